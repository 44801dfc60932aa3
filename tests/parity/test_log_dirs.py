"""Several data directories (`log.dirs` with more than one entry): new partitions go to
the directory holding the fewest logs, each directory keeps its own checkpoints, a
restart finds every log where it was, and kafka-log-dirs reports each directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from jocko_py.broker.config import build_config
from jocko_py.client import Client, KafkaError
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.manager import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
    read_offset_checkpoint,
)
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode
from tests.commitlog._util import batch
from tests.parity import kafka_tools as kt
from tests.support.broker import BrokerProcess
from tests.support.e2e import create_topics
from tests.support.tmpfs import small_tmpfs


def test_config_reads_every_log_dir(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    cfg = build_config(overrides={"log.dirs": f"{a}, {b},{a}"})
    assert (cfg.data_dir, cfg.extra_log_dirs) == (a, (b,))
    cfg = build_config(data_dir=f"{a},{b}")
    assert (cfg.data_dir, cfg.extra_log_dirs) == (a, (b,))
    assert build_config().extra_log_dirs == ()


def test_log_manager_spreads_and_reloads(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    mgr = LogManager(a, LogConfig(), (b,))
    mgr.load_all()
    for p in range(4):
        mgr.get_or_create("t", p).append(batch(1), 0)
    where = {p: mgr.dir_of("t", p) for p in range(4)}
    assert sorted(where.values()).count(a) == 2 and sorted(where.values()).count(b) == 2
    for p, d in where.items():
        assert d is not None and (d / f"t-{p}").is_dir()
    assert mgr.delete("t", 0)
    assert not (where[0] / "t-0").exists()
    mgr.close_all()
    for d in (a, b):
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        cp = read_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        assert {tp for tp in cp} == {("t", p) for p in (1, 2, 3) if where[p] == d}
    mgr2 = LogManager(a, LogConfig(), (b,))
    mgr2.load_all()
    assert set(mgr2.logs) == {("t", 1), ("t", 2), ("t", 3)}
    assert {p: mgr2.dir_of("t", p) for p in (1, 2, 3)} == {p: where[p] for p in (1, 2, 3)}
    assert all(mgr2.logs[("t", p)].log_end_offset == 1 for p in (1, 2, 3))
    # the next new log goes to the emptier directory (a lost t-0)
    mgr2.get_or_create("u", 0)
    assert mgr2.dir_of("u", 0) == where[0]
    mgr2.close_all()


class TwoDirBroker(BrokerProcess):
    def __init__(self, root: Path) -> None:
        super().__init__(root / "d1")
        self.second = root / "d2"

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("--data-dir")
        cmd[i + 1] = f"{self.data_dir},{self.second}"
        return cmd


def test_broker_with_two_log_dirs(tmp_path: Path) -> None:
    b = TwoDirBroker(tmp_path)
    b.start()
    try:
        topic = "spread"
        create_topics(b.bootstrap, [topic], partitions=4)
        p = KafkaProducer(bootstrap_servers=b.bootstrap)
        try:
            for i in range(40):
                p.send(topic, f"v{i}".encode(), partition=i % 4)
            p.flush(timeout=30)
        finally:
            p.close(timeout=10)
        on_disk = {d: sorted(x.name for x in d.iterdir() if x.name.startswith(topic))
                   for d in (b.data_dir, b.second)}
        assert [len(v) for v in on_disk.values()] == [2, 2], on_disk
        out = kt.run("4.1", kt.LOG_DIRS, "--bootstrap-server", b.bootstrap, "--describe",
                     "--topic-list", topic)
        [broker] = json.loads(out.strip().splitlines()[-1])["brokers"]
        reported = {d["logDir"]: sorted(p["partition"] for p in d["partitions"])
                    for d in broker["logDirs"]}
        assert reported == {str(d.resolve()): v for d, v in on_disk.items()}
        b.restart()
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                          enable_auto_commit=False, consumer_timeout_ms=5000)
        try:
            c.assign([TopicPartition(topic, i) for i in range(4)])
            got = sorted(int(m.value[1:]) for m in c)
        finally:
            c.close()
        assert got == list(range(40))
    finally:
        b.stop()


@pytest.fixture
def small_second_dir(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "d2", "3m") as mnt:
        yield mnt


def test_a_failed_log_dir_goes_offline_and_the_others_keep_serving(
        tmp_path: Path, small_second_dir: Path) -> None:
    """Two log dirs on a single node, the second a 3 MiB tmpfs: once it is full, its
    partitions answer KAFKA_STORAGE_ERROR (produce and fetch) and DescribeLogDirs marks
    it, while the broker keeps running and the first dir's partitions keep taking and
    serving writes; a new topic goes to the dir that still serves; after a restart with
    space freed, the second dir's acknowledged records are all there."""
    b = TwoDirBroker(tmp_path)
    b.overrides = {**b.overrides, "log.segment.bytes": "1048576"}
    b.start()
    topic, value = "jbod", os.urandom(60_000)
    filler = small_second_dir / "filler"
    filler.write_bytes(b"\0" * (1 << 20))  # freed before the restart
    try:
        with Client(b.bootstrap) as c:
            c.create_topic(topic, 2)  # partition 0 in d1, partition 1 in d2
            on_d2 = [x.name for x in small_second_dir.iterdir() if x.name.startswith(topic)]
            assert on_d2 == [f"{topic}-1"], on_d2
            acked, error = 0, None
            for _ in range(200):
                try:
                    c.produce(topic, 1, rb.build_batch([rb.NewRecord(None, value, (), 1)]),
                              acks=1)
                    acked += 1
                except KafkaError as e:
                    error = e.code
                    break
            assert error == ErrorCode.KAFKA_STORAGE_ERROR and acked > 5, b.log_tail()
            assert "keep serving" in b.log_tail()
        with Client(b.bootstrap) as c:
            with pytest.raises(KafkaError) as ei:
                c.fetch(topic, 1, 0)
            assert ei.value.code == ErrorCode.KAFKA_STORAGE_ERROR
            with pytest.raises(KafkaError) as ei:
                c.produce(topic, 1, rb.build_batch([rb.NewRecord(None, b"x", (), 1)]))
            assert ei.value.code == ErrorCode.KAFKA_STORAGE_ERROR
            # the first dir serves on
            for i in range(5):
                assert c.produce(topic, 0, rb.build_batch(
                    [rb.NewRecord(None, f"ok{i}".encode(), (), 1)])) == i
            assert c.list_offset(topic, 0, -1)[0] == 5
            c.create_topic("after", 2)
            assert all((b.data_dir / f"after-{i}").is_dir() for i in range(2))
            r = c.request(35, 4, {"topics": None})
            errors = {x.log_dir: x.error_code for x in r.results}
            assert errors == {str(b.data_dir.resolve()): 0,
                              str(small_second_dir.resolve()): ErrorCode.KAFKA_STORAGE_ERROR}
        assert b.proc is not None and b.proc.poll() is None
        # space freed, restart: the dir serves again with every acknowledged record
        filler.unlink()
        b.restart()
        with Client(b.bootstrap) as c:
            assert c.list_offset(topic, 1, -1)[0] >= acked
            assert c.list_offset(topic, 0, -1)[0] == 5
            assert c.produce(topic, 1, rb.build_batch([rb.NewRecord(None, b"x", (), 1)])) >= acked
    finally:
        b.stop()
