"""TxnOffsetCommit (key 28), versions 0-4: offsets committed inside a transaction.

Served by the group coordinator: the offsets are written to the group's
`__consumer_offsets` partition as a transactional batch of the producer (id and
epoch), and count only once the transaction's commit marker reaches that partition
(an abort drops them); until then an OffsetFetch with require_stable gets
UNSTABLE_OFFSET_COMMIT for those partitions. From v3 the member id, generation and
group instance id are checked as OffsetCommit checks them (KIP-447). Unknown
topic-partitions get UNKNOWN_TOPIC_OR_PARTITION. A producer epoch older than the
partition has seen gets INVALID_PRODUCER_EPOCH. v4 only allows TRANSACTION_ABORTABLE,
which this broker never returns.

Not implemented: checking that the group's partition was added to the transaction
(AddOffsetsToTxn) before the commit, as KIP-890 would.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.group import coordinator
from jocko_py.broker.group.coordinator import CommitRequest
from jocko_py.protocol.errors import ErrorCode


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
    if wanted:
        gc = coordinator(ctx.broker)
        committed = gc.txn_commit(
            group_id=req.group_id, producer_id=req.producer_id,
            producer_epoch=req.producer_epoch,
            generation_id=req.generation_id if v >= 3 else -1,
            member_id=(req.member_id or "") if v >= 3 else "",
            instance_id=req.group_instance_id if v >= 3 else None, offsets=wanted)
        if any(e == ErrorCode.NONE for e in committed.values()):
            durable = await gc.store.wait_durable(
                req.group_id, ctx.broker.config.int("offsets.commit.timeout.ms") / 1000)
            if durable != ErrorCode.NONE:
                committed = {tp: durable if e == ErrorCode.NONE else e
                             for tp, e in committed.items()}
        results.update({tp: ErrorCode.INVALID_PRODUCER_EPOCH if e == ErrorCode.PRODUCER_FENCED
                        else e for tp, e in committed.items()})
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": results[tp]})
    return {"throttle_time_ms": 0,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}
