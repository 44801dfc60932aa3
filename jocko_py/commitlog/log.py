"""The partition log: ordered segments, offsets, reads, retention, recovery.

This module owns one partition's directory.  Synchronous file I/O only; the
broker calls it from its event loop and batches fsyncs (see ``needs_flush``).

On-disk layout of a partition directory ``<topic>-<partition>/``::

    00000000000000000000.log        record batches (see segment.py)
    00000000000000000000.index      offset index   (see index.py)
    00000000000000000000.timeindex  time index     (see index.py)
    00000000000000001234.log        next segment, named by its base offset
    ...
    log-start-offset                checkpoint of the log start offset, text:
                                    line 1 "0" (format version), line 2 the offset
    leader-epoch-checkpoint         leader epoch -> start offset (see leader_epoch.py)
    producer-state.json             idempotent-producer snapshot (see producer_state.py)
    00000000000000001234.txnindex   transactions aborted by markers in that segment
                                    (see txn_index.py; only segments that have one)

Segments cover disjoint, increasing offset ranges; the last one is active
(the only one appended to).  Index files without a ``.log`` are leftovers of
an interrupted roll or delete and are removed on open; ``*.deleted`` and
``*.tmp`` files likewise.  The log start offset is the larger of the first
segment's base offset and the checkpoint (DeleteRecords can move it inside a
segment).

Compaction (cleanup.policy=compact) lives in ``cleaner.py``, which writes a
``<base20>.log.cleaned`` copy and swaps it in with :meth:`Log.replace_segment`.
Readers and recovery accept what compaction leaves behind: gaps between batch
offsets and batches whose record count is below their offset range.

The log keeps two derived states in step with its batches:

- ``leader_epochs``: the epoch assigned at the first offset of every leader
  epoch.  An entry is persisted *before* the batches that start it are
  written, so the checkpoint is never behind the data; on open entries past the
  log end (a torn tail cut by recovery) or below the log start are dropped, and
  a missing or corrupt checkpoint, or one whose latest epoch is older than the
  last batch's, is rebuilt from the batch headers.
- ``producer_state``: observes every idempotent batch appended (leader or
  follower).  Loaded from its snapshot (written by :meth:`Log.close`) plus a
  scan of the batches after it.  :meth:`Log.truncate_to` rebuilds it from an
  in-memory copy taken at a recent segment roll (or from the log start) plus a
  scan, so it always equals what replaying the remaining log gives.
  It also knows each producer's open transaction; a marker that aborts one adds
  an entry to the ``.txnindex`` of the marker's segment. Every replay (open,
  truncation) first drops the index entries at or past its start and re-adds
  them, so the indexes always agree with the replayed state.

The last stable offset is ``producer_state.last_stable_offset(high_watermark)``
(the high watermark belongs to the partition, not the log);
:meth:`Log.collect_aborted` answers read_committed fetches.
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.dirs import fsync_path
from jocko_py.commitlog.errors import KafkaStorageError, OffsetOutOfRangeError
from jocko_py.commitlog.fd_cache import HANDLES
from jocko_py.commitlog.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache
from jocko_py.commitlog.producer_state import (
    PRODUCER_SNAPSHOT_FILE,
    CompletedTxn,
    ProducerStateManager,
)
from jocko_py.commitlog.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    FileRegion,
    LogSegment,
)
from jocko_py.commitlog.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from jocko_py.protocol.records import (
    CorruptRecordError,
    RecordBatchHeader,
    RecordBatchTooLargeError,
    control_marker,
    iter_batches,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
)

__all__ = ["AppendInfo", "FlushTicket", "Log", "ReadInfo", "run_flush"]

logger = logging.getLogger(__name__)

LOG_START_OFFSET_FILE = "log-start-offset"
_INT32_MAX = 2147483647
# In-memory producer-state copies kept (taken at rolls) to rebuild after a truncation.
_MAX_PRODUCER_CHECKPOINTS = 3


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append did: offsets assigned, timestamps, size."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless LogAppendTime was applied
    valid_bytes: int
    num_records: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class ReadInfo:
    """Result of a read: whole batches, plus the log bounds at read time."""

    records: bytes | memoryview | FileRegion  # a FileRegion: asked with region_min
    log_start_offset: int
    log_end_offset: int
    first_batch_offset: int  # base offset of the first returned batch, -1 when empty


@dataclass(slots=True)
class FlushTicket:
    """A flush in progress (``Log.begin_flush``)."""

    log: Log
    log_end_offset: int
    # segment descriptors (kept open until fsynced: fd_cache.HANDLES) and index paths
    fds: list[int | Path]
    error: OSError | None = None
    released: bool = False


def run_flush(ticket: FlushTicket) -> None:
    """fsync a ticket's descriptors and files; safe on a thread other than the log
    owner's. A descriptor closed meanwhile (its segment was deleted or rolled and
    closed) or a file gone (deleted) is skipped; any other failure is kept in the
    ticket for ``end_flush``."""
    try:
        for fd in ticket.fds:
            try:
                if isinstance(fd, int):
                    os.fsync(fd)
                else:
                    fsync_path(fd)
            except FileNotFoundError:
                pass
            except OSError as e:
                if e.errno != errno.EBADF:
                    ticket.error = e
                    return
    finally:
        _release(ticket)



def _release(ticket: FlushTicket) -> None:
    if not ticket.released:
        ticket.released = True
        HANDLES.flush_done([fd for fd in ticket.fds if isinstance(fd, int)])


def _aborted(t: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Log:
    """A partition log made of segments.  Use :meth:`Log.open` to create or load one."""

    def __init__(self, directory: Path, config: LogConfig, *, new: bool = False) -> None:
        self.dir = directory
        self.config = config
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_start_offset = 0
        self._recovery_point = 0
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        #: Set when flush.messages is reached; the owner should call flush() soon.
        self.needs_flush = False
        #: Called (once per transition) when the log gets unflushed data.
        self.on_dirty: Callable[[Log], None] | None = None
        self._dirty_reported = False
        self.name = directory.name
        #: Leader epoch -> start offset of this partition (OffsetForLeaderEpoch).
        self.leader_epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT_FILE,
                                              new=new)
        #: Idempotent-producer state; the broker calls ``producer_state.check(h)``
        #: before a leader append, the log observes every appended batch.
        self.producer_state = ProducerStateManager()
        # (offset, state of every batch below offset), ascending offsets
        self._producer_checkpoints: list[tuple[int, ProducerStateManager]] = []
        # offset of producer-state.json on disk, None when there is none
        self._producer_snapshot_offset: int | None = None
        # True while producer-state.json holds exactly the current state at the log end
        self._producer_snapshot_current = False
        self._loaded = False

    # --- opening ---------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        recovery_point: int = 0,
        *,
        had_clean_shutdown: bool = False,
    ) -> Log:
        """Create or load the log in ``directory``.

        Segments that may hold data not known to be on disk (those at or after
        the one containing ``recovery_point``) are fully validated and a torn
        or corrupt tail is truncated, unless ``had_clean_shutdown``.  Every
        segment's indexes are sanity-checked and rebuilt when wrong.
        """
        lg = cls(directory, config)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            lg._load(recovery_point, had_clean_shutdown)
        except OSError as exc:
            lg.close()
            raise KafkaStorageError(f"cannot open log {directory}: {exc}") from exc
        return lg

    @classmethod
    def create(cls, directory: Path, config: LogConfig) -> Log:
        """A new, empty log in ``directory``, which the caller has just made (it is
        empty): what :meth:`open` would make of it, without looking for files to load
        or clean up. No file is created now: the active segment's files come with its
        first use (segment.py), the leader-epoch checkpoint with the first epoch."""
        lg = cls(directory, config, new=True)
        try:
            lg._add_segment(LogSegment.create(directory, 0, config, new=True))
        except OSError as exc:
            lg.close()
            raise KafkaStorageError(f"cannot create log {directory}: {exc}") from exc
        lg._producer_checkpoints = [(0, lg.producer_state.copy())]
        lg._loaded = True
        return lg

    def _load(self, recovery_point: int, had_clean_shutdown: bool) -> None:
        bases: list[int] = []
        for p in self.dir.iterdir():
            name = p.name
            if name.endswith((".deleted", ".tmp", ".cleaned", ".swap")):
                p.unlink(missing_ok=True)
                continue
            stem, dot, suffix = name.partition(".")
            if not dot or not stem.isdigit() or len(stem) != 20:
                continue
            if "." + suffix == LOG_SUFFIX:
                bases.append(int(stem))
            elif "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if not (self.dir / (stem + LOG_SUFFIX)).exists():
                    logger.info("[log=%s] removing orphan index %s", self.name, name)
                    p.unlink(missing_ok=True)
        bases.sort()
        checkpoint = self._read_log_start_offset()
        if self.config.segment_index_bytes <= 0:
            raise ValueError("segment_index_bytes must be positive")
        first_unsafe = 0
        for i, b in enumerate(bases):
            if b <= recovery_point:
                first_unsafe = i
        expected = None
        recovered: list[LogSegment] = []
        for i, base in enumerate(bases):
            recover = not had_clean_shutdown and i >= first_unsafe
            if expected is not None and base < expected:
                # Overlaps its predecessor: this and later files cannot be trusted.
                logger.warning("[log=%s] segment %d overlaps its predecessor", self.name, base)
                for later in bases[i:]:
                    LogSegment(self.dir, later, self.config).delete()
                break
            seg, truncated = LogSegment.open(self.dir, base, self.config, recover=recover)
            self._add_segment(seg)
            if recover:
                recovered.append(seg)
            expected = seg.next_offset
            if truncated:
                for later in bases[i + 1 :]:
                    logger.warning(
                        "[log=%s] deleting segment %d after corrupt data", self.name, later
                    )
                    LogSegment(self.dir, later, self.config).delete()
                break
        if not self.segments:
            start = checkpoint if checkpoint is not None else 0
            self._add_segment(LogSegment.create(self.dir, start, self.config))
        leo = self.log_end_offset
        start = self.segments[0].base_offset
        if checkpoint is not None:
            start = max(start, min(checkpoint, leo))
        self._log_start_offset = start
        if had_clean_shutdown:
            self._recovery_point = leo
        else:
            # What was recovered (the segments past the recovery point) is validated and
            # made durable before the log serves anything, so the recovery point moves
            # to the end: a replica that acknowledged these records as a follower or
            # leader must still have them after a second power loss (the replication
            # simulation's seed 654523560 lost committed records when recovery left
            # them unflushed). Only the recovered segments are flushed, not every one.
            for seg in recovered:
                seg.flush()
            self._recovery_point = leo
        self._load_leader_epochs()
        self._load_producer_state()
        self._loaded = True

    def _iter_headers(self, start: int) -> Iterator[RecordBatchHeader]:
        """Headers of the batches holding offsets >= ``start``, in order."""
        i = max(0, bisect.bisect_right(self._bases, start) - 1)
        for seg in self.segments[i:]:
            if seg.next_offset <= start or seg.size == 0:
                continue
            _, pos = seg.offset_index.lookup(start)
            for _, h in seg.iter_headers(pos):
                if h.next_offset > start:
                    yield h

    def _replay_producers(self, state: ProducerStateManager, start: int) -> None:
        """Observe every producer batch from ``start`` into ``state``; the aborted
        transactions whose marker is at or past ``start`` are indexed anew."""
        i = max(0, bisect.bisect_right(self._bases, start) - 1)
        for seg in self.segments[i:]:
            seg.txn_index.truncate_to(start)
        for seg in self.segments[i:]:
            if seg.next_offset <= start or seg.size == 0:
                continue
            _, pos0 = seg.offset_index.lookup(start)
            for pos, h in seg.iter_headers(pos0):
                if h.next_offset <= start or h.producer_id < 0:
                    continue
                marker = None
                if h.is_control:
                    try:
                        marker = control_marker(seg.read_batch_at(pos, h), h)
                    except CorruptRecordError:
                        logger.warning("[log=%s] unreadable control batch at %d", self.name,
                                       h.base_offset)
                        continue
                done = state.observe(h, h.base_offset, marker)
                if done is not None and done.aborted:
                    seg.txn_index.append(_aborted(done))

    def _last_batch_header(self) -> RecordBatchHeader | None:
        for seg in reversed(self.segments):
            if seg.size == 0:
                continue
            last = None
            for _, h in seg.iter_headers(seg.offset_index.last_entry()[1]):
                last = h
            return last
        return None

    def _load_leader_epochs(self) -> None:
        cache = self.leader_epochs
        start, leo = self._log_start_offset, self.log_end_offset
        if not cache.checkpoint_found:
            if leo > start:
                self._rebuild_leader_epochs("no readable checkpoint")
            return
        cache.truncate_from_end(leo)
        cache.truncate_from_start(start)
        last = self._last_batch_header()
        if last is not None and last.partition_leader_epoch > cache.latest_epoch():
            self._rebuild_leader_epochs("checkpoint is behind the log")

    def _rebuild_leader_epochs(self, reason: str) -> None:
        start = self._log_start_offset
        logger.info("[log=%s] rebuilding leader epochs from batches: %s", self.name, reason)
        self.leader_epochs.reset(
            (h.partition_leader_epoch, max(h.base_offset, start))
            for h in self._iter_headers(start)
        )

    def _load_producer_state(self) -> None:
        ps = self.producer_state
        path = self.dir / PRODUCER_SNAPSHOT_FILE
        start, leo = self._log_start_offset, self.log_end_offset
        scan_from = start
        if path.exists():
            snap = ps.load(path)
            if start <= snap <= leo:
                self._producer_snapshot_offset = snap
                self._producer_snapshot_current = snap == leo
                scan_from = snap
            else:
                # covers batches that are gone (truncated) or only part of the log
                logger.info(
                    "[log=%s] ignoring producer snapshot at %d outside [%d, %d]",
                    self.name, snap, start, leo,
                )
                ps.clear()
                path.unlink(missing_ok=True)
        self._replay_producers(ps, scan_from)
        self._producer_checkpoints = [(leo, ps.copy())]

    def _take_producer_checkpoint(self) -> None:
        cps = self._producer_checkpoints
        leo = self.log_end_offset
        if cps and cps[-1][0] == leo:
            cps.pop()
        cps.append((leo, self.producer_state.copy()))
        if len(cps) > _MAX_PRODUCER_CHECKPOINTS:
            del cps[0]

    def _rebuild_producer_state(self) -> None:
        """Make producer state what replaying the log from the log start gives."""
        start, leo = self._log_start_offset, self.log_end_offset
        cps = [(o, st) for o, st in self._producer_checkpoints if start <= o <= leo]
        self._producer_checkpoints = cps
        if cps:
            scan_from, base = cps[-1][0], cps[-1][1].copy()
        else:
            scan_from, base = start, ProducerStateManager()
        self._replay_producers(base, scan_from)
        # completed transactions above the HW are not known after a truncation: the
        # replayed markers are all that is left of them
        # in place: callers may hold a reference to producer_state
        self.producer_state.replace_with(base)
        self._producer_snapshot_current = False
        self._take_producer_checkpoint()
        if self._producer_snapshot_offset is not None and self._producer_snapshot_offset > leo:
            self._delete_producer_snapshot()

    def _delete_producer_snapshot(self) -> None:
        self._producer_snapshot_offset = None
        self._producer_snapshot_current = False
        path = self.dir / PRODUCER_SNAPSHOT_FILE
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"cannot delete {path}: {exc}") from exc

    def save_producer_state(self) -> None:
        """Write the producer snapshot (covering the whole log); done by :meth:`close`.

        Skipped when the file already holds the current state at the log end.
        """
        leo = self.log_end_offset
        if self._producer_snapshot_current and self._producer_snapshot_offset == leo:
            return
        try:
            self.producer_state.save(self.dir / PRODUCER_SNAPSHOT_FILE, leo)
        except OSError as exc:
            logger.warning("[log=%s] could not save producer state: %s", self.name, exc)
            return
        self._producer_snapshot_offset = leo
        self._producer_snapshot_current = True

    def _on_log_start_moved(self) -> None:
        start = self._log_start_offset
        self.leader_epochs.truncate_from_start(start)
        # a copy below the new start would need deleted batches to be replayed
        self._producer_checkpoints = [
            (o, st) for o, st in self._producer_checkpoints if o >= start
        ]

    def _add_segment(self, seg: LogSegment) -> None:
        self.segments.append(seg)
        self._bases.append(seg.base_offset)

    def _read_log_start_offset(self) -> int | None:
        path = self.dir / LOG_START_OFFSET_FILE
        try:
            lines = path.read_text().split()
            if len(lines) == 2 and lines[0] == "0":
                return int(lines[1])
            logger.warning("[log=%s] ignoring malformed %s", self.name, path.name)
        except FileNotFoundError:
            return None
        except ValueError:
            logger.warning("[log=%s] ignoring malformed %s", self.name, path.name)
        return None

    def _write_log_start_offset(self) -> None:
        path = self.dir / LOG_START_OFFSET_FILE
        tmp = path.with_suffix(".tmp")
        try:
            with open(tmp, "w") as f:
                f.write(f"0\n{self._log_start_offset}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {path}: {exc}") from exc

    # --- properties ------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def num_segments(self) -> int:
        return len(self.segments)

    # --- append ----------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        log_append_time: int | None = None,
        assign_offsets: bool = True,
        now_ms: int | None = None,
    ) -> AppendInfo:
        """Append validated batches; returns the offsets they got.

        As leader (``assign_offsets``) base offsets and the partition leader
        epoch are patched in place (in ``records`` itself when it is a writable
        view, else in a copy).  As follower the
        batches keep their offsets, which must start at or after the log end.
        """
        # a writable view (a slice of the request frame) is patched in place; anything
        # else is copied once so the caller's buffer is never changed behind its back
        buf = records if isinstance(records, memoryview) and not records.readonly \
            else bytearray(records)
        headers: list[tuple[int, RecordBatchHeader]] = list(iter_batches(buf, validate_crc=False))
        if not headers:
            raise CorruptRecordError("append needs at least one record batch")
        cfg = self.config
        next_offset = self.log_end_offset
        first_offset = next_offset if assign_offsets else headers[0][1].base_offset
        max_ts = -1
        offset_of_max = -1
        num_records = 0
        patched: list[RecordBatchHeader] = []
        for pos, h in headers:
            # Followers take what the leader accepted, so max.message.bytes is a
            # leader-side rule; a batch bigger than a segment can never be stored.
            if h.size > cfg.segment_bytes or (assign_offsets and h.size > cfg.max_message_bytes):
                raise RecordBatchTooLargeError(
                    f"record batch of {h.size} bytes exceeds max.message.bytes "
                    f"{cfg.max_message_bytes} or segment.bytes {cfg.segment_bytes}"
                )
            if assign_offsets:
                patch_base_offset(buf, pos, next_offset)
                patch_leader_epoch(buf, pos, leader_epoch)
                h = h._replace(base_offset=next_offset, partition_leader_epoch=leader_epoch)
            elif h.base_offset < next_offset:
                raise CorruptRecordError(
                    f"follower append at offset {h.base_offset} is below the log end {next_offset}"
                )
            if log_append_time is not None:
                set_log_append_time(buf, pos, log_append_time)
                h = h._replace(max_timestamp=log_append_time, attributes=h.attributes | 0x08)
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                offset_of_max = h.base_offset if log_append_time is not None else h.last_offset
            num_records += h.records_count
            next_offset = h.next_offset
            patched.append(h)
        last_offset = next_offset - 1
        now = _now_ms() if now_ms is None else now_ms
        if self.active_segment.should_roll(len(buf), last_offset, max_ts, now):
            self.roll(patched[0].base_offset)
        # The epoch goes to the checkpoint before its first batch reaches the
        # file, so after a crash the checkpoint is never behind the log.
        epochs = self.leader_epochs
        if assign_offsets:
            epochs.assign(leader_epoch, first_offset)
        else:
            for h in patched:
                epochs.assign(h.partition_leader_epoch, h.base_offset)
        self.active_segment.append(buf, patched)
        self._producer_snapshot_current = False
        ps = self.producer_state
        for (pos, _), h in zip(headers, patched, strict=True):
            if h.producer_id >= 0:
                marker = control_marker(buf[pos:pos + h.size], h) if h.is_control else None
                done = ps.observe(h, h.base_offset, marker)
                if done is not None and done.aborted:
                    self.active_segment.txn_index.append(_aborted(done))
        self.unflushed_messages += num_records
        if self.unflushed_messages >= cfg.flush_messages:
            self.needs_flush = True
        if not self._dirty_reported:
            self._dirty_reported = True
            if self.on_dirty is not None:
                self.on_dirty(self)
        return AppendInfo(
            first_offset=first_offset,
            last_offset=last_offset,
            max_timestamp=max_ts,
            offset_of_max_timestamp=offset_of_max,
            log_append_time=-1 if log_append_time is None else log_append_time,
            valid_bytes=len(buf),
            num_records=num_records,
            log_start_offset=self._log_start_offset,
        )

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``base_offset`` (default: the log end)."""
        new_base = self.log_end_offset if base_offset is None else base_offset
        active = self.active_segment
        if active.size == 0 and active.base_offset == new_base:
            return active
        if new_base < self.log_end_offset:
            raise ValueError(f"cannot roll to {new_base} below log end {self.log_end_offset}")
        # The old segment will not change again: put it on disk with its final
        # time index entry and move the recovery point past it, so a crash
        # never rescans it.  Kafka does this fsync on a background thread; here
        # it is one fsync per segment.bytes written, which the kernel's own
        # writeback keeps short.
        active.time_index.maybe_append(active.max_timestamp, active.offset_of_max_timestamp)
        self.flush()
        active.offset_index.close()
        active.time_index.close()
        seg = LogSegment.create(self.dir, new_base, self.config)
        self._add_segment(seg)
        self._take_producer_checkpoint()
        logger.info("[log=%s] rolled new segment at offset %d", self.name, new_base)
        return seg

    # --- read ------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        region_min: int | None = None,
    ) -> ReadInfo:
        """Whole batches starting with the one that contains ``offset``.

        Only batches entirely below ``max_offset`` (the high watermark) are
        returned.  Reads stay within one segment, like Kafka's; the caller
        fetches again for more.  Raises OffsetOutOfRangeError outside
        [log start offset, log end offset].  With ``region_min``, a read of at least
        that many bytes is a FileRegion, not bytes (see segment.py).
        """
        start, end = self._log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range [{start}, {end}] for {self.name}",
                log_start_offset=start,
                log_end_offset=end,
            )
        limit = end if max_offset is None else min(max_offset, end)
        if offset >= limit:
            return ReadInfo(b"", start, end, -1)
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        while i < len(self.segments):
            seg = self.segments[i]
            data = seg.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch,
                            region_min=region_min)
            if data is not None:
                first = data.first_offset if isinstance(data, FileRegion) else \
                    int.from_bytes(data[:8], "big", signed=True) if data else -1
                return ReadInfo(data, start, end, first)
            i += 1
        return ReadInfo(b"", start, end, -1)

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound): their marker is
        at or past ``fetch_offset``, so in the segment holding it or a later one."""
        out: list[AbortedTxn] = []
        i = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
        for seg in self.segments[i:]:
            entries = seg.txn_index.entries
            if not entries:
                continue
            out.extend(seg.txn_index.collect(fetch_offset, upper_bound))
            # Kafka's stop rule: a transaction completed when the LSO was already past
            # the bound means every later one started past it too
            if any(e.last_stable_offset >= upper_bound for e in entries):
                break
        return out

    def last_stable_offset(self, high_watermark: int) -> int:
        """Never below the log start (a transaction whose start was deleted by retention
        or DeleteRecords must not hold readers before the log), never past the HW."""
        lso = self.producer_state.last_stable_offset(high_watermark)
        return max(lso, min(self._log_start_offset, high_watermark))

    # --- timestamps --------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``."""
        for seg in self.segments:
            if seg.next_offset <= self._log_start_offset or seg.max_timestamp < timestamp:
                continue
            found = seg.find_offset_by_timestamp(timestamp, self._log_start_offset)
            if found is not None:
                return found
        return None

    def latest_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the log's largest timestamp.

        Same order as :meth:`offset_for_timestamp` (ListOffsets MAX_TIMESTAMP).
        """
        best: LogSegment | None = None
        for seg in self.segments:
            if seg.next_offset <= self._log_start_offset or seg.offset_of_max_timestamp < 0:
                continue
            if best is None or seg.max_timestamp > best.max_timestamp:
                best = seg
        if best is None:
            return None
        return best.offset_of_max_record()

    # --- deleting / truncating ---------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (DeleteRecords); returns it.

        Segments entirely below the new start are deleted; the active segment
        is kept.
        """
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: log end is {self.log_end_offset}",
                log_start_offset=self._log_start_offset,
                log_end_offset=self.log_end_offset,
            )
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._write_log_start_offset()
            self._delete_segments_below_start()
            self._on_log_start_moved()
        return self._log_start_offset

    def _delete_segments_below_start(self) -> int:
        n = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= self._log_start_offset:
            self._delete_oldest()
            n += 1
        return n

    def _delete_oldest(self) -> None:
        seg = self.segments.pop(0)
        self._bases.pop(0)
        logger.info("[log=%s] deleting segment %d", self.name, seg.base_offset)
        try:
            seg.delete()
        except OSError as exc:
            raise KafkaStorageError(f"cannot delete {seg.log_path}: {exc}") from exc

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments by retention.ms and retention.bytes; returns how many.

        As in Kafka, the active segment counts too: when it has expired (or is
        over the size budget) and is not empty, the log first rolls a new empty
        segment at the log end, then deletes it. So a quiet topic does not keep
        expired data until `segment.ms` rolls it, and the log end offset never
        moves back. The log start offset advances to the first remaining segment.
        """
        if not self.config.delete:
            return self._delete_segments_below_start()
        now = _now_ms() if now_ms is None else now_ms
        cfg = self.config
        deleted = self._delete_segments_below_start()
        if cfg.retention_ms >= 0:
            while self._oldest_deletable() and (
                now - self.segments[0].largest_timestamp > cfg.retention_ms
            ):
                self._delete_oldest_rolling_if_active()
                deleted += 1
        if cfg.retention_bytes >= 0:
            excess = self.size_bytes - cfg.retention_bytes
            while self._oldest_deletable() and excess - self.segments[0].size >= 0:
                excess -= self.segments[0].size
                self._delete_oldest_rolling_if_active()
                deleted += 1
        if self.segments[0].base_offset > self._log_start_offset:
            self._log_start_offset = self.segments[0].base_offset
            self._write_log_start_offset()
            self._on_log_start_moved()
        return deleted

    def _oldest_deletable(self) -> bool:
        # any segment but an empty active one (deleting that would gain nothing)
        return len(self.segments) > 1 or self.segments[0].size > 0

    def _delete_oldest_rolling_if_active(self) -> None:
        if len(self.segments) == 1:
            self.roll()
        self._delete_oldest()

    def truncate_to(self, offset: int) -> None:
        """Remove every batch that holds an offset >= ``offset`` (follower divergence).

        When ``offset`` falls inside a batch the whole batch goes, so the log
        end may end up below ``offset``.
        """
        if offset >= self.log_end_offset:
            # As Kafka does: cut the epoch cache at the log end all the same. A replica
            # that led and assigned its epoch at its log end without writing in it keeps
            # an entry the new leader never had; left there, every fetch reports the same
            # divergence and the follower never catches up.
            self.leader_epochs.truncate_from_end(self.log_end_offset)
            return
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            seg = self.segments.pop()
            self._bases.pop()
            seg.delete()
        self.active_segment.truncate_to(offset)
        self._recovery_point = min(self._recovery_point, self.log_end_offset)
        # The log is cut first, the epochs second: a crash in between leaves
        # entries past the log end, which open drops again.
        self.leader_epochs.truncate_from_end(self.log_end_offset)
        if self._log_start_offset > self.log_end_offset:
            # A batch straddling the log start was cut: keep start <= end.
            self._log_start_offset = self.log_end_offset
            self._write_log_start_offset()
            self._on_log_start_moved()
        self._rebuild_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start an empty log at ``offset``."""
        while self.segments:
            seg = self.segments.pop()
            self._bases.pop()
            seg.delete()
        self._add_segment(LogSegment.create(self.dir, offset, self.config))
        self._log_start_offset = offset
        self._recovery_point = offset
        self._write_log_start_offset()
        self.leader_epochs.clear()
        self.producer_state.clear()
        self._producer_checkpoints = [(offset, ProducerStateManager())]
        self._delete_producer_snapshot()

    def replace_segment(self, old: LogSegment, cleaned: Path | None) -> None:
        """Compaction hook (see cleaner.py): swap a cleaned copy in for ``old``.

        ``cleaned`` is a fully written and fsynced file with the same base
        offset; it is renamed over ``old``'s log and the indexes are rebuilt.
        ``None`` drops ``old`` (never the first or the active segment).
        """
        i = self.segments.index(old)
        if cleaned is None:
            if i == 0 or i == len(self.segments) - 1:
                raise ValueError("cannot drop the first or the active segment")
            self.segments.pop(i)
            self._bases.pop(i)
            old.delete()
            return
        old.close()
        old.index_path.unlink(missing_ok=True)
        old.time_index_path.unlink(missing_ok=True)
        os.replace(cleaned, old.log_path)
        seg, _ = LogSegment.open(self.dir, old.base_offset, self.config, recover=True)
        seg.flush()
        self.segments[i] = seg

    # --- flushing ----------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment with unflushed data; the recovery point moves to the end."""
        leo = self.log_end_offset
        self.leader_epochs.sync()
        for seg in reversed(self.segments):
            if seg.dirty:
                seg.flush()
            elif seg.next_offset <= self._recovery_point:
                break
        self._recovery_point = leo
        self.unflushed_messages = 0
        self.needs_flush = False
        self._dirty_reported = False
        self.last_flush_ms = _now_ms()

    def begin_flush(self) -> FlushTicket:
        """First half of a flush that does not block the caller's thread: take what must
        be made durable (the log end now, the dirty segments' descriptors). Then
        ``run_flush(ticket)`` (any thread: only fsyncs) and ``end_flush(ticket)`` (the
        owner's thread: the recovery point moves to the ticket's log end). Appends may
        continue meanwhile; they are covered by the next flush."""
        fds: list[int | Path] = []
        for seg in reversed(self.segments):
            if seg.dirty:
                fds.extend(seg.begin_flush())
            elif seg.next_offset <= self._recovery_point:
                break
        fds.extend(self.leader_epochs.sync_paths())
        ticket = FlushTicket(self, self.log_end_offset, fds)
        HANDLES.flush_started([fd for fd in fds if isinstance(fd, int)])
        self.unflushed_messages = 0
        self.needs_flush = False
        self._dirty_reported = False
        self.last_flush_ms = _now_ms()
        return ticket

    def end_flush(self, ticket: FlushTicket) -> None:
        _release(ticket)  # run_flush did, unless it never ran
        if ticket.error is not None:
            for seg in self.segments:  # flush everything again next time
                seg.dirty = True
            self.leader_epochs.unsynced = True
            raise KafkaStorageError(f"fsync of {self.name} failed: {ticket.error}")
        self._recovery_point = max(self._recovery_point, min(ticket.log_end_offset,
                                                             self.log_end_offset))

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """Flush when flush.messages was reached or flush.ms has passed; True if flushed."""
        if not self.unflushed_messages:
            return False
        now = _now_ms() if now_ms is None else now_ms
        if self.needs_flush or now - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    def update_config(self, config: LogConfig) -> None:
        """New topic config (AlterConfigs); applies to future appends and retention."""
        self.config = config
        for seg in self.segments:
            seg.config = config

    # --- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Flush and close every segment; writes the producer snapshot first."""
        if self._loaded and self.segments:
            self.save_producer_state()
        try:
            self.leader_epochs.sync()
        except KafkaStorageError:
            logger.exception("[log=%s] leader-epoch checkpoint fsync on close failed", self.name)
        for seg in self.segments:
            try:
                seg.flush()
            except KafkaStorageError:
                logger.exception("[log=%s] flush on close failed", self.name)
            seg.close()

    def delete(self) -> None:
        """Remove every file of this log and its directory."""
        for seg in self.segments:
            seg.delete()
        self.segments.clear()
        self._bases.clear()
        for p in list(self.dir.glob("*")) if self.dir.exists() else []:
            p.unlink(missing_ok=True)
        try:
            self.dir.rmdir()
        except OSError as exc:
            raise KafkaStorageError(f"cannot remove {self.dir}: {exc}") from exc

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, start={self._log_start_offset}, end={self.log_end_offset}, "
            f"segments={len(self.segments)})"
        )
