"""The records of ``__share_group_state`` (Kafka's layout, from ``coordinator-records/``).

This module owns their bytes: a key is an int16 record type followed by the key struct
(v0), a value an int16 version followed by the value struct; a null value is a
tombstone.

* type 0 = ShareSnapshotKey(group, topic id, partition), value ShareSnapshotValue v0:
  the whole state of one share partition (snapshot epoch, state epoch, leader epoch,
  start offset, delivery-complete count, create/write timestamps, state batches).
* type 1 = ShareUpdateKey(same fields), value ShareUpdateValue v0: a change to merge
  into the latest snapshot (leader epoch, start offset or -1, the batches written).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

from jocko_py.broker.share.persister import DeliveryState, SharePartitionKey, StateBatch
from jocko_py.protocol import messages

SNAPSHOT = 0
UPDATE = 1
_I16 = struct.Struct(">h")
_KEYS = {SNAPSHOT: "ShareSnapshotKey", UPDATE: "ShareUpdateKey"}


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """The state of one share partition as the coordinator keeps it (Kafka's
    ``ShareGroupOffset``); an update record decodes to one with ``state_epoch`` -1."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1


def _batches(items: Any) -> tuple[StateBatch, ...]:
    out = []
    for b in items:
        try:
            state = DeliveryState(b.delivery_state)
        except ValueError:
            state = DeliveryState.AVAILABLE
        out.append(StateBatch(b.first_offset, b.last_offset, state, b.delivery_count))
    return tuple(out)


def _wire_batches(batches: tuple[StateBatch, ...]) -> list[dict[str, Any]]:
    return [{"first_offset": b.first_offset, "last_offset": b.last_offset,
             "delivery_state": int(b.delivery_state), "delivery_count": b.delivery_count}
            for b in batches]


def key(record_type: int, k: SharePartitionKey) -> bytes:
    return _I16.pack(record_type) + bytes(messages.data_schema(_KEYS[record_type], 0).build(
        {"group_id": k.group_id, "topic_id": k.topic_id, "partition": k.partition}))


def snapshot_value(s: ShareGroupOffset) -> bytes:
    return _I16.pack(0) + bytes(messages.data_schema("ShareSnapshotValue", 0).build({
        "snapshot_epoch": s.snapshot_epoch, "state_epoch": s.state_epoch,
        "leader_epoch": s.leader_epoch, "start_offset": s.start_offset,
        "delivery_complete_count": s.delivery_complete_count,
        "create_timestamp": s.create_timestamp, "write_timestamp": s.write_timestamp,
        "state_batches": _wire_batches(s.batches)}))


def update_value(s: ShareGroupOffset) -> bytes:
    return _I16.pack(0) + bytes(messages.data_schema("ShareUpdateValue", 0).build({
        "snapshot_epoch": s.snapshot_epoch, "leader_epoch": s.leader_epoch,
        "start_offset": s.start_offset, "delivery_complete_count": s.delivery_complete_count,
        "state_batches": _wire_batches(s.batches)}))


def decode_key(data: bytes) -> tuple[int, SharePartitionKey] | None:
    """(record type, key), or None for a record that is not the share coordinator's."""
    if len(data) < 2:
        return None
    (rtype,) = _I16.unpack_from(data)
    name = _KEYS.get(rtype)
    if name is None:
        return None
    k = messages.data_schema(name, 0).parse_bytes(data[2:])
    return rtype, SharePartitionKey(k.group_id, uuid.UUID(str(k.topic_id)), k.partition)


def decode_value(record_type: int, data: bytes) -> ShareGroupOffset:
    (version,) = _I16.unpack_from(data)
    if record_type == SNAPSHOT:
        v = messages.data_schema("ShareSnapshotValue", version).parse_bytes(data[2:])
        return ShareGroupOffset(v.snapshot_epoch, v.state_epoch, v.leader_epoch,
                                v.start_offset, _batches(v.state_batches),
                                v.delivery_complete_count, v.create_timestamp,
                                v.write_timestamp)
    v = messages.data_schema("ShareUpdateValue", version).parse_bytes(data[2:])
    return ShareGroupOffset(v.snapshot_epoch, -1, v.leader_epoch, v.start_offset,
                            _batches(v.state_batches), v.delivery_complete_count)
