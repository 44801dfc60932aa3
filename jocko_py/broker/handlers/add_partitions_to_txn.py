"""AddPartitionsToTxn (key 24), versions 0-5: partitions join a transaction.

Served by the transaction coordinator of the transactional id (see
`broker/txn/coordinator.py` for the rules). v0-3 (clients): one transaction;
partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED (nothing is added); otherwise every partition gets the
coordinator's answer. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2, as Kafka
answers older clients. v4-5 (brokers, KIP-890 part 1): a batch of transactions, each
either VerifyOnly (is each partition in the producer's ongoing transaction? nothing
is written: what a partition leader asks before a transactional produce; one that is
not gets TRANSACTION_ABORTABLE, at v4 as at v5, as Kafka 4.4 answers) or added: what
a partition leader asks for a KIP-890 part 2 producer (Produce v12, TxnOffsetCommit
v5), so the transaction it starts is a transaction version 2 one (its end bumps the
epoch). v5 is v4 for a caller that knows TRANSACTION_ABORTABLE.

v4+ is a broker's request: anyone else gets CLUSTER_AUTHORIZATION_FAILED for every
partition (see `security/authz.py`), as Kafka requires CLUSTER_ACTION.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import (
    authorize_cluster,
    authorize_transactional_id,
    denied_topics,
)
from jocko_py.protocol.errors import ErrorCode


def fenced_as(version: int, first_fenced_version: int, err: ErrorCode) -> ErrorCode:
    """Clients older than KIP-588 know INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED."""
    if err == ErrorCode.PRODUCER_FENCED and version < first_fenced_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return err


def _topic_results(errors: dict[tuple[str, int], ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p), e in errors.items():
        by_topic.setdefault(t, []).append({"partition_index": p, "partition_error_code": e})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


async def _add(ctx: RequestContext, tid: str, pid: int, epoch: int,
               wanted: list[tuple[str, int]], verify_only: bool
               ) -> dict[tuple[str, int], ErrorCode]:
    tc = ctx.broker.transactions
    by_broker = ctx.version >= 4
    if by_broker:  # broker to broker (KIP-890)
        if not authorize_cluster(ctx, "CLUSTER_ACTION"):
            return {tp: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for tp in wanted}
        if verify_only:
            return tc.verify_local(tid, pid, epoch, wanted)
    elif not authorize_transactional_id(ctx, "WRITE", tid):
        return {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
    denied = set() if by_broker else denied_topics(ctx, "WRITE", (t for t, _ in wanted))
    if denied:
        return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied
                else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
    image = ctx.broker.image
    unknown = {tp for tp in wanted if image.partition(*tp) is None}
    if unknown:
        return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
    err = fenced_as(ctx.version, 2, await tc.add_partitions(
        tid, pid, epoch, wanted, client_tv=2 if by_broker else 0))
    return {tp: err for tp in wanted}


@api(24, 0, 5)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.version >= 4:
        results = []
        for t in req.transactions:
            wanted = [(tt.name, p) for tt in t.topics for p in tt.partitions]
            errors = await _add(ctx, t.transactional_id, t.producer_id, t.producer_epoch,
                                wanted, t.verify_only)
            results.append({"transactional_id": t.transactional_id,
                            "topic_results": _topic_results(errors)})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": results}
    wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    errors = await _add(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                        req.v3_and_below_producer_epoch, wanted, False)
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(errors)}
