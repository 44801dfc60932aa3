"""The bound on open segment files: one process-wide LRU of `.log` descriptors.

This module owns how many segment files the process keeps open. Each segment holds
at most one descriptor (its `.log`); its indexes live in memory and are written to
their files with an open-write-close, never kept open (see index.py). Segments not
used for a while are closed, least recently used first, once `limit` descriptors
are open, and reopened on their next read or write: a broker with more partitions
than the open-file limit (RLIMIT_NOFILE) allows keeps serving every one of them.

The limit is `jocko.log.max.open.files`; the default (-1) is three quarters of the
process's soft RLIMIT_NOFILE (768 of the usual 1,024), which leaves a quarter, and
at least 64, for sockets, checkpoints and the metadata log. RLIMIT_NOFILE is a per-process limit, so the bound is one per process
(every broker of an embedded process shares it).

A zero-copy send (segment.py `FileRegion`) holds a descriptor of its own (a dup) on
the file while its bytes go out: it counts against the bound (`borrow`/`give_back`),
so segment files open never exceed it, sends included.

A descriptor handed to a flush that runs on another thread (`Log.begin_flush`) is
not closed until that fsync is done (`flushing`): closing it meanwhile would skip
the fsync of data the recovery point then claims to be on disk. When nothing can be
closed (every open one is being flushed) the bound is exceeded for that moment (it
is a target: the OS's limit is the hard one). When the OS refuses a descriptor
(EMFILE, ENFILE), opening fails with KafkaStorageError and one clear log line (which
limit to raise), not an OSError escaping a handler.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from typing import Protocol

from jocko_py.commitlog.errors import KafkaStorageError

__all__ = ["HANDLES", "Closable", "FileHandles", "default_limit"]

log = logging.getLogger(__name__)

CONFIG_NAME = "jocko.log.max.open.files"
MIN_LIMIT = 8
# descriptors left to everything else at least: listeners, the event loop, the metadata
# log, logging, a few clients, checkpoint and index writes (open-write-close)
RESERVED = 64


def default_limit() -> int:
    """Three quarters of the soft open-file limit, leaving at least RESERVED (and at
    least MIN_LIMIT)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 20
    return max(MIN_LIMIT, min(soft * 3 // 4, soft - RESERVED))


class Closable(Protocol):
    """What the cache closes: a segment (its `.log` descriptor)."""

    def release_fd(self) -> None: ...


class FileHandles:
    """The LRU of open segment descriptors (see the module docstring)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit if limit is not None else default_limit()
        self._open: OrderedDict[int, Closable] = OrderedDict()  # id(segment) -> segment
        self._flushing: dict[int, int] = {}  # fd -> fsyncs in flight on other threads
        self._lock = threading.Lock()  # guards _flushing (the flush thread updates it)
        self.borrowed = 0  # dups held by zero-copy sends (see `borrow`)
        self.closed_by_limit = 0
        self._warned = False
        self._warned_over = False

    def configure(self, limit: int) -> None:
        """`limit` <= 0: the default (from RLIMIT_NOFILE)."""
        self.limit = max(MIN_LIMIT, limit) if limit > 0 else default_limit()
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and self.limit >= soft:
            log.warning("%s=%d is not below the open-file limit (ulimit -n) %d: the "
                        "broker may run out of descriptors for sockets", CONFIG_NAME,
                        self.limit, soft)

    @property
    def open_count(self) -> int:
        return len(self._open) + self.borrowed

    def borrow(self, seg: Closable, fd: int) -> int:
        """A descriptor of the caller's own on ``seg``'s file (``fd`` is its open one),
        counted against the bound until `give_back`. OSError (EMFILE...) when the OS
        has none left; the caller reads instead."""
        self._make_room(keep=seg, extra=1)
        dup = os.dup(fd)
        self.borrowed += 1
        return dup

    def give_back(self, fd: int) -> None:
        self.borrowed -= 1
        os.close(fd)

    def touch(self, seg: Closable) -> None:
        key = id(seg)
        if key in self._open:
            self._open.move_to_end(key)

    def open(self, seg: Closable, path: os.PathLike[str] | str, flags: int,
             mode: int = 0o644) -> int:
        """Open `path` for `seg` (closing the least recently used others when at the
        limit) and remember it as open. KafkaStorageError when it cannot."""
        self._make_room()
        try:
            fd = os.open(path, flags, mode)
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                self._out_of_descriptors(f"cannot open {path}: {exc}")
            raise KafkaStorageError(f"cannot open {path}: {exc}") from exc
        self._open[id(seg)] = seg
        return fd

    def forget(self, seg: Closable) -> None:
        """`seg` closed its descriptor itself."""
        self._open.pop(id(seg), None)

    def _make_room(self, keep: Closable | None = None, extra: int = 0) -> None:
        """Close least recently used segments until one more descriptor (``extra``
        more besides ``keep``'s) fits within the bound."""
        if len(self._open) + self.borrowed + extra < self.limit:
            return
        for key in list(self._open):
            seg = self._open[key]
            if seg is keep or self.is_flushing(seg):
                continue
            del self._open[key]
            seg.release_fd()
            self.closed_by_limit += 1
            if len(self._open) + self.borrowed + extra < self.limit:
                return
        if not self._warned_over:
            self._warned_over = True
            log.warning("%d segment files open, more than %s=%d: none can be closed now "
                        "(all being flushed)", len(self._open), CONFIG_NAME, self.limit)

    def storage_error(self, what: str, exc: OSError) -> KafkaStorageError:
        """The error for a failed open of a segment's file: out of descriptors (EMFILE,
        ENFILE) says so once in the log, clearly."""
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            try:
                self._out_of_descriptors(f"{what}: {exc}")
            except KafkaStorageError as e:
                return e
        return KafkaStorageError(f"{what}: {exc}")

    def _out_of_descriptors(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            log.error("out of file descriptors for segment files: %s (%s=%d, open-file "
                      "limit %d): raise `ulimit -n` or lower %s; requests on the partitions "
                      "concerned answer KAFKA_STORAGE_ERROR", why, CONFIG_NAME, self.limit,
                      soft, CONFIG_NAME)
        raise KafkaStorageError(f"out of file descriptors: {why}")

    # ---- descriptors handed to a flush on another thread

    def is_flushing(self, seg: Closable) -> bool:
        fd = getattr(seg, "_fd", -1)
        with self._lock:
            return fd in self._flushing

    def flush_started(self, fds: list[int]) -> None:
        with self._lock:
            for fd in fds:
                self._flushing[fd] = self._flushing.get(fd, 0) + 1

    def flush_done(self, fds: list[int]) -> None:
        with self._lock:
            for fd in fds:
                n = self._flushing.get(fd, 0) - 1
                if n > 0:
                    self._flushing[fd] = n
                else:
                    self._flushing.pop(fd, None)


HANDLES = FileHandles()
