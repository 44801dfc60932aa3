"""TxnOffsetCommit (key 28), versions 0-4: offsets committed inside a transaction.

Served by the group coordinator: the offsets are written to the group's
`__consumer_offsets` partition as a transactional batch of the producer (id and
epoch), and count only once the transaction's commit marker reaches that partition
(an abort drops them); until then an OffsetFetch with require_stable gets
UNSTABLE_OFFSET_COMMIT for those partitions. From v3 the member id, generation and
group instance id are checked as OffsetCommit checks them (KIP-447). Unknown
topic-partitions get UNKNOWN_TOPIC_OR_PARTITION. A producer epoch older than the
partition has seen gets INVALID_PRODUCER_EPOCH. v4 allows TRANSACTION_ABORTABLE (see
below).

KIP-890 part 1: the first commit of a transaction on the group's partition is
verified with the transaction coordinator, as a transactional produce is: if that
partition was not added to the producer's ongoing transaction (AddOffsetsToTxn), the
commit gets INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v4, as Kafka 4.4 answers (a
coordinator not ready: COORDINATOR_NOT_AVAILABLE, which clients retry).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.group import coordinator
from jocko_py.broker.group.coordinator import CommitRequest
from jocko_py.broker.group.offsets_store import OFFSETS_TOPIC
from jocko_py.broker.security.authz import authorize_group, authorize_transactional_id
from jocko_py.protocol.errors import ErrorCode

_RETRIABLE = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT})


async def _verify(ctx: RequestContext, req: Any, version: int) -> ErrorCode:
    """KIP-890 part 1 for the group's `__consumer_offsets` partition (led here if this
    broker coordinates the group; otherwise the commit itself answers NOT_COORDINATOR)."""
    replicas = ctx.broker.replicas
    verifier = replicas.txn_verifier
    gc = coordinator(ctx.broker)
    if verifier is None or not req.group_id or not gc.store.topic_exists():
        return ErrorCode.NONE
    tp = (OFFSETS_TOPIC, gc.store.partition_for(req.group_id))
    p = replicas.get(*tp)
    if p is None or not p.is_leader or p.log.producer_state.in_transaction(req.producer_id):
        return ErrorCode.NONE
    token = p.log.producer_state.verification_token(req.producer_id)
    try:
        answers = await verifier(req.transactional_id, req.producer_id, req.producer_epoch, [tp])
    except Exception:
        answers = {}
    err = answers.get(tp, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if err == ErrorCode.NONE and p.log.producer_state.verification_token(req.producer_id) \
            != token:
        err = ErrorCode.TRANSACTION_ABORTABLE  # a marker ended the transaction meanwhile
    if err in _RETRIABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if err in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if err == ErrorCode.TRANSACTION_ABORTABLE and version >= 4:
        return err
    return ErrorCode.NONE if err == ErrorCode.NONE else ErrorCode.INVALID_TXN_STATE


@api(28, 0, 4)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    image = ctx.broker.topics.image
    results: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], CommitRequest] = {}
    order: list[tuple[str, int]] = []
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if image.partition(*tp) is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            wanted[tp] = CommitRequest(p.committed_offset,
                                       p.committed_leader_epoch if v >= 2 else -1,
                                       p.committed_metadata)
    if not authorize_transactional_id(ctx, "WRITE", req.transactional_id):
        results.update({tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted})
        wanted = {}
    elif not authorize_group(ctx, "READ", req.group_id):
        results.update({tp: ErrorCode.GROUP_AUTHORIZATION_FAILED for tp in wanted})
        wanted = {}
    verify_err = await _verify(ctx, req, v) if wanted else ErrorCode.NONE
    if verify_err != ErrorCode.NONE:
        results.update({tp: verify_err for tp in wanted})
        wanted = {}
    if wanted:
        gc = coordinator(ctx.broker)
        committed = await gc.txn_commit(
            group_id=req.group_id, producer_id=req.producer_id,
            producer_epoch=req.producer_epoch,
            generation_id=req.generation_id_or_member_epoch if v >= 3 else -1,
            member_id=(req.member_id or "") if v >= 3 else "",
            instance_id=req.group_instance_id if v >= 3 else None, offsets=wanted)
        results.update({tp: ErrorCode.INVALID_PRODUCER_EPOCH if e == ErrorCode.PRODUCER_FENCED
                        else e for tp, e in committed.items()})
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": results[tp]})
    return {"throttle_time_ms": 0,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}
