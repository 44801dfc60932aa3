"""The aborted-transaction index of one segment (Kafka's ``.txnindex``).

This module owns the byte layout of ``<base20>.txnindex`` and nothing else: one
entry per transaction aborted by a marker that lies in the segment
``<base20>.log``. A read_committed Fetch asks the log for the aborted
transactions that overlap the range it returns, so the consumer can skip their
records (KIP-98).

On-disk format (Kafka's, big-endian), a sequence of 34-byte entries and
nothing else (no header)::

    offset  size  field
         0     2  version           (0)
         2     8  producerId
        10     8  firstOffset       (first offset of the transaction in this partition)
        18     8  lastOffset        (offset of the ABORT marker)
        26     8  lastStableOffset  (the partition's LSO once this transaction completed)

Entries are in marker order. The file is created with the first entry (most
segments never have one) and deleted with its segment. A torn trailing entry
is dropped on load; entries past the log end are removed when the log is
truncated, and the log rebuilds the entries of every batch it replays on
recovery (see ``Log._load_producer_state``), so the file is never trusted past
what the producer-state replay confirms.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from jocko_py.commitlog.errors import KafkaStorageError

__all__ = ["TXN_INDEX_SUFFIX", "AbortedTxn", "TxnIndex"]

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndex:
    """The entries of one segment, in memory and in its file (written through)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._fd = -1
        self.dirty = False

    @classmethod
    def load(cls, path: Path) -> TxnIndex:
        idx = cls(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return idx
        except OSError as exc:
            raise KafkaStorageError(f"cannot read {path}: {exc}") from exc
        whole = len(data) - len(data) % ENTRY_SIZE
        for pos in range(0, whole, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != 0:
                whole = pos  # garbage from here on: keep what came before
                break
            idx.entries.append(AbortedTxn(pid, first, last, lso))
        if whole != len(data):
            idx._rewrite()
        return idx

    def append(self, txn: AbortedTxn) -> None:
        # open-write-close: aborted transactions are rare, and a segment holds no
        # descriptor but its .log's (fd_cache.py)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, _ENTRY.pack(0, *txn))
            finally:
                os.close(fd)
        except OSError as exc:
            raise KafkaStorageError(f"write to {self.path} failed: {exc}") from exc
        self.entries.append(txn)
        self.dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or beyond ``offset``."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def _rewrite(self) -> None:
        self.close()
        try:
            if not self.entries:
                self.path.unlink(missing_ok=True)
                return
            tmp = self.path.with_suffix(".txnindex.tmp")
            with open(tmp, "wb") as f:
                f.write(b"".join(_ENTRY.pack(0, *e) for e in self.entries))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            raise KafkaStorageError(f"cannot rewrite {self.path}: {exc}") from exc

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Entries overlapping [fetch_offset, upper_bound)."""
        return [e for e in self.entries
                if e.last_offset >= fetch_offset and e.first_offset < upper_bound]

    def begin_flush(self) -> Path | None:
        """The file to fsync (on any thread), None when nothing changed."""
        if not self.dirty or not self.entries:
            return None
        self.dirty = False
        return self.path

    def flush(self) -> None:
        if self.dirty and self.entries:
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise KafkaStorageError(f"fsync of {self.path} failed: {exc}") from exc
        self.dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.entries = []
        self.path.unlink(missing_ok=True)
