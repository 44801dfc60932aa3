"""A streams group (KIP-1071) in ``__consumer_offsets``: Kafka's StreamsGroup* record types.

Record types (the key's int16): 17 StreamsGroupMetadata (group epoch, metadata hash,
validated topology epoch), 19 StreamsGroupMemberMetadata (a member's process, endpoint,
tags, topology epoch, ...), 20 StreamsGroupTargetAssignmentMetadata (assignment epoch), 21
StreamsGroupTargetAssignmentMember (a member's target tasks), 22
StreamsGroupCurrentMemberAssignment (member epochs, state, tasks and tasks pending
revocation), 23 StreamsGroupTopology (the topology the group was initialized with); every
value v0. The model (``streams.py``) keys its records by (kind, member id); this module
turns them into bytes and back. The metadata value's LastAssignmentConfigs (tag 1) is not
written: the coordinator takes the configuration it runs with on load.
"""

from __future__ import annotations

import struct
from typing import Any

from jocko_py.broker.group.streams import (
    CopartitionGroup,
    CurrentRecord,
    GroupRecord,
    MemberRecord,
    Subtopology,
    Tasks,
    TopicInfo,
    Topology,
    task_ids,
)
from jocko_py.broker.group.streams_assignor import Task
from jocko_py.protocol import messages

_I16 = struct.Struct(">h")

# record type -> (key name, value name, model record kind)
STREAMS_RECORDS = {
    17: ("StreamsGroupMetadataKey", "StreamsGroupMetadataValue", "streams_metadata"),
    19: ("StreamsGroupMemberMetadataKey", "StreamsGroupMemberMetadataValue", "streams_member"),
    20: ("StreamsGroupTargetAssignmentMetadataKey", "StreamsGroupTargetAssignmentMetadataValue",
         "streams_target_metadata"),
    21: ("StreamsGroupTargetAssignmentMemberKey", "StreamsGroupTargetAssignmentMemberValue",
         "streams_target"),
    22: ("StreamsGroupCurrentMemberAssignmentKey", "StreamsGroupCurrentMemberAssignmentValue",
         "streams_current"),
    23: ("StreamsGroupTopologyKey", "StreamsGroupTopologyValue", "streams_topology"),
}
KIND_TYPE = {kind: t for t, (_, _, kind) in STREAMS_RECORDS.items()}
_MEMBER_KINDS = ("streams_member", "streams_target", "streams_current")


def is_streams_kind(kind: str) -> bool:
    return kind in KIND_TYPE


def _ids(tasks: frozenset[Task]) -> list[dict[str, Any]]:
    return [{"subtopology_id": sid, "partitions": ps} for sid, ps in task_ids(tasks).items()]


def _from_ids(items: Any) -> frozenset[Task]:
    return frozenset((t.subtopology_id, p) for t in items for p in t.partitions)


def _topic_info(t: TopicInfo) -> dict[str, Any]:
    return {"name": t.name, "partitions": t.partitions,
            "replication_factor": t.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in t.configs]}


def _from_topic_info(t: Any) -> TopicInfo:
    return TopicInfo(t.name, t.partitions, t.replication_factor,
                     tuple((c.key, c.value) for c in t.topic_configs))


def encode(group: str, kind: str, member_id: str, rec: object | None
           ) -> tuple[bytes, bytes | None]:
    """One record (key, value; value None: a tombstone) of ``group``."""
    rtype = KIND_TYPE[kind]
    kname, vname, _ = STREAMS_RECORDS[rtype]
    key_obj: dict[str, Any] = {"group_id": group}
    if kind in _MEMBER_KINDS:
        key_obj["member_id"] = member_id
    key = _I16.pack(rtype) + bytes(messages.data_schema(kname, 0).build(key_obj))
    if rec is None:
        return key, None
    value: dict[str, Any]
    if isinstance(rec, GroupRecord):
        value = {"epoch": rec.epoch, "metadata_hash": rec.metadata_hash,
                 "validated_topology_epoch": rec.validated_topology_epoch}
    elif kind == "streams_target_metadata":
        assert isinstance(rec, tuple)
        value = {"assignment_epoch": rec[0], "assignment_timestamp": rec[1]}
    elif isinstance(rec, MemberRecord):
        value = {"instance_id": rec.instance_id, "rack_id": rec.rack_id,
                 "client_id": rec.client_id, "client_host": rec.client_host,
                 "rebalance_timeout_ms": rec.rebalance_timeout_ms,
                 "topology_epoch": rec.topology_epoch, "process_id": rec.process_id,
                 "user_endpoint": None if rec.user_endpoint is None else {
                     "host": rec.user_endpoint[0], "port": rec.user_endpoint[1]},
                 "client_tags": [{"key": k, "value": v} for k, v in rec.client_tags]}
    elif isinstance(rec, Tasks):
        value = {"active_tasks": _ids(rec.active), "standby_tasks": _ids(rec.standby),
                 "warmup_tasks": _ids(rec.warmup)}
    elif isinstance(rec, CurrentRecord):
        value = {"member_epoch": rec.member_epoch,
                 "previous_member_epoch": rec.previous_epoch, "state": rec.state,
                 "active_tasks": _ids(rec.assigned.active),
                 "standby_tasks": _ids(rec.assigned.standby),
                 "warmup_tasks": _ids(rec.assigned.warmup),
                 "active_tasks_pending_revocation": _ids(rec.revoking.active),
                 "standby_tasks_pending_revocation": _ids(rec.revoking.standby),
                 "warmup_tasks_pending_revocation": _ids(rec.revoking.warmup)}
    else:
        assert isinstance(rec, Topology)
        value = {"epoch": rec.epoch, "subtopologies": [{
            "subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
            "source_topic_regex": list(s.source_topic_regex),
            "state_changelog_topics": [_topic_info(t) for t in s.state_changelog_topics],
            "repartition_sink_topics": list(s.repartition_sink_topics),
            "repartition_source_topics": [_topic_info(t) for t in s.repartition_source_topics],
            "copartition_groups": [{
                "source_topics": list(g.source_topics),
                "source_topic_regex": list(g.source_topic_regex),
                "repartition_source_topics": list(g.repartition_source_topics)}
                for g in s.copartition_groups],
        } for s in rec.subtopologies]}
    return key, _I16.pack(0) + bytes(messages.data_schema(vname, 0).build(value))


def decode_key(rtype: int, body: bytes) -> tuple[str, str, str]:
    """(kind, group, member id) of a streams record key (without its int16)."""
    kname, _, kind = STREAMS_RECORDS[rtype]
    k = messages.data_schema(kname, 0).parse_bytes(body)
    return kind, k.group_id, getattr(k, "member_id", "") or ""


def decode_value(kind: str, data: bytes) -> object:
    _, vname, _ = STREAMS_RECORDS[KIND_TYPE[kind]]
    (vv,) = _I16.unpack_from(data)
    v = messages.data_schema(vname, vv).parse_bytes(data[2:])
    if kind == "streams_metadata":
        return GroupRecord(v.epoch, v.metadata_hash, v.validated_topology_epoch, ())
    if kind == "streams_target_metadata":
        return int(v.assignment_epoch), int(v.assignment_timestamp)
    if kind == "streams_member":
        ep = v.user_endpoint
        return MemberRecord(v.instance_id, v.rack_id, v.client_id, v.client_host,
                            v.rebalance_timeout_ms, v.topology_epoch, v.process_id,
                            None if ep is None else (ep.host, ep.port),
                            tuple((t.key, t.value) for t in v.client_tags))
    if kind == "streams_target":
        return Tasks(_from_ids(v.active_tasks), _from_ids(v.standby_tasks),
                     _from_ids(v.warmup_tasks))
    if kind == "streams_current":
        return CurrentRecord(
            v.member_epoch, v.previous_member_epoch, v.state,
            Tasks(_from_ids(v.active_tasks), _from_ids(v.standby_tasks),
                  _from_ids(v.warmup_tasks)),
            Tasks(_from_ids(v.active_tasks_pending_revocation),
                  _from_ids(v.standby_tasks_pending_revocation),
                  _from_ids(v.warmup_tasks_pending_revocation)))
    return Topology.of(v.epoch, (Subtopology(
        s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
        tuple(_from_topic_info(t) for t in s.state_changelog_topics),
        tuple(s.repartition_sink_topics),
        tuple(_from_topic_info(t) for t in s.repartition_source_topics),
        tuple(CopartitionGroup(tuple(g.source_topics), tuple(g.source_topic_regex),
                               tuple(g.repartition_source_topics))
              for g in s.copartition_groups)) for s in v.subtopologies))


def entries_for(group: str, recs: dict[tuple[str, str], object]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for (kind, mid), rec in recs.items():
        k, v = encode(group, kind, mid, rec)
        out[k] = v
    return out
