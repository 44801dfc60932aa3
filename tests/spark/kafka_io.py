"""Non-Spark Kafka clients for the Spark tests: the "other client" that produces the
records Spark reads, and the consumer that checks what Spark wrote.

Producing goes through confluent-kafka (librdkafka) with an explicit partition, key,
headers and timestamp per record, and records the offset the broker acknowledged.
Consuming goes through kafka-python with `assign` (no consumer group: the broker
need not implement groups for these tests).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Record:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp_ms: int
    offset: int = -1  # as acknowledged by the broker; -1 before producing

    def with_offset(self, offset: int) -> Record:
        return Record(self.partition, self.key, self.value, self.headers, self.timestamp_ms, offset)


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Record],
    timeout: float = 30.0,
    batch_per_record: bool = False,
    compression: str = "none",
) -> list[Record]:
    """Produce `records` in order (acks=all, idempotent, one in flight per partition
    so that the per-partition order is the given order) and return them with the
    offsets the broker assigned. `batch_per_record` waits for each record's
    acknowledgement before sending the next, so each is a batch of its own."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": int(timeout * 1000),
            "broker.address.family": "v4",
            "compression.type": compression,
        }
    )
    acked: dict[int, Record] = {}
    errors: list[str] = []

    def on_delivery(err: object, msg: object, index: int) -> None:
        if err is not None:
            errors.append(f"record {index}: {err}")
        else:
            acked[index] = records[index].with_offset(msg.offset())  # type: ignore[attr-defined]

    for i, r in enumerate(records):
        producer.produce(
            topic,
            key=r.key,
            value=r.value,
            partition=r.partition,
            timestamp=r.timestamp_ms,
            headers=list(r.headers) or None,
            on_delivery=lambda err, msg, i=i: on_delivery(err, msg, i),
        )
        producer.poll(0)
        if batch_per_record:
            producer.flush(timeout)
    remaining = producer.flush(timeout)
    if remaining or errors or len(acked) != len(records):
        raise KafkaException(
            f"produce to {topic}: {remaining} undelivered, {len(acked)}/{len(records)} acked,"
            f" errors: {errors[:5]}"
        )
    return [acked[i] for i in range(len(records))]


def consume_all(
    bootstrap: str, topic: str, partitions: Sequence[int], timeout: float = 30.0
) -> dict[int, list[Record]]:
    """Every record of the given partitions from the log start to the current end,
    in offset order per partition."""
    from kafka import KafkaConsumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in partitions]
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=20_000,
    )
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: dict[int, list[Record]] = {p: [] for p in partitions}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                got = {tp.partition: consumer.position(tp) for tp in tps}
                raise TimeoutError(f"consume {topic}: at {got}, end {end}")
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                for m in msgs:
                    if m.offset >= end[tp]:
                        continue
                    out[tp.partition].append(
                        Record(
                            tp.partition,
                            m.key,
                            m.value,
                            tuple((k, v) for k, v in m.headers),
                            m.timestamp,
                            m.offset,
                        )
                    )
        return out
    finally:
        consumer.close()


def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    """DeleteRecords: move each partition's log start offset up to `before[p]`."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.delete_records(
            {TopicPartition(topic, p): off for p, off in before.items()}, timeout_ms=30_000
        )
    finally:
        admin.close()


def now_ms() -> int:
    return int(time.time() * 1000)
