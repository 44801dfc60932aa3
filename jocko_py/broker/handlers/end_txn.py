"""EndTxn (key 26), versions 0-5: commit or abort the producer's transaction.

Answered once PrepareCommit / PrepareAbort is replicated in `__transaction_state`;
the coordinator then writes the markers (see `broker/txn/coordinator.py`).
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2. v4 only allows
TRANSACTION_ABORTABLE, which this broker never returns.

v5 (KIP-890 part 2), while `transaction.version` 2 is finalized: the transaction ends
with the producer epoch bumped (the markers carry the new epoch, so a produce of the
ended transaction that arrives late is fenced) and the response names the producer id
and epoch of the next transaction (a fresh producer id once the epoch is exhausted,
recorded in `__transaction_state` before it is answered); a late EndTxn with the old
epoch is fenced unless it is a retry of this very end (answered the same). An abort
of an empty transaction only bumps the epoch. Below transaction.version 2, v5 means
v4 (the response names the current producer id and epoch): Kafka 4.x clients use it
only once they see the level finalized.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.features import txn_v2
from jocko_py.broker.handlers.add_partitions_to_txn import fenced_as
from jocko_py.broker.security.authz import authorize_transactional_id
from jocko_py.protocol.errors import ErrorCode


@api(26, 0, 5)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_transactional_id(ctx, "WRITE", req.transactional_id):
        out0: dict[str, Any] = {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        if ctx.version >= 5:
            out0["producer_id"], out0["producer_epoch"] = -1, -1
        return out0
    err, pid, epoch = await ctx.broker.transactions.end_txn_v(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
        bump_epoch=ctx.version >= 5 and txn_v2(ctx.broker.image.features))
    out: dict[str, Any] = {"throttle_time_ms": 0, "error_code": fenced_as(ctx.version, 2, err)}
    if ctx.version >= 5:
        ok = err == ErrorCode.NONE
        out["producer_id"], out["producer_epoch"] = (pid, epoch) if ok else (-1, -1)
    return out
