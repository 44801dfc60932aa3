"""A single-node durable metadata log: the metadata records of a broker without raft.

Owns one append-only file. A single broker persists its metadata records here and
replays them into a ``MetadataImage`` at start-up; in a cluster the raft log takes
its place with the same record encoding (``metadata.encode_record``).

Public API: ``LocalMetadataLog(path)`` (``path`` is a file, or an existing directory in
which ``__cluster_metadata.log`` is used); ``append(records)`` (atomic and durable: the
batch is written and fsync'd before returning); ``replay() -> Iterator[MetadataRecord]``;
``rewrite(records)`` (atomically replace the whole log, e.g. by an image snapshot);
``close()``.

On-disk format: a sequence of batches, each
``[u32 payload length][u32 CRC-32 of payload][payload]`` (big-endian), where the payload
is ``[u32 record count]`` followed by ``[u32 length][encode_record bytes]`` per record.
A batch is the unit of atomicity: on open, the file is scanned and the first batch that
is short or fails its CRC, and everything after it, is truncated (a torn tail from a
crash mid-append). Batches before it are intact because each append is fsync'd.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from jocko_py.cluster.metadata import MetadataRecord, decode_record, encode_record

log = logging.getLogger("jocko_py.cluster.local_log")

_HDR = struct.Struct(">II")
_U32 = struct.Struct(">I")
DEFAULT_FILE_NAME = "__cluster_metadata.log"


def _encode_batch(records: Iterable[MetadataRecord]) -> bytes:
    recs = [encode_record(r) for r in records]
    payload = bytearray(_U32.pack(len(recs)))
    for b in recs:
        payload += _U32.pack(len(b))
        payload += b
    return _HDR.pack(len(payload), zlib.crc32(payload)) + bytes(payload)


def _decode_batch(payload: bytes) -> list[bytes]:
    (count,) = _U32.unpack_from(payload, 0)
    pos = 4
    out: list[bytes] = []
    for _ in range(count):
        (n,) = _U32.unpack_from(payload, pos)
        pos += 4
        out.append(payload[pos : pos + n])
        pos += n
    return out


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalMetadataLog:
    """Append-only, fsync'd, torn-tail-tolerant file of metadata record batches."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        p = Path(path)
        if p.is_dir():
            p = p / DEFAULT_FILE_NAME
        p.parent.mkdir(parents=True, exist_ok=True)
        self.path = p
        created = not p.exists()
        self._batches: list[bytes] = []
        self._f = open(p, "a+b")  # noqa: SIM115 - held open for the log's lifetime
        if created:
            _fsync_dir(p.parent)
        self._recover()

    def _recover(self) -> None:
        self._f.seek(0)
        data = self._f.read()
        pos = 0
        while pos + _HDR.size <= len(data):
            n, crc = _HDR.unpack_from(data, pos)
            payload = data[pos + _HDR.size : pos + _HDR.size + n]
            if len(payload) < n or zlib.crc32(payload) != crc:
                break
            self._batches.append(payload)
            pos += _HDR.size + n
        if pos != len(data):
            log.warning(
                "[metadata-log %s] truncating torn tail: %d bytes at offset %d",
                self.path,
                len(data) - pos,
                pos,
            )
            self._f.truncate(pos)
            self._f.flush()
            os.fsync(self._f.fileno())

    def append(self, records: list[MetadataRecord]) -> None:
        """Write ``records`` as one atomic batch and fsync before returning."""
        if not records:
            return
        frame = _encode_batch(records)
        self._f.seek(0, os.SEEK_END)
        self._f.write(frame)
        self._f.flush()
        os.fsync(self._f.fileno())
        self._batches.append(frame[_HDR.size :])

    def replay(self) -> Iterator[MetadataRecord]:
        """Every record of every intact batch, in append order."""
        for payload in list(self._batches):
            for raw in _decode_batch(payload):
                yield decode_record(raw)

    def rewrite(self, records: list[MetadataRecord]) -> None:
        """Atomically replace the log's contents with one batch of ``records``."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        frame = _encode_batch(records) if records else b""
        with open(tmp, "wb") as f:
            f.write(frame)
            f.flush()
            os.fsync(f.fileno())
        self._f.close()
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        self._f = open(self.path, "a+b")  # noqa: SIM115
        self._batches = [frame[_HDR.size :]] if records else []

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> LocalMetadataLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
