"""InitProducerId (key 22), versions 0-5, for idempotent and transactional producers.

Without a transactional id: hands out producer ids from blocks recorded in the
metadata log (so ids are never reused after a restart). A v3+ request that names its
current id and epoch gets the same id with the epoch bumped (KIP-360), or a fresh id
when the epoch is exhausted.

With a transactional id: answered by the transaction coordinator of that id (epoch
bump, fencing of the previous producer, abort of its open transaction; see
`broker/txn/coordinator.py`); `transaction.timeout.ms` must be within
`transaction.max.timeout.ms` (INVALID_TRANSACTION_TIMEOUT). PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v4, as Kafka answers older clients.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import (
    authorize_any_topic,
    authorize_cluster,
    authorize_transactional_id,
)
from jocko_py.protocol.errors import ErrorCode, KafkaError

MAX_EPOCH = 32766


@api(22, 0, 5)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if req.transactional_id is not None:
        if not authorize_transactional_id(ctx, "WRITE", req.transactional_id):
            return {"throttle_time_ms": 0,
                    "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "producer_id": -1, "producer_epoch": -1}
        err, pid, epoch = await ctx.broker.transactions.init_producer_id(
            req.transactional_id, req.transaction_timeout_ms,
            req.producer_id if ctx.version >= 3 else -1,
            req.producer_epoch if ctx.version >= 3 else -1)
        if err == ErrorCode.PRODUCER_FENCED and ctx.version < 4:
            err = ErrorCode.INVALID_PRODUCER_EPOCH
        return {"throttle_time_ms": 0, "error_code": err, "producer_id": pid,
                "producer_epoch": epoch}
    if not (authorize_cluster(ctx, "IDEMPOTENT_WRITE") or authorize_any_topic(ctx, "WRITE")):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    if ctx.version >= 3 and req.producer_id >= 0 and 0 <= req.producer_epoch < MAX_EPOCH:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": req.producer_id,
                "producer_epoch": req.producer_epoch + 1}
    try:
        pid = await ctx.broker.controller_channel.allocate_producer_id()
    except KafkaError as e:
        code = e.code if e.code != ErrorCode.NOT_CONTROLLER else ErrorCode.COORDINATOR_NOT_AVAILABLE
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid, "producer_epoch": 0}
