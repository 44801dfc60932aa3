"""Retention by share of disk: the planner's rules, then a real broker whose data
directory is a small tmpfs that producers keep filling."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jocko_py.client import Client
from jocko_py.commitlog.disk_retention import SegmentInfo, disk_usage, plan
from jocko_py.protocol import records as rb
from tests.support.broker import BrokerProcess
from tests.support.tmpfs import small_tmpfs


def segs(n: int, size: int = 100, start_ts: int = 0) -> list[SegmentInfo]:
    return [SegmentInfo(i * 10, (i + 1) * 10, size, start_ts + i) for i in range(n)]


def test_plan_is_fair_by_weight_and_respects_floors() -> None:
    segments = {("a", 0): segs(10), ("b", 0): segs(10)}
    sizes = {"a": 1000, "b": 1000}
    # equal weights: the excess is taken evenly
    got = plan(400, segments, sizes, {"a": 1, "b": 1}, {("a", 0): 1000, ("b", 0): 1000})
    assert got == {("a", 0): 20, ("b", 0): 20}
    # b weighs 3: a gives until a : b = 1 : 3
    got = plan(1000, segments, sizes, {"a": 1, "b": 3}, {("a", 0): 1000, ("b", 0): 1000})
    assert got == {("a", 0): 80, ("b", 0): 20}
    # a floor (high watermark or committed offset) stops deletion at that segment
    got = plan(1000, segments, sizes, {}, {("a", 0): 35, ("b", 0): 0})
    assert got == {("a", 0): 30}
    # nothing over the limit: nothing deleted
    assert plan(0, segments, sizes, {}, {("a", 0): 1000}) == {}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", "16m") as mnt:
        yield mnt


def test_filling_disk_stays_under_its_share(small_disk: Path, tmp_path: Path) -> None:
    broker = BrokerProcess(small_disk / "data", log_path=tmp_path / "broker.log", overrides={
        "jocko.log.retention.disk.percent": "50",
        "jocko.log.retention.disk.protect.committed.offsets": "true",
        "log.retention.check.interval.ms": "100",
        "log.segment.bytes": "262144",
        "log.index.size.max.bytes": "65536",
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    })
    broker.start()
    total = disk_usage(small_disk).total
    limit = total // 2
    value = os.urandom(20_000)
    try:
        with Client(broker.bootstrap) as c:
            c.create_topic("plain", 1)
            c.create_topic("vip", 1, configs={"jocko.retention.disk.share": "3"})
            c.create_topic("held", 1)
            # a group has read nothing of "held": its committed offset 0 protects it all
            c.request(10, 3, {"key": "slow-readers", "key_type": 0})
            r = c.request(8, 8, {"group_id": "slow-readers", "generation_id_or_member_epoch": -1,
                                 "member_id": "", "group_instance_id": None, "topics": [{
                                     "name": "held", "partitions": [{
                                         "partition_index": 0, "committed_offset": 0,
                                         "committed_leader_epoch": -1,
                                         "committed_metadata": ""}]}]})
            assert r.topics[0].partitions[0].error_code == 0
            for _ in range(50):  # 1 MB into "held"
                c.produce("held", 0, rb.build_batch([rb.NewRecord(None, value)]), acks=1)
            # 24 MB into a 16 MB disk whose limit is 8 MB: retention must keep up
            worst = 0
            for i in range(1200):
                topic = "plain" if i % 2 else "vip"
                c.produce(topic, 0, rb.build_batch([rb.NewRecord(None, value)]), acks=1)
                if i % 50 == 49:
                    deadline = time.monotonic() + 10
                    while disk_usage(small_disk).used > limit + 2_000_000:
                        assert time.monotonic() < deadline, broker.log_tail()
                        time.sleep(0.05)
                worst = max(worst, disk_usage(small_disk).used)
            time.sleep(0.5)  # one more retention pass
            starts = {t: c.list_offset(t, 0, -2)[0] for t in ("plain", "vip", "held")}
            ends = {t: c.list_offset(t, 0, -1)[0] for t in ("plain", "vip", "held")}
        used = disk_usage(small_disk).used
        # under the limit, give or take the active segments (256 KiB each) and what
        # arrived since the last pass
        assert used <= limit + 1_500_000, (used, limit)
        assert worst < total, "the disk never filled up"
        assert starts["held"] == 0 and ends["held"] == 50, "committed offsets are protected"
        kept = {t: ends[t] - starts[t] for t in ("plain", "vip")}
        assert starts["plain"] > 0 and starts["vip"] > 0
        # weights 1 : 3 (in whole 256 KiB segments, so roughly)
        assert 2.0 <= kept["vip"] / kept["plain"] <= 4.5, kept
        assert "log start moved" in broker.log_tail(200)
    finally:
        broker.stop()
