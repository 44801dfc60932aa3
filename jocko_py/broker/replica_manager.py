"""Partitions this broker hosts: their logs, high watermarks and producer state.

The replica manager owns the `Partition` objects. A produce goes through
`Partition.append`: validate every batch header (length, magic, CRC-32C, Kafka's
produce rules) without decoding records, check idempotent-producer sequences,
then `Log.append` patches offsets and writes. The high watermark is the minimum
log end offset of the in-sync replicas; on one node ISR = {self}, so it follows
the log end offset at once, and `acks=all` waits on the produce purgatory until
the high watermark passes the batch (the hook followers will use).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from jocko_py.broker.producer_state import ProducerStateManager
from jocko_py.broker.purgatory import Purgatory
from jocko_py.broker.topics import PartitionChange, TopicManager
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.errors import KafkaStorageError, OffsetOutOfRangeError
from jocko_py.commitlog.log import Log
from jocko_py.commitlog.manager import LogManager
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.replica_manager")

PRODUCER_SNAPSHOT = "producer-state.json"


@dataclass(slots=True)
class AppendResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: list[tuple[int, str]] | None = None
    last_offset: int = -1


@dataclass(slots=True)
class ReadResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview | None = None


class Partition:
    def __init__(
        self, topic: str, partition: int, topic_id: uuid.UUID, log_: Log, broker_id: int
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log_
        self.broker_id = broker_id
        self.leader_epoch = 0
        self.isr = {broker_id}
        self.high_watermark = log_.log_end_offset
        self.producers = ProducerStateManager()
        self._load_producer_state()

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _load_producer_state(self) -> None:
        start = self.producers.load(self.log.dir / PRODUCER_SNAPSHOT)
        start = max(start, self.log.log_start_offset)
        if start > self.log.log_end_offset:
            self.producers.producers = {}
            start = self.log.log_start_offset
        for seg in self.log.segments:
            if seg.next_offset <= start:
                continue
            for _, h in seg.iter_headers():
                if h.next_offset > start:
                    self.producers.observe(h, h.base_offset)

    def save_producer_state(self) -> None:
        try:
            self.producers.save(self.log.dir / PRODUCER_SNAPSHOT, self.log.log_end_offset)
        except OSError as e:
            log.warning("[partition=%s] could not save producer state: %s", self.name, e)

    def append(self, data: memoryview | bytes, max_message_bytes: int) -> AppendResult:
        """Validate and append a producer's records blob (one partition's data)."""
        try:
            batches = rb.split_batches(data, validate_crc=True)
            if not batches:
                return AppendResult(ErrorCode.INVALID_RECORD, message="empty record set")
            if len(batches) != 1:
                return AppendResult(
                    ErrorCode.INVALID_RECORD,
                    message="Produce requests v3+ must contain exactly one record batch "
                    "per partition",
                )
            compacted = self.log.config.compact
            for h, view in batches:
                rb.check_produce_batch(h)
                rb.validate_record_structure(view, h, require_keys=compacted)
        except rb.UnsupportedMagicError as e:
            # Kafka: legacy magic 0/1 is an invalid record for v3+ produce; any
            # other magic means the bytes are not a record batch at all
            code = ErrorCode.INVALID_RECORD if e.magic in (0, 1) else ErrorCode.CORRUPT_MESSAGE
            return AppendResult(code, message=str(e))
        except rb.InvalidRecordError as e:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(e))
        except rb.RecordError as e:
            # CORRUPT_MESSAGE, or MESSAGE_TOO_LARGE for a batch that decompresses
            # past the limit
            return AppendResult(ErrorCode(e.error_code), message=str(e))
        h, view = batches[0]
        if h.size > max_message_bytes:
            return AppendResult(
                ErrorCode.MESSAGE_TOO_LARGE,
                message=f"batch of {h.size} bytes exceeds max.message.bytes={max_message_bytes}",
            )
        if h.is_transactional:
            return AppendResult(
                ErrorCode.INVALID_TXN_STATE, message="transactions are not supported"
            )
        check = self.producers.check(h)
        if check.error != ErrorCode.NONE:
            return AppendResult(check.error, log_start_offset=self.log.log_start_offset)
        if check.duplicate is not None:
            d = check.duplicate
            return AppendResult(
                base_offset=d.first_offset, last_offset=d.last_offset,
                log_start_offset=self.log.log_start_offset,
            )
        append_time = None
        if self.log.config.log_append_time:
            append_time = int(time.time() * 1000)
        try:
            info = self.log.append(view, self.leader_epoch, log_append_time=append_time)
        except KafkaStorageError as e:
            log.error("[partition=%s] append failed: %s", self.name, e)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=str(e))
        except rb.RecordError as e:  # e.g. a batch larger than segment.bytes
            return AppendResult(ErrorCode(e.error_code), message=str(e))
        self.producers.observe(h, info.first_offset)
        self.maybe_advance_high_watermark()
        return AppendResult(
            base_offset=info.first_offset,
            last_offset=info.last_offset,
            log_append_time=append_time if append_time is not None else -1,
            log_start_offset=self.log.log_start_offset,
        )

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """A client's view of the leader epoch (-1: not given) against ours (KIP-320)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def maybe_advance_high_watermark(self) -> bool:
        # ISR = {self} on one node: the HW is our own log end offset.
        leo = self.log.log_end_offset
        if leo != self.high_watermark:
            self.high_watermark = leo
            return True
        return False

    def read(self, offset: int, max_bytes: int, *, committed_only: bool,
             min_one: bool) -> ReadResult:
        hw = self.high_watermark
        try:
            info = self.log.read(offset, max_bytes, max_offset=hw, min_one_batch=min_one)
        except OffsetOutOfRangeError:
            return ReadResult(
                ErrorCode.OFFSET_OUT_OF_RANGE, hw, hw, self.log.log_start_offset, None
            )
        except KafkaStorageError:
            return ReadResult(ErrorCode.KAFKA_STORAGE_ERROR, hw, hw, self.log.log_start_offset)
        return ReadResult(ErrorCode.NONE, hw, hw, self.log.log_start_offset, info.records)


class ReplicaManager:
    def __init__(self, data_dir: Path, base_config: LogConfig, topics: TopicManager,
                 broker_id: int) -> None:
        self.base_config = base_config
        self.topics = topics
        self.broker_id = broker_id
        self.logs = LogManager(data_dir, base_config)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_waiters = Purgatory()
        self.produce_waiters = Purgatory()
        self._group_flush: asyncio.Future[None] | None = None
        topics.listeners.append(self.on_partition_changes)

    def start(self) -> None:
        configs = {
            (t.name, p): self.log_config(t.name)
            for t in self.topics.image.topics.values() for p in t.partitions
        }
        self.logs.load_all(configs)
        self.on_partition_changes(self.topics.existing_partitions())
        # log directories of topics no longer in the metadata are leftovers of a
        # deletion interrupted by a crash
        known = set(self.partitions)
        for key in list(self.logs.logs):
            if key not in known:
                log.info("removing log %s-%d of a deleted topic", *key)
                self.logs.delete(*key)

    def log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_properties(self.topics.image.topic_configs(topic), self.base_config)

    def on_partition_changes(self, changes: list[PartitionChange]) -> None:
        for ch in changes:
            key = (ch.topic, ch.partition)
            if ch.added:
                if key in self.partitions:
                    continue
                lg = self.logs.get_or_create(ch.topic, ch.partition, self.log_config(ch.topic))
                self.partitions[key] = Partition(
                    ch.topic, ch.partition, ch.topic_id, lg, self.broker_id
                )
            else:
                p = self.partitions.pop(key, None)
                if p is not None:
                    self.logs.delete(ch.topic, ch.partition)
                    self.fetch_waiters.notify(key)

    def update_topic_config(self, topic: str) -> None:
        cfg = self.log_config(topic)
        for (t, _), p in self.partitions.items():
            if t == topic:
                p.log.update_config(cfg)

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def notify_append(self, p: Partition) -> None:
        self.fetch_waiters.notify((p.topic, p.partition))

    def flush_dirty(self) -> None:
        self.logs.flush_dirty()

    def flush_barrier(self, p: Partition) -> asyncio.Future[None] | None:
        """A future for the next group flush if `p` reached `flush.messages`.

        Every produce that lands in the same loop turn shares one fsync pass
        (group commit): the flush runs once the turn's handlers have appended.
        """
        if not p.log.needs_flush:
            return None
        if self._group_flush is None:
            loop = asyncio.get_running_loop()
            self._group_flush = loop.create_future()
            loop.call_soon(self._run_group_flush)
        return self._group_flush

    def _run_group_flush(self) -> None:
        fut, self._group_flush = self._group_flush, None
        try:
            self.logs.flush_dirty()
        except Exception as e:
            log.error("group flush failed: %s", e)
            if fut is not None and not fut.done():
                fut.set_exception(e)
            return
        if fut is not None and not fut.done():
            fut.set_result(None)

    def close(self) -> None:
        for p in self.partitions.values():
            p.save_producer_state()
        self.logs.close_all()
