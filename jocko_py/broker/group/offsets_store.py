"""Group metadata and committed offsets in the internal topic `__consumer_offsets`.

This module owns the byte layout of that topic, the topic itself (created on the first
FindCoordinator) and the mapping of groups to its partitions; it reads the partitions
back for the coordinator runtime when this broker is elected (`OffsetsStore.read`).
Writes go through the runtime (`broker/coordinator/`), acknowledged once the partition's
high watermark passes them (acks=all). Layout (Kafka's, from `coordinator-records/`):
every record key and value starts with an int16 version, followed by the versioned
struct.

* key version 0/1 = OffsetCommitKey(group, topic, partition),
  value = OffsetCommitValue v3 (offset, leaderEpoch, metadata, commitTimestamp),
  or v1 when an explicit expireTimestamp is kept (OffsetCommit v2-4 retention).
* key version 2 = GroupMetadataKey(group), value = GroupMetadataValue v3
  (protocol type, generation, protocol, leader, state timestamp, members with
  their subscription and assignment).
* key versions 3-8 = a KIP-848 consumer-protocol group: ConsumerGroupMetadata (3: group
  epoch), ConsumerGroupMemberMetadata (5: a member's subscription and settings),
  ConsumerGroupTargetAssignmentMetadata (6: assignment epoch),
  ConsumerGroupTargetAssignmentMember (7), ConsumerGroupCurrentMemberAssignment (8:
  member epochs, state, assigned and pending-revocation partitions); every value v0.
  (ConsumerGroupPartitionMetadata, 4, is not written: the coordinator reads the
  subscribed partitions from the metadata image.)
* key versions 17-23 = a KIP-1071 streams group (StreamsGroup* records, see
  `streams_records.py`), replayed beside the KIP-848 records (`shard.py`).
* key versions 10-15 = a KIP-932 share group (ShareGroup* records, see
  `share_records.py`), replayed the same way.
* a null value is a tombstone: the offset or group was deleted.

The partition of a group is Kafka's `abs(javaStringHashCode(group)) % partitions`
(`Utils.abs` masks the sign bit). The topic is compacted, so the latest record
per key is what survives.

Partition count: as Kafka's coordinator, the store reads the topic's partition
count once (when it first sees the topic in this process) and keeps it, so a
CreatePartitions on `__consumer_offsets` (which Kafka 3.9 accepts) does not move
a group to another partition while the broker runs. After a restart the new
count applies and a group's records may sit in two partitions; `read()` merges
the partitions by record timestamp (each partition in offset order), so the
newest record of every key wins whatever the partition numbers.
"""

from __future__ import annotations

import heapq
import logging
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jocko_py.broker.coordinator.runtime import LogRecord
from jocko_py.broker.group import share_records, streams_records
from jocko_py.broker.group.consumer import (
    CurrentRecord,
    MemberRecord,
    TopicPartition,
    group_assignment,
)
from jocko_py.broker.group.state import Group, Member, OffsetAndMetadata
from jocko_py.protocol import messages
from jocko_py.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from jocko_py.broker.coordinator.shell import ReplicaLog
    from jocko_py.broker.interfaces import CoordinatorHost

log = logging.getLogger("jocko_py.broker.group.offsets_store")

OFFSETS_TOPIC = "__consumer_offsets"
_I16 = struct.Struct(">h")
MAX_BATCH_BYTES = 100 * 1024 * 1024


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    return (java_string_hash(group_id) & 0x7FFFFFFF) % num_partitions


# -- encoding -------------------------------------------------------------------------

def _encode(name: str, version: int, obj: dict[str, Any]) -> bytes:
    return _I16.pack(version) + bytes(messages.data_schema(name, version).build(obj))


def _encode_key(name: str, record_type: int, obj: dict[str, Any]) -> bytes:
    """A key: its int16 is the record type (the spec's apiKey; the key layout is v0)."""
    return _I16.pack(record_type) + bytes(messages.data_schema(name, 0).build(obj))


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _encode_key("OffsetCommitKey", 1,
                       {"group": group, "topic": topic, "partition": partition})


def group_key(group: str) -> bytes:
    return _encode_key("GroupMetadataKey", 2, {"group": group})


def offset_value(om: OffsetAndMetadata) -> bytes:
    if om.expire_timestamp >= 0:
        return _encode("OffsetCommitValue", 1, {
            "offset": om.offset, "metadata": om.metadata, "commit_timestamp": om.commit_timestamp,
            "expire_timestamp": om.expire_timestamp})
    return _encode("OffsetCommitValue", 3, {
        "offset": om.offset, "leader_epoch": om.leader_epoch, "metadata": om.metadata,
        "commit_timestamp": om.commit_timestamp})


def group_value(g: Group, assignments: dict[str, bytes] | None = None) -> bytes:
    members = []
    if g.protocol_name is not None:
        for m in g.members.values():
            members.append({
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms,
                "subscription": m.metadata(g.protocol_name),
                "assignment": (assignments or {}).get(m.member_id, m.assignment),
            })
    return _encode("GroupMetadataValue", 3, {
        "protocol_type": g.protocol_type or "",
        "generation": g.generation_id,
        "protocol": g.protocol_name,
        "leader": g.leader_id,
        "current_state_timestamp": g.state_timestamp,
        "members": members,
    })


# KIP-848 record types: (record type, key name, value name, model record kind)
_CONSUMER_RECORDS = {
    3: ("ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue", "metadata"),
    5: ("ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataValue", "member"),
    6: ("ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue",
        "target_metadata"),
    7: ("ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue",
        "target"),
    8: ("ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue",
        "current"),
}
_KIND_VERSION = {kind: v for v, (_, _, kind) in _CONSUMER_RECORDS.items()}


def _tps(tps: frozenset[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic_id": tid, "partitions": sorted(ps)}
            for tid, ps in sorted(group_assignment(tps).items(), key=lambda kv: str(kv[0]))]


def _from_tps(items: Any) -> frozenset[TopicPartition]:
    return frozenset((t.topic_id, p) for t in items for p in t.partitions)


def consumer_record(group: str, kind: str, member_id: str, rec: object | None
                    ) -> tuple[bytes, bytes | None]:
    """One KIP-848 record (key, value; value None: a tombstone) of ``group``."""
    version = _KIND_VERSION[kind]
    kname, vname, _ = _CONSUMER_RECORDS[version]
    key_obj: dict[str, Any] = {"group_id": group}
    if kind in ("member", "target", "current"):
        key_obj["member_id"] = member_id
    key = _encode_key(kname, version, key_obj)
    if rec is None:
        return key, None
    value: dict[str, Any]
    if kind == "metadata":
        value = {"epoch": rec}
    elif kind == "target_metadata":
        value = {"assignment_epoch": rec}
    elif kind == "target":
        assert isinstance(rec, frozenset)
        value = {"topic_partitions": _tps(rec)}
    elif kind == "member":
        assert isinstance(rec, MemberRecord)
        value = {"instance_id": rec.instance_id, "rack_id": rec.rack_id,
                 "client_id": rec.client_id, "client_host": rec.client_host,
                 "subscribed_topic_names": list(rec.subscribed_names),
                 "subscribed_topic_regex": rec.subscribed_regex,
                 "rebalance_timeout_ms": rec.rebalance_timeout_ms,
                 "server_assignor": rec.server_assignor,
                 "classic_member_metadata": None if rec.classic is None else {
                     "session_timeout_ms": rec.classic[0],
                     "supported_protocols": [{"name": n, "metadata": md}
                                             for n, md in rec.classic[1]]}}
    else:
        assert isinstance(rec, CurrentRecord)
        value = {"member_epoch": rec.member_epoch, "previous_member_epoch": rec.previous_epoch,
                 "state": rec.state, "assigned_partitions": _tps(rec.assigned),
                 "partitions_pending_revocation": _tps(rec.revoking)}
    return key, _encode(vname, 0, value)


def decode_consumer_value(kind: str, data: bytes) -> object:
    if streams_records.is_streams_kind(kind):
        return streams_records.decode_value(kind, data)
    if share_records.is_share_kind(kind):
        return share_records.decode_value(kind, data)
    version = _KIND_VERSION[kind]
    _, vname, _ = _CONSUMER_RECORDS[version]
    (vv,) = _I16.unpack_from(data)
    v = messages.data_schema(vname, vv).parse_bytes(data[2:])
    if kind == "metadata":
        return int(v.epoch)
    if kind == "target_metadata":
        return int(v.assignment_epoch)
    if kind == "target":
        return _from_tps(v.topic_partitions)
    if kind == "member":
        cm = v.classic_member_metadata
        return MemberRecord(v.instance_id, v.rack_id, v.client_id, v.client_host,
                            tuple(v.subscribed_topic_names), v.subscribed_topic_regex,
                            v.rebalance_timeout_ms, v.server_assignor,
                            None if cm is None else (cm.session_timeout_ms, tuple(
                                (p.name, bytes(p.metadata)) for p in cm.supported_protocols)))
    return CurrentRecord(v.member_epoch, v.previous_member_epoch, v.state,
                         _from_tps(v.assigned_partitions),
                         _from_tps(v.partitions_pending_revocation))


@dataclass(slots=True)
class DecodedKey:
    kind: str  # "offset", "group", or a KIP-848 record kind (see _CONSUMER_RECORDS)
    group: str
    topic: str = ""
    partition: int = -1
    member_id: str = ""


def decode_key(data: bytes) -> DecodedKey | None:
    if len(data) < 2:
        return None
    (version,) = _I16.unpack_from(data)
    body = data[2:]
    if version in (0, 1):  # LegacyOffsetCommitKey and OffsetCommitKey: one layout
        k = messages.data_schema("OffsetCommitKey", 0).parse_bytes(body)
        return DecodedKey("offset", k.group, k.topic, k.partition)
    if version == 2:
        k = messages.data_schema("GroupMetadataKey", 0).parse_bytes(body)
        return DecodedKey("group", k.group)
    if version in _CONSUMER_RECORDS:
        kname, _, kind = _CONSUMER_RECORDS[version]
        k = messages.data_schema(kname, 0).parse_bytes(body)
        return DecodedKey(kind, k.group_id, member_id=getattr(k, "member_id", "") or "")
    if version in streams_records.STREAMS_RECORDS:
        kind, group, member_id = streams_records.decode_key(version, body)
        return DecodedKey(kind, group, member_id=member_id)
    if version in share_records.SHARE_RECORDS:
        kind, group, member_id = share_records.decode_key(version, body)
        return DecodedKey(kind, group, member_id=member_id)
    return None  # e.g. partition metadata (4): not ours


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    (version,) = _I16.unpack_from(data)
    v = messages.data_schema("OffsetCommitValue", version).parse_bytes(data[2:])
    return OffsetAndMetadata(
        offset=v.offset, leader_epoch=v.leader_epoch if version >= 3 else -1,
        metadata=v.metadata or "", commit_timestamp=v.commit_timestamp,
        expire_timestamp=v.expire_timestamp if version == 1 else -1)


def decode_group_value(group_id: str, data: bytes, now: int) -> Group:
    """A classic group as its GroupMetadataValue holds it: Stable at its generation
    when it has members (through the state-transition guard), else Empty; ``now`` is
    its members' last heartbeat (their sessions start anew)."""
    (version,) = _I16.unpack_from(data)
    v = messages.data_schema("GroupMetadataValue", version).parse_bytes(data[2:])
    ts = v.current_state_timestamp if version >= 2 and v.current_state_timestamp >= 0 \
        else now
    g = Group(group_id, ts)
    g.generation_id = v.generation
    g.protocol_type = v.protocol_type or None
    g.protocol_name = v.protocol
    for mm in v.members:
        m = Member(
            member_id=mm.member_id,
            group_instance_id=mm.group_instance_id if version >= 3 else None,
            client_id=mm.client_id, client_host=mm.client_host,
            rebalance_timeout_ms=mm.rebalance_timeout if version >= 1 else mm.session_timeout,
            session_timeout_ms=mm.session_timeout,
            protocol_type=g.protocol_type or "",
            protocols=[(v.protocol or "", bytes(mm.subscription))],
            assignment=bytes(mm.assignment), last_heartbeat_ms=now, is_new=False)
        g.add(m)
    g.protocol_type = v.protocol_type or None
    g.leader_id = v.leader if v.leader in g.members else next(iter(g.members), None)
    if g.members:
        g.resume_stable(ts)
    return g


# -- the store ------------------------------------------------------------------------

class OffsetsStore:
    """Reads and writes `__consumer_offsets` through the broker's partitions."""

    def __init__(self, broker: CoordinatorHost) -> None:
        self.broker = broker
        self.num_partitions = max(1, broker.config.int("offsets.topic.num.partitions"))
        self.replication_factor = max(1, broker.config.int("offsets.topic.replication.factor"))
        self.segment_bytes = broker.config.get("offsets.topic.segment.bytes") or "104857600"
        self.pinned = False

    def topic_exists(self) -> bool:
        t = self.broker.image.topics.get(OFFSETS_TOPIC)
        if t is not None and not self.pinned:
            # read once, as Kafka does: partitions added later must not move groups
            self.num_partitions = len(t.partitions)
            self.pinned = True
        return t is not None

    async def ensure_topic(self) -> None:
        """Create the topic as Kafka does on the first FindCoordinator, with
        `offsets.topic.replication.factor` capped to the live brokers."""
        if self.topic_exists():
            return
        t0 = time.monotonic()
        live = sum(not b.fenced for b in self.broker.image.brokers.values())
        try:
            await self.broker.controller_channel.create_topic(
                OFFSETS_TOPIC, self.num_partitions,
                max(1, min(self.replication_factor, live)),
                {"cleanup.policy": "compact", "segment.bytes": self.segment_bytes,
                 "compression.type": "producer"})
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        log.info("created %s with %d partitions in %.2fs", OFFSETS_TOPIC,
                 self.num_partitions, time.monotonic() - t0)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def is_leader_for(self, group_id: str) -> bool:
        return self.is_leader_for_partition(self.partition_for(group_id))

    def is_leader_for_partition(self, idx: int) -> bool:
        p = self.broker.replicas.get(OFFSETS_TOPIC, idx)
        return p is not None and p.is_leader

    def leader_of(self, group_id: str) -> int:
        """The broker leading the group's partition (its coordinator), or -1."""
        img = self.broker.image.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        return img.leader if img is not None else -1

    def read(self, log_: ReplicaLog, wanted: list[int]) -> dict[int, list[LogRecord]]:
        """The records of the groups of ``wanted`` partitions, in replay order.

        Every local replica of the topic is read and merged by record timestamp (see
        the module docstring); a group's records normally all sit in one partition,
        where offset order is what counts, and ``heapq.merge`` never reorders one
        partition's records. Each record goes to its group's partition."""
        out: dict[int, list[LogRecord]] = {i: [] for i in wanted}
        if not self.topic_exists():
            return out
        t = self.broker.image.topics.get(OFFSETS_TOPIC)
        count = max(self.num_partitions, len(t.partitions) if t is not None else 0)
        streams = [log_.read(idx) for idx in range(count)]
        for _ts, offset, rec in heapq.merge(*streams, key=lambda r: r[0]):
            try:
                k = decode_key(rec.key)
            except Exception:
                log.exception("skipping an undecodable key at offset %d", offset)
                continue
            if k is None:
                continue
            dest = out.get(self.partition_for(k.group))
            if dest is not None:
                dest.append(rec)
        return out
