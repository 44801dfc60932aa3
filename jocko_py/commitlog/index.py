"""Sparse segment indexes: offset -> file position, and timestamp -> offset.

This module owns the two index files of a segment.  Both are rebuildable from
the ``.log`` file, so they are checked on open and never trusted blindly.

On-disk format (big-endian, entries only, no header; file length is exactly
``entries * entry_size`` — nothing is preallocated):

- ``<base20>.index`` (OffsetIndex), 8-byte entries::

      int32 relative offset   (batch base offset - segment base offset)
      int32 position          (byte position of that batch in the .log file)

  Relative offsets strictly increase; positions strictly increase.

- ``<base20>.timeindex`` (TimeIndex), 12-byte entries::

      int64 timestamp         (largest batch max timestamp seen so far in the segment)
      int32 relative offset   (base offset of the batch that carries that timestamp)

  Timestamps strictly increase.  An entry (t, o) promises that no batch
  appended before the entry was written has a timestamp above t, so a search
  for timestamp T may start at the last entry whose t < T.

Entries are kept in memory (``array``); new ones are buffered and appended to the
file with an open-write-close when the buffer reaches ``SPILL_BYTES``, on
``begin_flush``/``flush`` (then fsynced) and on ``close``. No descriptor is held
between writes: a segment costs one descriptor, its ``.log`` (see fd_cache.py).
What a crash loses of an index is at most what an fsync had not covered, as before
(the buffered writer kept up to 8 KiB in the process too); indexes are rebuildable.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import sys
from array import array
from pathlib import Path

__all__ = ["IndexCorruptError", "OffsetIndex", "TimeIndex"]

log = logging.getLogger(__name__)

_OFFSET_ENTRY = struct.Struct(">ii")
# entries buffered in the process before they are appended to the file
SPILL_BYTES = 8192
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorruptError(Exception):
    """The index file fails a sanity check and must be rebuilt from the log."""


class _IndexFile:
    """Append-only file of fixed-size entries with an in-memory copy."""

    entry_size: int

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self._pending = bytearray()  # entries not yet written to the file
        self._dirty = False  # written to the file (or pending) since the last fsync

    @property
    def entries(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_bytes(self) -> int:
        return self.entries * self.entry_size

    def _write_file(self, raw: bytes | bytearray, *, truncate: bool = False,
                    fsync: bool = False) -> None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else os.O_APPEND)
        fd = os.open(self.path, flags, 0o644)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _spill(self) -> None:
        if self._pending:
            self._write_file(self._pending)
            self._pending = bytearray()

    def write_out(self) -> None:
        """Write buffered entries to the file, no fsync (still dirty: a flush makes them
        durable)."""
        self._spill()

    def create_file(self) -> None:
        """Make sure the file exists (empty), so its absence always means damage."""
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644))

    def _read_existing(self) -> bytes:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return b""  # an empty segment whose index was never written
        if len(data) % self.entry_size:
            raise IndexCorruptError(
                f"{self.path.name}: size {len(data)} is not a multiple of {self.entry_size}"
            )
        return data

    def _write_raw(self, raw: bytes) -> None:
        self._pending += raw
        self._dirty = True
        if len(self._pending) >= SPILL_BYTES:
            self._spill()

    def _rewrite(self, raw: bytes) -> None:
        self._pending = bytearray()
        self._write_file(raw, truncate=True)
        self._dirty = True

    def begin_flush(self) -> Path | None:
        """Write buffered entries to the OS; the file to fsync (None when nothing
        changed). The fsync itself may run on another thread (``log.run_flush``)."""
        if not self._dirty:
            return None
        self._spill()
        self._dirty = False
        return self.path

    def flush(self) -> None:
        """Write buffered entries and fsync them (no-op when nothing changed)."""
        if not self._dirty:
            return
        self._write_file(self._pending, fsync=True)
        self._pending = bytearray()
        self._dirty = False

    def close(self) -> None:
        """Write buffered entries (not fsynced); the index holds no descriptor."""
        try:
            self._spill()
        except OSError as exc:  # rebuildable: a shorter index only costs a longer scan
            log.warning("[index=%s] entries not written on close: %s", self.path, exc)
            self._pending = bytearray()

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    """Sparse map from offsets to positions of batches in the segment's .log."""

    entry_size = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        # int32 like the file format: half the memory of Python ints in "q" arrays.
        self._offsets = array("i")  # relative offsets
        self._positions = array("i")

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_bytes: int) -> OffsetIndex:
        """Open ``path`` and read its entries; IndexCorruptError if they make no sense."""
        idx = cls(path, base_offset, max_index_bytes)
        try:
            raw = array("i")
            raw.frombytes(idx._read_existing())
            if sys.byteorder == "little":
                raw.byteswap()
            offsets, positions = raw[0::2], raw[1::2]
            # Every entry is checked, not just the last: one bad entry would send
            # reads into the middle of a batch.
            if len(offsets) != len(positions) or (offsets and min(offsets[0], positions[0]) < 0):
                raise IndexCorruptError(f"{path.name}: negative entry")
            for i in range(1, len(offsets)):
                if offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1]:
                    raise IndexCorruptError(f"{path.name}: entries are not increasing")
            idx._offsets = offsets
            idx._positions = positions
        except Exception:
            idx.close()
            raise
        return idx

    @property
    def entries(self) -> int:
        return len(self._offsets)

    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base, 0) when empty."""
        if not self._offsets:
            return self.base_offset, 0
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._offsets and (rel <= self._offsets[-1] or position <= self._positions[-1]):
            return  # never go backwards; a duplicate entry adds nothing
        self._offsets.append(rel)
        self._positions.append(position)
        self._write_raw(_OFFSET_ENTRY.pack(rel, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= ``offset``, as (absolute offset, position).

        (base_offset, 0) when no entry qualifies: scan from the segment start.
        """
        i = bisect.bisect_right(self._offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0: none): a batch
        boundary from which to walk headers forward."""
        i = bisect.bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries that point at or beyond ``position`` (the log was cut there)."""
        i = bisect.bisect_left(self._positions, position)
        if i == len(self._positions):
            return
        del self._offsets[i:]
        del self._positions[i:]
        self._rewrite(b"".join(_OFFSET_ENTRY.pack(o, p) for o, p in self.iter_raw()))

    def reset(self) -> None:
        del self._offsets[:]
        del self._positions[:]
        self._rewrite(b"")

    def iter_raw(self) -> list[tuple[int, int]]:
        return list(zip(self._offsets, self._positions, strict=True))


class TimeIndex(_IndexFile):
    """Sparse map from timestamps to the offsets where a search should start."""

    entry_size = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._timestamps = array("q")
        self._offsets = array("i")

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_bytes: int) -> TimeIndex:
        idx = cls(path, base_offset, max_index_bytes)
        try:
            data = idx._read_existing()
            last_ts = None
            for ts, rel in _TIME_ENTRY.iter_unpack(data):
                if (last_ts is not None and ts <= last_ts) or rel < 0:
                    raise IndexCorruptError(f"{path.name}: timestamps are not increasing")
                idx._timestamps.append(ts)
                idx._offsets.append(rel)
                last_ts = ts
        except Exception:
            idx.close()
            raise
        return idx

    @property
    def entries(self) -> int:
        return len(self._timestamps)

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry, or None."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if ``timestamp`` is above the last entry's."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if offset < self.base_offset:
            return  # no batch with a timestamp yet (-1 offset): nothing to index
        rel = offset - self.base_offset
        self._timestamps.append(timestamp)
        self._offsets.append(rel)
        self._write_raw(_TIME_ENTRY.pack(timestamp, rel))

    def lookup(self, timestamp: int) -> int:
        """Offset from which to scan for the first record with ts >= ``timestamp``."""
        i = bisect.bisect_left(self._timestamps, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self._offsets[i]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries that refer to offsets >= ``offset``."""
        rel = offset - self.base_offset
        keep = [(t, o) for t, o in zip(self._timestamps, self._offsets, strict=True) if o < rel]
        if len(keep) == len(self._timestamps):
            return
        self._timestamps = array("q", (t for t, _ in keep))
        self._offsets = array("i", (o for _, o in keep))
        self._rewrite(b"".join(_TIME_ENTRY.pack(t, o) for t, o in keep))

    def reset(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        self._rewrite(b"")
