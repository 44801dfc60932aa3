"""A user's test module: Kafka clients against the jocko-py pytest plugin's fixtures.

Written as an application's suite would be: no conftest, nothing imported from this
repository's tests; `kafka_broker`, `kafka_bootstrap`, `kafka_broker_factory` and
`kafka_cluster` come from the plugin the package installs (entry point `pytest11`).
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic


def new_topic() -> str:
    return f"orders-{uuid.uuid4().hex[:8]}"


def test_sync_client_round_trip(kafka_bootstrap: str) -> None:
    topic = new_topic()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(100):
        producer.send(topic, key=f"k{i}".encode(), value=f"order {i}".encode())
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    values = []
    for m in consumer:
        values.append(m.value)
        if len(values) == 100:
            break
    consumer.close()
    assert values == [f"order {i}".encode() for i in range(100)]


@pytest.mark.asyncio
async def test_async_client_round_trip(kafka_bootstrap: str) -> None:
    topic = new_topic()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for i in range(50):
            await producer.send_and_wait(topic, f"event {i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap,
                                group_id="async-app", auto_offset_reset="earliest")
    await consumer.start()
    try:
        got: list[bytes] = []
        async with asyncio.timeout(20):
            while len(got) < 50:
                batch = await consumer.getmany(timeout_ms=1000)
                for records in batch.values():
                    got += [r.value for r in records if r.value is not None]
    finally:
        await consumer.stop()
    assert got == [f"event {i}".encode() for i in range(50)]


def test_producers_on_many_threads(kafka_bootstrap: str) -> None:
    topic = new_topic()
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    admin.close()

    def produce(worker: int) -> None:
        p = Producer({"bootstrap.servers": kafka_bootstrap})
        for i in range(100):
            p.produce(topic, value=f"{worker}-{i}".encode())
        assert p.flush(20) == 0

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "threads-app",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen: set[str] = set()
    try:
        for _ in range(60):
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error() is None:
                    seen.add(m.value().decode())
            if len(seen) == 400:
                break
    finally:
        c.close()
    assert seen == {f"{w}-{i}" for w in range(4) for i in range(100)}


@pytest.mark.asyncio
async def test_fresh_broker_started_inside_a_running_loop(kafka_broker_factory) -> None:  # type: ignore[no-untyped-def]
    # started from a coroutine: the broker runs on its own loop, this one keeps running
    broker = kafka_broker_factory({"num.partitions": "4"})
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait("auto-created", b"x")
        partitions = await producer.partitions_for("auto-created")
    finally:
        await producer.stop()
    assert partitions == {0, 1, 2, 3}


def test_three_broker_cluster(kafka_cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])
    assert len(admin.describe_cluster()["brokers"]) == 3
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers, acks="all")
    for i in range(20):
        producer.send(topic, f"replicated {i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_cluster.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == 20:
            break
    consumer.close()
    assert sorted(got) == sorted(f"replicated {i}".encode() for i in range(20))
