"""Several data directories (`log.dirs` with more than one entry): new partitions go to
the directory holding the fewest logs, each directory keeps its own checkpoints, a
restart finds every log where it was, and kafka-log-dirs reports each directory.
"""

from __future__ import annotations

import json
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from jocko_py.broker.config import build_config
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.manager import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
    read_offset_checkpoint,
)
from tests.commitlog._util import batch
from tests.parity import kafka_tools as kt
from tests.support.broker import BrokerProcess
from tests.support.e2e import create_topics


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
