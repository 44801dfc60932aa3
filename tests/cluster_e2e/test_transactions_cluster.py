"""Transactions on a three-broker cluster with confluent-kafka (librdkafka).

The transaction coordinator is the leader of the transactional id's partition of
`__transaction_state` (RF 3); the output topic's partitions are led by different
brokers, so markers travel both as local appends and as WriteTxnMarkers requests.
Checked: commit and abort across those partitions (read_committed sees committed
data once, aborted never), and the coordinator's broker killed (SIGKILL) in the
middle of a transaction: the transaction then completes or aborts as a whole on every
partition, never half-applied, and the partitions are usable by the next transaction.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from jocko_py.broker.group.offsets_store import partition_for
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.clients, pytest.mark.timeout(240)]

TIMEOUT = 30.0
PARTS = 3
TXN_PARTITIONS = 6


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    c = Cluster(tmp_path_factory.mktemp("txn-cluster"), overrides={
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    })
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _topic(c: Cluster) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(name, PARTS, 3, config={"min.insync.replicas": "2"})]
                        )[name].result(TIMEOUT)
    c.wait_for("leaders", lambda: all(c.partition_state(name, i)[0] >= 0 for i in range(PARTS)))
    return name


def _producer(c: Cluster, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 20000, "message.timeout.ms": 20000})
    p.init_transactions(TIMEOUT)
    return p


def _read_committed(c: Cluster, topic: str, expect: int, wait: float = 20.0) -> list[bytes]:
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "fetch.wait.max.ms": 50})
    cons.assign([TopicPartition(topic, i, 0) for i in range(PARTS)])
    got: list[bytes] = []
    deadline = time.monotonic() + wait
    settle: float | None = None
    try:
        while time.monotonic() < deadline:
            m = cons.poll(0.1)
            if m is not None and not m.error():
                got.append(m.value())
            if len(got) >= expect:
                settle = settle or time.monotonic() + 1.0
                if time.monotonic() > settle:
                    break
    finally:
        cons.close()
    return got


def _coordinator(c: Cluster, tid: str) -> int:
    idx = partition_for(tid, TXN_PARTITIONS)
    return c.wait_for("a transaction coordinator",
                      lambda: c.partition_state("__transaction_state", idx)[0] + 1) - 1


def test_commit_and_abort_across_brokers(txn_cluster: Cluster) -> None:
    c = txn_cluster
    topic = _topic(c)
    assert len({c.partition_state(topic, i)[0] for i in range(PARTS)}) > 1
    p = _producer(c, f"tid-{uuid.uuid4().hex[:6]}")
    for batch, commit in (("a", True), ("b", False), ("c", True)):
        p.begin_transaction()
        for i in range(9):
            p.produce(topic, value=f"{batch}-{i}".encode(), partition=i % PARTS)
        p.flush(TIMEOUT)
        if commit:
            p.commit_transaction(TIMEOUT)
        else:
            p.abort_transaction(TIMEOUT)
    got = _read_committed(c, topic, 18)
    assert sorted(got) == sorted([f"a-{i}".encode() for i in range(9)]
                                 + [f"c-{i}".encode() for i in range(9)])


def test_coordinator_killed_mid_transaction(txn_cluster: Cluster) -> None:
    c = txn_cluster
    topic = _topic(c)
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    p = _producer(c, tid)
    coord = _coordinator(c, tid)
    p.begin_transaction()
    for i in range(9):
        p.produce(topic, value=f"x-{i}".encode(), partition=i % PARTS)
    p.flush(TIMEOUT)
    victim = c.brokers[coord]
    victim.kill()
    committed = True
    try:
        p.commit_transaction(TIMEOUT)
    except KafkaException:
        committed = False  # it may abort instead: never half-applied is what counts
        if p is not None:
            try:
                p.abort_transaction(TIMEOUT)
            except KafkaException:
                pass
    # another coordinator serves the id now; a new producer fences any leftover
    p2 = _producer(c, tid)
    assert _coordinator(c, tid) != coord
    p2.begin_transaction()
    for i in range(3):
        p2.produce(topic, value=f"y-{i}".encode(), partition=i % PARTS)
    p2.commit_transaction(TIMEOUT)
    got = _read_committed(c, topic, 12 if committed else 3)
    xs = sorted(v for v in got if v.startswith(b"x-"))
    assert xs in ([], sorted(f"x-{i}".encode() for i in range(9))), got
    if committed:
        assert len(xs) == 9
    assert sorted(v for v in got if v.startswith(b"y-")) == [b"y-0", b"y-1", b"y-2"]
    victim.start()
    c.wait_registered(set(c.brokers))


def test_partition_leader_killed_before_the_markers(txn_cluster: Cluster) -> None:
    """The markers of a partition whose leader died are retried until its new leader
    has them: the commit is whole on every partition."""
    c = txn_cluster
    topic = _topic(c)
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    p = _producer(c, tid)
    coord = _coordinator(c, tid)
    leaders = {i: c.partition_state(topic, i)[0] for i in range(PARTS)}
    # placement spreads the leaders over the brokers: at most one is the coordinator's
    victim_part = next(i for i, b in leaders.items() if b != coord)
    p.begin_transaction()
    for i in range(9):
        p.produce(topic, value=f"z-{i}".encode(), partition=i % PARTS)
    p.flush(TIMEOUT)
    victim = c.brokers[leaders[victim_part]]
    victim.kill()
    p.commit_transaction(TIMEOUT)
    got = _read_committed(c, topic, 9)
    assert sorted(got) == sorted(f"z-{i}".encode() for i in range(9))
    victim.start()
    c.wait_registered(set(c.brokers))
