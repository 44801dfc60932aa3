"""DescribeProducers (key 61), version 0: the idempotent producers a partition leader
knows (what `kafka-transactions --describe-producers` and Admin.describeProducers read).

Answered by the partition's leader from its producer state (`commitlog/producer_state.py`):
per producer its id, epoch, last sequence and last timestamp. Transactions are not
implemented, so the coordinator epoch is -1 and there is never an open transaction
(current_txn_start_offset -1). A partition led elsewhere: NOT_LEADER_OR_FOLLOWER;
unknown: UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api


@api(61, 0, 0)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    replicas = ctx.broker.replicas
    topics = []
    for t in req.topics:
        parts = []
        for pid in t.partition_indexes:
            out: dict[str, Any] = {"partition_index": pid, "error_code": 0,
                                   "error_message": None, "active_producers": []}
            p, err = replicas.get_partition_or_error(t.name, pid)
            if p is None:
                out["error_code"] = err
            else:
                out["active_producers"] = [
                    {"producer_id": e.producer_id, "producer_epoch": e.epoch,
                     "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                     "coordinator_epoch": -1, "current_txn_start_offset": -1}
                    for _, e in sorted(p.log.producer_state.producers.items())]
            parts.append(out)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
