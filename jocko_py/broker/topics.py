"""Topic metadata on one node: validated admin changes become metadata records.

This module owns topic names, ids, partition counts and topic configs. Every
change is a list of metadata records (`cluster.metadata`) appended durably to
the local metadata log and then applied to the `MetadataImage`; listeners (the
replica manager) are told which partitions appeared or disappeared. In a
cluster the raft log will take the local log's place; the records stay the same.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jocko_py.cluster.local_log import LocalMetadataLog
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_TOPIC,
    BrokerEndpoint,
    ConfigRecord,
    MetadataImage,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.topics")

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
PRODUCER_ID_BLOCK = 1000


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is longer than {MAX_TOPIC_NAME} characters",
        )
    if not _LEGAL.match(name):
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal: it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass(frozen=True)
class PartitionChange:
    topic: str
    partition: int
    topic_id: uuid.UUID
    added: bool


Listener = Callable[[list[PartitionChange]], None]


class TopicManager:
    """Single-node metadata: the local durable log plus the image built from it."""

    def __init__(self, data_dir: Path, broker_id: int, host: str, port: int):
        self.broker_id = broker_id
        self.image = MetadataImage()
        self.log = LocalMetadataLog(data_dir / "__cluster_metadata.log")
        self.listeners: list[Listener] = []
        for rec in self.log.replay():
            self.image.apply(rec)
        self._next_pid = self.image.next_producer_id
        self._pid_limit = self.image.next_producer_id
        b = self.image.brokers.get(broker_id)
        if b is None or (b.host, b.port) != (host, port) or b.fenced:
            epoch = (b.broker_epoch + 1) if b else 1
            self.commit([
                RegisterBrokerRecord(
                    broker_id=broker_id, incarnation_id=uuid.uuid4(), broker_epoch=epoch,
                    endpoints=(BrokerEndpoint("PLAINTEXT", host, port),), fenced=False,
                ),
                UnfenceBrokerRecord(broker_id, epoch),
            ])

    def commit(self, records: list[MetadataRecord]) -> None:
        self.log.append(records)
        changes: list[PartitionChange] = []
        for rec in records:
            if isinstance(rec, RemoveTopicRecord):
                t = self.image.topic_by_id(rec.topic_id)
                if t is not None:
                    changes += [PartitionChange(t.name, p, t.topic_id, False) for p in t.partitions]
            self.image.apply(rec)
            if isinstance(rec, PartitionRecord):
                t = self.image.topic_by_id(rec.topic_id)
                if t is not None:
                    changes.append(PartitionChange(t.name, rec.partition_id, t.topic_id, True))
        if changes:
            for listener in self.listeners:
                listener(changes)

    def existing_partitions(self) -> list[PartitionChange]:
        return [
            PartitionChange(t.name, p, t.topic_id, True)
            for t in self.image.topics.values()
            for p in t.partitions
        ]

    # -- admin operations ----------------------------------------------------------

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
        validate_configs: Callable[[dict[str, str]], None] | None = None,
    ) -> uuid.UUID:
        validate_topic_name(name)
        if name in self.image.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        if replication_factor <= 0:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            )
        live = [b for b in self.image.brokers.values() if not b.fenced]
        if replication_factor > len(live):
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): "
                f"The target replication factor of {replication_factor} cannot be reached "
                f"because only {len(live)} broker(s) are registered.",
            )
        configs = dict(configs or {})
        if validate_configs is not None:
            validate_configs(configs)
        topic_id = uuid.uuid4()
        if validate_only:
            return topic_id
        replicas = tuple(sorted(b.broker_id for b in live))[:replication_factor]
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        records += [
            ConfigRecord(CONFIG_RESOURCE_TOPIC, name, k, v) for k, v in sorted(configs.items())
        ]
        records += [
            PartitionRecord(
                partition_id=p, topic_id=topic_id, replicas=replicas, isr=replicas,
                leader=replicas[0], leader_epoch=0, partition_epoch=0,
            )
            for p in range(num_partitions)
        ]
        self.commit(records)
        log.info("[broker=%d] created topic %s (%s) with %d partition(s), configs %s",
                 self.broker_id, name, topic_id, num_partitions, configs)
        return topic_id

    def delete_topic(self, name: str) -> uuid.UUID:
        t = self.image.topics.get(name)
        if t is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        self.commit([RemoveTopicRecord(t.topic_id)])
        log.info("[broker=%d] deleted topic %s (%s)", self.broker_id, name, t.topic_id)
        return t.topic_id

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        t = self.image.topics.get(name)
        if t is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        current = len(t.partitions)
        if count < current:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the "
                f"requested {count}.",
            )
        if count == current:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
            )
        if validate_only:
            return
        any_p = next(iter(t.partitions.values()))
        self.commit([
            PartitionRecord(
                partition_id=p, topic_id=t.topic_id, replicas=any_p.replicas,
                isr=any_p.replicas, leader=any_p.replicas[0],
            )
            for p in range(current, count)
        ])

    def set_topic_configs(self, name: str, changes: dict[str, str | None]) -> None:
        self.commit([
            ConfigRecord(CONFIG_RESOURCE_TOPIC, name, k, v) for k, v in sorted(changes.items())
        ])

    def allocate_producer_id(self) -> int:
        if self._next_pid >= self._pid_limit:
            start = self.image.next_producer_id
            self.commit([ProducerIdsRecord(self.broker_id, 0, start + PRODUCER_ID_BLOCK)])
            self._next_pid, self._pid_limit = start, start + PRODUCER_ID_BLOCK
        pid = self._next_pid
        self._next_pid += 1
        return pid

    def close(self) -> None:
        self.log.close()
