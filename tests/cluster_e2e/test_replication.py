"""Replication across three real broker processes, with a real client (librdkafka).

An RF=3 topic with min.insync.replicas=2, an idempotent acks=all producer, the leader
of a partition killed with SIGKILL mid-stream and restarted: every acknowledged
record is read back exactly once, in order per partition, and the ISR logs agree.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from jocko_py.client import Client
from jocko_py.client import KafkaError as JockoError
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode
from tests.security.raw import Raw, cluster_secret
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

PARTITIONS = 3


def _create(c: Cluster, name: str, partitions: int = PARTITIONS, rf: int = 3,
            configs: dict[str, str] | None = None) -> None:
    with Client(c.brokers[2].bootstrap) as cl:  # any broker: forwarded to the controller
        cl.create_topic(name, partitions, rf, configs or {"min.insync.replicas": "2"})
    c.wait_for(f"{name} visible with full ISR on every broker", lambda: all(
        len(c.partition_state(name, p, via=b)[1]) == rf
        for b in c.alive() for p in range(partitions)))


def _read_all(bootstrap: str, topic: str, partitions: int, expect: int,
              timeout: float = 60) -> dict[int, list[bytes]]:
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    cons.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    try:
        while sum(map(len, got.values())) < expect and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None or m.error():
                continue
            got[m.partition()].append(m.value())
    finally:
        cons.close()
    return got


def test_leader_kill_loses_no_acknowledged_record(cluster: Cluster) -> None:
    topic = "orders"
    _create(cluster, topic)
    leader0 = cluster.partition_state(topic, 0)[0]
    acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors: list[str] = []
    lock = threading.Lock()

    def on_delivery(err: Any, msg: Any) -> None:
        with lock:
            if err is None:
                acked[msg.partition()].append(msg.value())
            else:
                errors.append(str(err))

    prod = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                     "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000,
                     "retry.backoff.ms": 100})
    total = 3000
    killed_at = total // 3
    for i in range(total):
        prod.produce(topic, value=f"{i:06d}".encode(), partition=i % PARTITIONS,
                     on_delivery=on_delivery)
        prod.poll(0)
        if i == killed_at:
            prod.flush(30)
            cluster.brokers[leader0].kill()
        if i % 200 == 0:
            time.sleep(0.05)
    assert prod.flush(120) == 0, "records left undelivered"
    assert not errors, errors[:5]
    new_leader = cluster.partition_state(topic, 0)[0]
    assert new_leader not in (leader0, -1)
    # the killed broker comes back with its logs and rejoins the ISR
    cluster.brokers[leader0].start()
    cluster.wait_for("the restarted broker back in every ISR", lambda: all(
        leader0 in cluster.partition_state(topic, p)[1] for p in range(PARTITIONS)),
        timeout=90)
    got = _read_all(cluster.bootstrap, topic, PARTITIONS, total)
    for p in range(PARTITIONS):
        assert got[p] == acked[p], (
            f"partition {p}: read {len(got[p])}, acked {len(acked[p])}; first difference at "
            f"{next((i for i, (a, b) in enumerate(zip(got[p], acked[p], strict=False)) if a != b), None)}")
        # in order, each value once
        assert got[p] == sorted(set(got[p]))
    # every replica's log is identical up to the HW
    _assert_replicas_agree(cluster, topic, PARTITIONS)


def _assert_replicas_agree(cluster: Cluster, topic: str, partitions: int) -> None:
    for p in range(partitions):
        def same(p: int = p) -> bool:
            logs = []
            for b in cluster.brokers.values():
                d = b.data_dir / f"{topic}-{p}"
                segs = sorted(d.glob("*.log"))
                logs.append(b"".join(s.read_bytes() for s in segs))
            return all(x == logs[0] for x in logs)
        cluster.wait_for(f"{topic}-{p} identical on every replica", same, timeout=30)


def test_min_insync_replicas_refuses_acks_all(cluster: Cluster) -> None:
    """With two of three brokers down, acks=all gets NOT_ENOUGH_REPLICAS (once the ISR
    shrank) and acks=1 still works; nothing is acknowledged that is not replicated."""
    topic = "strict"
    _create(cluster, topic, partitions=1)
    leader = cluster.partition_state(topic)[0]
    others = [b for b in cluster.brokers if b != leader]
    for b in others:
        cluster.brokers[b].kill()
    # The controller may have been one of them: the leader alone cannot reach a raft
    # majority, so the ISR stays as it was; the leader's own ISR check shrinks it
    # only through the controller. Either way no acks=all write may succeed.
    batch = rb.build_batch([rb.NewRecord(None, b"x", (), int(time.time() * 1000))])
    with Client(cluster.brokers[leader].bootstrap) as cl:
        with pytest.raises(JockoError) as e:
            body = {"acks": -1, "timeout_ms": 3000, "topic_data": [{
                "name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
            r = cl.request(0, 9, body)
            p = r.responses[0].partition_responses[0]
            if p.error_code:
                raise JockoError(p.error_code)
        assert e.value.code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT,
                                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    for b in others:
        cluster.brokers[b].start()


def test_under_min_isr_the_high_watermark_holds_and_the_elr_is_reported(
        cluster: Cluster) -> None:
    """KIP-966 on real processes: min.insync.replicas=3, a follower killed. The ISR
    shrinks to two, the follower is an eligible leader replica (DescribeTopicPartitions),
    acks=all is refused and an acks=1 record is appended but stays above the high
    watermark (unseen) until the follower, restarted, is back in the ISR; its restart
    (a new incarnation, maybe unflushed data lost) takes it out of the ELR."""
    topic = "held"
    _create(cluster, topic, partitions=1, configs={"min.insync.replicas": "3"})
    leader = cluster.partition_state(topic)[0]
    controller = cluster.metadata().controller_id
    followers = [b for b in cluster.brokers if b != leader]
    victim = next((b for b in followers if b != controller), followers[0])
    lb = cluster.brokers[leader]

    def batch(v: bytes) -> bytes:
        return rb.build_batch([rb.NewRecord(None, v, (), int(time.time() * 1000))])

    def elr() -> list[int]:
        with Client(lb.bootstrap) as cl:
            r = cl.request(75, 0, {"topics": [{"name": topic}],
                                   "response_partition_limit": 10, "cursor": None})
            return sorted(r.topics[0].partitions[0].eligible_leader_replicas)

    def hw() -> int:
        with Client(lb.bootstrap) as cl:
            return cl.list_offset(topic, 0, -1)[0]

    with Client(lb.bootstrap) as cl:
        assert cl.produce(topic, 0, batch(b"first"), acks=-1) == 0
    cluster.wait_for("HW 1", lambda: hw() == 1)
    cluster.brokers[victim].kill()
    cluster.wait_for("ISR without the killed follower", lambda: cluster.partition_state(
        topic, via=lb)[1] == sorted(b for b in cluster.brokers if b != victim), timeout=90)
    cluster.wait_for("the killed follower in the ELR", lambda: elr() == [victim])
    with Client(lb.bootstrap) as cl:
        with pytest.raises(JockoError) as e:
            cl.produce(topic, 0, batch(b"refused"), acks=-1)
        assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert cl.produce(topic, 0, batch(b"held"), acks=1) == 1
        time.sleep(1.0)  # followers fetch it; the HW must still not move
        assert hw() == 1
        assert cl.fetch(topic, 0, 1).records in (b"", None)
    cluster.brokers[victim].start()
    cluster.wait_for("full ISR again", lambda: len(cluster.partition_state(
        topic, via=lb)[1]) == 3, timeout=90)
    cluster.wait_for("HW past the held record", lambda: hw() == 2)
    assert elr() == []


def test_sigterm_moves_leadership_before_exit(cluster: Cluster) -> None:
    """Controlled shutdown: the leader asks the controller to move its partitions."""
    topic = "moving"
    _create(cluster, topic, partitions=1)
    leader, _, epoch = cluster.partition_state(topic)
    cluster.brokers[leader].stop_gracefully(timeout=30)
    new_leader, isr, new_epoch = cluster.partition_state(topic)
    assert new_leader not in (leader, -1)
    assert new_epoch > epoch
    assert leader not in isr
    cluster.brokers[leader].start()
    cluster.wait_for("back in the ISR", lambda: leader in cluster.partition_state(topic)[1])


def test_rf_larger_than_cluster_is_refused(cluster: Cluster) -> None:
    with Client(cluster.brokers[3].bootstrap) as cl, pytest.raises(JockoError) as e:
        cl.create_topic("too-big", 1, 4)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_follower_answers_not_leader(cluster: Cluster) -> None:
    topic = "nl"
    _create(cluster, topic, partitions=1)
    leader = cluster.partition_state(topic)[0]
    follower = next(b for b in cluster.brokers if b != leader)
    batch = rb.build_batch([rb.NewRecord(None, b"x", (), int(time.time() * 1000))])
    with Client(cluster.brokers[follower].bootstrap) as cl:
        with pytest.raises(JockoError) as e:
            cl.produce(topic, 0, batch)
        assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        with pytest.raises(JockoError) as e:
            cl.fetch(topic, 0, 0)
        assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_fetch_v18_follower_behind_the_high_watermark_is_answered_at_once(
        cluster: Cluster) -> None:
    """KIP-1166: a follower's Fetch v18 carries the high watermark it knows; a leader
    whose high watermark is past it answers without waiting for data. One that knows the
    leader's high watermark, or does not say (Long.MAX_VALUE), or fetches at v17, waits
    max_wait_ms for data as before."""
    import uuid

    topic = "hw18"
    _create(cluster, topic, partitions=1)
    leader = cluster.partition_state(topic)[0]
    follower = next(b for b in cluster.brokers if b != leader)
    # a follower's Fetch is a broker's request: sent as broker `follower` (JOCKO-CLUSTER)
    replica = Raw(cluster.brokers[leader].bootstrap).broker_login(
        follower, cluster_secret(cluster.brokers[leader].data_dir))
    with Client(cluster.brokers[leader].bootstrap) as cl:
        for i in range(3):
            cl.produce(topic, 0, rb.build_batch([rb.NewRecord(None, b"v%d" % i)]), acks=-1)
        hw = cl.list_offset(topic, 0, -1)[0]
        assert hw == 3
        md = cl.request(3, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})
        tid = md.topics[0].topic_id

        def fetch(version: int, known_hw: int | None) -> tuple[float, Any]:
            part: dict[str, Any] = {"partition": 0, "current_leader_epoch": -1,
                                    "fetch_offset": hw, "last_fetched_epoch": -1,
                                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}
            if known_hw is not None:
                part["high_watermark"] = known_hw
            t0 = time.monotonic()
            r = replica.call(1, version, {
                "replica_state": {"replica_id": follower, "replica_epoch": -1},
                "max_wait_ms": 2000, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic_id": tid, "partitions": [part]}],
                "forgotten_topics_data": [], "rack_id": ""})
            p = r.responses[0].partitions[0]
            assert (r.error_code, p.error_code, p.high_watermark) == (0, 0, hw), r
            return time.monotonic() - t0, p
        for known in (hw - 1, -1):
            took, p = fetch(18, known)
            assert took < 1.0 and not p.records, (known, took)
        for version, known in ((18, hw), (18, None), (17, None)):
            took, _ = fetch(version, known)
            assert took >= 1.8, (version, known, took)
    replica.close()


def test_idempotent_dedup_survives_failover(cluster: Cluster) -> None:
    """A batch acknowledged by the old leader and retried (same producer id, epoch and
    sequence) to the new leader is recognised as a duplicate: followers rebuilt the
    producer state from the replicated log."""
    topic = "dedup"
    _create(cluster, topic, partitions=1)
    leader = cluster.partition_state(topic)[0]
    with Client(cluster.brokers[leader].bootstrap) as cl:
        r = cl.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                               "producer_id": -1, "producer_epoch": -1})
        pid, epoch = r.producer_id, r.producer_epoch
        batches = [rb.build_batch([rb.NewRecord(None, b"r%d" % i, (), int(time.time() * 1000))],
                                  producer_id=pid, producer_epoch=epoch, base_sequence=i)
                   for i in range(3)]
        offsets = [cl.produce(topic, 0, b, acks=-1) for b in batches]
    assert offsets == [0, 1, 2]
    cluster.brokers[leader].kill()
    new = cluster.wait_for("new leader", lambda: (
        lp := cluster.partition_state(topic)[0]) not in (leader, -1) and lp)
    with Client(cluster.brokers[new].bootstrap) as cl:
        # the last batch again, as a producer that never saw its acknowledgement would
        assert cl.produce(topic, 0, batches[2], acks=-1) == 2
        nxt = rb.build_batch([rb.NewRecord(None, b"r3", (), int(time.time() * 1000))],
                             producer_id=pid, producer_epoch=epoch, base_sequence=3)
        assert cl.produce(topic, 0, nxt, acks=-1) == 3
        assert cl.list_offset(topic, 0, -1)[0] == 4
    cluster.brokers[leader].start()
