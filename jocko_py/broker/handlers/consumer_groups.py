"""KIP-848 consumer-protocol groups: ConsumerGroupHeartbeat (68) v0-1 and
ConsumerGroupDescribe (69) v0-1.

ConsumerGroupHeartbeat joins (member epoch 0), heartbeats and leaves (-1; -2 for a
static member that will be back) a consumer-protocol group; the coordinator computes
the assignment with a server-side assignor (``group.consumer.assignors``: uniform,
range) and hands it out with member epochs (rules in ``broker/group/consumer.py``). v0:
the coordinator names a joining member; v1 (KIP-1082): the member names itself, and
``SubscribedTopicRegex`` subscribes by regular expression (Python ``re``, matched
against the whole topic name; internal topics never match). The answer's heartbeat
interval is the group's ``consumer.heartbeat.interval.ms`` (a group config) or
``group.consumer.heartbeat.interval.ms``; a member is removed after the group's
``consumer.session.timeout.ms`` or ``group.consumer.session.timeout.ms`` without a
heartbeat. Without ``group.version`` 1
finalized (a metadata log from before features were recorded, or a downgrade) a
heartbeat gets UNSUPPORTED_VERSION, as Kafka 4.4 answers.

ConsumerGroupDescribe shows each group's state (Empty, Assigning, Reconciling,
Stable), epochs, assignor and members with their current and target assignments and,
from v1 (KIP-1099), their type (0: a classic member of the group, 1: a consumer
member); a classic group, or one that does not exist, answers GROUP_ID_NOT_FOUND with
Kafka's message (the admin client then asks DescribeGroups). Authorized operations are not computed.

The group is kept in ``__consumer_offsets`` with Kafka's record types (group epoch,
member metadata, target and current assignments); a heartbeat that changed it is
answered once those records are replicated, and a new coordinator loads them.

Not implemented: client-side assignors (``ClientAssignors``), rack-aware assignment, a
classic group with live members upgraded in place.
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.features import GROUP_VERSION, level
from jocko_py.broker.group.consumer import HeartbeatRequest, TopicPartition, group_assignment
from jocko_py.broker.handlers.groups import AUTHORIZED_OPS_NOT_REQUESTED, client_host
from jocko_py.broker.security.authz import authorize_group, denied_topics
from jocko_py.protocol.errors import ErrorCode


@api(68, 0, 1)
async def consumer_group_heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gc = ctx.broker.groups
    interval = gc.config.consumer_heartbeat_interval_ms
    raw = gc.group_overrides(req.group_id or "").get("consumer.heartbeat.interval.ms")
    if raw and raw.isdigit():  # the group's config (GROUP config resource) wins
        interval = int(raw)

    def error(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": msg,
                "member_id": None, "member_epoch": -1, "heartbeat_interval_ms": 0,
                "assignment": None}

    if level(ctx.broker.image.features, GROUP_VERSION) < 1:
        # the consumer protocol needs group.version 1, as Kafka answers without it
        return {**error(ErrorCode.UNSUPPORTED_VERSION, ""), "error_message": None,
                "member_epoch": 0}
    if not authorize_group(ctx, "READ", req.group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    if req.subscribed_topic_names:
        # a member may subscribe only to topics it may describe, as Kafka checks
        denied = denied_topics(ctx, "DESCRIBE", req.subscribed_topic_names)
        if denied:
            return error(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                         f"Unauthorized to DESCRIBE on topics {', '.join(sorted(denied))}.")
    if not req.group_id:
        return error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty")
    if ctx.version >= 1 and not req.member_id:
        return error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty")
    owned: list[TopicPartition] | None = None
    if req.topic_partitions is not None:
        owned = [(tp.topic_id, p) for tp in req.topic_partitions for p in tp.partitions]
    hreq = HeartbeatRequest(
        member_id=req.member_id or "", member_epoch=req.member_epoch,
        instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_names=None if req.subscribed_topic_names is None
        else list(req.subscribed_topic_names),
        subscribed_regex=req.subscribed_topic_regex if ctx.version >= 1 else None,
        server_assignor=req.server_assignor, owned=owned,
        client_id=ctx.header.client_id or "", client_host=client_host(ctx))
    # answered once the group's records are replicated, as Kafka does
    r = await gc.consumer_heartbeat(req.group_id, hreq)
    if r.error != ErrorCode.NONE:
        return error(r.error, r.message or r.error.name)
    assignment = None
    if r.assignment is not None:
        assignment = {"topic_partitions": [
            {"topic_id": tid, "partitions": sorted(ps)}
            for tid, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))]}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "member_id": r.member_id, "member_epoch": r.member_epoch,
            "heartbeat_interval_ms": interval, "assignment": assignment}


def _topic_partitions(ctx: RequestContext, tps: frozenset[TopicPartition]
                      ) -> list[dict[str, Any]]:
    image = ctx.broker.image  # by id: proportional to the answer, not the cluster

    def name(tid: uuid.UUID) -> str:
        t = image.topic_by_id(tid)
        return "" if t is None else t.name

    return [{"topic_id": tid, "topic_name": name(tid), "partitions": sorted(ps)}
            for tid, ps in sorted(group_assignment(tps).items(), key=lambda kv: str(kv[0]))]


@api(69, 0, 1)
async def consumer_group_describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gc = ctx.broker.groups
    out = []
    for gid in req.group_ids:
        if not authorize_group(ctx, "DESCRIBE", gid):
            out.append({
                "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "error_message": None,
                "group_id": gid, "group_state": "", "group_epoch": -1,
                "assignment_epoch": -1, "assignor_name": "", "members": [],
                "authorized_operations": AUTHORIZED_OPS_NOT_REQUESTED})
            continue
        err, g = gc.describe(gid)
        entry: dict[str, Any] = {
            "error_code": err, "error_message": None, "group_id": gid, "group_state": "",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPS_NOT_REQUESTED}
        if err == ErrorCode.NONE and (g is None or g.consumer is None):
            entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
            entry["error_message"] = f"Group {gid} not found." if g is None \
                else f"Group {gid} is not a consumer group."
        elif g is not None and g.consumer is not None:
            cg = g.consumer
            entry.update({
                "group_state": cg.state().value, "group_epoch": cg.group_epoch,
                "assignment_epoch": cg.assignment_epoch, "assignor_name": cg.assignor(),
                "members": [{
                    "member_id": m.member_id, "instance_id": m.instance_id,
                    "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_names),
                    "subscribed_topic_regex": m.subscribed_regex,
                    "assignment": {"topic_partitions": _topic_partitions(ctx, m.assigned)},
                    "target_assignment": {"topic_partitions": _topic_partitions(
                        ctx, cg.target.get(m.member_id, frozenset()))},
                    "member_type": 0 if m.classic is not None else 1,
                } for m in cg.members.values()]})
        out.append(entry)
    return {"throttle_time_ms": 0, "groups": out}
