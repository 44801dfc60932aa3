"""Exclusive data directories (Kafka's `.lock`), with real processes and a real client: a
second `jocko-py broker` on a directory in use exits at once with one line naming the
directory and the pid holding it, touches nothing, and the first broker's acknowledged
records are all intact; in one process, two embedded brokers on one directory conflict
too, and a stopped broker's lock is free for its restart."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from jocko_py.commitlog.dirs import DirectoryInUseError
from jocko_py.embedded import EmbeddedBroker
from tests.support.broker import REPO, BrokerProcess, free_port

N = 300


def _files(d: Path) -> dict[str, bytes | int]:
    """Every file but the lock: meta.properties by content, the logs by size."""
    out: dict[str, bytes | int] = {}
    for p in sorted(d.rglob("*")):
        if p.is_file() and p.name != ".lock":
            rel = str(p.relative_to(d))
            out[rel] = p.read_bytes() if p.name == "meta.properties" else p.stat().st_size
    return out


def _consume_all(bootstrap: str, topic: str, n: int) -> list[bytes]:
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=1000).values():
                out += [r.value for r in batch]
        return out
    finally:
        c.close()


@pytest.mark.timeout(120)
def test_a_second_broker_on_a_used_data_dir_exits_at_once_and_every_acked_record_survives(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = BrokerProcess(data, overrides={"offsets.topic.replication.factor": "1",
                                           "group.initial.rebalance.delay.ms": "0"})
    first.start()
    try:
        assert first.proc is not None
        topic = f"locked-{uuid.uuid4().hex[:6]}"
        p = KafkaProducer(bootstrap_servers=first.bootstrap, acks="all", linger_ms=5)
        try:
            sent = [f"record-{i}".encode() for i in range(N)]
            for f in [p.send(topic, v) for v in sent]:
                f.get(timeout=30)  # acknowledged by the first broker
        finally:
            p.close()
        before = _files(data)

        t0 = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "jocko_py.cli", "broker", "--data-dir", str(data),
             "--broker-addr", f"127.0.0.1:{free_port()}"],
            capture_output=True, text=True, timeout=60, cwd=REPO)
        took = time.monotonic() - t0
        assert second.returncode != 0
        assert second.stderr.strip() == (
            f"jocko-py broker: data directory {data} is in use by another process "
            f"(pid {first.proc.pid}): its .lock is held"), second.stderr
        assert took < 10, f"the second broker took {took:.1f}s to give up"
        assert _files(data) == before  # it read and wrote nothing

        assert _consume_all(first.bootstrap, topic, N) == sent
        first.stop_gracefully()
        first.start()  # the lock was released with the process: it restarts
        assert _consume_all(first.bootstrap, topic, N) == sent
    finally:
        first.stop()


@pytest.mark.timeout(60)
def test_embedded_brokers_in_one_process_conflict_and_a_stopped_one_restarts(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data) as a:
        b = EmbeddedBroker(data)
        with pytest.raises(DirectoryInUseError, match=f"data directory {data} is in use"):
            b.start()
        assert not b.running
        a.stop()
        a.start()  # released on stop, re-taken on start, in the same process
        assert a.running
    with EmbeddedBroker(data) as b:  # and free for another one once closed
        assert b.running
