"""ShareFetch (key 78) and ShareAcknowledge (key 79), versions 1-2 (KIP-932, Kafka 4.4).

A share consumer fetches the partitions of its share session (rules in
`broker/share/session.py`): acknowledgements piggybacked on the request are applied
first (answered in `acknowledge_error_code` once their state write succeeded), then the
session's partitions are acquired for the member (`broker/share/manager.py`), waiting up
to `max_wait_ms` while nothing can be acquired. A partition's answer carries the batches
read from the log and `acquired_records` (first/last offset, delivery count): the client
hands out only acquired offsets, and acknowledges the acquired offsets without a data
record as GAP. Epoch -1 closes the session: acknowledgements are applied, nothing is
fetched, the member's remaining records are released (as when the connection the session
was opened on closes). ShareAcknowledge applies
acknowledgements alone (epoch 0 is INVALID_SHARE_SESSION_EPOCH).

ACLs as Kafka checks them: READ on the group (else GROUP_AUTHORIZATION_FAILED for the
whole request), READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions). A
topic id not in the metadata gets UNKNOWN_TOPIC_ID for its partitions. A partition not
led here gets NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint.

Versions: v1 is the stable KIP-932 version (v0, the 4.0 early access, was removed in
4.1); v2 adds `share_acquire_mode` (1: record_limit, never more than `max_records`; 0:
batch-optimized, whole batches) and renew acknowledgements (type 4, KIP-1222): a request
with `is_renew_ack` renews (and acknowledges) but acquires nothing. `batch_size` is
accepted and not used (the acquired ranges are not split to it). As in Kafka, the APIs are
advertised always and answer UNSUPPORTED_VERSION while share groups are disabled
(`share.version` finalized below 1, when the broker knows that feature).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from jocko_py.broker import features
from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.leader_discovery import LEADER_HINT_ERRORS, current_leader, node_endpoints
from jocko_py.broker.security.authz import authorize_group, denied_topics
from jocko_py.broker.share.manager import FetchRequestPartition, SharePartitionManager
from jocko_py.broker.share.partition import AckBatch
from jocko_py.protocol.errors import ErrorCode

E = ErrorCode
RECORD_LIMIT = 1  # ShareAcquireMode


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def share_manager(ctx: RequestContext) -> SharePartitionManager:
    m = ctx.broker.share_partitions
    assert isinstance(m, SharePartitionManager)
    return m


def _disabled(ctx: RequestContext) -> bool:
    return "share.version" in features.SUPPORTED and \
        features.level(ctx.broker.topics.image.features, "share.version") < 1


def _top_error(code: ErrorCode, msg: str | None = None, **extra: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": msg,
            "responses": [], "node_endpoints": [], **extra}


class _Resolved:
    """The request's partitions: known and allowed ones, and those answered with an error."""

    def __init__(self, ctx: RequestContext, topics: Any) -> None:
        image = ctx.broker.topics.image
        self.ok: list[FetchRequestPartition] = []
        self.errors: list[tuple[uuid.UUID, str, int, ErrorCode]] = []
        named: list[tuple[uuid.UUID, str | None, Any]] = []
        for t in topics:
            ti = image.topic_by_id(t.topic_id)
            named.append((t.topic_id, None if ti is None else ti.name, t))
        denied = denied_topics(ctx, "READ", {n for _, n, _ in named if n is not None})
        for tid, name, t in named:
            for p in t.partitions:
                if name is None:
                    self.errors.append((tid, "", p.partition_index, E.UNKNOWN_TOPIC_ID))
                elif name in denied:
                    self.errors.append((tid, name, p.partition_index,
                                        E.TOPIC_AUTHORIZATION_FAILED))
                else:
                    self.ok.append(FetchRequestPartition(tid, name, p.partition_index, [
                        AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                        for b in p.acknowledgement_batches]))

    @property
    def has_acks(self) -> bool:
        return any(p.acknowledgements for p in self.ok)


def _names(ctx: RequestContext) -> dict[uuid.UUID, str]:
    return {t.topic_id: name for name, t in ctx.broker.topics.image.topics.items()}


def _build(ctx: RequestContext, parts: dict[tuple[uuid.UUID, int], dict[str, Any]],
           topic_of: dict[uuid.UUID, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    image = ctx.broker.topics.image
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    leaders: list[int] = []
    for (tid, p), out in parts.items():
        name = topic_of.get(tid)
        out["current_leader"] = current_leader(image, name, p) if name else \
            {"leader_id": -1, "leader_epoch": -1}
        if out["error_code"] in LEADER_HINT_ERRORS and out["current_leader"]["leader_id"] >= 0:
            leaders.append(out["current_leader"]["leader_id"])
        by_topic.setdefault(tid, []).append(out)
    responses = [{"topic_id": tid, "partitions": ps} for tid, ps in by_topic.items()]
    return responses, node_endpoints(image, leaders) if leaders else []


@api(78, 1, 2)
async def share_fetch(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    if _disabled(ctx):
        return _top_error(E.UNSUPPORTED_VERSION, "share groups are not enabled",
                          acquisition_lock_timeout_ms=0)
    if not req.group_id or not req.member_id:
        return _top_error(E.INVALID_REQUEST, "group id and member id are required",
                          acquisition_lock_timeout_ms=0)
    if not authorize_group(ctx, "READ", req.group_id):
        return _top_error(E.GROUP_AUTHORIZATION_FAILED, acquisition_lock_timeout_ms=0)
    mgr = share_manager(ctx)
    group, member = req.group_id, req.member_id
    lock_ms = mgr.lock_duration_ms(group)
    resolved = _Resolved(ctx, req.topics)
    image = ctx.broker.topics.image
    forgotten = []
    for ft in req.forgotten_topics_data:
        forgotten += [(ft.topic_id, p) for p in ft.partitions]
    decision = mgr.sessions.fetch(
        group, member, req.share_session_epoch,
        [(p.topic_id, p.partition) for p in resolved.ok], forgotten, resolved.has_acks,
        _now_ms(), ctx.peer)
    if decision.error:
        return _top_error(decision.error, decision.message, acquisition_lock_timeout_ms=lock_ms)
    parts: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}

    def entry(tid: uuid.UUID, p: int) -> dict[str, Any]:
        out = parts.get((tid, p))
        if out is None:
            out = parts[(tid, p)] = {
                "partition_index": p, "error_code": E.NONE, "error_message": None,
                "acknowledge_error_code": E.NONE, "acknowledge_error_message": None,
                "records": b"", "acquired_records": []}
        return out

    for tid, _name, p, err in resolved.errors:
        entry(tid, p)["error_code"] = err
    for tp in resolved.ok:
        out = entry(tp.topic_id, tp.partition)
        if tp.acknowledgements:
            err, msg = await mgr.acknowledge(group, member, tp)
            out["acknowledge_error_code"], out["acknowledge_error_message"] = err, msg
    if decision.closing:
        await mgr.release_member(group, member)
    elif not (v >= 2 and req.is_renew_ack):
        topic_of = _names(ctx)
        to_fetch = [FetchRequestPartition(tid, topic_of[tid], p)
                    for tid, p in decision.partitions if tid in topic_of]
        for tid, p in decision.partitions:
            if tid not in topic_of:  # deleted since it joined the session
                entry(tid, p)["error_code"] = E.UNKNOWN_TOPIC_ID
        max_records = req.max_records if req.max_records > 0 else 500
        strict = v >= 2 and req.share_acquire_mode == RECORD_LIMIT
        results = await mgr.fetch(group, member, to_fetch, req.max_wait_ms, req.min_bytes,
                                  req.max_bytes, max_records, strict)
        for tp, r in zip(to_fetch, results, strict=True):
            if r.error == E.NONE and not r.acquired and (tp.topic_id, tp.partition) not in parts:
                continue  # nothing new: an incremental answer leaves it out
            out = entry(tp.topic_id, tp.partition)
            out["error_code"], out["error_message"] = r.error, r.message
            out["records"] = r.records
            out["acquired_records"] = [
                {"first_offset": a.first_offset, "last_offset": a.last_offset,
                 "delivery_count": a.delivery_count} for a in r.acquired]
    del image
    responses, endpoints = _build(ctx, parts, _names(ctx))
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms, "responses": responses,
            "node_endpoints": endpoints}


@api(79, 1, 2)
async def share_acknowledge(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    extra: dict[str, Any] = {"acquisition_lock_timeout_ms": 0} if v >= 2 else {}
    if _disabled(ctx):
        return _top_error(E.UNSUPPORTED_VERSION, "share groups are not enabled", **extra)
    if not req.group_id or not req.member_id:
        return _top_error(E.INVALID_REQUEST, "group id and member id are required", **extra)
    if not authorize_group(ctx, "READ", req.group_id):
        return _top_error(E.GROUP_AUTHORIZATION_FAILED, **extra)
    mgr = share_manager(ctx)
    group, member = req.group_id, req.member_id
    if v >= 2:
        extra = {"acquisition_lock_timeout_ms": mgr.lock_duration_ms(group)}
    decision = mgr.sessions.acknowledge(group, member, req.share_session_epoch, _now_ms())
    if decision.error:
        return _top_error(decision.error, decision.message, **extra)
    resolved = _Resolved(ctx, req.topics)
    parts: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
    for tid, _name, p, err in resolved.errors:
        parts[(tid, p)] = {"partition_index": p, "error_code": err, "error_message": None}
    for tp in resolved.ok:
        err, msg = await mgr.acknowledge(group, member, tp) if tp.acknowledgements \
            else (E.NONE, None)
        parts[(tp.topic_id, tp.partition)] = {"partition_index": tp.partition,
                                              "error_code": err, "error_message": msg}
    if decision.closing:
        await mgr.release_member(group, member)
    responses, endpoints = _build(ctx, parts, _names(ctx))
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None,
            "responses": responses, "node_endpoints": endpoints, **extra}
