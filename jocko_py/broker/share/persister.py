"""The contract between a share partition and the durable copy of its state (Kafka's
``Persister``): the share partition leader reads the state when it loads a share
partition and writes every change of it before answering the acknowledgement that made
it; the group coordinator initializes the state of partitions newly assigned to a share
group and deletes it with the group.

Implementations: ``InMemoryPersister`` (unit tests of one layer and the simulation) and
the RPC persister, which sends InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86) and ReadShareGroupStateSummary
(87) to the share coordinator owning ``"<group>:<topic id>:<partition>"`` on
``__share_group_state``.

A key is ``SharePartitionKey(group_id, topic_id, partition)``. Errors are Kafka's: the
coordinator's NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE
are retried by the RPC persister before they reach the caller; FENCED_STATE_EPOCH when
a write carries an older ``state_epoch`` than the stored one (a stale share partition
leader), FENCED_LEADER_EPOCH for an older ``leader_epoch``; UNKNOWN_TOPIC_OR_PARTITION
on a read of a partition never initialized.
"""

from __future__ import annotations

import base64
import enum
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from jocko_py.protocol.errors import ErrorCode

E = ErrorCode


class DeliveryState(enum.IntEnum):
    """A record's state as the durable state stores it (the share partition also has
    ACQUIRED, which is never persisted: an acquired record is AVAILABLE on disk)."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(frozen=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """The FindCoordinator key (key type 2, SHARE) of this partition's state, as
        Kafka's ``SharePartitionKey.asCoordinatorKey``: the topic id is written as
        Kafka's ``Uuid.toString()`` (``kafka_uuid_str``), not Python's hex form."""
        return f"{self.group_id}:{kafka_uuid_str(self.topic_id)}:{self.partition}"


def kafka_uuid_str(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID | None:
    """The inverse of ``kafka_uuid_str`` (Kafka's ``Uuid.fromString``): 22 characters of
    URL-safe base64 decoding to 16 bytes, else None."""
    if len(text) != 22:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except ValueError:
        return None
    if len(raw) != 16 or kafka_uuid_str(uuid.UUID(bytes=raw)) != text:
        return None
    return uuid.UUID(bytes=raw)


@dataclass(frozen=True)
class StateBatch:
    """Records ``first_offset``..``last_offset`` (inclusive), all in one state."""
    first_offset: int
    last_offset: int
    delivery_state: DeliveryState
    delivery_count: int


@dataclass(frozen=True)
class ShareState:
    """What a read returns: ``error`` NONE and the state, or the error. Offsets below
    ``start_offset`` are done (acknowledged or archived); at and above it, ``batches``
    lists the records not AVAILABLE with count 0."""
    error: ErrorCode = E.NONE
    state_epoch: int = 0
    start_offset: int = -1
    batches: tuple[StateBatch, ...] = ()
    message: str | None = None


@dataclass(frozen=True)
class ShareStateSummary:
    error: ErrorCode = E.NONE
    state_epoch: int = 0
    start_offset: int = -1
    leader_epoch: int = -1
    # records at or above the start offset whose delivery is complete (KIP-1226), -1
    # unknown: DescribeShareGroupOffsets' lag is the end offset - start - this
    delivery_complete_count: int = -1


class SharePersister(Protocol):
    async def initialize(self, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> ErrorCode: ...

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareState: ...

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...],
                    delivery_complete_count: int = -1) -> ErrorCode: ...

    async def delete(self, key: SharePartitionKey) -> ErrorCode: ...

    async def read_summary(self, key: SharePartitionKey,
                           leader_epoch: int) -> ShareStateSummary: ...


@dataclass
class _Stored:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()


@dataclass
class InMemoryPersister:
    """The persister of one process's memory, with Kafka's fencing rules: for unit tests
    of the share partition and for the simulation, never for a broker."""
    states: dict[SharePartitionKey, _Stored] = field(default_factory=dict)

    async def initialize(self, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> ErrorCode:
        cur = self.states.get(key)
        if cur is not None and state_epoch < cur.state_epoch:
            return E.FENCED_STATE_EPOCH
        self.states[key] = _Stored(state_epoch, -1, start_offset)
        return E.NONE

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareState:
        cur = self.states.get(key)
        if cur is None:
            return ShareState(E.UNKNOWN_TOPIC_OR_PARTITION, message="not initialized")
        if leader_epoch < cur.leader_epoch:
            return ShareState(E.FENCED_LEADER_EPOCH)
        cur.leader_epoch = leader_epoch
        return ShareState(E.NONE, cur.state_epoch, cur.start_offset, cur.batches)

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...],
                    delivery_complete_count: int = -1) -> ErrorCode:
        cur = self.states.get(key)
        if cur is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        if state_epoch < cur.state_epoch:
            return E.FENCED_STATE_EPOCH
        if leader_epoch < cur.leader_epoch:
            return E.FENCED_LEADER_EPOCH
        cur.state_epoch, cur.leader_epoch = state_epoch, max(leader_epoch, cur.leader_epoch)
        cur.start_offset, cur.batches = start_offset, batches
        return E.NONE

    async def delete(self, key: SharePartitionKey) -> ErrorCode:
        self.states.pop(key, None)
        return E.NONE

    async def read_summary(self, key: SharePartitionKey,
                           leader_epoch: int) -> ShareStateSummary:
        cur = self.states.get(key)
        if cur is None:
            return ShareStateSummary(E.UNKNOWN_TOPIC_OR_PARTITION)
        return ShareStateSummary(E.NONE, cur.state_epoch, cur.start_offset, cur.leader_epoch)
