"""InitProducerId (key 22), versions 0-5, for idempotent producers.

Hands out producer ids from blocks recorded in the metadata log (so ids are
never reused after a restart). A v3+ request that names its current id and
epoch gets the same id with the epoch bumped (KIP-360), or a fresh id when the
epoch is exhausted. Transactional ids are not supported: such requests get
INVALID_REQUEST with no id.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_any_topic, authorize_cluster
from jocko_py.broker.topics import TopicError
from jocko_py.protocol.errors import ErrorCode

MAX_EPOCH = 32766


@api(22, 0, 5)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if req.transactional_id is not None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "producer_id": -1, "producer_epoch": -1}
    if not (authorize_cluster(ctx, "IDEMPOTENT_WRITE") or authorize_any_topic(ctx, "WRITE")):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    if ctx.version >= 3 and req.producer_id >= 0 and 0 <= req.producer_epoch < MAX_EPOCH:
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": req.producer_id,
                "producer_epoch": req.producer_epoch + 1}
    try:
        pid = await ctx.broker.topics.allocate_producer_id()
    except TopicError as e:
        code = e.code if e.code != ErrorCode.NOT_CONTROLLER else ErrorCode.COORDINATOR_NOT_AVAILABLE
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}
