"""Durable state of a raft replica: quorum state, log and snapshot.

A storage executes the persistence actions of ``RaftCore`` (``PersistQuorumState``,
``AppendLog``, ``TruncateLog``, ``PersistSnapshot``) and reloads a ``DurableState`` after a
restart. ``MemoryStorage`` is for the simulation (what it holds survives a simulated
crash); ``FileStorage`` is the real one.

On-disk layout of ``FileStorage(directory)``:

- ``quorum-state``: JSON ``{"epoch": int, "voted_for": int | null}``, replaced atomically
  (write temp, fsync, rename, fsync directory).
- ``snapshot``: ``Snapshot.to_bytes()`` preceded by ``[u32 CRC-32]``, replaced atomically.
- ``log``: entries, each ``[u32 body length][u32 CRC-32 of body][body]`` with body
  ``[i64 offset][i32 epoch][i8 kind][data]`` (big-endian). Every append is fsync'd before
  the action returns. On load, a short or corrupt tail is truncated (a torn write from
  a crash) and entries below the snapshot's end offset are skipped. Truncation cuts the
  file at the entry's position; a snapshot rewrites the log without the entries it
  covers (atomic rename).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import struct
import zlib
from pathlib import Path

from jocko_py.cluster.raft.core import DurableState
from jocko_py.cluster.raft.messages import (
    Action,
    AppendLog,
    Entry,
    PersistQuorumState,
    PersistSnapshot,
    Snapshot,
    TruncateLog,
)
from jocko_py.commitlog.dirs import fsync_path

log = logging.getLogger("jocko_py.cluster.raft.storage")

_FRAME = struct.Struct(">II")
_BODY = struct.Struct(">qib")


class MemoryStorage:
    """Durable state kept in memory; the simulation treats it as the disk."""

    def __init__(self) -> None:
        self.state = DurableState()

    def execute(self, action: Action) -> None:
        s = self.state
        if isinstance(action, PersistQuorumState):
            s.epoch, s.voted_for = action.epoch, action.voted_for
        elif isinstance(action, AppendLog):
            s.entries.extend(action.entries)
        elif isinstance(action, TruncateLog):
            s.entries = [e for e in s.entries if e.offset < action.offset]
        elif isinstance(action, PersistSnapshot):
            s.snapshot = action.snapshot
            end = action.snapshot.end_offset
            s.entries = [] if action.replace_log else [e for e in s.entries if e.offset >= end]

    def load(self) -> DurableState:
        s = self.state
        return DurableState(s.epoch, s.voted_for, s.snapshot, list(s.entries))

    def clone(self) -> MemoryStorage:
        m = MemoryStorage()
        m.state = copy.copy(self.state)
        m.state.entries = list(self.state.entries)
        return m



def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)


def _frame(e: Entry) -> bytes:
    body = _BODY.pack(e.offset, e.epoch, e.kind) + e.data
    return _FRAME.pack(len(body), zlib.crc32(body)) + body


class FileStorage:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._state_path = self.dir / "quorum-state"
        self._snap_path = self.dir / "snapshot"
        self._log_path = self.dir / "log"
        self._positions: list[tuple[int, int]] = []  # (offset, file position)
        self._state = self._load()
        self._f = open(self._log_path, "ab")  # noqa: SIM115

    def _load(self) -> DurableState:
        st = DurableState()
        if self._state_path.exists():
            doc = json.loads(self._state_path.read_bytes())
            st.epoch, st.voted_for = int(doc["epoch"]), doc["voted_for"]
        if self._snap_path.exists():
            raw = self._snap_path.read_bytes()
            if len(raw) >= 4 and zlib.crc32(raw[4:]) == int.from_bytes(raw[:4], "big"):
                st.snapshot = Snapshot.from_bytes(raw[4:])
            else:
                log.error("[raft-storage %s] corrupt snapshot ignored", self.dir)
        data = self._log_path.read_bytes() if self._log_path.exists() else b""
        pos = 0
        start = st.snapshot.end_offset if st.snapshot else 0
        while pos + _FRAME.size <= len(data):
            n, crc = _FRAME.unpack_from(data, pos)
            body = data[pos + _FRAME.size : pos + _FRAME.size + n]
            if len(body) < n or zlib.crc32(body) != crc:
                break
            off, epoch, kind = _BODY.unpack_from(body, 0)
            if off >= start:
                if st.entries and off != st.entries[-1].offset + 1:
                    log.error("[raft-storage %s] gap in log at %d; truncating", self.dir, off)
                    break
                st.entries.append(Entry(off, epoch, bytes(body[_BODY.size :]), kind))
                self._positions.append((off, pos))
            pos += _FRAME.size + n
        if pos != len(data):
            log.warning("[raft-storage %s] truncating torn log tail at %d", self.dir, pos)
            with open(self._log_path, "r+b") as f:
                f.truncate(pos)
                f.flush()
                os.fsync(f.fileno())
        return st

    def load(self) -> DurableState:
        s = self._state
        return DurableState(s.epoch, s.voted_for, s.snapshot, list(s.entries))

    def execute(self, action: Action) -> None:
        s = self._state
        if isinstance(action, PersistQuorumState):
            doc = {"epoch": action.epoch, "voted_for": action.voted_for}
            _atomic_write(self._state_path, json.dumps(doc).encode())
            s.epoch, s.voted_for = action.epoch, action.voted_for
        elif isinstance(action, AppendLog):
            pos = self._f.tell()
            buf = bytearray()
            for e in action.entries:
                self._positions.append((e.offset, pos + len(buf)))
                buf += _frame(e)
            self._f.write(buf)
            self._f.flush()
            os.fsync(self._f.fileno())
            s.entries.extend(action.entries)
        elif isinstance(action, TruncateLog):
            cut = None
            while self._positions and self._positions[-1][0] >= action.offset:
                cut = self._positions.pop()[1]
            s.entries = [e for e in s.entries if e.offset < action.offset]
            if cut is not None:
                self._f.close()
                with open(self._log_path, "r+b") as f:
                    f.truncate(cut)
                    f.flush()
                    os.fsync(f.fileno())
                self._f = open(self._log_path, "ab")  # noqa: SIM115
        elif isinstance(action, PersistSnapshot):
            blob = action.snapshot.to_bytes()
            _atomic_write(self._snap_path, zlib.crc32(blob).to_bytes(4, "big") + blob)
            s.snapshot = action.snapshot
            end = action.snapshot.end_offset
            s.entries = [] if action.replace_log else [e for e in s.entries if e.offset >= end]
            self._rewrite_log()

    def _rewrite_log(self) -> None:
        self._f.close()
        buf = bytearray()
        self._positions = []
        for e in self._state.entries:
            self._positions.append((e.offset, len(buf)))
            buf += _frame(e)
        _atomic_write(self._log_path, bytes(buf))
        self._f = open(self._log_path, "ab")  # noqa: SIM115

    def close(self) -> None:
        self._f.close()
