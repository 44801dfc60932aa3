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

from jocko_py.protocol.wire import Encoded

# upper bounds (seconds) of the request latency histogram's buckets (le="+Inf" last)
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0,
)

# Field names of the arrays of structs in Kafka's messages (from the generated schemas;
# tests/broker/test_metrics.py checks the list is complete): the only places below the
# top level where a response carries error codes.
STRUCT_ARRAYS = frozenset({
    "aborted_transactions", "acknowledgement_batches", "acls", "acquired_records",
    "active_partitions", "active_producers", "active_tasks",
    "active_tasks_pending_revocation", "api_keys", "assigned_partitions", "assignments",
    "brokers", "client_tags", "components", "config_resources", "configs", "coordinators",
    "copartition_groups", "creations", "credential_infos", "current_voters",
    "deleting_topics", "deletions", "directories", "dirs", "end_points", "endpoints",
    "entity", "entries", "feature_updates", "features", "filter_results", "filters",
    "finalized_features", "forgotten_topics_data", "global_stores", "granting_voters",
    "groups", "initialized_topics", "initializing_topics", "last_assignment_configs",
    "leader_endpoints", "listeners",
    "markers", "matching_acls", "members", "new_isr_with_epochs", "node_endpoints",
    "nodes", "observers", "ops", "owned_partitions", "owners", "partition_data",
    "partition_metadata", "partition_responses", "partition_result", "partitions",
    "partitions_by_user_endpoint", "partitions_pending_revocation", "preferred_candidates",
    "protocols", "record_errors", "renewers", "repartition_source_topics",
    "replica_election_results", "resources", "responses", "results",
    "results_by_partition", "results_by_topic_v3_and_below", "results_by_transaction",
    "standby_partitions", "standby_tasks", "standby_tasks_pending_revocation",
    "state_batches", "state_changelog_topics", "status", "subtopologies",
    "supported_features", "supported_protocols", "synonyms", "task_end_offsets",
    "task_offsets", "tokens", "topic_configs", "topic_data", "topic_partitions",
    "topic_results", "topics", "transaction_partitions", "transaction_states",
    "transactions", "upsertions", "users", "v3_and_below_topics", "values", "voters",
    "warmup_tasks", "warmup_tasks_pending_revocation",
})

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
        # Fetch record bytes sent with sendfile (connection.py), and read into memory
        # because the send could not use it (no descriptor left for a dup)
        self.zero_copy_bytes = 0
        self.zero_copy_fallback_bytes = 0

    def count_errors(self, api_key: int, body: Any) -> None:
        """Count the non-zero `error_code`s of a response body: its own and those of the
        structs in its arrays (descending only into fields that are struct arrays)."""
        if not isinstance(body, dict):
            return
        errors = self.errors
        if api_key == 1 or api_key == 0:  # the hot ones: Fetch and Produce, by their layout
            code = body.get("error_code")
            if code:
                errors[(api_key, int(code))] += 1
            inner = "partitions" if api_key == 1 else "partition_responses"
            try:
                for t in body["responses"]:
                    for p in t[inner]:
                        code = p["error_code"]
                        if code:
                            errors[(api_key, int(code))] += 1
                return
            except (KeyError, TypeError):
                pass  # not the usual layout: the general walk below
        stack = [body]
        while stack:
            node = stack.pop()
            code = node.get("error_code")
            if code:
                errors[(api_key, int(code))] += 1
            for k in node.keys() & STRUCT_ARRAYS:
                items = node[k]
                if type(items) is Encoded:  # cached bytes: their codes were counted then
                    for code, n in items.errors.items():
                        errors[(api_key, int(code))] += n
                elif items:
                    stack.extend(x for x in items if isinstance(x, dict))


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
