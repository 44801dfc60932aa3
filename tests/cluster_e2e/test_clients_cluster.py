"""kafka-python, aiokafka, kcat and confluent-kafka against a three-broker cluster.

The scenarios are in scenarios.py: a partition leader killed (SIGKILL) under an
idempotent acks=all producer and restarted, everything acknowledged read back exactly
once and in order by the same client; a group member that keeps going when its
coordinator's broker is killed. The group members are tests/groups/workers (kafka-python,
aiokafka, confluent-kafka) and `kcat -G`. confluent-kafka's producer side is
tests/cluster_e2e/test_replication.py. One cluster for the module.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cluster_e2e.scenarios import (
    PACE_EVERY,
    PACE_PAUSE_S,
    PARTITIONS,
    RECORDS,
    ThreadProducing,
    WorkerMember,
    coordinator_kill_scenario,
    leader_kill_scenario,
    partition_of,
)
from tests.groups.harness import Worker
from tests.support.broker import terminate
from tests.support.cluster import Cluster
from tests.support.prereq import missing, requires

pytestmark = [pytest.mark.cluster, pytest.mark.clients, pytest.mark.timeout(300)]

needs_kcat = requires(shutil.which("kcat") is not None, "kcat not installed: make kcat")


# --------------------------------------------------------------------------- kafka-python


def kafka_python_producer(bootstrap: str, topic: str, sent: list[bytes]) -> ThreadProducing:
    from kafka import KafkaProducer  # type: ignore[import-untyped]

    def send(vals: list[bytes], acked: list[int], errors: list[str]) -> None:
        prod = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                             linger_ms=5, delivery_timeout_ms=120_000)

        def ok(_md: Any) -> None:
            acked[0] += 1

        try:
            for i, v in enumerate(vals):
                fut = prod.send(topic, value=v, partition=partition_of(i))
                fut.add_callback(ok)
                fut.add_errback(lambda e: errors.append(repr(e)))
                if (i + 1) % PACE_EVERY == 0:
                    time.sleep(PACE_PAUSE_S)
            prod.flush(120)
        finally:
            prod.close(10)

    return ThreadProducing("kafka-python", send, sent)


def kafka_python_read(bootstrap: str, topic: str, n: int = RECORDS) -> dict[int, list[bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    cons = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        cons.assign(tps)
        cons.seek_to_beginning(*tps)
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < n and time.monotonic() < deadline:
            for tp, recs in cons.poll(500).items():
                got[tp.partition] += [r.value for r in recs]
    finally:
        cons.close()
    return got


def test_kafka_python_leader_kill(shared_cluster: Cluster) -> None:
    c = shared_cluster
    topic = "kpy-stream"
    t = leader_kill_scenario(c, topic, lambda vals: kafka_python_producer(c.bootstrap, topic, vals),
                             lambda: kafka_python_read(c.bootstrap, topic))
    print(f"kafka-python leader kill: {t}")


# --------------------------------------------------------------------------- aiokafka


def aiokafka_producer(bootstrap: str, topic: str, sent: list[bytes]) -> ThreadProducing:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    async def main(vals: list[bytes], acked: list[int], errors: list[str]) -> None:
        prod = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                acks="all", linger_ms=5, request_timeout_ms=30_000)
        await prod.start()

        def done(fut: asyncio.Future[Any]) -> None:
            if fut.exception() is not None:
                errors.append(repr(fut.exception()))
            else:
                acked[0] += 1

        futs = []
        try:
            for i, v in enumerate(vals):
                fut = await prod.send(topic, value=v, partition=partition_of(i))
                fut.add_done_callback(done)
                futs.append(fut)
                if (i + 1) % PACE_EVERY == 0:
                    await asyncio.sleep(PACE_PAUSE_S)
            await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), 120)
        finally:
            await prod.stop()

    def send(vals: list[bytes], acked: list[int], errors: list[str]) -> None:
        asyncio.run(main(vals, acked, errors))

    return ThreadProducing("aiokafka", send, sent)


def aiokafka_read(bootstrap: str, topic: str, n: int = RECORDS) -> dict[int, list[bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> dict[int, list[bytes]]:
        cons = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest")
        await cons.start()
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            cons.assign(tps)
            await cons.seek_to_beginning(*tps)
            deadline = time.monotonic() + 60
            while sum(map(len, got.values())) < n and time.monotonic() < deadline:
                for tp, recs in (await cons.getmany(timeout_ms=500)).items():
                    got[tp.partition] += [r.value for r in recs]
        finally:
            await cons.stop()
        return got

    return asyncio.run(main())


def test_aiokafka_leader_kill(shared_cluster: Cluster) -> None:
    c = shared_cluster
    topic = "aio-stream"
    t = leader_kill_scenario(c, topic, lambda vals: aiokafka_producer(c.bootstrap, topic, vals),
                             lambda: aiokafka_read(c.bootstrap, topic))
    print(f"aiokafka leader kill: {t}")


# --------------------------------------------------------------------------- kcat


class KcatProducing:
    """`kcat -P` (idempotent, acks=all) fed line by line at the scenario's pace; kcat
    reports no per-record acknowledgement, so progress counts the lines written, and the
    end of the stream is kcat's exit status (non-zero when a delivery failed)."""

    def __init__(self, bootstrap: str, topic: str, sent: list[bytes], stderr: Path) -> None:
        self.written = 0
        self.stderr = stderr
        with open(stderr, "wb") as err:
            self.proc = subprocess.Popen(
                ["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "enable.idempotence=true",
                 "-X", "acks=all", "-X", "linger.ms=5", "-X", "message.timeout.ms=120000"],
                stdin=subprocess.PIPE, stderr=err)
        self.writer = threading.Thread(target=self._write, args=(sent,), daemon=True)
        self.writer.start()

    def _write(self, sent: list[bytes]) -> None:
        assert self.proc.stdin is not None
        try:
            for i, v in enumerate(sent):
                self.proc.stdin.write(v + b"\n")
                self.proc.stdin.flush()
                self.written += 1
                if (i + 1) % PACE_EVERY == 0:
                    time.sleep(PACE_PAUSE_S)
        finally:
            self.proc.stdin.close()

    def progress(self) -> int:
        return self.written

    def finish(self, timeout: float) -> None:
        self.writer.join(timeout)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            terminate(self.proc, 5)
            raise AssertionError(f"kcat -P did not exit in {timeout}s\n{self.describe()}") from None
        assert rc == 0, f"kcat -P exited {rc}\n{self.describe()}"

    def describe(self) -> str:
        return f"kcat -P: {self.written} lines written, stderr:\n" + \
            self.stderr.read_text(errors="replace")[-3000:]


def kcat_read(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    out = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
         "-f", "%p %o %s\n"], capture_output=True, timeout=60, check=True).stdout
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for line in out.splitlines():
        p, _, v = line.split(b" ", 2)
        got[int(p)].append(v)
    return got


@needs_kcat
def test_kcat_leader_kill(shared_cluster: Cluster, tmp_path: Path) -> None:
    c = shared_cluster
    topic = "kcat-stream"
    t = leader_kill_scenario(
        c, topic, lambda vals: KcatProducing(c.bootstrap, topic, vals, tmp_path / "kcat.err"),
        lambda: kcat_read(c.bootstrap, topic), explicit_partitions=False)
    print(f"kcat leader kill: {t}")


class KcatMember:
    """`kcat -G` (librdkafka's high-level consumer, auto commit every 500 ms): prints
    `R partition offset value` per record into a file."""

    def __init__(self, bootstrap: str, topic: str, group: str, workdir: Path) -> None:
        self.out = workdir / f"kcat-{group}.out"
        self.err = workdir / f"kcat-{group}.err"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                ["kcat", "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
                 "-X", "auto.commit.interval.ms=500", "-X", "session.timeout.ms=6000",
                 "-X", "heartbeat.interval.ms=500", "-u", "-q", "-f", "R %p %o %s\n", topic],
                stdout=out, stderr=err)

    def records(self) -> list[tuple[int, int, bytes]]:
        recs = []
        data = self.out.read_bytes()
        # only whole lines: kcat may be halfway through writing the last one
        for line in data[:data.rfind(b"\n") + 1].splitlines():
            if line.startswith(b"R "):
                _, p, o, v = line.split(b" ", 3)
                recs.append((int(p), int(o), v))
        return recs

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop_cleanly(self) -> None:
        rc, forced = terminate(self.proc, 30, signal.SIGTERM)
        assert not forced and rc == 0, f"kcat -G exited {rc} (forced {forced})\n{self.describe()}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def describe(self) -> str:
        return (f"kcat -G: exit {self.proc.poll()}, {len(self.records())} records, stderr:\n"
                + self.err.read_text(errors="replace")[-3000:])


# --------------------------------------------------------------------------- group members


@pytest.mark.parametrize("kind", ["kafka_python", "aiokafka", "confluent", "kcat"])
def test_group_member_survives_coordinator_kill(shared_cluster: Cluster, tmp_path: Path,
                                                kind: str) -> None:
    if kind == "kcat" and shutil.which("kcat") is None:
        missing("kcat not installed: make kcat")

    def start(bootstrap: str, topic: str, group: str) -> Any:
        if kind == "kcat":
            return KcatMember(bootstrap, topic, group, tmp_path)
        return WorkerMember(Worker(kind, bootstrap, topic, group, tmp_path))

    t = coordinator_kill_scenario(shared_cluster, f"grp-{kind}", f"g-{kind}", start)
    print(f"{kind} coordinator kill: {t}")
