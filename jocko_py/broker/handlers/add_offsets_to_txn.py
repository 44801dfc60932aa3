"""AddOffsetsToTxn (key 25), versions 0-4: add a group's offsets to a transaction.

The transaction coordinator adds the group's `__consumer_offsets` partition to the
transaction, as AddPartitionsToTxn would, so the commit or abort marker reaches it
(creating `__consumer_offsets` first if it does not exist yet). The producer then
sends TxnOffsetCommit to the group coordinator. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2. v4 only allows TRANSACTION_ABORTABLE, which this
broker never returns.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.handlers.add_partitions_to_txn import fenced_as
from jocko_py.broker.security.authz import authorize_group, authorize_transactional_id
from jocko_py.protocol.errors import ErrorCode, KafkaError


@api(25, 0, 4)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not req.group_id:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_GROUP_ID}
    if not authorize_transactional_id(ctx, "WRITE", req.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not authorize_group(ctx, "READ", req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    try:
        await ctx.broker.groups.ensure_active()
    except KafkaError:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    tc = ctx.broker.transactions
    tp = tc.offsets_partition(req.group_id)
    if tp is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    err = await tc.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                  [tp])
    return {"throttle_time_ms": 0, "error_code": fenced_as(ctx.version, 2, err)}
