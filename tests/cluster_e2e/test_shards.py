"""`jocko-py broker --shards 2`: one command, two broker processes (jocko_py/shards.py).

One real sharded broker on loopback: both shards register (node ids 0 and 1000, Kafka
ports P and P+1), a topic's partitions land on both, kafka-python produces to every
partition and librdkafka (confluent-kafka) reads every record back from both shards,
in order, with a consumer group whose coordinator is one of the shards; SIGINT to the
supervisor stops both shard processes cleanly (exit 0); the same command on the same
directory starts again with the records there; a shard killed with SIGKILL makes the
supervisor stop the other one and exit 1 with one line naming the shard.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.broker import REPO, free_port_block, terminate, wait_for_port

pytestmark = pytest.mark.cluster

TOPIC = "sharded"
PARTITIONS = 4
PER_PARTITION = 50


class ShardedBroker:
    """The supervisor process of a `--shards 2` broker."""

    def __init__(self, data: Path) -> None:
        self.data = data
        # Kafka ports P, P+1; raft P+2, P+3; gossip (UDP) P+4, P+5; consoles P+6, P+7
        self.port = free_port_block((0, 1, 2, 3, 6, 7), udp=(4, 5))
        self.log = data.parent / "sharded.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jocko_py.cli", "broker", "--shards", "2",
                 "--broker-addr", self.bootstrap, "--data-dir", str(self.data),
                 "--console-addr", f"127.0.0.1:{self.port + 6}",
                 "--override", "group.initial.rebalance.delay.ms=0"],
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        for port in (self.port, self.port + 1):
            wait_for_port("127.0.0.1", port, timeout=30)
        self.wait_brokers({0, 1000})

    def shard_pids(self) -> list[int]:
        assert self.proc is not None
        kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        return [int(x) for x in kids.split()]

    def wait_brokers(self, ids: set[int], timeout: float = 30.0) -> None:
        from jocko_py.client import Client

        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while time.monotonic() < deadline:
            try:
                with Client(self.bootstrap, timeout=5) as c:
                    seen = {b.node_id for b in c.metadata([]).brokers}
                if seen == ids:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"brokers {sorted(seen)}, not {sorted(ids)}:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        rc, forced = terminate(self.proc, 60, sig)
        assert not forced, f"the supervisor did not stop within 60 s:\n{self.tail()}"
        return rc


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie not reaped yet is gone too
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def _leaders(bootstrap: str) -> dict[int, int]:
    from jocko_py.client import Client

    deadline = time.monotonic() + 30
    while True:
        with Client(bootstrap, timeout=5) as c:
            t = c.metadata([TOPIC]).topics[0]
        leaders = {p.partition_index: p.leader_id for p in t.partitions}
        if not t.error_code and len(leaders) == PARTITIONS and min(leaders.values()) >= 0:
            return leaders
        assert time.monotonic() < deadline, f"no leaders for {TOPIC}: {t}"
        time.sleep(0.2)


def _consume_all(bootstrap: str, group: str) -> dict[int, list[bytes]]:
    """Every record of the topic through librdkafka, with a group (subscribe, commit)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        c.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < PARTITIONS * PER_PARTITION:
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got[m.partition()].append(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def test_two_shards_serve_stop_restart_and_fail_together(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    b = ShardedBroker(tmp_path / "data")
    b.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        admin.close()
        leaders = _leaders(b.bootstrap)
        assert set(leaders.values()) == {0, 1000}, leaders  # partitions on both shards
        status = subprocess.run(
            [sys.executable, "-m", "jocko_py.cli", "cluster", "status",
             "--bootstrap-server", b.bootstrap], capture_output=True, text=True, timeout=60)
        lines = [x.split() for x in status.stdout.splitlines() if "rack=" in x]
        assert [(x[0], x[4], " ".join(x[5:])) for x in lines] == [
            ("0", "voter", "node 0, shard 0"),
            ("1000", "observer", "node 0, shard 1")], status.stdout  # a host's shards together
        for console in (b.port + 6, b.port + 7):  # each shard's console, at its port + k
            with urllib.request.urlopen(f"http://127.0.0.1:{console}/", timeout=30) as r:
                page = r.read().decode()
            assert "host (shard)" in page and "node 0, shard 1" in page, page
        prod = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")
        want = {p: [f"{p}-{i}".encode() for i in range(PER_PARTITION)]
                for p in range(PARTITIONS)}
        for p, values in want.items():
            for v in values:
                prod.send(TOPIC, v, partition=p)
        prod.flush(30)
        prod.close()
        assert _consume_all(b.bootstrap, "g1") == want

        shard_pids = b.shard_pids()
        assert len(shard_pids) == 2
        mark = b.log.stat().st_size
        assert b.stop(signal.SIGINT) == 0, b.tail()
        assert all(_gone(p) for p in shard_pids)
        stopped = b.log.read_bytes()[mark:].decode(errors="replace")
        assert "broker 0 stopped cleanly" in stopped and "broker 1000 stopped cleanly" \
            in stopped, stopped[-3000:]

        b.start()  # the same command, the same directory
        assert _consume_all(b.bootstrap, "g2") == want
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g1"})
        try:  # g1's commits on the first run, from its coordinator (either shard)
            committed = {tp.partition: tp.offset for tp in c.committed(
                [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)}
        finally:
            c.close()
        assert committed == {p: PER_PARTITION for p in range(PARTITIONS)}

        first, second = b.shard_pids()
        os.kill(second, signal.SIGKILL)
        assert b.proc is not None
        rc = b.proc.wait(60)
        assert rc == 1
        assert "jocko-py broker: shard 1 (node 1000) was killed by SIGKILL; stopping the " \
            "other shards\n" in b.log.read_text(), b.tail()
        assert _gone(first)
    finally:
        if b.proc is not None and b.proc.poll() is None:
            b.stop()
