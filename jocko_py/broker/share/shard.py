"""The share coordinator's shard: the durable state of the share partitions whose
``"<group>:<topic id>:<partition>"`` falls on one ``__share_group_state`` partition
(Kafka's ``ShareCoordinatorShard``).

This module owns every decision of the state RPCs (83-87) as operations on the
coordinator runtime (``broker/coordinator/runtime.py``): each takes ``now`` and returns
a ``CoordinatorResult`` whose records are replayed into the shard once appended
(``replay=True``), so a refused write changes nothing and a reload rebuilds the same
state. Per share partition it holds the state epoch, the leader epoch, the start
offset, the delivery-complete count and the state batches.

Writing, as Kafka does: the first write of a key (and InitializeShareGroupState) is a
ShareSnapshot; later writes are ShareUpdates carrying only the new batches, merged into
the state on replay (``batches.combine``), until
``share.coordinator.snapshot.update.records.per.snapshot`` updates have followed the
snapshot: the next write is a new snapshot of the whole merged state (snapshot epoch +1).
DeleteShareGroupState writes a tombstone of the snapshot key.

Fencing (Kafka's order): a topic id of zero, a negative partition, epoch or (write)
state epoch is INVALID_REQUEST; a read or write of a share partition never initialized
is INVALID_REQUEST ("... on uninitialized share partition not allowed"); an older leader
epoch than the stored one is FENCED_LEADER_EPOCH, then an older state epoch
FENCED_STATE_EPOCH (initialize: an older state epoch); a topic or partition unknown to
the metadata is UNKNOWN_TOPIC_OR_PARTITION. A read at a newer leader epoch writes it
(a record), so a stale leader is fenced even after a reload.

Log size (Kafka's design: ``__share_group_state`` has cleanup.policy=delete, not
compact, because an update's key is the same for every update of a key and
compaction would keep only the last one): the shard knows the offset of each key's
latest snapshot; every record below the smallest of them is redundant. A timer every
``share.coordinator.state.topic.prune.interval.ms`` hands that offset out (an effect,
``Prune``) for the log's start offset to move up; a timer every
``share.coordinator.cold.partition.snapshot.interval.ms`` rewrites as a snapshot each
key whose latest snapshot is older than that and not the partition's last record, so a
share partition nobody writes to does not hold the log back forever. The prune timer
also drops (tombstones) the state of share partitions whose topic was deleted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from jocko_py.broker.coordinator.runtime import CoordinatorResult, LogRecord, Record, Timer
from jocko_py.broker.share import records
from jocko_py.broker.share.batches import combine
from jocko_py.broker.share.persister import SharePartitionKey, StateBatch
from jocko_py.broker.share.records import ShareGroupOffset
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.share.shard")

E = ErrorCode
ZERO_UUID = uuid.UUID(int=0)

WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
PRUNE_TIMER = "prune"
COLD_TIMER = "cold-snapshot"


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104857600
    snapshot_updates: int = 500  # share.coordinator.snapshot.update.records.per.snapshot
    write_timeout_ms: int = 5000
    prune_interval_ms: int = 300000
    cold_snapshot_interval_ms: int = 300000


@dataclass(frozen=True, slots=True)
class Answer:
    """A state RPC's answer for one share partition."""

    error: ErrorCode = E.NONE
    message: str | None = None
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class Prune:
    """Records of the shard's partition below ``offset`` are not needed any more."""

    offset: int


# the number of partitions of a topic id in the metadata, or None when unknown
TopicPartitions = Callable[[uuid.UUID], int | None]


class ShareCoordinatorShard:
    def __init__(self, partition: int, config: ShareCoordinatorConfig,
                 topic_partitions: TopicPartitions) -> None:
        self.partition = partition
        self.config = config
        self.topic_partitions = topic_partitions
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}
        self.state_epochs: dict[SharePartitionKey, int] = {}
        self.update_counts: dict[SharePartitionKey, int] = {}
        self.snapshot_offsets: dict[SharePartitionKey, int] = {}
        self.last_offset = -1  # the offset of the last record replayed

    # -- replay ----------------------------------------------------------------------

    def replay(self, record: LogRecord) -> None:
        if record.offset >= 0:
            self.last_offset = max(self.last_offset, record.offset)
        decoded = records.decode_key(record.key)
        if decoded is None:
            return
        rtype, key = decoded
        if record.value is None:
            if rtype == records.SNAPSHOT:
                self.states.pop(key, None)
                self.leader_epochs.pop(key, None)
                self.state_epochs.pop(key, None)
                self.update_counts.pop(key, None)
                self.snapshot_offsets.pop(key, None)
            return
        value = records.decode_value(rtype, record.value)
        self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
        if rtype == records.SNAPSHOT:
            self._raise_epoch(self.state_epochs, key, value.state_epoch)
            self.states[key] = value
            if self.update_counts.get(key, 0) >= self.config.snapshot_updates:
                self.update_counts[key] = 0
            self.snapshot_offsets[key] = record.offset
            return
        cur = self.states.get(key)
        if cur is None:
            self.states[key] = replace(value, state_epoch=self.state_epochs.get(key, 0))
        else:
            start = cur.start_offset if value.start_offset == -1 else value.start_offset
            self.states[key] = replace(
                cur, start_offset=start,
                leader_epoch=cur.leader_epoch if value.leader_epoch == -1
                else value.leader_epoch,
                delivery_complete_count=value.delivery_complete_count,
                batches=combine(cur.batches, value.batches, start))
        self.update_counts[key] = 0 if key not in self.update_counts \
            else self.update_counts[key] + 1

    @staticmethod
    def _raise_epoch(m: dict[SharePartitionKey, int], key: SharePartitionKey, epoch: int
                     ) -> None:
        if epoch > m.get(key, -1 << 31):
            m[key] = epoch

    def on_loaded(self, now: int) -> CoordinatorResult[None]:
        return CoordinatorResult(None, timers=[
            Timer(PRUNE_TIMER, now + self.config.prune_interval_ms, _prune_op),
            Timer(COLD_TIMER, now + self.config.cold_snapshot_interval_ms, _cold_op)])

    def on_unloaded(self) -> list[tuple[int, object]]:
        return []

    # -- checks ----------------------------------------------------------------------

    def _known(self, key: SharePartitionKey) -> bool:
        n = self.topic_partitions(key.topic_id)
        return n is not None and key.partition < n

    @staticmethod
    def _basic(key: SharePartitionKey) -> Answer | None:
        if key.topic_id == ZERO_UUID:
            return Answer(E.INVALID_REQUEST, "The topic id cannot be null.")
        if key.partition < 0:
            return Answer(E.INVALID_REQUEST, "The partition id cannot be a negative number.")
        return None

    def _unknown(self, key: SharePartitionKey) -> Answer:
        return Answer(E.UNKNOWN_TOPIC_OR_PARTITION,
                      f"Topic or partition not found in metadata image: {key.coordinator_key()}")

    # -- operations ------------------------------------------------------------------

    def initialize(self, now: int, key: SharePartitionKey, state_epoch: int,
                   start_offset: int) -> CoordinatorResult[Answer]:
        bad = self._basic(key)
        if bad is None and state_epoch < 0:
            bad = Answer(E.INVALID_REQUEST, "The state epoch cannot be a negative number.")
        if bad is None and self.state_epochs.get(key, -1) > state_epoch:
            bad = Answer(E.FENCED_STATE_EPOCH, "Initialize request state epoch is smaller "
                         f"than last recorded current: {self.state_epochs[key]}, "
                         f"requested: {state_epoch}.")
        if bad is None and not self._known(key):
            bad = self._unknown(key)
        if bad is not None:
            return CoordinatorResult(bad)
        cur = self.states.get(key)
        # nothing delivered yet at a known start offset (Kafka's ShareGroupOffset.fromRequest)
        snap = ShareGroupOffset(cur.snapshot_epoch + 1 if cur is not None else 0, state_epoch,
                                -1, start_offset, (), 0 if start_offset != -1 else -1, now,
                                now)
        return CoordinatorResult(Answer(), [self._snapshot(key, snap)], replay=True)

    def read(self, now: int, key: SharePartitionKey, leader_epoch: int
             ) -> CoordinatorResult[Answer]:
        bad = self._basic(key)
        if bad is None and leader_epoch < 0:
            bad = Answer(E.INVALID_REQUEST, "The leader epoch cannot be a negative number.")
        if bad is None and key not in self.states:
            bad = Answer(E.INVALID_REQUEST, READ_UNINITIALIZED)
        if bad is None and self.leader_epochs.get(key, -1) > leader_epoch:
            bad = Answer(E.FENCED_LEADER_EPOCH, "Read request leader epoch is smaller than "
                         f"last recorded current: {self.leader_epochs[key]}, "
                         f"requested: {leader_epoch}.")
        if bad is None and not self._known(key):
            bad = self._unknown(key)
        if bad is not None:
            return CoordinatorResult(bad)
        cur = self.states[key]
        answer = Answer(E.NONE, None, cur.state_epoch, leader_epoch, cur.start_offset,
                        cur.batches, cur.delivery_complete_count)
        if self.leader_epochs.get(key) == leader_epoch:
            return CoordinatorResult(answer)
        # a new leader of the share partition: its epoch is made durable
        rec = self._state_record(now, key, cur.state_epoch, leader_epoch, cur.start_offset,
                                 (), cur.delivery_complete_count)
        return CoordinatorResult(answer, [rec], replay=True)

    def write(self, now: int, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
              start_offset: int, batches: tuple[StateBatch, ...],
              delivery_complete_count: int = -1) -> CoordinatorResult[Answer]:
        bad = self._basic(key)
        if bad is None and leader_epoch < 0:
            bad = Answer(E.INVALID_REQUEST, "The leader epoch cannot be a negative number.")
        if bad is None and state_epoch < 0:
            bad = Answer(E.INVALID_REQUEST, "The state epoch cannot be a negative number.")
        if bad is None and key not in self.states:
            bad = Answer(E.INVALID_REQUEST, WRITE_UNINITIALIZED)
        if bad is None and self.leader_epochs.get(key, -1) > leader_epoch:
            bad = Answer(E.FENCED_LEADER_EPOCH, "Write request leader epoch is smaller than "
                         f"last recorded current: {self.leader_epochs[key]}, "
                         f"requested: {leader_epoch}.")
        if bad is None and self.state_epochs.get(key, -1) > state_epoch:
            bad = Answer(E.FENCED_STATE_EPOCH, "Write request state epoch is smaller than "
                         f"last recorded current: {self.state_epochs[key]}, "
                         f"requested: {state_epoch}.")
        if bad is None and not self._known(key):
            bad = self._unknown(key)
        if bad is not None:
            return CoordinatorResult(bad)
        rec = self._state_record(now, key, state_epoch, leader_epoch, start_offset, batches,
                                 delivery_complete_count)
        return CoordinatorResult(Answer(), [rec], replay=True)

    def delete(self, now: int, key: SharePartitionKey) -> CoordinatorResult[Answer]:
        bad = self._basic(key)
        if bad is None and not self._known(key) and key not in self.states:
            bad = self._unknown(key)
        if bad is not None:
            return CoordinatorResult(bad)
        if key not in self.states:
            return CoordinatorResult(Answer())
        return CoordinatorResult(Answer(), [(records.key(records.SNAPSHOT, key), None)],
                                 replay=True)

    def summary(self, key: SharePartitionKey, leader_epoch: int) -> Answer:
        """ReadShareGroupStateSummary (no write): a key never initialized answers with
        start offset -1, as Kafka does."""
        bad = self._basic(key)
        if bad is None and not self._known(key):
            bad = self._unknown(key)
        if bad is not None:
            return bad
        cur = self.states.get(key)
        if cur is None:
            return Answer()
        return Answer(E.NONE, None, cur.state_epoch, cur.leader_epoch, cur.start_offset, (),
                      cur.delivery_complete_count)

    def state(self, key: SharePartitionKey) -> ShareGroupOffset | None:
        return self.states.get(key)

    def keys(self) -> list[SharePartitionKey]:
        return list(self.states)

    # -- records ---------------------------------------------------------------------

    def _snapshot(self, key: SharePartitionKey, s: ShareGroupOffset) -> Record:
        return records.key(records.SNAPSHOT, key), records.snapshot_value(s)

    def _state_record(self, now: int, key: SharePartitionKey, state_epoch: int,
                      leader_epoch: int, start_offset: int, batches: tuple[StateBatch, ...],
                      delivery_complete_count: int) -> Record:
        """A ShareSnapshot (the first of a key, or after enough updates) or a ShareUpdate."""
        cur = self.states.get(key)
        if cur is None:
            return self._snapshot(key, ShareGroupOffset(
                0, state_epoch, leader_epoch, start_offset,
                combine((), batches, start_offset), delivery_complete_count, now, now))
        if self.update_counts.get(key, 0) >= self.config.snapshot_updates:
            start = cur.start_offset if start_offset == -1 else start_offset
            return self._snapshot(key, ShareGroupOffset(
                cur.snapshot_epoch + 1, cur.state_epoch if state_epoch == -1 else state_epoch,
                cur.leader_epoch if leader_epoch == -1 else leader_epoch, start,
                combine(cur.batches, batches, start), delivery_complete_count,
                cur.create_timestamp, now))
        return records.key(records.UPDATE, key), records.update_value(ShareGroupOffset(
            cur.snapshot_epoch, -1, leader_epoch, start_offset,
            combine((), batches, start_offset), delivery_complete_count))

    # -- the log's size --------------------------------------------------------------

    def redundant_offset(self, dropped: frozenset[uuid.UUID] = frozenset()) -> int | None:
        """Every record below this offset is not needed to rebuild the state (of the
        share partitions not of the ``dropped`` topics)."""
        kept = [o for k, o in self.snapshot_offsets.items() if k.topic_id not in dropped]
        return min(kept) if kept else None

    def prune(self, now: int) -> CoordinatorResult[None]:
        """The prune timer: the state of share partitions whose topic was deleted goes
        (Kafka's maybeCleanupShareState), then the redundant offset is handed out."""
        gone = {k.topic_id for k in self.states if self.topic_partitions(k.topic_id) is None}
        recs: list[Record] = [(records.key(records.SNAPSHOT, k), None)
                              for k in self.states if k.topic_id in gone]
        if recs:
            log.info("[partition=%d] dropping the share state of %d partition(s) of "
                     "deleted topics", self.partition, len(recs))
        off = self.redundant_offset(frozenset(gone))
        timers = [Timer(PRUNE_TIMER, now + self.config.prune_interval_ms, _prune_op)]
        effects: list[object] = [Prune(off)] if off is not None and off > 0 else []
        return CoordinatorResult(None, recs, replay=True, timers=timers, effects=effects)

    def snapshot_cold(self, now: int) -> CoordinatorResult[None]:
        recs: list[Record] = []
        for key, cur in self.states.items():
            if now - cur.write_timestamp < self.config.cold_snapshot_interval_ms:
                continue
            if self.snapshot_offsets.get(key, -1) >= self.last_offset:
                continue  # its snapshot is the last record: nothing to gain
            recs.append(self._snapshot(key, replace(
                cur, snapshot_epoch=cur.snapshot_epoch + 1, write_timestamp=now)))
        return CoordinatorResult(None, recs, replay=True, timers=[
            Timer(COLD_TIMER, now + self.config.cold_snapshot_interval_ms, _cold_op)])


def _prune_op(s: ShareCoordinatorShard, now: int) -> CoordinatorResult[None]:
    return s.prune(now)


def _cold_op(s: ShareCoordinatorShard, now: int) -> CoordinatorResult[None]:
    return s.snapshot_cold(now)
