"""Classic group membership APIs, served by the group coordinator.

JoinGroup (key 11) v0-9, SyncGroup (14) v0-5, Heartbeat (12) v0-4, LeaveGroup
(13) v0-5 (batched members from v3), ListGroups (16) v0-5 (state filter v4,
type filter v5: "classic" or "consumer", KIP-848), DescribeGroups (15) v0-6
(an unknown or consumer-protocol group is Dead up to v5 and GROUP_ID_NOT_FOUND
with a message from v6, KIP-1043, as Kafka 4.4: a consumer group is described
with ConsumerGroupDescribe), DeleteGroups (42) v0-3 (v3's per-group error
message is null, as Kafka 4.4 leaves it).

JoinGroup and SyncGroup responses wait until the rebalance phase completes
(see `broker/group/coordinator.py`); v4+ JoinGroup without a static
`group.instance.id` gets MEMBER_ID_REQUIRED first (KIP-394). v9's
skip_assignment is set for a static leader that rejoins a stable group.
Authorized operations are not computed (Kafka's "not requested" value).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import (
    GROUP,
    authorize_cluster,
    authorize_group,
    authorized_operations,
)
from jocko_py.protocol.errors import ErrorCode

AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)


def client_host(ctx: RequestContext) -> str:
    return "/" + ctx.peer.rpartition(":")[0].strip("[]")


@api(11, 0, 9)
async def join_group(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    if not authorize_group(ctx, "READ", req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "generation_id": -1,
                "protocol_type": None, "protocol_name": None if v >= 7 else "", "leader": "",
                "skip_assignment": False, "member_id": req.member_id or "", "members": []}
    instance_id = req.group_instance_id if v >= 5 else None
    r = await ctx.broker.groups.join(
        group_id=req.group_id, member_id=req.member_id or "", instance_id=instance_id,
        client_id=ctx.header.client_id or "", client_host=client_host(ctx),
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=v >= 4 and instance_id is None,
        supports_skip_assignment=v >= 9,
    )
    protocol_name = r.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""
    return {
        "throttle_time_ms": 0,
        "error_code": r.error,
        "generation_id": r.generation_id,
        "protocol_type": r.protocol_type,
        "protocol_name": protocol_name,
        "leader": r.leader_id,
        "skip_assignment": r.skip_assignment,
        "member_id": r.member_id,
        "members": [{"member_id": mid, "group_instance_id": iid, "metadata": md}
                    for mid, iid, md in r.members],
    }


@api(14, 0, 5)
async def sync_group(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    if not authorize_group(ctx, "READ", req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
    r = await ctx.broker.groups.sync(
        group_id=req.group_id, generation_id=req.generation_id, member_id=req.member_id,
        instance_id=req.group_instance_id if v >= 3 else None,
        protocol_type=req.protocol_type if v >= 5 else None,
        protocol_name=req.protocol_name if v >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    return {"throttle_time_ms": 0, "error_code": r.error, "protocol_type": r.protocol_type,
            "protocol_name": r.protocol_name, "assignment": r.assignment}


@api(12, 0, 4)
async def heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_group(ctx, "READ", req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    err = await ctx.broker.groups.heartbeat(
        req.group_id, req.member_id,
        req.group_instance_id if ctx.version >= 3 else None, req.generation_id)
    return {"throttle_time_ms": 0, "error_code": err}


@api(13, 0, 5)
async def leave_group(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_group(ctx, "READ", req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
    if ctx.version >= 3:
        members = [(m.member_id or "", m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    top, per = await ctx.broker.groups.leave(req.group_id, members)
    if ctx.version < 3:
        err = top
        if err == ErrorCode.NONE and per:
            err = per[0]
        return {"throttle_time_ms": 0, "error_code": err}
    return {
        "throttle_time_ms": 0,
        "error_code": top,
        "members": [{"member_id": mid, "group_instance_id": iid, "error_code": e}
                    for (mid, iid), e in zip(members, per, strict=True)],
    }


@api(16, 0, 5)
async def list_groups(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gc = ctx.broker.groups
    states = {s.lower() for s in req.states_filter} if ctx.version >= 4 else set()
    types = {t.lower() for t in req.types_filter} if ctx.version >= 5 else set()
    out = []
    # every group with DESCRIBE on the cluster, else the groups the principal may describe
    everything = authorize_cluster(ctx, "DESCRIBE")
    for g in gc.list_groups():
        if types and g.group_type not in types:
            continue
        if g.streams is not None:
            state, ptype = g.streams.state().value, "streams"
        elif g.share is not None:
            state, ptype = g.share.state(), "share"
        elif g.consumer is not None:
            state, ptype = g.consumer.state().value, "consumer"
        else:
            state, ptype = g.state.value, g.protocol_type or ""
        if states and state.lower() not in states:
            continue
        if not everything and not authorize_group(ctx, "DESCRIBE", g.group_id):
            continue
        out.append({"group_id": g.group_id, "protocol_type": ptype,
                    "group_state": state, "group_type": g.group_type})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": out}


@api(15, 0, 6)
async def describe_groups(ctx: RequestContext, req: Any) -> dict[str, Any]:
    """A group this coordinator does not know, or a consumer (KIP-848) group, is Dead
    with no error up to v5; v6 (KIP-1043) says GROUP_ID_NOT_FOUND and why, as Kafka 4.x."""
    from jocko_py.broker.group.state import GroupState

    gc = ctx.broker.groups
    out = []
    for gid in req.groups:
        err, g = gc.describe(gid)
        if not authorize_group(ctx, "DESCRIBE", gid):
            err, g = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
        entry: dict[str, Any] = {
            "error_code": err, "group_id": gid, "group_state": "Dead" if err == ErrorCode.NONE else "",
            "protocol_type": "", "protocol_data": "", "members": [],
            "authorized_operations": AUTHORIZED_OPS_NOT_REQUESTED, "error_message": None,
        }
        if err == ErrorCode.NONE and (g is None or g.consumer is not None or g.streams is not None
                                      or g.share is not None):
            if ctx.version >= 6:
                entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
                entry["error_message"] = f"Group {gid} not found." if g is None \
                    else f"Group {gid} is not a classic group."
            g = None
        elif g is not None:
            stable = g.is_(GroupState.STABLE)
            entry["group_state"] = g.state.value
            entry["protocol_type"] = g.protocol_type or ""
            entry["protocol_data"] = (g.protocol_name or "") if stable else ""
            entry["members"] = [{
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata(g.protocol_name)
                if stable and g.protocol_name else b"",
                "member_assignment": m.assignment if stable else b"",
            } for m in g.members.values()]
        if g is not None and ctx.version >= 3 and req.include_authorized_operations:
            entry["authorized_operations"] = authorized_operations(ctx, GROUP, gid)
        out.append(entry)
    return {"throttle_time_ms": 0, "groups": out}


@api(42, 0, 3)
async def delete_groups(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gc = ctx.broker.groups
    results = []
    for gid in req.groups_names:
        err = await gc.delete_group(gid) if authorize_group(ctx, "DELETE", gid) \
            else ErrorCode.GROUP_AUTHORIZATION_FAILED
        results.append({"group_id": gid, "error_code": err})
    return {"throttle_time_ms": 0, "results": results}
