"""A share group (KIP-932) in ``__consumer_offsets``: Kafka's ShareGroup* record types.

Record types (the key's int16): 10 ShareGroupMemberMetadata (rack, client, subscribed
topic names), 11 ShareGroupMetadata (group epoch, metadata hash), 12
ShareGroupTargetAssignmentMetadata (assignment epoch), 13 ShareGroupTargetAssignmentMember
(a member's target partitions), 14 ShareGroupCurrentMemberAssignment (member epochs and
partitions), 15 ShareGroupStatePartitionMetadata (partitions whose share state is
initializing, initialized or being deleted); every value v0. The model (``share.py``)
keys its records by (kind, member id); this module turns them into bytes and back.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from jocko_py.broker.group.share import CurrentRecord, MemberRecord, StatePartitions
from jocko_py.protocol import messages

_I16 = struct.Struct(">h")

SHARE_RECORDS = {
    10: ("ShareGroupMemberMetadataKey", "ShareGroupMemberMetadataValue", "share_member"),
    11: ("ShareGroupMetadataKey", "ShareGroupMetadataValue", "share_metadata"),
    12: ("ShareGroupTargetAssignmentMetadataKey", "ShareGroupTargetAssignmentMetadataValue",
         "share_target_metadata"),
    13: ("ShareGroupTargetAssignmentMemberKey", "ShareGroupTargetAssignmentMemberValue",
         "share_target"),
    14: ("ShareGroupCurrentMemberAssignmentKey", "ShareGroupCurrentMemberAssignmentValue",
         "share_current"),
    15: ("ShareGroupStatePartitionMetadataKey", "ShareGroupStatePartitionMetadataValue",
         "share_state_partitions"),
}
KIND_TYPE = {kind: t for t, (_, _, kind) in SHARE_RECORDS.items()}
_MEMBER_KINDS = ("share_member", "share_target", "share_current")
# tombstones of a group's records go in this order: members' first, the group's last
TOMBSTONE_ORDER = {"share_current": 0, "share_target": 1, "share_member": 2,
                   "share_state_partitions": 3, "share_target_metadata": 4,
                   "share_metadata": 5}


def is_share_kind(kind: str) -> bool:
    return kind in KIND_TYPE


def _tps(tps: frozenset[tuple[uuid.UUID, int]]) -> list[dict[str, Any]]:
    by: dict[uuid.UUID, list[int]] = {}
    for tid, p in sorted(tps):
        by.setdefault(tid, []).append(p)
    return [{"topic_id": tid, "partitions": ps} for tid, ps in by.items()]


def _from_tps(items: Any) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((t.topic_id, p) for t in items for p in t.partitions)


def encode(group: str, kind: str, member_id: str, rec: object | None
           ) -> tuple[bytes, bytes | None]:
    """One record (key, value; value None: a tombstone) of ``group``."""
    rtype = KIND_TYPE[kind]
    kname, vname, _ = SHARE_RECORDS[rtype]
    key_obj: dict[str, Any] = {"group_id": group}
    if kind in _MEMBER_KINDS:
        key_obj["member_id"] = member_id
    key = _I16.pack(rtype) + bytes(messages.data_schema(kname, 0).build(key_obj))
    if rec is None:
        return key, None
    value: dict[str, Any]
    if kind == "share_metadata":
        assert isinstance(rec, tuple)
        value = {"epoch": rec[0], "metadata_hash": rec[1]}
    elif kind == "share_target_metadata":
        assert isinstance(rec, tuple)
        value = {"assignment_epoch": rec[0], "assignment_timestamp": rec[1]}
    elif isinstance(rec, MemberRecord):
        value = {"rack_id": rec.rack_id, "client_id": rec.client_id,
                 "client_host": rec.client_host,
                 "subscribed_topic_names": list(rec.subscribed)}
    elif isinstance(rec, CurrentRecord):
        value = {"member_epoch": rec.member_epoch, "previous_member_epoch": rec.previous_epoch,
                 "state": rec.state, "assigned_partitions": _tps(rec.assigned)}
    elif isinstance(rec, StatePartitions):
        value = {
            "initializing_topics": [{"topic_id": t, "topic_name": n, "partitions": list(ps)}
                                    for t, n, ps in rec.initializing],
            "initialized_topics": [{"topic_id": t, "topic_name": n, "partitions": list(ps)}
                                   for t, n, ps in rec.initialized],
            "deleting_topics": [{"topic_id": t, "topic_name": n} for t, n in rec.deleting]}
    else:
        assert isinstance(rec, frozenset)
        value = {"topic_partitions": _tps(rec)}
    return key, _I16.pack(0) + bytes(messages.data_schema(vname, 0).build(value))


def decode_key(rtype: int, body: bytes) -> tuple[str, str, str]:
    """(kind, group, member id) of a share record key (without its int16)."""
    kname, _, kind = SHARE_RECORDS[rtype]
    k = messages.data_schema(kname, 0).parse_bytes(body)
    return kind, k.group_id, getattr(k, "member_id", "") or ""


def decode_value(kind: str, data: bytes) -> object:
    _, vname, _ = SHARE_RECORDS[KIND_TYPE[kind]]
    (vv,) = _I16.unpack_from(data)
    v = messages.data_schema(vname, vv).parse_bytes(data[2:])
    if kind == "share_metadata":
        return int(v.epoch), int(v.metadata_hash)
    if kind == "share_target_metadata":
        return int(v.assignment_epoch), int(v.assignment_timestamp)
    if kind == "share_member":
        return MemberRecord(v.rack_id, v.client_id, v.client_host,
                            tuple(v.subscribed_topic_names))
    if kind == "share_current":
        return CurrentRecord(v.member_epoch, v.previous_member_epoch, v.state,
                             _from_tps(v.assigned_partitions))
    if kind == "share_target":
        return _from_tps(v.topic_partitions)
    return StatePartitions(
        tuple((t.topic_id, t.topic_name, tuple(t.partitions)) for t in v.initializing_topics),
        tuple((t.topic_id, t.topic_name, tuple(t.partitions)) for t in v.initialized_topics),
        tuple((t.topic_id, t.topic_name) for t in v.deleting_topics))


def entries_for(group: str, recs: dict[tuple[str, str], object]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for (kind, mid), rec in recs.items():
        k, v = encode(group, kind, mid, rec)
        out[k] = v
    return out
