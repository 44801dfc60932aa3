"""KIP-932 share groups: ShareGroupHeartbeat (76) v1 and ShareGroupDescribe (77) v1.

ShareGroupHeartbeat joins (member epoch 0, with the subscribed topic names and the
member id the client chose), heartbeats and leaves (-1) a share group; the coordinator
assigns the partitions of the subscribed topics whose share state is initialized with
its "simple" assignor (a partition may go to several members) and hands them out with
member epochs (rules in ``broker/group/share.py``). It answers UNSUPPORTED_VERSION while
the ``share.version`` feature is 0, as Kafka. ACLs (Kafka's): READ on the group
(GROUP_AUTHORIZATION_FAILED), DESCRIBE on every subscribed topic
(TOPIC_AUTHORIZATION_FAILED). Requests are checked as Kafka does (INVALID_REQUEST:
empty group id or member id, no topics when joining, an epoch below -1).

ShareGroupDescribe shows each group's state (Empty, Stable), epochs, assignor ("simple")
and members with their subscriptions and assignments; a group that is not a share group
answers GROUP_ID_NOT_FOUND. Needs DESCRIBE on the group, and on the topics the group's
members use (else TOPIC_AUTHORIZATION_FAILED for that group).
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.features import level
from jocko_py.broker.group.consumer import TopicPartition
from jocko_py.broker.group.share import ASSIGNOR_NAME, HeartbeatRequest, partitions_by_topic
from jocko_py.broker.handlers.groups import AUTHORIZED_OPS_NOT_REQUESTED, client_host
from jocko_py.broker.security.authz import (
    GROUP,
    authorize_group,
    authorized_operations,
    denied_topics,
)
from jocko_py.protocol.errors import ErrorCode

SHARE_VERSION = "share.version"


def share_enabled(ctx: RequestContext) -> bool:
    return level(ctx.broker.topics.image.features, SHARE_VERSION) >= 1


def _invalid(req: Any) -> str | None:
    """Kafka's checks of a ShareGroupHeartbeat (the message, or None)."""
    if not req.group_id:
        return "GroupId can't be empty."
    if not req.member_id:
        return ""  # Kafka 4.4.0 says INVALID_REQUEST without a message
    if req.rack_id is not None and not req.rack_id:
        return "RackId can't be empty."
    if req.member_epoch == 0 and not req.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    if req.member_epoch < -1:
        return "MemberEpoch is invalid."
    return None


@api(76, 1, 1)
async def share_group_heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gc = ctx.broker.groups

    def error(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": msg,
                "member_id": None, "member_epoch": -1, "heartbeat_interval_ms": 0,
                "assignment": None}

    if not share_enabled(ctx):
        return error(ErrorCode.UNSUPPORTED_VERSION, None)
    if not authorize_group(ctx, "READ", req.group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    if req.subscribed_topic_names:
        denied = denied_topics(ctx, "DESCRIBE", req.subscribed_topic_names)
        if denied:
            return error(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                         f"Unauthorized to DESCRIBE on topics {', '.join(sorted(denied))}.")
    why = _invalid(req)
    if why is not None:
        return error(ErrorCode.INVALID_REQUEST, why or None)
    hreq = HeartbeatRequest(
        member_id=req.member_id, member_epoch=req.member_epoch, rack_id=req.rack_id,
        subscribed=None if req.subscribed_topic_names is None
        else list(req.subscribed_topic_names),
        client_id=ctx.header.client_id or "", client_host=client_host(ctx))
    # answered once the group's records are replicated, as Kafka does
    r = await gc.share.heartbeat(req.group_id, hreq)
    if r.error != ErrorCode.NONE:
        return error(r.error, r.message)
    assignment = None
    if r.assignment is not None:
        assignment = {"topic_partitions": [
            {"topic_id": tid, "partitions": ps}
            for tid, ps in partitions_by_topic(r.assignment).items()]}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "member_id": r.member_id, "member_epoch": r.member_epoch,
            "heartbeat_interval_ms": r.heartbeat_interval_ms, "assignment": assignment}


def _described(ctx: RequestContext, tps: frozenset[TopicPartition]) -> dict[str, Any]:
    image = ctx.broker.topics.image

    def name(tid: uuid.UUID) -> str:
        t = image.topic_by_id(tid)
        return "" if t is None else t.name

    return {"topic_partitions": [{"topic_id": tid, "topic_name": name(tid), "partitions": ps}
                                 for tid, ps in partitions_by_topic(tps).items()]}


@api(77, 1, 1)
async def share_group_describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gc = ctx.broker.groups
    out = []
    for gid in req.group_ids:
        entry: dict[str, Any] = {
            "error_code": ErrorCode.NONE, "error_message": None, "group_id": gid,
            "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
            "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPS_NOT_REQUESTED}
        out.append(entry)
        if not share_enabled(ctx):
            entry["error_code"] = ErrorCode.UNSUPPORTED_VERSION
            continue
        if not authorize_group(ctx, "DESCRIBE", gid):
            entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        err, g = gc.describe(gid)
        if err != ErrorCode.NONE:
            entry["error_code"] = err
            continue
        if g is None or g.share is None:
            entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
            entry["error_message"] = f"Group {gid} not found." if g is None \
                else f"Group {gid} is not a share group."
            continue
        sg = g.share
        topics: set[str] = set()
        for m in sg.members.values():
            topics |= m.subscribed
        image = ctx.broker.topics.image
        for m in sg.members.values():
            for tid, _p in m.assigned:
                t = image.topic_by_id(tid)
                if t is not None:
                    topics.add(t.name)
        if topics and denied_topics(ctx, "DESCRIBE", sorted(topics)):
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            entry["error_message"] = ("The group has described topic(s) that the client is "
                                      "not authorized to describe.")
            continue
        entry.update({
            "group_state": sg.state(), "group_epoch": sg.group_epoch,
            "assignment_epoch": sg.assignment_epoch, "assignor_name": ASSIGNOR_NAME,
            "members": [{
                "member_id": m.member_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": sorted(m.subscribed),
                "assignment": _described(ctx, m.assigned),
            } for m in sg.members.values()]})
        if req.include_authorized_operations:
            entry["authorized_operations"] = authorized_operations(ctx, GROUP, gid)
    return {"throttle_time_ms": 0, "groups": out}
