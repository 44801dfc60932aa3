"""AddPartitionsToTxn (key 24), versions 0-3: a producer adds partitions to its transaction.

Served by the transaction coordinator of the transactional id (see
`broker/txn/coordinator.py` for the rules). Partitions of unknown topics get
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (nothing is
added); otherwise every partition gets the coordinator's answer. PRODUCER_FENCED
is INVALID_PRODUCER_EPOCH before v2, as Kafka answers older clients.

Not implemented: v4+ (the batched broker-to-broker form with VerifyOnly, KIP-890
part 1), so produce requests are not verified against the transaction.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.txn import coordinator
from jocko_py.protocol.errors import ErrorCode


def fenced_as(version: int, first_fenced_version: int, err: ErrorCode) -> ErrorCode:
    """Clients older than KIP-588 know INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED."""
    if err == ErrorCode.PRODUCER_FENCED and version < first_fenced_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return err


@api(24, 0, 3)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = ctx.broker.topics.image
    wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    unknown = {tp for tp in wanted if image.partition(*tp) is None}
    if unknown:
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                  else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
    else:
        err = await coordinator(ctx.broker).add_partitions(
            req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch, wanted)
        err = fenced_as(ctx.version, 2, err)
        errors = {tp: err for tp in wanted}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p), e in errors.items():
        by_topic.setdefault(t, []).append({"partition_index": p, "partition_error_code": e})
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]}
