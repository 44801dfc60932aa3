"""DescribeProducers (key 61), version 0: the active producers of partitions led here.

From each partition's producer state (the one the log keeps for idempotence and
transactions): producer id and epoch, last sequence, last timestamp, the epoch of
the coordinator whose marker it saw last, and the first offset of its open
transaction (-1 when none). Partitions not led here get NOT_LEADER_OR_FOLLOWER (or
UNKNOWN_TOPIC_OR_PARTITION); without READ on the topic, TOPIC_AUTHORIZATION_FAILED. Used by `kafka-transactions describe-producers`,
`find-hanging` and `abort`.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import denied_topics
from jocko_py.protocol.errors import ErrorCode


@api(61, 0, 0)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    replicas = ctx.broker.replicas
    topics = []
    denied = denied_topics(ctx, "READ", (t.name for t in req.topics))
    for t in req.topics:
        parts = []
        for idx in t.partition_indexes:
            p, err = replicas.get_partition_or_error(t.name, idx)
            if t.name in denied:
                p, err = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if p is None:
                parts.append({"partition_index": idx, "error_code": err, "error_message": None,
                              "active_producers": []})
                continue
            producers = [{
                "producer_id": e.producer_id, "producer_epoch": e.epoch,
                "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_start_offset": e.txn_first_offset,
            } for e in p.log.producer_state.producers.values()]
            parts.append({"partition_index": idx, "error_code": ErrorCode.NONE, "error_message": None,
                          "active_producers": producers})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
