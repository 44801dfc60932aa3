"""TxnOffsetCommit (key 28), versions 0-6: offsets committed inside a transaction.

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

v5 (KIP-890 part 2), while `transaction.version` 2 is finalized: the first commit of a
transaction adds the group's partition to the transaction itself (the implicit
AddOffsetsToTxn: the group coordinator asks the transaction coordinator, as a
transactional Produce v12 does); a producer epoch the transaction coordinator has
moved past is fenced (INVALID_PRODUCER_EPOCH). Below transaction.version 2, v5 means
v4. v6 (KIP-1319) names topics by id (UNKNOWN_TOPIC_ID for an unknown one); a commit
refused for its generation by a group that did not exist gets GROUP_ID_NOT_FOUND
(ILLEGAL_GENERATION before v6), and STALE_MEMBER_EPOCH is ILLEGAL_GENERATION before v6.
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.features import txn_v2
from jocko_py.broker.group.coordinator import CommitRequest
from jocko_py.broker.group.offsets_store import OFFSETS_TOPIC
from jocko_py.broker.security.authz import authorize_group, authorize_transactional_id
from jocko_py.protocol.errors import ErrorCode

_RETRIABLE = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT})


async def _verify(ctx: RequestContext, req: Any, version: int) -> ErrorCode:
    """KIP-890 for the group's `__consumer_offsets` partition (led here if this broker
    coordinates the group; otherwise the commit itself answers NOT_COORDINATOR): part 1
    verifies it is in the transaction, part 2 (v5 under transaction.version 2) adds it."""
    replicas = ctx.broker.replicas
    verifier = replicas.txn_verifier
    gc = ctx.broker.groups
    if verifier is None or not req.group_id or not gc.store.topic_exists():
        return ErrorCode.NONE
    tp = (OFFSETS_TOPIC, gc.store.partition_for(req.group_id))
    p = replicas.get(*tp)
    if p is None or not p.is_leader or p.log.producer_state.in_transaction(
            req.producer_id, req.producer_epoch):
        return ErrorCode.NONE
    add = version >= 5 and txn_v2(ctx.broker.image.features)
    token = p.log.producer_state.verification_token(req.producer_id)
    try:
        answers = await verifier(req.transactional_id, req.producer_id, req.producer_epoch, [tp],
                                 add)
    except Exception:
        answers = {}
    err = answers.get(tp, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if err == ErrorCode.NONE and not add and \
            p.log.producer_state.verification_token(req.producer_id) != token:
        err = ErrorCode.TRANSACTION_ABORTABLE  # a marker ended the transaction meanwhile
    if err in _RETRIABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if err in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if err == ErrorCode.TRANSACTION_ABORTABLE and version >= 4:
        return err
    return ErrorCode.NONE if err == ErrorCode.NONE else ErrorCode.INVALID_TXN_STATE


@api(28, 0, 6)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    image = ctx.broker.image
    results: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], CommitRequest] = {}
    order: list[tuple[str, int]] = []
    ids: dict[str, uuid.UUID] = {}
    for i, t in enumerate(req.topics):
        if v >= 6:
            ti = image.topic_by_id(t.topic_id)
            # an unknown id keeps its place under a name no topic can have
            name = ti.name if ti is not None else f"\0{i}"
            ids[name] = t.topic_id
        else:
            name = t.name
        for p in t.partitions:
            tp = (name, p.partition_index)
            order.append(tp)
            if v >= 6 and name.startswith("\0"):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
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
    gc = ctx.broker.groups
    if wanted:
        # (a generation or member epoch of a group that did not exist: v6 names it)
        missing = v >= 6 and req.generation_id_or_member_epoch >= 0 \
            and gc.describe(req.group_id)[1] is None
        # answered once the ISR of the group's partition has the commit
        committed = await gc.txn_commit(
            group_id=req.group_id, producer_id=req.producer_id,
            producer_epoch=req.producer_epoch,
            generation_id=req.generation_id_or_member_epoch if v >= 3 else -1,
            member_id=(req.member_id or "") if v >= 3 else "",
            instance_id=req.group_instance_id if v >= 3 else None, offsets=wanted)
        if missing:
            committed = {tp: ErrorCode.GROUP_ID_NOT_FOUND if e == ErrorCode.ILLEGAL_GENERATION
                         else e for tp, e in committed.items()}
        results.update({tp: _for_version(v, e) for tp, e in committed.items()})
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": results[tp]})
    if v >= 6:
        return {"throttle_time_ms": 0, "topics": [{"topic_id": ids[n], "partitions": ps}
                                                  for n, ps in topics.items()]}
    return {"throttle_time_ms": 0,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


def _for_version(version: int, err: ErrorCode) -> ErrorCode:
    if err == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if err == ErrorCode.STALE_MEMBER_EPOCH and version < 6:
        return ErrorCode.ILLEGAL_GENERATION
    return err
