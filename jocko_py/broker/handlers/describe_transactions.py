"""DescribeTransactions (key 65), version 0: the coordinator's view of transactional ids.

Answered for each id by this broker if it is the id's transaction coordinator
(NOT_COORDINATOR otherwise, COORDINATOR_LOAD_IN_PROGRESS while its partition
loads; TRANSACTIONAL_ID_NOT_FOUND for an unknown id): state (Kafka's names: Empty,
Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort,
PrepareEpochFence), timeout, start time (-1 when no transaction was started),
producer id and epoch, and the partitions of the current transaction. No
authorisation (there is none in this broker).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_transactional_id
from jocko_py.protocol.errors import ErrorCode


@api(65, 0, 0)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    tc = ctx.broker.transactions
    states = []
    for tid in req.transactional_ids:
        err, m = tc.describe(tid)
        if not authorize_transactional_id(ctx, "DESCRIBE", tid):
            err, m = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
        if m is None or err != ErrorCode.NONE:
            states.append({"error_code": err, "transactional_id": tid, "transaction_state": "",
                           "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                           "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(m.partitions):
            by_topic.setdefault(t, []).append(p)
        states.append({
            "error_code": ErrorCode.NONE, "transactional_id": tid, "transaction_state": m.state.kafka_name,
            "transaction_timeout_ms": m.timeout_ms, "transaction_start_time_ms": m.start_ms,
            "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"throttle_time_ms": 0, "transaction_states": states}
