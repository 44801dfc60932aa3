"""Committed offsets: OffsetCommit (key 8) v2-9, OffsetFetch (9) v1-9, OffsetDelete (47) v0.

For a KIP-848 consumer-protocol group, OffsetCommit's generation is the member epoch
(an unknown member gets UNKNOWN_MEMBER_ID, another epoch STALE_MEMBER_EPOCH); OffsetFetch
v9 checks the member id and epoch it carries the same way (epoch -1: no check).

Offsets live in the group coordinator and are written to `__consumer_offsets`
before the response. Members commit with their generation and member id;
simple (non-member) commits use generation -1 and only for an Empty or new
group. Commits for unknown topic-partitions get UNKNOWN_TOPIC_OR_PARTITION;
metadata over `offset.metadata.max.bytes` gets OFFSET_METADATA_TOO_LARGE.
v2-4 retention_time_ms is kept as an explicit expire time. OffsetFetch v8+
answers several groups; a null topic list means every committed offset of the
group. With require_stable, a partition with a pending transactional offset
(TxnOffsetCommit not yet committed or aborted) gets UNSTABLE_OFFSET_COMMIT.
OffsetCommit v0-1 and OffsetFetch v0 (ZooKeeper-era) are not served, as in
Kafka 4.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.group import coordinator
from jocko_py.broker.group.coordinator import CommitRequest
from jocko_py.broker.security.authz import authorize_group, denied_topics
from jocko_py.protocol.errors import ErrorCode


def _partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    t = ctx.broker.topics.image.topics.get(topic)
    return t is not None and partition in t.partitions


@api(8, 2, 9)
async def offset_commit(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    results: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], CommitRequest] = {}
    order: list[tuple[str, int]] = []
    group_ok = authorize_group(ctx, "READ", req.group_id)
    denied = denied_topics(ctx, "READ", (t.name for t in req.topics))
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if not group_ok:
                results[tp] = ErrorCode.GROUP_AUTHORIZATION_FAILED
                continue
            if t.name in denied:
                results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not _partition_exists(ctx, *tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            wanted[tp] = CommitRequest(
                p.committed_offset, p.committed_leader_epoch if v >= 6 else -1,
                p.committed_metadata)
    if wanted:
        gc = coordinator(ctx.broker)
        committed = gc.commit(
            group_id=req.group_id, generation_id=req.generation_id_or_member_epoch,
            member_id=req.member_id or "",
            instance_id=req.group_instance_id if v >= 7 else None,
            retention_ms=req.retention_time_ms if 2 <= v <= 4 else -1,
            offsets=wanted)
        if any(e == ErrorCode.NONE for e in committed.values()):
            # acknowledged once the ISR of the group's partition has the commit
            durable = await gc.store.wait_durable(
                req.group_id, ctx.broker.config.int("offsets.commit.timeout.ms") / 1000)
            if durable != ErrorCode.NONE:
                committed = {tp: durable if e == ErrorCode.NONE else e
                             for tp, e in committed.items()}
        results.update(committed)
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append(
            {"partition_index": tp[1], "error_code": results[tp]})
    return {"throttle_time_ms": 0,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


def _fetch_group(ctx: RequestContext, group_id: str, topics: Any, require_stable: bool = False,
                 member: tuple[str, int] | None = None,
                 ) -> tuple[ErrorCode, list[dict[str, Any]]]:
    wanted = None if topics is None else [
        (t.name, p) for t in topics for p in t.partition_indexes]
    if not authorize_group(ctx, "DESCRIBE", group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    err, offsets = coordinator(ctx.broker).fetch_offsets(group_id, wanted, member)
    # topics the principal may not describe: left out of "all", an error when named
    denied = denied_topics(ctx, "DESCRIBE", (tp[0] for tp in offsets))
    if err != ErrorCode.NONE:
        if wanted is None:
            return err, []
        offsets = {tp: None for tp in wanted}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    gc = coordinator(ctx.broker)
    for (topic, part), om in offsets.items():
        if topic in denied:
            if wanted is None:
                continue
            om = None
        unstable = require_stable and gc.has_pending_txn_offset(group_id, (topic, part))
        by_topic.setdefault(topic, []).append({
            "partition_index": part,
            "committed_offset": om.offset if om and not unstable else -1,
            "committed_leader_epoch": om.leader_epoch if om and not unstable else -1,
            "metadata": om.metadata if om else "",
            "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic in denied
            else ErrorCode.UNSTABLE_OFFSET_COMMIT if unstable else 0,
        })
    return err, [{"name": n, "partitions": ps} for n, ps in by_topic.items()]


@api(9, 1, 9)
async def offset_fetch(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    if v >= 8:
        groups = []
        for g in req.groups:
            member = (g.member_id or "", g.member_epoch) if v >= 9 else None
            err, topics = _fetch_group(ctx, g.group_id, g.topics, req.require_stable, member)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": err})
        return {"throttle_time_ms": 0, "groups": groups}
    err, topics = _fetch_group(ctx, req.group_id, req.topics if v >= 2 else req.topics or [],
                               v >= 7 and req.require_stable)
    if v < 2 and err != ErrorCode.NONE:
        for t in topics:
            for p in t["partitions"]:
                p["error_code"] = err
    return {"throttle_time_ms": 0, "topics": topics, "error_code": err}


@api(47, 0, 0)
async def offset_delete(ctx: RequestContext, req: Any) -> dict[str, Any]:
    results: dict[tuple[str, int], ErrorCode] = {}
    wanted: list[tuple[str, int]] = []
    order: list[tuple[str, int]] = []
    if not authorize_group(ctx, "DELETE", req.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0,
                "topics": []}
    denied = denied_topics(ctx, "READ", (t.name for t in req.topics))
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if t.name in denied:
                results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif _partition_exists(ctx, *tp):
                wanted.append(tp)
            else:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    err, per = coordinator(ctx.broker).delete_offsets(req.group_id, wanted)
    if err != ErrorCode.NONE:
        return {"error_code": err, "throttle_time_ms": 0, "topics": []}
    results.update(per)
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append(
            {"partition_index": tp[1], "error_code": results[tp]})
    return {"error_code": 0, "throttle_time_ms": 0,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}
