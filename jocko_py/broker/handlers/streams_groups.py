"""KIP-1071 streams groups: StreamsGroupHeartbeat (88) v0-1, StreamsGroupDescribe (89)
v0-1 and StreamsGroupTopologyDescriptionUpdate (93) v0.

StreamsGroupHeartbeat joins (member epoch 0, with the topology), heartbeats and leaves
(-1; -2 for a static member that will be back) a streams group; the coordinator
configures the topology against the topics, creates missing internal topics (repartition
and changelog topics), assigns active and standby tasks with its sticky assignor and
hands them out with member epochs (rules in ``broker/group/streams.py``). It answers
UNSUPPORTED_VERSION while the ``streams.version`` feature is 0, as Kafka. ACLs (Kafka's):
READ on the group; DESCRIBE on every topic of a joining member's topology
(TOPIC_AUTHORIZATION_FAILED); CREATE on the cluster or on an internal topic to create it
(else the MISSING_INTERNAL_TOPICS status says "Unauthorized to CREATE on topics ...").
A topology naming Kafka's internal topics or invalid topic names is STREAMS_INVALID_TOPOLOGY.
v1 adds AcceptableRecoveryLag and TopologyDescriptionRequired (always false: no topology
description plug-in is configured, as Kafka's default).

StreamsGroupDescribe shows each group's state (Empty, NotReady, Assigning, Reconciling,
Stable), epochs, topology and members with their current and target tasks; a group that
is not a streams group answers GROUP_ID_NOT_FOUND. Needs DESCRIBE on the group and on the
topology's topics. v1's TopologyDescriptionStatus is NOT_REQUESTED or, when asked,
UNAVAILABLE (0/1: descriptions are not kept), AssignorName "sticky".

StreamsGroupTopologyDescriptionUpdate checks the member (UNKNOWN_MEMBER_ID) and the
topology epoch and accepts the description without keeping it (Kafka keeps it only through
a ``group.streams.topology.description.plugin.class``, unset by default).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.group.streams import (
    CopartitionGroup,
    HeartbeatRequest,
    StreamsGroupModel,
    Subtopology,
    TopicInfo,
    Topology,
    invalid_topology,
    task_ids,
    validate,
)
from jocko_py.broker.group.streams_assignor import Task
from jocko_py.broker.handlers.groups import AUTHORIZED_OPS_NOT_REQUESTED, client_host
from jocko_py.broker.security.authz import (
    GROUP,
    authorize_cluster,
    authorize_group,
    authorized_operations,
    denied_topics,
)
from jocko_py.broker.topic_names import INTERNAL_TOPICS, validate_topic_name
from jocko_py.protocol.errors import ErrorCode, KafkaError

STREAMS_VERSION = "streams.version"
# StreamsGroupDescribe v1 TopologyDescriptionStatus
DESCRIPTION_NOT_REQUESTED, DESCRIPTION_UNAVAILABLE = 0, 1


def streams_enabled(ctx: RequestContext) -> bool:
    from jocko_py.broker.features import finalized

    return finalized(ctx.broker.image.features).get(STREAMS_VERSION, 0) >= 1


def _tasks(items: Any) -> frozenset[Task] | None:
    if items is None:
        return None
    return frozenset((t.subtopology_id, p) for t in items for p in t.partitions)


def _topic_info(t: Any) -> TopicInfo:
    return TopicInfo(t.name, t.partitions, t.replication_factor,
                     tuple((c.key, c.value) for c in t.topic_configs))


def _topology(t: Any) -> Topology | None:
    if t is None:
        return None
    return Topology.of(t.epoch, (Subtopology(
        s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
        tuple(_topic_info(i) for i in s.state_changelog_topics),
        tuple(s.repartition_sink_topics),
        tuple(_topic_info(i) for i in s.repartition_source_topics),
        tuple(CopartitionGroup(tuple(g.source_topics), tuple(g.source_topic_regex),
                               tuple(g.repartition_source_topics))
              for g in s.copartition_groups)) for s in t.subtopologies))


def _topology_topics(t: Topology) -> list[str]:
    out: list[str] = []
    for s in t.subtopologies:
        out += list(s.source_topics) + list(s.repartition_sink_topics)
        out += [i.name for i in s.repartition_source_topics]
        out += [i.name for i in s.state_changelog_topics]
    return list(dict.fromkeys(out))


def _task_list(tasks: frozenset[Task]) -> list[dict[str, Any]]:
    return [{"subtopology_id": sid, "partitions": ps} for sid, ps in task_ids(tasks).items()]


@api(88, 0, 1)
async def streams_group_heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gc = ctx.broker.groups
    cfg = gc.streams.config

    def error(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": msg,
                "member_id": req.member_id or "", "member_epoch": -1,
                "heartbeat_interval_ms": 0, "status": None, "active_tasks": None,
                "standby_tasks": None, "warmup_tasks": None,
                "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None}

    if not streams_enabled(ctx):
        return error(ErrorCode.UNSUPPORTED_VERSION,
                     "The streams group protocol is not enabled (streams.version is 0).")
    if not authorize_group(ctx, "READ", req.group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    topology = _topology(req.topology)
    if topology is not None:
        required = _topology_topics(topology)
        prohibited = [t for t in required if t in INTERNAL_TOPICS]
        if prohibited:
            return error(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                         f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka "
                         "Streams topology is prohibited.")
        invalid = []
        for t in required:
            try:
                validate_topic_name(t)
            except KafkaError:
                invalid.append(t)
        if invalid:
            return error(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                         f"Topic names {','.join(invalid)} are not valid topic names.")
        denied = denied_topics(ctx, "DESCRIBE", required)
        if denied:
            return error(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                         f"Unauthorized to DESCRIBE on topics {', '.join(sorted(denied))}.")
    endpoint = None
    if req.user_endpoint is not None:
        endpoint = (req.user_endpoint.host, req.user_endpoint.port)
    hreq = HeartbeatRequest(
        member_id=req.member_id, member_epoch=req.member_epoch,
        endpoint_information_epoch=req.endpoint_information_epoch,
        instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms, topology=topology,
        active=_tasks(req.active_tasks), standby=_tasks(req.standby_tasks),
        warmup=_tasks(req.warmup_tasks), process_id=req.process_id, user_endpoint=endpoint,
        client_tags=None if req.client_tags is None
        else tuple((kv.key, kv.value) for kv in req.client_tags),
        task_offsets=None if req.task_offsets is None
        else tuple((o.subtopology_id, o.partition, o.offset) for o in req.task_offsets),
        task_end_offsets=None if req.task_end_offsets is None
        else tuple((o.subtopology_id, o.partition, o.offset) for o in req.task_end_offsets),
        shutdown_application=req.shutdown_application,
        client_id=ctx.header.client_id or "", client_host=client_host(ctx))
    if not req.group_id:
        return error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    bad = validate(hreq)
    if bad is not None:
        return error(ErrorCode.INVALID_REQUEST, bad)
    if topology is not None:
        bad = invalid_topology(topology)
        if bad is not None:
            return error(ErrorCode.STREAMS_INVALID_TOPOLOGY, bad)
    # answered once the group's records are replicated, as Kafka does
    r = await gc.streams.heartbeat(req.group_id, hreq)
    if r.error != ErrorCode.NONE:
        return error(r.error, r.message or r.error.name)
    status = list(r.status)
    if r.to_create:
        status = await _create_internal_topics(ctx, r.to_create, status)
    out: dict[str, Any] = {
        "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
        "member_id": r.member_id, "member_epoch": r.member_epoch,
        "heartbeat_interval_ms": cfg.heartbeat_interval_ms,
        "task_offset_interval_ms": cfg.task_offset_interval_ms,
        "status": [{"status_code": int(c), "status_detail": d} for c, d in status]
        if status else None,
        "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
        "topology_description_required": False,
        "endpoint_information_epoch": r.endpoint_information_epoch,
        "partitions_by_user_endpoint": None,
    }
    if ctx.version == 0:
        out["acceptable_recovery_lag_legacy"] = min(cfg.acceptable_recovery_lag, 2**31 - 1)
    else:
        out["acceptable_recovery_lag"] = cfg.acceptable_recovery_lag
    if r.assignment is not None:
        out["active_tasks"] = _task_list(r.assignment.active)
        out["standby_tasks"] = _task_list(r.assignment.standby)
        out["warmup_tasks"] = _task_list(r.assignment.warmup)
    if r.endpoints is not None:
        out["partitions_by_user_endpoint"] = [{
            "user_endpoint": {"host": e.endpoint[0], "port": e.endpoint[1]},
            "active_partitions": [{"topic": t, "partitions": ps} for t, ps in e.active.items()],
            "standby_partitions": [{"topic": t, "partitions": ps}
                                   for t, ps in e.standby.items()],
        } for e in r.endpoints]
    return out


async def _create_internal_topics(ctx: RequestContext, topics: tuple[TopicInfo, ...],
                                  status: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Create the missing internal topics the principal may create (Kafka: CREATE on
    the cluster, else on each topic); the others are reported in the status."""
    from jocko_py.broker.group.streams import Status

    broker = ctx.broker
    names = [t.name for t in topics]
    unauthorized: set[str] = set()
    if not authorize_cluster(ctx, "CREATE"):
        unauthorized = denied_topics(ctx, "CREATE", names)
    if unauthorized:
        msg = f"Unauthorized to CREATE on topics {', '.join(sorted(unauthorized))}."
        for i, (code, detail) in enumerate(status):
            if code == Status.MISSING_INTERNAL_TOPICS:
                status[i] = (code, f"{detail}; {msg}")
                break
        else:
            status.append((Status.MISSING_INTERNAL_TOPICS, msg))
    live = sum(not b.fenced for b in broker.image.brokers.values()) or 1
    default_rf = broker.config.int("default.replication.factor")
    for t in topics:
        if t.name in unauthorized or t.name in broker.image.topics:
            continue
        rf = t.replication_factor if t.replication_factor > 0 else min(default_rf, live)
        try:
            await broker.controller_channel.create_topic(t.name, t.partitions, rf, dict(t.configs))
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                for i, (code, detail) in enumerate(status):
                    if code == Status.MISSING_INTERNAL_TOPICS:
                        status[i] = (code, f"{detail}; {t.name}: {e.message or e.code.name}")
                        break
    return status


def _describe_topic_info(t: TopicInfo) -> dict[str, Any]:
    return {"name": t.name, "partitions": t.partitions,
            "replication_factor": t.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in t.configs]}


def _describe(ctx: RequestContext, sg: StreamsGroupModel) -> dict[str, Any]:
    topology = None
    if sg.topology is not None:
        configured = sg.configured
        subs = None
        if configured is not None and configured.num_tasks is not None:
            subs = [{
                "subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
                "repartition_sink_topics": list(s.repartition_sink_topics),
                "state_changelog_topics": [_describe_topic_info(t)
                                           for t in s.state_changelog_topics],
                "repartition_source_topics": [_describe_topic_info(t)
                                              for t in s.repartition_source_topics],
            } for s in sg.topology.subtopologies]
        topology = {"epoch": sg.topology.epoch, "subtopologies": subs}

    def assignment(active: frozenset[Task], standby: frozenset[Task],
                   warmup: frozenset[Task]) -> dict[str, Any]:
        return {"active_tasks": _task_list(active), "standby_tasks": _task_list(standby),
                "warmup_tasks": _task_list(warmup)}

    members = []
    for m in sg.members.values():
        tgt = sg.target.get(m.member_id)
        members.append({
            "member_id": m.member_id, "member_epoch": m.member_epoch,
            "instance_id": m.instance_id, "rack_id": m.rack_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "topology_epoch": m.topology_epoch, "process_id": m.process_id,
            "user_endpoint": None if m.user_endpoint is None else {
                "host": m.user_endpoint[0], "port": m.user_endpoint[1]},
            "client_tags": [{"key": k, "value": v} for k, v in m.client_tags],
            "task_offsets": [{"subtopology_id": s, "partition": p, "offset": o}
                             for s, p, o in m.task_offsets],
            "task_end_offsets": [{"subtopology_id": s, "partition": p, "offset": o}
                                 for s, p, o in m.task_end_offsets],
            "assignment": assignment(m.assigned.active, m.assigned.standby,
                                     m.assigned.warmup),
            "target_assignment": assignment(tgt.active, tgt.standby, tgt.warmup)
            if tgt is not None else assignment(frozenset(), frozenset(), frozenset()),
            "is_classic": False,
        })
    return {"group_state": sg.state().value, "group_epoch": sg.group_epoch,
            "assignment_epoch": sg.assignment_epoch, "topology": topology,
            "members": members}


@api(89, 0, 1)
async def streams_group_describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gc = ctx.broker.groups
    want_description = ctx.version >= 1 and bool(
        getattr(req, "include_topology_description", False))
    out = []
    for gid in req.group_ids:
        entry: dict[str, Any] = {
            "error_code": ErrorCode.NONE, "error_message": None, "group_id": gid, "group_state": "",
            "group_epoch": -1, "assignment_epoch": -1, "topology": None, "members": [],
            "authorized_operations": AUTHORIZED_OPS_NOT_REQUESTED,
            "topology_description": None,
            "topology_description_status": DESCRIPTION_UNAVAILABLE if want_description
            else DESCRIPTION_NOT_REQUESTED,
            "assignor_name": None}
        out.append(entry)
        if not authorize_group(ctx, "DESCRIBE", gid):
            entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        err, g = gc.describe(gid)
        if err != ErrorCode.NONE:
            entry["error_code"] = err
            continue
        if g is None or g.streams is None:
            entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
            entry["error_message"] = f"Group {gid} not found." if g is None \
                else f"Group {gid} is not a streams group."
            continue
        sg = g.streams
        if sg.topology is not None:
            denied = denied_topics(ctx, "DESCRIBE", _topology_topics(sg.topology))
            if denied:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                entry["error_message"] = ("The described group uses topics that the client "
                                          "is not authorized to describe.")
                continue
        entry.update(_describe(ctx, sg))
        entry["assignor_name"] = "sticky"
        if req.include_authorized_operations:
            entry["authorized_operations"] = authorized_operations(ctx, GROUP, gid)
    return {"throttle_time_ms": 0, "groups": out}


@api(93, 0, 0)
async def streams_group_topology_description_update(ctx: RequestContext, req: Any
                                                    ) -> dict[str, Any]:
    def answer(code: ErrorCode, msg: str | None = None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": msg}

    if not streams_enabled(ctx):
        return answer(ErrorCode.UNSUPPORTED_VERSION,
                      "The streams group protocol is not enabled (streams.version is 0).")
    if not authorize_group(ctx, "READ", req.group_id):
        return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    gc = ctx.broker.groups
    err, g = gc.describe(req.group_id)
    if err != ErrorCode.NONE:
        return answer(err)
    if g is None or g.streams is None or req.member_id not in g.streams.members:
        return answer(ErrorCode.UNKNOWN_MEMBER_ID,
                      f"Member {req.member_id} is not a member of group {req.group_id}.")
    sg = g.streams
    if sg.topology is None or req.topology_epoch != sg.topology.epoch:
        return answer(ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH,
                      f"Topology epoch {req.topology_epoch} is not the group's "
                      f"({None if sg.topology is None else sg.topology.epoch}).")
    return answer(ErrorCode.NONE)

