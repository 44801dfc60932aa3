"""One log segment: a ``.log`` file of record batches plus its two indexes.

This module owns reading, appending, recovering and truncating one segment.

On-disk format: ``<base20>.log``, where ``<base20>`` is the segment's base
offset as 20 zero-padded decimal digits, is the concatenation of record
batches (magic 2) exactly as produced, with only baseOffset and
partitionLeaderEpoch patched by the log (see ``jocko_py.protocol.records`` for
the batch layout).  There is no file header and no padding: the file length is
the sum of the batch sizes.  Batches have strictly increasing base offsets, all
>= the segment's base offset.  ``<base20>.index`` and ``<base20>.timeindex``
are described in :mod:`jocko_py.commitlog.index`; ``<base20>.txnindex``, the
transactions aborted by markers in this segment, in :mod:`jocko_py.commitlog.txn_index`
(kept by the log: the producer-state replay rebuilds it).

A batch is trusted on read because it was validated when appended (by the
broker) or by :meth:`LogSegment.recover` on start-up after an unclean stop.

Zero-copy reads: asked with ``region_min``, a read of at least that many bytes is a
:class:`FileRegion` (position and length of whole batches, found from the offset index
and a few headers, the bytes themselves never read) that the broker's connection sends
with ``sendfile``. The bytes must be the ones the read saw: the segment records every
truncation (``truncations``) and whether it was closed (deleted, replaced by the
cleaner), and the region refuses (:class:`RegionChanged`) to give out bytes that
changed since; a descriptor of its own (a dup) keeps a deleted file's old bytes
readable while they are being sent, as Kafka's delayed segment deletion does.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.errors import KafkaStorageError
from jocko_py.commitlog.fd_cache import HANDLES
from jocko_py.commitlog.index import IndexCorruptError, OffsetIndex, TimeIndex
from jocko_py.commitlog.txn_index import TXN_INDEX_SUFFIX, TxnIndex
from jocko_py.protocol.records import (
    CURRENT_MAGIC,
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    Record,
    RecordBatchHeader,
    RecordError,
    compute_crc,
    decode_records,
    parse_header,
)
from jocko_py.protocol.wire import OutOfLine

__all__ = ["REGION_MIN_BYTES", "FileRegion", "LogSegment", "RegionChanged", "filename_prefix"]

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

_SCAN_CHUNK = 64 * 1024
_RECOVERY_CHUNK = 1024 * 1024
_INT32_MAX = 2147483647
# reads this big or bigger are sent from the file (sendfile) when the caller allows it:
# below, a pread and a write cost less than setting up a sendfile
REGION_MIN_BYTES = 64 * 1024


class RegionChanged(Exception):
    """The bytes of a `FileRegion` are no longer the ones read: the segment was
    truncated below its end, or closed (deleted, compacted) before they were sent."""


class FileRegion(OutOfLine):
    """Whole batches of a segment, ``size`` bytes at ``position``, not read into memory
    (see the module docstring). ``first_offset``/``last_offset`` bound the offsets in it
    (the last one from the index and headers: a compacted segment's gaps included)."""

    __slots__ = ("segment", "position", "size", "first_offset", "last_offset", "_truncations")

    def __init__(self, segment: LogSegment, position: int, size: int, first_offset: int,
                 last_offset: int) -> None:
        self.segment = segment
        self.position = position
        self.size = size
        self.first_offset = first_offset
        self.last_offset = last_offset
        self._truncations = len(segment.truncations)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion({self.segment.log_path.name}, {self.position}+{self.size})"

    def check(self, *, opened: bool = False) -> None:
        """RegionChanged unless the file still holds the bytes read. ``opened``: a
        descriptor of our own is open on it (see `open`), so its closing or deletion
        since no longer matters; only a truncation below our end does."""
        seg = self.segment
        if seg.closed and not opened:
            raise RegionChanged(f"{seg.log_path} was closed (deleted or compacted) before "
                                f"its bytes at {self.position} were sent")
        end = self.position + self.size
        for p in seg.truncations[self._truncations:]:
            if p < end:
                raise RegionChanged(f"{seg.log_path} was truncated to {p} bytes while its "
                                    f"bytes {self.position}-{end} were being sent")

    def open(self) -> int:
        """A descriptor of our own on the segment's file, counted against the open-file
        bound until `close` (fd_cache.py). Raises RegionChanged, or OSError /
        KafkaStorageError when no descriptor is left."""
        self.check()
        return HANDLES.borrow(self.segment, self.segment._fdesc())

    @staticmethod
    def close(fd: int) -> None:
        """Give back a descriptor from `open`."""
        HANDLES.give_back(fd)

    def read(self) -> bytes:
        """The bytes, read (a TLS connection, or no descriptor left for `open`)."""
        self.check()
        try:
            data = os.pread(self.segment._fdesc(), self.size, self.position)
        except OSError as exc:
            raise KafkaStorageError(f"read from {self.segment.log_path} failed: {exc}") from exc
        if len(data) != self.size:
            raise RegionChanged(f"{self.segment.log_path} is shorter than {self.position}+"
                                f"{self.size} bytes")
        return data


def filename_prefix(base_offset: int) -> str:
    return f"{base_offset:020d}"


class LogSegment:
    """A segment file and its indexes; not thread-safe (one owner, the Log)."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        prefix = filename_prefix(base_offset)
        self.log_path = directory / (prefix + LOG_SUFFIX)
        self.index_path = directory / (prefix + INDEX_SUFFIX)
        self.time_index_path = directory / (prefix + TIME_INDEX_SUFFIX)
        self.txn_index = TxnIndex(directory / (prefix + TXN_INDEX_SUFFIX))
        self._fd = -1
        self.size = 0
        self.next_offset = base_offset
        # Largest batch max timestamp and the base offset of the batch carrying it.
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None
        self.created_ms = int(time.time() * 1000)
        self.dirty = False
        # Kafka picks each segment's jitter at random so that many partitions
        # created together do not all roll at the same moment.
        jitter = config.segment_jitter_ms
        self.roll_jitter_ms = random.randrange(min(jitter, config.segment_ms)) if jitter > 0 else 0
        self._bytes_since_index = 0
        self.offset_index: OffsetIndex
        self.time_index: TimeIndex
        # the sizes this file was cut to, in order (FileRegion: bytes changed since a read)
        self.truncations: list[int] = []
        self.closed = False  # closed for good (deleted, compacted, log closed)
        # the index files are still to be created, by the first append, and the .log by
        # the first use of its descriptor (create(new=True))
        self._index_files_pending = False
        self._file_pending = False

    # --- opening --------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, *,
               new: bool = False) -> LogSegment:
        """A new, empty segment (files created; an existing .log is emptied).

        ``new``: ``directory`` was just made (empty), so there is nothing to remove, and
        no file is created yet: the ``.log`` is made by the first use of its descriptor
        (an append, a read), the index files by the first append, before its bytes are
        written: a segment with data always has both (their absence means damage, see
        `open`), an empty one needs none, and a log directory without a segment file
        loads as an empty log."""
        seg = cls(directory, base_offset, config)
        try:
            if new:
                seg._file_pending = True
            else:
                seg._fd = HANDLES.open(seg, seg.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
            if not new:
                seg.index_path.unlink(missing_ok=True)
                seg.time_index_path.unlink(missing_ok=True)
                seg.txn_index.path.unlink(missing_ok=True)
            seg.offset_index = OffsetIndex(seg.index_path, base_offset, config.segment_index_bytes)
            seg.time_index = TimeIndex(seg.time_index_path, base_offset, config.segment_index_bytes)
            if new:
                seg._index_files_pending = True
            else:
                seg.offset_index.create_file()
                seg.time_index.create_file()
        except (OSError, KafkaStorageError) as exc:
            seg._close_quietly()
            for p in (seg.log_path, seg.index_path, seg.time_index_path):
                p.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise HANDLES.storage_error(f"cannot create segment {seg.log_path}",
                                            exc) from exc
            raise KafkaStorageError(f"cannot create segment {seg.log_path}: {exc}") from exc
        return seg

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, config: LogConfig, *, recover: bool
    ) -> tuple[LogSegment, int]:
        """Open an existing segment; returns (segment, bytes truncated by recovery).

        With ``recover`` every batch is validated and the indexes rebuilt.  Without
        it the indexes are sanity-checked against the log (and rebuilt by a full
        recovery if they fail) and only the tail past the last index entry is scanned.
        """
        seg = cls(directory, base_offset, config)
        seg._fd = HANDLES.open(seg, seg.log_path, os.O_RDWR | os.O_CREAT)
        st = os.fstat(seg._fd)
        seg.size = st.st_size
        seg.created_ms = int(st.st_mtime * 1000)
        seg.txn_index = TxnIndex.load(seg.txn_index.path)
        if recover:
            return seg, seg.recover()
        if seg.size > 0 and not (seg.index_path.exists() and seg.time_index_path.exists()):
            log.warning("[segment=%s] index file missing; rebuilding", seg.log_path)
            return seg, seg.recover()
        try:
            seg.offset_index = OffsetIndex.load(
                seg.index_path, base_offset, config.segment_index_bytes
            )
            try:
                seg.time_index = TimeIndex.load(
                    seg.time_index_path, base_offset, config.segment_index_bytes
                )
            except Exception:
                seg.offset_index.close()
                raise
            seg._check_indexes()
            seg._load_tail()
        except (IndexCorruptError, KafkaStorageError, RecordError, OSError, ValueError) as exc:
            log.warning("[segment=%s] index check failed (%s); rebuilding", seg.log_path, exc)
            return seg, seg.recover()
        return seg, 0

    def _check_indexes(self) -> None:
        off, pos = self.offset_index.last_entry()
        if self.offset_index.entries:
            if pos + HEADER_SIZE > self.size:
                raise IndexCorruptError("offset index points past the end of the log")
            h = self._header_at(pos)
            if h.base_offset != off:
                raise IndexCorruptError(
                    f"offset index entry ({off}, {pos}) disagrees with batch at {h.base_offset}"
                )
        if self.size > 0 and not self.offset_index.entries:
            raise IndexCorruptError("offset index is empty for a non-empty log")
        last_t = self.time_index.last_entry()
        if last_t is not None and self.size == 0:
            raise IndexCorruptError("time index has entries for an empty log")

    def _load_tail(self) -> None:
        """Scan batch headers after the last index entry for next offset / timestamps."""
        _, pos = self.offset_index.last_entry()
        last_t = self.time_index.last_entry()
        if last_t is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_t
        if self.size > 0:
            self.first_batch_timestamp = self._header_at(0).max_timestamp
        for p, h in self.iter_headers(pos):
            if h.batch_length < MIN_BATCH_LENGTH or h.magic != CURRENT_MAGIC:
                raise IndexCorruptError(f"bad batch header at position {p}")
            self._track(h)
            pos = p + h.size
        if pos != self.size:
            raise IndexCorruptError(f"log ends mid-batch at {pos} of {self.size}")
        if last_t is not None and last_t[1] >= self.next_offset:
            raise IndexCorruptError("time index refers to an offset past the log end")

    def _track(self, h: RecordBatchHeader) -> None:
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.base_offset
        self.next_offset = h.next_offset

    # --- recovery -------------------------------------------------------------

    def recover(self) -> int:
        """Validate every batch, rebuild both indexes, cut a torn or corrupt tail.

        Returns the number of bytes truncated.
        """
        for attr in ("offset_index", "time_index"):
            idx = getattr(self, attr, None)
            if idx is not None:
                idx.close()
        self.index_path.unlink(missing_ok=True)
        self.time_index_path.unlink(missing_ok=True)
        cfg = self.config
        self.offset_index = OffsetIndex(self.index_path, self.base_offset, cfg.segment_index_bytes)
        self.time_index = TimeIndex(self.time_index_path, self.base_offset, cfg.segment_index_bytes)
        self.offset_index.create_file()
        self.time_index.create_file()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        self._bytes_since_index = 0
        file_size = os.fstat(self._fdesc()).st_size
        pos = 0
        reason = ""
        # Read in large chunks: one pread per batch would make recovery of a
        # segment full of small batches syscall-bound.
        chunk = b""
        chunk_start = 0
        while pos < file_size:
            remaining = file_size - pos
            if remaining < HEADER_SIZE:
                reason = f"{remaining} trailing bytes"
                break
            off = pos - chunk_start
            if off + HEADER_SIZE > len(chunk):
                chunk = os.pread(self._fdesc(), min(_RECOVERY_CHUNK, remaining), pos)
                chunk_start, off = pos, 0
            h = parse_header(chunk, off)
            if h.batch_length < MIN_BATCH_LENGTH or h.magic != CURRENT_MAGIC:
                reason = f"bad length {h.batch_length} or magic {h.magic}"
                break
            if h.size > remaining:
                reason = f"batch of {h.size} bytes with {remaining} left (torn write)"
                break
            if h.base_offset < self.next_offset or h.last_offset_delta < 0:
                reason = f"offset {h.base_offset} goes backwards"
                break
            if h.last_offset - self.base_offset > _INT32_MAX:
                reason = f"offset {h.last_offset} too far from segment base"
                break
            if off + h.size > len(chunk):
                chunk = os.pread(self._fdesc(), min(max(h.size, _RECOVERY_CHUNK), remaining), pos)
                chunk_start, off = pos, 0
            if compute_crc(chunk, off, h.size) != h.crc:
                reason = f"CRC mismatch in batch at offset {h.base_offset}"
                break
            self._index_batch(h, pos)
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = h.max_timestamp
            pos += h.size
        truncated = file_size - pos
        if truncated:
            log.warning(
                "[segment=%s] recovery truncates %d bytes at position %d: %s",
                self.log_path,
                truncated,
                pos,
                reason,
            )
            os.ftruncate(self._fdesc(), pos)
            self.truncations.append(pos)
        self.size = pos
        self.dirty = True
        return truncated

    # --- appending ------------------------------------------------------------

    def _index_batch(self, h: RecordBatchHeader, position: int) -> None:
        self._track(h)
        # The first batch always gets an entry so lookups never scan from before it.
        if self._bytes_since_index >= self.config.index_interval_bytes or position == 0:
            self.offset_index.append(h.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += h.size

    def append(
        self, data: bytes | bytearray | memoryview, batches: list[RecordBatchHeader]
    ) -> None:
        """Write ``data`` (the whole batches described by ``batches``) at the end.

        On OSError the file is cut back to its previous length and
        KafkaStorageError is raised, so the segment stays consistent.
        """
        start = self.size
        view = memoryview(data)
        written = 0
        if self._index_files_pending:
            try:
                self.offset_index.create_file()
                self.time_index.create_file()
            except OSError as exc:
                raise KafkaStorageError(f"cannot create the indexes of {self.log_path}: "
                                        f"{exc}") from exc
            self._index_files_pending = False
        try:
            while written < len(view):
                written += os.pwrite(self._fdesc(), view[written:], start + written)
        except OSError as exc:
            try:
                os.ftruncate(self._fdesc(), start)
            except OSError:
                log.exception("[segment=%s] cannot truncate after failed write", self.log_path)
            raise KafkaStorageError(f"write to {self.log_path} failed: {exc}") from exc
        self.size = start + written
        self.dirty = True
        pos = start
        for h in batches:
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = h.max_timestamp
            try:
                self._index_batch(h, pos)
            except OSError as exc:
                # The index is rebuildable; losing an entry only costs a longer scan.
                log.warning("[segment=%s] index write failed: %s", self.log_path, exc)
            pos += h.size

    # --- reading --------------------------------------------------------------

    def _header_at(self, pos: int) -> RecordBatchHeader:
        return parse_header(os.pread(self._fdesc(), HEADER_SIZE, pos))

    def iter_headers(self, pos: int = 0) -> Iterator[tuple[int, RecordBatchHeader]]:
        """(position, header) of every batch from ``pos``, read in chunks."""
        buf = b""
        buf_start = pos
        end = self.size
        while pos + HEADER_SIZE <= end:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(self._fdesc(), min(_SCAN_CHUNK, end - pos), pos)
                buf_start = pos
                off = 0
                if len(buf) < HEADER_SIZE:
                    return
            h = parse_header(buf, off)
            if h.batch_length < MIN_BATCH_LENGTH:
                raise KafkaStorageError(f"{self.log_path}: corrupt batch length at {pos}")
            yield pos, h
            pos += h.size

    def find_position(self, offset: int) -> tuple[int, RecordBatchHeader] | None:
        """Position and header of the first batch whose last offset >= ``offset``."""
        _, pos = self.offset_index.lookup(offset)
        for p, h in self.iter_headers(pos):
            if h.last_offset >= offset:
                return p, h
        return None

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        region_min: int | None = None,
    ) -> bytes | memoryview | FileRegion | None:
        """Whole batches from the one containing ``offset``.

        Stops before a batch whose last offset is >= ``max_offset`` and once
        ``max_bytes`` would be exceeded (but returns one batch regardless when
        ``min_one_batch``).  None when no batch here reaches ``offset``. With
        ``region_min``, a read of at least that many bytes is a FileRegion.
        """
        found = self.find_position(offset)
        if found is None:
            return None
        start, first = found
        if max_offset is not None and first.last_offset >= max_offset:
            return b""
        if first.size > max_bytes and not min_one_batch:
            return b""
        want = min(max(max_bytes, first.size), self.size - start)
        if region_min is not None and want >= region_min:
            region = self._region(start, first, start + want, max_offset)
            if region.size >= region_min:
                return region
            want = region.size  # exactly whole batches: the walk below keeps them all
        # one pread of everything that could be returned, trimmed to whole batches
        # in memory: a single syscall and a single header walk
        try:
            data = os.pread(self._fdesc(), want, start)
        except OSError as exc:
            raise KafkaStorageError(f"read from {self.log_path} failed: {exc}") from exc
        total = 0
        n = len(data)
        while total + HEADER_SIZE <= n:
            h = parse_header(data, total)
            if h.batch_length < MIN_BATCH_LENGTH:
                raise KafkaStorageError(f"{self.log_path}: corrupt batch length at {start + total}")
            if total + h.size > n:
                break
            if max_offset is not None and h.last_offset >= max_offset:
                break
            total += h.size
        if total == n:
            return data
        return memoryview(data)[:total]

    def _region(self, start: int, first: RecordBatchHeader, limit: int,
                max_offset: int | None) -> FileRegion:
        """The whole batches from ``start`` (``first``'s position) that end by ``limit``
        and lie below ``max_offset``, found without reading them: the offset index
        gives a batch boundary just below each bound and a few headers the rest."""
        last_offset = self.next_offset - 1
        if max_offset is not None and max_offset < self.next_offset:
            at = self.find_position(max_offset)  # the first batch not to return
            if at is not None and at[0] <= limit:
                limit, last_offset = at[0], at[1].base_offset - 1
        if limit < self.size:
            walk_from = max(start, self.offset_index.floor_position(limit - 1))
            end = walk_from
            for p, h in self.iter_headers(walk_from):
                if p + h.size > limit:
                    last_offset = h.base_offset - 1
                    break
                end = p + h.size
                last_offset = h.last_offset
            limit = end
        return FileRegion(self, start, limit - start, first.base_offset, last_offset)

    def read_batch_at(self, position: int, header: RecordBatchHeader) -> bytes:
        return os.pread(self._fdesc(), header.size, position)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record >= ``start_offset`` with ts >= ``timestamp``."""
        scan_from = max(self.time_index.lookup(timestamp), start_offset)
        found = self.find_position(scan_from)
        if found is None:
            return None
        for p, h in self.iter_headers(found[0]):
            if h.max_timestamp < timestamp or h.last_offset < start_offset:
                continue
            for rec in self._decode(p, h):
                if rec.timestamp >= timestamp and rec.offset >= start_offset:
                    return rec.offset, rec.timestamp
        return None

    def offset_of_max_record(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the max timestamp, or None."""
        if self.offset_of_max_timestamp < 0:
            return None
        found = self.find_position(self.offset_of_max_timestamp)
        if found is None:
            return None
        p, h = found
        for rec in self._decode(p, h):
            if rec.timestamp == h.max_timestamp:
                return rec.offset, h.max_timestamp
        return h.last_offset, h.max_timestamp

    def _decode(self, position: int, header: RecordBatchHeader) -> list[Record]:
        # Stored batches were validated on the way in; failing to decode one now
        # means the disk returned something else, which is a storage error.
        try:
            return decode_records(self.read_batch_at(position, header), header)
        except RecordError as exc:
            raise KafkaStorageError(
                f"{self.log_path}: batch at position {position} does not decode: {exc.message}"
            ) from exc

    # --- rolling / sizing -----------------------------------------------------

    def should_roll(
        self, incoming_bytes: int, last_offset: int, max_timestamp: int, now_ms: int
    ) -> bool:
        """Kafka's roll rule: size, age, index space, or relative offset overflow.

        Age is measured like Kafka: the incoming batches' max timestamp minus the
        first batch's timestamp, falling back to wall time since creation when the
        segment has no timestamps (so replaying old data does not roll per append).
        """
        if self.size == 0:
            return False
        cfg = self.config
        if self.size + incoming_bytes > cfg.segment_bytes:
            return True
        first = self.first_batch_timestamp
        if first is not None and first >= 0:
            waited = max_timestamp - first
        else:
            waited = now_ms - self.created_ms
        if waited > cfg.segment_ms - self.roll_jitter_ms:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > _INT32_MAX

    @property
    def largest_timestamp(self) -> int:
        """For retention: the largest batch timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.fstat(self._fdesc()).st_mtime * 1000)
        except OSError:
            return self.created_ms

    # --- truncation / lifecycle -----------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset >= ``offset``; returns bytes removed."""
        found = self.find_position(offset)
        if found is None:
            return 0
        pos, first_removed = found
        removed = self.size - pos
        self.truncations.append(pos)  # before: a failed cut may have cut some
        try:
            os.ftruncate(self._fdesc(), pos)
        except OSError as exc:
            raise KafkaStorageError(f"truncate of {self.log_path} failed: {exc}") from exc
        self.size = pos
        self.dirty = True
        self.offset_index.truncate_to_position(pos)
        self.txn_index.truncate_to(offset)
        # Cut at the first removed batch, which may start below ``offset``.
        self.time_index.truncate_to_offset(first_removed.base_offset)
        # Recompute what the tail scan would give for the shorter file.
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        self._bytes_since_index = 0
        for p, h in self.iter_headers(0):
            if p == 0:
                self.first_batch_timestamp = h.max_timestamp
            self._track(h)
        return removed

    def begin_flush(self) -> list[int | Path]:
        """What to fsync to make this segment durable: the log's descriptor and the
        paths of its indexes (buffers written out; they hold no descriptor); clears
        ``dirty``. See ``Log.begin_flush``."""
        if not self.dirty:
            return []
        fds: list[int | Path] = [self._fdesc()]
        for idx in (self.offset_index, self.time_index):
            path = idx.begin_flush()
            if path is not None:
                fds.append(path)
        txn = self.txn_index.begin_flush()
        if txn is not None:
            fds.append(txn)
        self.dirty = False
        return fds

    def flush(self) -> None:
        if not self.dirty:
            return
        try:
            os.fsync(self._fdesc())
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except OSError as exc:
            raise KafkaStorageError(f"fsync of {self.log_path} failed: {exc}") from exc
        self.dirty = False

    def _fdesc(self) -> int:
        """The `.log` descriptor, reopened if the open-file bound closed it (fd_cache.py)."""
        fd = self._fd
        if fd >= 0:
            HANDLES.touch(self)
            return fd
        if self._file_pending:
            self._fd = fd = HANDLES.open(self, self.log_path, os.O_RDWR | os.O_CREAT)
            self._file_pending = False
            return fd
        self._fd = fd = HANDLES.open(self, self.log_path, os.O_RDWR)
        return fd

    def release_fd(self) -> None:
        """Close the `.log` descriptor (the open-file bound needs it); reopened on use.
        Written data stays in the page cache: a later fsync through a new descriptor
        makes it durable (Linux reports an unseen writeback error to it, too)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def _close_quietly(self) -> None:
        if self._fd >= 0:
            HANDLES.forget(self)
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1

    def close(self) -> None:
        self.closed = True
        for attr in ("offset_index", "time_index"):
            idx = getattr(self, attr, None)
            if idx is not None:
                idx.close()
        self.txn_index.close()
        self._close_quietly()

    def delete(self) -> None:
        self.close()
        for p in (self.log_path, self.index_path, self.time_index_path, self.txn_index.path):
            p.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"
