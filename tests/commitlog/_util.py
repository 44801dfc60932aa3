"""Helpers shared by the commit log tests."""

from __future__ import annotations

from jocko_py.protocol.records import NewRecord, build_batch, split_batches


def batch(n: int = 1, ts: int = 1_000, value_size: int = 10, **kw: object) -> bytes:
    """A client-style batch (base offset 0) of ``n`` records stamped ``ts``."""
    recs = [NewRecord(b"k%d" % i, b"v" * value_size, (), ts) for i in range(n)]
    return build_batch(recs, **kw)  # type: ignore[arg-type]


def base_offsets(data: bytes) -> list[int]:
    """Base offsets of the whole batches in ``data`` (CRC-checked)."""
    return [h.base_offset for h, _ in split_batches(data, validate_crc=True)]
