"""The broker's own counters, kept in plain ints on the hot path.

This module owns what the broker counts as it serves: requests per API (count and
a latency histogram), error codes per API, connections, bytes and records in and
out per topic, ISR shrinks and expands. Nothing here imports a metrics library:
the request path only does integer additions, and `broker/metrics.py` turns these
numbers (and the state it reads from the partitions, logs, groups and quorum) into
Prometheus metrics when scraped.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections import defaultdict
from typing import Any

# upper bounds (seconds) of the request latency histogram's buckets (le="+Inf" last)
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0,
)

_RECORDS_COUNT = struct.Struct(">i")
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_RECORDS_COUNT_OFFSET = 57
_LOG_OVERHEAD = 12


class RequestStats:
    """One API's requests: how many, and how long each took (a histogram)."""

    __slots__ = ("count", "buckets", "total_seconds")

    def __init__(self) -> None:
        self.count = 0
        self.total_seconds = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # not cumulative; last is +Inf

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total_seconds += seconds
        self.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1


class BrokerStats:
    """Everything the broker counts; read (never reset) by the metrics collector."""

    def __init__(self) -> None:
        self.requests: dict[int, RequestStats] = defaultdict(RequestStats)
        # (api key, error code) -> responses carrying it (per partition where the
        # response has partitions, as Kafka's ErrorsPerSec); NONE is not counted
        self.errors: dict[tuple[int, int], int] = defaultdict(int)
        self.connections_created = 0
        self.connections_closed = 0
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.messages_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.messages_out: dict[str, int] = defaultdict(int)
        self.replication_bytes_in: dict[str, int] = defaultdict(int)
        self.replication_bytes_out: dict[str, int] = defaultdict(int)
        self.failed_produce: dict[str, int] = defaultdict(int)
        self.failed_fetch: dict[str, int] = defaultdict(int)
        self.isr_shrinks = 0
        self.isr_expands = 0

    def count_errors(self, api_key: int, body: Any) -> None:
        """Count the non-zero `error_code`s of a response body (dicts and lists)."""
        errors = self.errors
        stack = [body]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                code = node.get("error_code")
                if code:
                    errors[(api_key, int(code))] += 1
                for v in node.values():
                    if isinstance(v, list | dict):
                        stack.append(v)
            elif isinstance(node, list):
                stack.extend(v for v in node if isinstance(v, list | dict))


def count_records(data: bytes | memoryview) -> int:
    """Records in the whole record batches of ``data`` (from their headers only)."""
    n = 0
    pos = 0
    end = len(data)
    while pos + _RECORDS_COUNT_OFFSET + 4 <= end:
        _, length = _PREFIX.unpack_from(data, pos)
        nxt = pos + _LOG_OVERHEAD + length
        if length <= 0 or nxt > end:
            break
        n += _RECORDS_COUNT.unpack_from(data, pos + _RECORDS_COUNT_OFFSET)[0]
        pos = nxt
    return n
