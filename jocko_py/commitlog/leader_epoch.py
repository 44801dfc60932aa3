"""The leader-epoch cache of one partition: which leader epoch starts at which offset.

This module owns the partition's ``leader-epoch-checkpoint`` file.  The cache
answers OffsetForLeaderEpoch (:meth:`LeaderEpochCache.end_offset_for`), which is
how a follower (or a consumer validating its position) finds where its log
diverges from the leader's.  It follows Kafka's ``LeaderEpochFileCache``.

On-disk format (Kafka's checkpoint text format, byte for byte)::

    0                 format version
    N                 number of entries
    <epoch> <start>   N lines, one entry each: leader epoch and the offset of the
    ...               first batch written in that epoch, both ascending

The file is rewritten whole on every change: written to
``leader-epoch-checkpoint.tmp``, renamed over the old one. A truncation or reset
fsyncs the file and the directory at once; a new epoch (``assign``: every partition
a broker becomes leader of, thousands at once when topics are created or leaders
move) does not (Kafka's KAFKA-15046): the owning log fsyncs it with its next flush
(:meth:`LeaderEpochCache.sync_paths`). Losing an unsynced assign to a power loss is
safe: a checkpoint behind the log is rebuilt from the batch headers on load, one
ahead of it is truncated to the log end.  A file that cannot be parsed is logged and
ignored; the owning :class:`~jocko_py.commitlog.log.Log` then rebuilds the
entries from the batch headers (see :attr:`LeaderEpochCache.checkpoint_found`).

Rules (Kafka's):
- Entries have strictly increasing epochs and strictly increasing start offsets.
- ``assign`` only ever adds a newer epoch; a start offset at or below existing
  entries' start offsets removes those entries first, so monotonicity holds.
- ``truncate_from_end(o)`` drops entries starting at or after ``o`` (the log was
  cut back to end at ``o``); ``truncate_from_start(o)`` drops entries wholly
  below a new log start ``o`` and moves the one covering ``o`` to start there.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from jocko_py.commitlog.errors import KafkaStorageError

__all__ = [
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "LeaderEpochCache",
]

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0


class CorruptCheckpointError(ValueError):
    pass


def _parse(text: str) -> list[tuple[int, int]]:
    lines = text.splitlines()
    if len(lines) < 2:
        raise CorruptCheckpointError("missing version or entry count")
    if lines[0].strip() != str(_VERSION):
        raise CorruptCheckpointError(f"unknown version {lines[0].strip()!r}")
    count = int(lines[1].strip())
    body = lines[2:]
    if count < 0 or len(body) != count:
        raise CorruptCheckpointError(f"expected {count} entries, found {len(body)} lines")
    entries: list[tuple[int, int]] = []
    for line in body:
        parts = line.split()
        if len(parts) != 2:
            raise CorruptCheckpointError(f"malformed entry {line!r}")
        epoch, start = int(parts[0]), int(parts[1])
        if epoch < 0 or start < 0:
            raise CorruptCheckpointError(f"negative entry {line!r}")
        if entries and (epoch <= entries[-1][0] or start < entries[-1][1]):
            raise CorruptCheckpointError(f"entry {line!r} is not after {entries[-1]}")
        entries.append((epoch, start))
    return entries


class LeaderEpochCache:
    """(epoch, start offset) entries of one partition, backed by a checkpoint file.

    Not thread-safe: the owning Log is its only user.
    """

    def __init__(self, path: Path, *, new: bool = False) -> None:
        """Read the checkpoint at ``path``; ``new``: the log's directory was just made,
        there is nothing to read (the first write then needs no temporary file)."""
        self.path = path
        self._epochs: list[int] = []
        self._starts: list[int] = []
        #: False when the file was missing or unreadable: the owner should rebuild.
        self.checkpoint_found = False
        #: True when the file was last written without fsync (``assign``)
        self.unsynced = False
        # the file does not exist: a torn first write is no worse than no file (both
        # are rebuilt from the batch headers), so it is written in place, not renamed
        self._absent = new
        if new:
            return
        try:
            text = path.read_text()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("[leader-epoch %s] cannot read checkpoint: %s", path, exc)
            return
        try:
            entries = _parse(text)
        except ValueError as exc:
            logger.warning("[leader-epoch %s] ignoring corrupt checkpoint: %s", path, exc)
            return
        for epoch, start in entries:
            self._epochs.append(epoch)
            self._starts.append(start)
        self.checkpoint_found = True

    # --- queries ------------------------------------------------------------------

    def latest_epoch(self) -> int:
        """The newest epoch with an entry, -1 when there is none."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs, oldest first."""
        return list(zip(self._epochs, self._starts, strict=True))

    def __len__(self) -> int:
        return len(self._epochs)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest known epoch <= ``epoch``, where that epoch ends).

        The end of an epoch is the start offset of the next known epoch, or
        ``log_end_offset`` for the latest one.  As Kafka's code does (its
        javadoc says otherwise): an epoch below every known epoch answers
        (``epoch``, start of the first known epoch), since the data before it is
        gone; an undefined (-1) epoch, an epoch above the latest, or an empty
        cache answer (-1, -1).
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """Epoch of the entry covering ``offset`` (the last one starting at or before it)."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    # --- changes ------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *,
               defer: list[LeaderEpochCache] | None = None) -> None:
        """Record that ``epoch`` starts at ``start_offset``; persists when it changes anything.

        A no-op for an epoch at or below the latest one, or a negative (unset)
        epoch, so callers may call it for every append. With ``defer`` the file is not
        written here: the cache is added to the list, and the caller must `save` it
        before it answers anything (LogManager.save_leader_epochs writes many at once).
        """
        if self._assign(epoch, start_offset):
            if defer is None:
                self._write(sync=False)
            else:
                defer.append(self)

    def save(self) -> None:
        """Write the checkpoint, without fsync (as `assign` does); any thread."""
        self._write(sync=False)

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        if start_offset < 0:
            raise ValueError(f"invalid start offset {start_offset} for leader epoch {epoch}")
        removed = 0
        while self._starts and self._starts[-1] >= start_offset:
            # Entries that start where the new epoch starts never got data of
            # their own in this log; later ones mean the log went backwards.
            if self._starts[-1] != start_offset:
                removed += 1
            self._epochs.pop()
            self._starts.pop()
        if removed:
            logger.warning(
                "[leader-epoch %s] epoch %d at %d removed %d later entries",
                self.path, epoch, start_offset, removed,
            )
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def reset(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace every entry by ``entries`` (applied with :meth:`assign`'s rules); persists."""
        self._epochs.clear()
        self._starts.clear()
        for epoch, start in entries:
            self._assign(epoch, start)
        self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log now ends there)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:]
        del self._starts[keep:]
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries below a new log start; the one covering it now starts at it."""
        covering = bisect.bisect_right(self._starts, start_offset) - 1
        if covering < 0 or (covering == 0 and self._starts[0] == start_offset):
            return
        epoch = self._epochs[covering]
        del self._epochs[:covering]
        del self._starts[:covering]
        self._epochs[0] = epoch
        self._starts[0] = start_offset
        self._write()

    def clear(self) -> None:
        """Forget every entry and delete the checkpoint file."""
        self._epochs.clear()
        self._starts.clear()
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"cannot delete {self.path}: {exc}") from exc

    # --- file -----------------------------------------------------------------------

    def sync_paths(self) -> list[Path]:
        """What to fsync so the last write is durable (the file, then its directory for
        the rename); empty when it is. Clears the mark: the caller fsyncs them."""
        if not self.unsynced:
            return []
        self.unsynced = False
        return [self.path, self.path.parent]

    def sync(self) -> None:
        """fsync the last write, if it was not."""
        for p in self.sync_paths():
            try:
                fd = os.open(p, os.O_RDONLY)
            except FileNotFoundError:
                continue
            except OSError as exc:
                self.unsynced = True
                raise KafkaStorageError(f"cannot fsync {p}: {exc}") from exc
            try:
                os.fsync(fd)
            except OSError as exc:
                self.unsynced = True
                raise KafkaStorageError(f"cannot fsync {p}: {exc}") from exc
            finally:
                os.close(fd)

    def _write(self, sync: bool = True) -> None:
        lines = [str(_VERSION), str(len(self._epochs))]
        lines.extend(f"{e} {s}" for e, s in zip(self._epochs, self._starts, strict=True))
        data = ("\n".join(lines) + "\n").encode()
        in_place = self._absent and not sync
        target = self.path if in_place else self.path.with_name(self.path.name + ".tmp")
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if not in_place:
                os.replace(target, self.path)
            if sync:
                _fsync_dir(self.path.parent)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {self.path}: {exc}") from exc
        self.unsynced = not sync
        self.checkpoint_found = True
        self._absent = False

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries()})"


def _fsync_dir(directory: Path) -> None:
    # The rename is only durable once the directory entry is on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
