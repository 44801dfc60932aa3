"""Kafka transactions with confluent-kafka (librdkafka) against a real broker process.

Commit and abort with a read_committed reader (aborted data never visible, committed
data exactly once, in order per partition), send_offsets_to_transaction in a
consume-transform-produce step (the group's offsets move only with a commit), zombie
fencing by a second producer with the same transactional.id, and a transaction that
outlives transaction.timeout.ms aborted by the coordinator.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess

TIMEOUT = 20.0


def _topic(b: BrokerProcess, partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)
    return name


def _producer(b: BrokerProcess, tid: str, **extra: Any) -> Producer:
    conf: dict[str, Any] = {"bootstrap.servers": b.bootstrap, "transactional.id": tid,
                            "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(TIMEOUT)
    return p


def _read_all(b: BrokerProcess, topic: str, partitions: int, isolation: str,
              expect: int, wait: float = 10.0) -> list[tuple[int, bytes]]:
    """(partition, value) of every record visible at ``isolation``: polls until
    ``expect`` records came and then a little longer, to catch extra ones."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "fetch.wait.max.ms": 50})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + wait
    settle: float | None = None
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and not m.error():
                got.append((m.partition(), m.value()))
            if len(got) >= expect:
                settle = settle or time.monotonic() + 0.5
                if time.monotonic() > settle:
                    break
    finally:
        c.close()
    return got


def test_commit_and_abort_read_committed(txn_broker: BrokerProcess) -> None:
    topic = _topic(txn_broker)
    p = _producer(txn_broker, f"tid-{uuid.uuid4().hex[:6]}")
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, key=b"%d" % i, value=b"c1-%d" % i, partition=i % 2)
    p.commit_transaction(TIMEOUT)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, key=b"%d" % i, value=b"ab-%d" % i, partition=i % 2)
    p.flush(TIMEOUT)  # the aborted records reach the log: the markers must hide them
    p.abort_transaction(TIMEOUT)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, key=b"%d" % i, value=b"c2-%d" % i, partition=i % 2)
    p.commit_transaction(TIMEOUT)

    committed = _read_all(txn_broker, topic, 2, "read_committed", 20)
    assert sorted(v for _, v in committed) == sorted(
        [b"c1-%d" % i for i in range(10)] + [b"c2-%d" % i for i in range(10)])
    for part in (0, 1):
        seen = [v for pp, v in committed if pp == part]
        assert seen == [b"c1-%d" % i for i in range(part, 10, 2)] + \
            [b"c2-%d" % i for i in range(part, 10, 2)]
    uncommitted = _read_all(txn_broker, topic, 2, "read_uncommitted", 30)
    assert sum(v.startswith(b"ab-") for _, v in uncommitted) == 10
    assert len(uncommitted) == 30


def test_open_transaction_is_invisible_until_committed(txn_broker: BrokerProcess) -> None:
    topic = _topic(txn_broker, 1)
    p = _producer(txn_broker, f"tid-{uuid.uuid4().hex[:6]}")
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"open-%d" % i, partition=0)
    p.flush(TIMEOUT)
    # the LSO stays at the transaction's first offset: nothing for read_committed
    assert _read_all(txn_broker, topic, 1, "read_committed", 1, wait=1.5) == []
    c = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": "lso",
                  "isolation.level": "read_committed"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT)
        assert (lo, hi) == (0, 0)  # ListOffsets latest under read_committed = LSO
    finally:
        c.close()
    p.commit_transaction(TIMEOUT)
    got = _read_all(txn_broker, topic, 1, "read_committed", 5)
    assert [v for _, v in got] == [b"open-%d" % i for i in range(5)]


def test_send_offsets_to_transaction(txn_broker: BrokerProcess) -> None:
    src, dst = _topic(txn_broker, 1), _topic(txn_broker, 1)
    plain = Producer({"bootstrap.servers": txn_broker.bootstrap})
    for i in range(10):
        plain.produce(src, value=b"in-%d" % i, partition=0)
    plain.flush(TIMEOUT)
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.subscribe([src])
    p = _producer(txn_broker, f"tid-{uuid.uuid4().hex[:6]}")
    try:
        msgs = []
        deadline = time.monotonic() + TIMEOUT
        while len(msgs) < 10 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                msgs.append(m)
        assert len(msgs) == 10
        # first half: committed with its offsets
        p.begin_transaction()
        for m in msgs[:5]:
            p.produce(dst, value=m.value().replace(b"in", b"out"), partition=0)
        p.send_offsets_to_transaction([TopicPartition(src, 0, msgs[4].offset() + 1)],
                                      c.consumer_group_metadata(), TIMEOUT)
        p.commit_transaction(TIMEOUT)
        assert c.committed([TopicPartition(src, 0)], TIMEOUT)[0].offset == 5
        # second half: aborted, so the group's offset must not move
        p.begin_transaction()
        for m in msgs[5:]:
            p.produce(dst, value=m.value().replace(b"in", b"out"), partition=0)
        p.send_offsets_to_transaction([TopicPartition(src, 0, msgs[9].offset() + 1)],
                                      c.consumer_group_metadata(), TIMEOUT)
        p.flush(TIMEOUT)
        p.abort_transaction(TIMEOUT)
        assert c.committed([TopicPartition(src, 0)], TIMEOUT)[0].offset == 5
    finally:
        c.close()
    got = _read_all(txn_broker, dst, 1, "read_committed", 5)
    assert [v for _, v in got] == [b"out-%d" % i for i in range(5)]


def test_zombie_producer_is_fenced(txn_broker: BrokerProcess) -> None:
    topic = _topic(txn_broker, 1)
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    zombie = _producer(txn_broker, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(TIMEOUT)
    # a new instance with the same id: fences the zombie and aborts its transaction
    fresh = _producer(txn_broker, tid)
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh", partition=0)
    fresh.commit_transaction(TIMEOUT)
    with pytest.raises(KafkaException) as ei:
        zombie.produce(topic, value=b"late", partition=0)
        zombie.commit_transaction(TIMEOUT)
    err = ei.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err
    got = _read_all(txn_broker, topic, 1, "read_committed", 1)
    assert [v for _, v in got] == [b"fresh"]


def test_timed_out_transaction_is_aborted(txn_broker: BrokerProcess) -> None:
    topic = _topic(txn_broker, 1)
    p = _producer(txn_broker, f"tid-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, value=b"too-slow", partition=0)
    p.flush(TIMEOUT)
    # the coordinator aborts it (timer every 200 ms): the LSO moves past it
    deadline = time.monotonic() + 10
    c = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": "to",
                  "isolation.level": "read_committed"})
    try:
        while time.monotonic() < deadline:
            if c.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT)[1] == 2:
                break  # the record and the abort marker
            time.sleep(0.1)
        assert c.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT)[1] == 2
    finally:
        c.close()
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT)
    assert _read_all(txn_broker, topic, 1, "read_committed", 1, wait=1.5) == []


def test_transaction_timeout_above_the_maximum_is_refused(txn_broker: BrokerProcess) -> None:
    p = Producer({"bootstrap.servers": txn_broker.bootstrap, "transactional.id": "too-long",
                  "transaction.timeout.ms": 900001})
    with pytest.raises(KafkaException) as ei:
        p.init_transactions(TIMEOUT)
    assert ei.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT
