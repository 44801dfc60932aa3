"""Group metadata and committed offsets in the internal topic `__consumer_offsets`.

This module owns the byte layout of that topic and the I/O against it: it
writes records through the replica manager (as the partition's leader: this broker
coordinates exactly the groups whose partition it leads) and reads a partition back
when this broker becomes its leader. A write is acknowledged to clients once the
partition's high watermark passes it (`wait_durable`: acks=all semantics). Layout (Kafka's, from `coordinator-records/`): every record key and
value starts with an int16 version, followed by the versioned struct.

* key version 0/1 = OffsetCommitKey(group, topic, partition),
  value = OffsetCommitValue v3 (offset, leaderEpoch, metadata, commitTimestamp),
  or v1 when an explicit expireTimestamp is kept (OffsetCommit v2-4 retention).
* key version 2 = GroupMetadataKey(group), value = GroupMetadataValue v3
  (protocol type, generation, protocol, leader, state timestamp, members with
  their subscription and assignment).
* a null value is a tombstone: the offset or group was deleted.

The partition of a group is Kafka's `abs(javaStringHashCode(group)) % partitions`
(`Utils.abs` masks the sign bit). The topic is compacted, so the latest record
per key is what survives.

Partition count: as Kafka's coordinator, the store reads the topic's partition
count once (when it first sees the topic in this process) and keeps it, so a
CreatePartitions on `__consumer_offsets` (which Kafka 3.9 accepts) does not move
a group to another partition while the broker runs. After a restart the new
count applies and a group's records may sit in two partitions; `load()` merges
the partitions by record timestamp (each partition in offset order), so the
newest record of every key wins whatever the partition numbers.
"""

from __future__ import annotations

import heapq
import logging
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jocko_py.broker.group.state import Group, GroupState, Member, OffsetAndMetadata
from jocko_py.broker.topics import TopicError
from jocko_py.protocol import messages
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker

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


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _encode("OffsetCommitKey", 1, {"group": group, "topic": topic, "partition": partition})


def group_key(group: str) -> bytes:
    return _encode("GroupMetadataKey", 2, {"group": group})


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


@dataclass(slots=True)
class DecodedKey:
    kind: str  # "offset" or "group"
    group: str
    topic: str = ""
    partition: int = -1


def decode_key(data: bytes) -> DecodedKey | None:
    if len(data) < 2:
        return None
    (version,) = _I16.unpack_from(data)
    body = data[2:]
    if version in (0, 1):
        k = messages.data_schema("OffsetCommitKey", version).parse_bytes(body)
        return DecodedKey("offset", k.group, k.topic, k.partition)
    if version == 2:
        k = messages.data_schema("GroupMetadataKey", 2).parse_bytes(body)
        return DecodedKey("group", k.group)
    return None  # e.g. new-protocol (KIP-848) records: not ours


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    (version,) = _I16.unpack_from(data)
    v = messages.data_schema("OffsetCommitValue", version).parse_bytes(data[2:])
    return OffsetAndMetadata(
        offset=v.offset, leader_epoch=v.leader_epoch if version >= 3 else -1,
        metadata=v.metadata or "", commit_timestamp=v.commit_timestamp,
        expire_timestamp=v.expire_timestamp if version == 1 else -1)


def decode_group_value(group_id: str, data: bytes, now: float) -> Group:
    (version,) = _I16.unpack_from(data)
    v = messages.data_schema("GroupMetadataValue", version).parse_bytes(data[2:])
    ts = v.current_state_timestamp if version >= 2 and v.current_state_timestamp >= 0 \
        else int(time.time() * 1000)
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
            assignment=bytes(mm.assignment), last_heartbeat=now, is_new=False)
        g.add(m)
    g.protocol_type = v.protocol_type or None
    g.leader_id = v.leader if v.leader in g.members else next(iter(g.members), None)
    g.state = GroupState.STABLE if g.members else GroupState.EMPTY
    g.state_timestamp = ts
    return g


@dataclass
class LoadedState:
    groups: dict[str, Group] = field(default_factory=dict)
    records: int = 0


# -- the store ------------------------------------------------------------------------

class OffsetsStore:
    """Reads and writes `__consumer_offsets` through the broker's partitions."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.num_partitions = max(1, broker.config.int("offsets.topic.num.partitions"))
        self.replication_factor = max(1, broker.config.int("offsets.topic.replication.factor"))
        self.segment_bytes = broker.config.get("offsets.topic.segment.bytes") or "104857600"
        self.pinned = False
        self._written: dict[str, tuple[Any, int]] = {}

    def topic_exists(self) -> bool:
        t = self.broker.topics.image.topics.get(OFFSETS_TOPIC)
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
        live = sum(not b.fenced for b in self.broker.topics.image.brokers.values())
        try:
            await self.broker.topics.create_topic(
                OFFSETS_TOPIC, self.num_partitions,
                max(1, min(self.replication_factor, live)),
                {"cleanup.policy": "compact", "segment.bytes": self.segment_bytes,
                 "compression.type": "producer"})
        except TopicError as e:
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
        img = self.broker.topics.image.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        return img.leader if img is not None else -1

    def append(self, group_id: str, entries: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> ErrorCode:
        """Write records for one group atomically (one batch); a Kafka error code.
        `wait_durable(group_id, ...)` then waits for the ISR to have them. With
        ``producer`` (id, epoch) the batch is transactional (TxnOffsetCommit): it
        counts once its producer's commit marker follows it."""
        if not entries:
            return ErrorCode.NONE
        p = self.broker.replicas.get(OFFSETS_TOPIC, self.partition_for(group_id))
        if p is None or not p.is_leader:
            return ErrorCode.NOT_COORDINATOR
        now = int(time.time() * 1000)
        recs = [rb.NewRecord(k, v, (), now) for k, v in entries]
        if producer is not None:
            if p.log.producer_state.check_marker(producer[0], producer[1], -1) \
                    == ErrorCode.INVALID_PRODUCER_EPOCH:
                return ErrorCode.PRODUCER_FENCED
            batch = rb.build_batch(recs, producer_id=producer[0], producer_epoch=producer[1],
                                   is_transactional=True)
        else:
            batch = rb.build_batch(recs)
        r = p.append_internal(batch, now)
        if r.error != ErrorCode.NONE:
            log.warning("[group=%s] write to %s failed: %s %s", group_id, p.name,
                        r.error.name, r.message)
            if r.error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
                return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self.broker.replicas.notify_append(p)
        self._written[group_id] = (p, r.last_offset)
        return ErrorCode.NONE

    async def wait_durable(self, group_id: str, timeout_s: float) -> ErrorCode:
        """Wait until the group's last write is below the HW (replicated to the ISR)."""
        written = self._written.pop(group_id, None)
        if written is None:
            return ErrorCode.NONE
        p, last = written
        err = await self.broker.replicas.wait_replicated(p, last, time.monotonic() + timeout_s)
        if err in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
            return ErrorCode.NOT_COORDINATOR
        return err

    def load(self, partitions: list[int] | None = None) -> LoadedState:
        """Replay every partition of the topic into groups with their offsets.

        Partitions are merged by record timestamp (see the module docstring); a
        group's records normally all sit in one partition, where offset order
        is what counts, and `heapq.merge` never reorders one partition's records.
        """
        out = LoadedState()
        if not self.topic_exists():
            return out
        now = time.monotonic()
        groups = out.groups
        t0 = time.monotonic()
        t = self.broker.topics.image.topics.get(OFFSETS_TOPIC)
        count = max(self.num_partitions, len(t.partitions) if t is not None else 0)
        wanted = range(count) if partitions is None else partitions
        streams = [self._records(idx) for idx in wanted]
        for _ts, name, offset, key, value, pid in heapq.merge(*streams, key=lambda r: r[0]):
            out.records += 1
            try:
                if pid >= 0:
                    self._apply_pending(groups, pid, key, value)
                else:
                    self._apply(groups, key, value, now)
            except Exception:
                log.exception("[partition=%s] skipping undecodable record at %d", name, offset)
        log.info("loaded %d groups from %d records of %s in %.2fs", len(groups), out.records,
                 OFFSETS_TOPIC, time.monotonic() - t0)
        return out

    def _records(self, idx: int) -> Iterator[tuple[int, str, int, bytes, bytes | None, int]]:
        """(timestamp, partition, offset, key, value, producer id) of every record, in
        log order; transactional offset commits (TxnOffsetCommit) come out at their
        commit marker (producer id -1), not at all when aborted, and with their producer
        id at the end when their transaction is still open."""
        p = self.broker.replicas.get(OFFSETS_TOPIC, idx)
        if p is None:
            return
        lg = p.log
        start = lg.log_start_offset
        open_txns: dict[int, list[rb.Record]] = {}
        for seg in list(lg.segments):
            for pos, h in seg.iter_headers():
                if h.next_offset <= start:
                    continue
                data = seg.read_batch_at(pos, h)
                if h.is_control:
                    try:
                        ctype, _ = rb.control_marker(data, h)
                    except rb.RecordError:
                        continue
                    held = open_txns.pop(h.producer_id, [])
                    if ctype == rb.ControlType.COMMIT:
                        for rec in held:
                            yield rec.timestamp, p.name, rec.offset, rec.key or b"", rec.value, -1
                    continue
                try:
                    recs = rb.decode_records(data, h)
                except Exception:
                    log.exception("[partition=%s] skipping undecodable batch", p.name)
                    continue
                for rec in recs:
                    if rec.offset < start or rec.key is None:
                        continue
                    if h.is_transactional:
                        open_txns.setdefault(h.producer_id, []).append(rec)
                        continue
                    yield rec.timestamp, p.name, rec.offset, rec.key, rec.value, -1
        for pid, held in open_txns.items():
            for rec in held:
                yield rec.timestamp, p.name, rec.offset, rec.key or b"", rec.value, pid

    @staticmethod
    def _apply_pending(groups: dict[str, Group], pid: int, key: bytes,
                       value: bytes | None) -> None:
        k = decode_key(key)
        if k is None or k.kind != "offset" or value is None:
            return
        g = groups.get(k.group)
        if g is None:
            g = groups[k.group] = Group(k.group, int(time.time() * 1000))
        g.pending_txn_offsets.setdefault(pid, {})[(k.topic, k.partition)] = \
            decode_offset_value(value)

    @staticmethod
    def _apply(groups: dict[str, Group], key: bytes, value: bytes | None, now: float) -> None:
        k = decode_key(key)
        if k is None:
            return
        g = groups.get(k.group)
        if k.kind == "offset":
            if value is None:
                if g is not None:
                    g.offsets.pop((k.topic, k.partition), None)
                return
            if g is None:
                g = groups[k.group] = Group(k.group, int(time.time() * 1000))
            g.offsets[(k.topic, k.partition)] = decode_offset_value(value)
            return
        if value is None:
            if g is not None:
                # the group was deleted; offsets written after this record survive
                g.offsets.clear()
                groups.pop(k.group, None)
            return
        new = decode_group_value(k.group, value, now)
        if g is not None:
            new.offsets = g.offsets
        groups[k.group] = new
