"""read_committed readers of every Python client and kcat against one transactional topic.

confluent-kafka writes, in one partition and then another, a committed transaction, an
aborted one (flushed, so in the log), records of a still open transaction, a
committed one again; kafka-python, aiokafka and kcat read with read_committed: exactly
the committed records, in order, nothing aborted, nothing of the open transaction
(the LSO holds them back); with read_uncommitted the aborted ones and the open ones
are there too.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid

import pytest
from confluent_kafka import Producer

from tests.support.broker import BrokerProcess
from tests.support.prereq import missing
from tests.transactions.test_confluent_transactions import TIMEOUT, _producer, _topic

COMMITTED = [f"c1-{i}" for i in range(5)] + [f"c2-{i}" for i in range(5)]
ALL = COMMITTED + [f"ab-{i}" for i in range(5)]


@pytest.fixture(scope="module")
def topic(txn_broker: BrokerProcess) -> tuple[str, Producer]:
    b = txn_broker
    name = _topic(b, 1)
    p = _producer(b, f"rc-{uuid.uuid4().hex[:6]}")
    for tag, commit in (("c1", True), ("ab", False), ("c2", True)):
        p.begin_transaction()
        for i in range(5):
            p.produce(name, value=f"{tag}-{i}".encode(), partition=0)
        p.flush(TIMEOUT)
        if commit:
            p.commit_transaction(TIMEOUT)
        else:
            p.abort_transaction(TIMEOUT)
    # an open transaction at the end: read_committed readers stop before it
    p.begin_transaction()
    p.produce(name, value=b"open-0", partition=0)
    p.flush(TIMEOUT)
    return name, p  # the producer stays alive (its transaction open) for the module


def _kafka_python(bootstrap: str, topic: str, isolation: str, n: int) -> list[str]:
    from kafka import KafkaConsumer, TopicPartition  # type: ignore[import-untyped]

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      enable_auto_commit=False, consumer_timeout_ms=2000)
    c.assign([TopicPartition(topic, 0)])
    c.seek_to_beginning()
    try:
        return [m.value.decode() for m in c]
    finally:
        c.close()


async def _aiokafka(bootstrap: str, topic: str, isolation: str, n: int) -> list[str]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                         enable_auto_commit=False)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        out: list[str] = []
        for _ in range(20):
            got = await c.getmany(tp, timeout_ms=200)
            out += [m.value.decode() for m in got.get(tp, [])]
            if len(out) >= n and not got:
                break
        return out
    finally:
        await c.stop()


def _kcat(bootstrap: str, topic: str, isolation: str, n: int) -> list[str]:
    r = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o",
                        "beginning", "-e", "-q", "-X", f"isolation.level={isolation}",
                        "-f", "%s\n"], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "kcat"])
def test_read_committed(txn_broker: BrokerProcess, topic: tuple[str, Producer],
                        client: str) -> None:
    name = topic[0]
    if client == "kcat" and shutil.which("kcat") is None:
        missing("kcat not installed: make kcat")

    def read(isolation: str, n: int) -> list[str]:
        if client == "kafka-python":
            return _kafka_python(txn_broker.bootstrap, name, isolation, n)
        if client == "aiokafka":
            return asyncio.run(_aiokafka(txn_broker.bootstrap, name, isolation, n))
        return _kcat(txn_broker.bootstrap, name, isolation, n)

    assert read("read_committed", len(COMMITTED)) == COMMITTED
    assert sorted(read("read_uncommitted", len(ALL) + 1)) == sorted(ALL + ["open-0"])
