"""EndTxn (key 26), versions 0-4: commit or abort the producer's transaction.

Answered once PrepareCommit / PrepareAbort is replicated in `__transaction_state`;
the coordinator then writes the markers (see `broker/txn/coordinator.py`).
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2. v4 only allows
TRANSACTION_ABORTABLE, which this broker never returns. Not implemented: v5 (KIP-890
part 2, an epoch bump on every transaction end).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.handlers.add_partitions_to_txn import fenced_as
from jocko_py.broker.txn import coordinator


@api(26, 0, 4)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    err = await coordinator(ctx.broker).end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
    return {"throttle_time_ms": 0, "error_code": fenced_as(ctx.version, 2, err)}
