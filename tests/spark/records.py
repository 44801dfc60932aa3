"""Test data and conversions between Spark's Kafka rows and `Record`s."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tests.spark.kafka_io import Header, Record


def sample_records(
    base_ts: int, partitions: int = 3, count: int = 24, start: int = 0
) -> list[Record]:
    """Deterministic records spread round-robin over `partitions`, with null and
    empty keys and values, repeated header keys, empty and null header values, and
    timestamps one second apart (so increasing within each partition)."""
    out: list[Record] = []
    for i in range(start, start + count):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        if i % 11 == 10:
            value: bytes | None = None  # a tombstone
        elif i % 13 == 5:
            value = b""
        else:
            value = json.dumps({"i": i, "text": "é" * (i % 5)}).encode()
        kind = i % 4
        headers: tuple[Header, ...]
        if kind == 0:
            headers = ()
        elif kind == 1:
            headers = (("trace", f"t-{i}".encode()),)
        elif kind == 2:
            headers = (("dup", b"a"), ("dup", b"b"), ("empty", b""))
        else:
            headers = (("nul", None), ("bin", bytes([0, 255, i % 256])))
        out.append(Record(i % partitions, key, value, headers, base_ts + 1000 * i))
    return out


def _b(x: Any) -> bytes | None:
    return None if x is None else bytes(x)


def rows_to_records(df: Any, with_headers: bool = True) -> list[Record]:
    """Collect a Kafka-source DataFrame as Records sorted by (partition, offset);
    also checks that topic-independent columns have the connector's types."""
    cols = ["partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "timestampType"]
    if with_headers:
        cols.append("headers")
    out = []
    for row in df.selectExpr(*cols).collect():
        assert row["timestampType"] == 0, f"expected CreateTime (0), got {row['timestampType']}"
        headers: tuple[Header, ...] = ()
        if with_headers and row["headers"] is not None:
            headers = tuple((h["key"], _b(h["value"])) for h in row["headers"])
        out.append(
            Record(
                row["partition"],
                _b(row["key"]),
                _b(row["value"]),
                headers,
                row["ts"],
                row["offset"],
            )
        )
    return sorted(out, key=lambda r: (r.partition, r.offset))


def by_position(records: Iterable[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.partition, r.offset))


def diff(expected: list[Record], actual: list[Record], limit: int = 5) -> str:
    """A short description of how two record lists differ, for assertion messages."""
    e = {(r.partition, r.offset): r for r in expected}
    a = {(r.partition, r.offset): r for r in actual}
    lines = [f"expected {len(expected)} records, got {len(actual)}"]
    missing = sorted(set(e) - set(a))
    extra = sorted(set(a) - set(e))
    changed = sorted(k for k in set(e) & set(a) if e[k] != a[k])
    if missing:
        lines.append(f"missing (partition, offset): {missing[:limit]}")
    if extra:
        lines.append(f"unexpected (partition, offset): {extra[:limit]}")
    for k in changed[:limit]:
        lines.append(f"at {k}: expected {e[k]}\n            got {a[k]}")
    if len(actual) != len(a):
        lines.append("duplicates in actual")
    return "\n".join(lines)
