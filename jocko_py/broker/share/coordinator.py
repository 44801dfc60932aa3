"""The share coordinator service: the state RPCs routed to the shard of their key's
``__share_group_state`` partition (Kafka's ``ShareCoordinatorService``).

This module owns the topic (created on the first FindCoordinator of key type 2, as
Kafka does: ``share.coordinator.state.topic.num.partitions`` partitions,
``share.coordinator.state.topic.replication.factor`` capped to the live brokers,
``min.insync.replicas`` = ``share.coordinator.state.topic.min.isr`` capped to that,
cleanup.policy=delete with retention.ms=-1, the shard pruning it), the mapping of a key
``"<group>:<topic id>:<partition>"`` to its partition (Java's String.hashCode, as for
groups), and the entry points of the handlers. Every operation runs on the coordinator
runtime (``broker/coordinator/``), one ``ShareCoordinatorShard`` (``shard.py``, where
the decisions are) per partition led here, loaded by replaying the partition when this
broker becomes its leader; the answer leaves once the records are committed (acks=all,
``share.coordinator.write.timeout.ms``). Not led here: NOT_COORDINATOR; loading:
COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from jocko_py.broker.coordinator.runtime import CoordinatorResult, CoordinatorRuntime, LogRecord
from jocko_py.broker.coordinator.shell import CoordinatorShell, ReplicaLog, SystemClock
from jocko_py.broker.share.persister import SharePartitionKey, StateBatch
from jocko_py.broker.share.shard import Answer, Prune, ShareCoordinatorConfig, ShareCoordinatorShard
from jocko_py.commitlog.errors import KafkaStorageError, OffsetOutOfRangeError
from jocko_py.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from jocko_py.broker.config import BrokerConfig
    from jocko_py.broker.controller_channel import ControllerChannel
    from jocko_py.broker.replica_manager import ReplicaManager
    from jocko_py.cluster.metadata import MetadataImage

log = logging.getLogger("jocko_py.broker.share.coordinator")

E = ErrorCode
STATE_TOPIC = "__share_group_state"


class ShareCoordinatorHost(Protocol):
    """What the share coordinator uses of the broker (``interfaces.CoordinatorHost``'s
    shape; ``interfaces`` names the share persister, so it is not imported here): the
    config, the metadata image, the controller channel (to create the topic) and the
    replicas of the topic's partitions."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def controller_channel(self) -> ControllerChannel: ...

    @property
    def replicas(self) -> ReplicaManager: ...


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` over Java's String.hashCode
    (UTF-16 code units). ``Utils.abs`` is ``Math.abs`` with Integer.MIN_VALUE -> 0 (not
    the ``& 0x7fffffff`` of ``Utils.toPositive``)."""
    h = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % num_partitions


def config_from(broker: ShareCoordinatorHost) -> ShareCoordinatorConfig:
    c = broker.config
    return ShareCoordinatorConfig(
        num_partitions=max(1, c.int("share.coordinator.state.topic.num.partitions")),
        replication_factor=max(1, c.int("share.coordinator.state.topic.replication.factor")),
        min_isr=max(1, c.int("share.coordinator.state.topic.min.isr")),
        segment_bytes=max(1, c.int("share.coordinator.state.topic.segment.bytes")),
        snapshot_updates=max(0, c.int("share.coordinator.snapshot.update.records.per.snapshot")),
        write_timeout_ms=max(1, c.int("share.coordinator.write.timeout.ms")),
        prune_interval_ms=max(1, c.int("share.coordinator.state.topic.prune.interval.ms")),
        cold_snapshot_interval_ms=max(
            1, c.int("share.coordinator.cold.partition.snapshot.interval.ms")))


class ShareCoordinator:
    def __init__(self, broker: ShareCoordinatorHost, config: ShareCoordinatorConfig | None = None
                 ) -> None:
        self.broker = broker
        self.config = config or config_from(broker)
        self.num_partitions = self.config.num_partitions
        self.pinned = False
        self.log = ReplicaLog(broker.replicas, STATE_TOPIC)
        self.runtime: CoordinatorRuntime[ShareCoordinatorShard] = CoordinatorRuntime(
            "share", self._new_shard, self.log)
        self.runtime.on_effect = self._on_effect
        self.shell = CoordinatorShell(self.runtime, self.log, self._read, SystemClock(),
                                      lambda: self.config.write_timeout_ms)

    def _new_shard(self, partition: int) -> ShareCoordinatorShard:
        return ShareCoordinatorShard(partition, self.config, self._topic_partitions)

    def _topic_partitions(self, topic_id: uuid.UUID) -> int | None:
        t = self.broker.image.topic_by_id(topic_id)
        return None if t is None else len(t.partitions)

    def _read(self, wanted: list[int]) -> dict[int, list[LogRecord]]:
        return {idx: [dataclasses.replace(rec, offset=off)
                      for _ts, off, rec in self.log.read(idx)] for idx in wanted}

    def on_partition_role(self, p: Any, leader: bool) -> None:
        self.shell.on_partition_role(p, leader)

    def _on_effect(self, partition: int, effect: object) -> None:
        if not isinstance(effect, Prune):
            return
        p = self.log.partition(partition)
        if p is None or not p.is_leader:
            return
        offset = min(effect.offset, p.high_watermark)
        if offset <= p.log.log_start_offset:
            return
        try:
            start = p.log.delete_records_before(offset)
        except (OffsetOutOfRangeError, KafkaStorageError) as e:
            log.warning("[partition=%s] pruning below %d failed: %s", p.name, offset, e)
            return
        log.info("[partition=%s] pruned share state below offset %d", p.name, start)

    # -- the topic -------------------------------------------------------------------

    def topic_exists(self) -> bool:
        t = self.broker.image.topics.get(STATE_TOPIC)
        if t is not None and not self.pinned:
            self.num_partitions = len(t.partitions)  # as Kafka: read once
            self.pinned = True
        return t is not None

    async def ensure_topic(self) -> None:
        if self.topic_exists():
            return
        t0 = time.monotonic()
        live = sum(not b.fenced for b in self.broker.image.brokers.values())
        rf = max(1, min(self.config.replication_factor, live))
        try:
            await self.broker.controller_channel.create_topic(
                STATE_TOPIC, self.config.num_partitions, rf,
                {"cleanup.policy": "delete", "retention.ms": "-1",
                 "compression.type": "producer",
                 "segment.bytes": str(self.config.segment_bytes),
                 "min.insync.replicas": str(min(self.config.min_isr, rf))})
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        log.info("created %s with %d partitions, replication factor %d in %.2fs",
                 STATE_TOPIC, self.config.num_partitions, rf, time.monotonic() - t0)

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def leader_of(self, key: str) -> int:
        img = self.broker.image.partition(STATE_TOPIC, self.partition_for(key))
        return img.leader if img is not None else -1

    # -- the state RPCs --------------------------------------------------------------

    async def _run(self, key: SharePartitionKey,
                   op: Callable[[ShareCoordinatorShard, int], CoordinatorResult[Answer]]
                   ) -> Answer:
        if not self.topic_exists():
            return Answer(E.NOT_COORDINATOR)
        idx = self.partition_for(key.coordinator_key())
        out = await self.shell.write(idx, op)
        resp, err = out
        if err != E.NONE or resp is None:
            return Answer(err if err != E.NONE else E.UNKNOWN_SERVER_ERROR)
        return resp

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int
                         ) -> Answer:
        return await self._run(key, lambda s, now: s.initialize(now, key, state_epoch,
                                                                start_offset))

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> Answer:
        return await self._run(key, lambda s, now: s.read(now, key, leader_epoch))

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...],
                    delivery_complete_count: int = -1) -> Answer:
        return await self._run(key, lambda s, now: s.write(
            now, key, state_epoch, leader_epoch, start_offset, batches,
            delivery_complete_count))

    async def delete(self, key: SharePartitionKey) -> Answer:
        return await self._run(key, lambda s, now: s.delete(now, key))

    async def summary(self, key: SharePartitionKey, leader_epoch: int) -> Answer:
        return await self._run(key, lambda s, now: CoordinatorResult(
            s.summary(key, leader_epoch)))
