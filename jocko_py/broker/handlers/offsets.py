"""Committed offsets: OffsetCommit (key 8) v2-10, OffsetFetch (9) v1-10, OffsetDelete (47) v0.

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
Kafka 4. v10 of both names topics by id (KIP-848), resolved with the metadata image:
an id it does not know gets UNKNOWN_TOPIC_ID on each partition (OffsetFetch: with
offset -1), and an OffsetFetch of every offset lists the topics by id, leaving out
those no longer in the metadata, as Apache Kafka 4.4.0 answers.
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.group.coordinator import CommitRequest
from jocko_py.broker.security.authz import authorize_group, denied_topics
from jocko_py.protocol.errors import ErrorCode


def _partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    t = ctx.broker.image.topics.get(topic)
    return t is not None and partition in t.partitions


def _resolve(ctx: RequestContext, topics: Any, by_id: bool) -> list[str | None]:
    """Each request topic's name; at v10 its id looked up (None: an unknown id)."""
    if not by_id:
        return [t.name for t in topics]
    image = ctx.broker.image
    return [None if (ti := image.topic_by_id(t.topic_id)) is None else ti.name
            for t in topics]


def _topic_id(ctx: RequestContext, name: str) -> uuid.UUID | None:
    t = ctx.broker.image.topics.get(name)
    return None if t is None else t.topic_id


@api(8, 2, 10)
async def offset_commit(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    by_id = v >= 10
    names = _resolve(ctx, req.topics, by_id)
    results: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], CommitRequest] = {}
    # (topic key, partition) in request order; an unknown topic id's key is "" + its id
    order: list[tuple[str, int]] = []
    ids: dict[str, uuid.UUID] = {}
    group_ok = authorize_group(ctx, "READ", req.group_id)
    denied = denied_topics(ctx, "READ", (n for n in names if n is not None))
    for t, name in zip(req.topics, names, strict=True):
        key = name if name is not None else "\0" + str(t.topic_id)
        if by_id:
            ids[key] = t.topic_id
        for p in t.partitions:
            tp = (key, p.partition_index)
            order.append(tp)
            if not group_ok:
                results[tp] = ErrorCode.GROUP_AUTHORIZATION_FAILED
                continue
            if name is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if name in denied:
                results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not _partition_exists(ctx, *tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            wanted[tp] = CommitRequest(
                p.committed_offset, p.committed_leader_epoch if v >= 6 else -1,
                p.committed_metadata)
    if wanted:
        gc = ctx.broker.groups
        # acknowledged once the ISR of the group's partition has the commit
        committed = await gc.commit(
            group_id=req.group_id, generation_id=req.generation_id_or_member_epoch,
            member_id=req.member_id or "",
            instance_id=req.group_instance_id if v >= 7 else None,
            retention_ms=req.retention_time_ms if 2 <= v <= 4 else -1,
            offsets=wanted)
        results.update(committed)
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append(
            {"partition_index": tp[1], "error_code": results[tp]})
    if by_id:
        return {"throttle_time_ms": 0,
                "topics": [{"topic_id": ids[k], "partitions": ps} for k, ps in topics.items()]}
    return {"throttle_time_ms": 0,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


def _fetch_group(ctx: RequestContext, group_id: str, topics: Any, require_stable: bool = False,
                 member: tuple[str, int] | None = None,
                 ) -> tuple[ErrorCode, list[dict[str, Any]]]:
    wanted = None if topics is None else [
        (t.name, p) for t in topics for p in t.partition_indexes]
    if not authorize_group(ctx, "DESCRIBE", group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    err, offsets = ctx.broker.groups.fetch_offsets(group_id, wanted, member)
    # topics the principal may not describe: left out of "all", an error when named
    denied = denied_topics(ctx, "DESCRIBE", (tp[0] for tp in offsets))
    if err != ErrorCode.NONE:
        if wanted is None:
            return err, []
        offsets = {tp: None for tp in wanted}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    gc = ctx.broker.groups
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


class _NamedTopic:
    """A v10 request topic whose id resolved, shaped as `_fetch_group` reads topics."""

    def __init__(self, name: str, partition_indexes: list[int]) -> None:
        self.name, self.partition_indexes = name, partition_indexes


def _fetch_group_by_id(ctx: RequestContext, group_id: str, topics: Any,
                       require_stable: bool, member: tuple[str, int]
                       ) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """OffsetFetch v10: the group's offsets with topics named by id."""
    names = None if topics is None else _resolve(ctx, topics, True)
    named = None if topics is None or names is None else [
        _NamedTopic(n, list(t.partition_indexes))
        for t, n in zip(topics, names, strict=True) if n is not None]
    err, out = _fetch_group(ctx, group_id, named, require_stable, member)
    by_id: list[dict[str, Any]] = []
    for t in out:
        tid = _topic_id(ctx, t["name"])
        if tid is None:
            continue  # deleted since: no id to name it by
        by_id.append({"topic_id": tid, "partitions": t["partitions"]})
    if topics is not None and names is not None:
        for t, n in zip(topics, names, strict=True):
            if n is None:
                by_id.append({"topic_id": t.topic_id, "partitions": [{
                    "partition_index": p, "committed_offset": -1,
                    "committed_leader_epoch": -1, "metadata": "",
                    "error_code": ErrorCode.UNKNOWN_TOPIC_ID} for p in t.partition_indexes]})
    return err, by_id


@api(9, 1, 10)
async def offset_fetch(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    if v >= 8:
        groups = []
        for g in req.groups:
            member = (g.member_id or "", g.member_epoch) if v >= 9 else None
            if v >= 10:
                assert member is not None
                err, topics = _fetch_group_by_id(ctx, g.group_id, g.topics,
                                                 req.require_stable, member)
            else:
                err, topics = _fetch_group(ctx, g.group_id, g.topics, req.require_stable,
                                           member)
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
    err, per = await ctx.broker.groups.delete_offsets(req.group_id, wanted)
    if err != ErrorCode.NONE:
        return {"error_code": err, "throttle_time_ms": 0, "topics": []}
    results.update(per)
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append(
            {"partition_index": tp[1], "error_code": results[tp]})
    return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}
