"""Durable group state: `__consumer_offsets` layout, reload on restart, offset retention."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from jocko_py.broker.coordinator.runtime import LogRecord
from jocko_py.broker.group.offsets_store import (
    OFFSETS_TOPIC,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    java_string_hash,
    offset_key,
    offset_value,
    partition_for,
)
from jocko_py.broker.group.shard import GroupConfig, GroupShard
from jocko_py.broker.group.state import Group, GroupState, Member, OffsetAndMetadata
from jocko_py.client import Client
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.log import Log
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode as E
from tests.groups.test_protocol_edges import GROUP_OVERRIDES, commit, heartbeat, stable_single
from tests.support.broker import BrokerProcess

# -- record layout ---------------------------------------------------------------------


def test_java_hash_and_partition() -> None:
    # String.hashCode values computed by Java
    assert java_string_hash("") == 0
    assert java_string_hash("test") == 3556498
    assert java_string_hash("hello") == 99162322
    # Integer.MIN_VALUE: Kafka's Utils.abs masks the sign bit, so partition 0
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    g = "a-group-whose-hash-is-negative-zz"
    assert partition_for(g, 50) == (java_string_hash(g) & 0x7FFFFFFF) % 50


def test_record_layout_round_trip() -> None:
    k = offset_key("g", "t", 3)
    assert k[:2] == b"\x00\x01"  # OffsetCommitKey version 1, as Kafka writes it
    d = decode_key(k)
    assert d is not None and (d.kind, d.group, d.topic, d.partition) == ("offset", "g", "t", 3)
    assert group_key("g")[:2] == b"\x00\x02"
    om = OffsetAndMetadata(42, 7, "meta", 1234)
    v = offset_value(om)
    assert v[:2] == b"\x00\x03"
    assert decode_offset_value(v) == om
    om1 = OffsetAndMetadata(5, -1, "", 10, 99)
    assert offset_value(om1)[:2] == b"\x00\x01"
    assert decode_offset_value(offset_value(om1)) == om1
    g = Group("g", 1000)
    g.add(Member("m1", "i1", "c", "/h", 300, 6000, "consumer", [("range", b"sub")], b"asg"))
    g.generation_id, g.protocol_name = 4, "range"
    g.resume_stable(1000)
    back = decode_group_value("g", group_value(g), 5000)
    assert back.state is GroupState.STABLE and back.generation_id == 4
    assert back.leader_id == "m1" and back.protocol_type == "consumer"
    m = back.members["m1"]
    assert (m.group_instance_id, m.assignment, m.metadata("range")) == ("i1", b"asg", b"sub")
    assert back.static_members == {"i1": "m1"}
    assert m.last_heartbeat_ms == 5000 and back.state_timestamp == 1000


# -- offset expiry (the group shard alone) ------------------------------------------------


def make_shard(retention_ms: int) -> GroupShard:
    shard = GroupShard(0, GroupConfig(offsets_retention_ms=retention_ms), dict)
    shard.on_loaded(0)
    return shard


def expire(shard: GroupShard, now: int) -> tuple[int, list[tuple[str, bytes]]]:
    """Run the expiry as the runtime does: its records replayed once written; the count
    and the (group, key) of every tombstone written."""
    r = shard.expire_offsets(now)
    for k, v in r.records:
        shard.replay(LogRecord(k, v))
    tombstones = []
    for k, v in r.records:
        d = decode_key(k)
        assert d is not None and v is None
        tombstones.append((d.group, k))
    assert r.replay and isinstance(r.response, int)
    return r.response, tombstones


def subscription(*topics: str) -> bytes:
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


def test_offset_expiry_rules() -> None:
    shard = make_shard(retention_ms=1000)
    groups = shard.groups
    simple = groups["simple"] = Group("simple", 0)
    simple.offsets[("t", 0)] = OffsetAndMetadata(1, -1, "", commit_timestamp=5000)
    empty = groups["empty"] = Group("empty", 8000)
    empty.protocol_type = "consumer"
    empty.offsets[("t", 0)] = OffsetAndMetadata(1, -1, "", commit_timestamp=1000)
    stable = groups["stable"] = Group("stable", 0)
    stable.add(Member("m", None, "c", "/h", 1, 1, "consumer", [("range", subscription("t"))]))
    stable.protocol_name = "range"
    stable.resume_stable(0)
    stable.offsets[("t", 0)] = OffsetAndMetadata(1, -1, "", commit_timestamp=0)
    stable.offsets[("old", 0)] = OffsetAndMetadata(1, -1, "", commit_timestamp=0)
    explicit = groups["explicit"] = Group("explicit", 0)
    explicit.offsets[("t", 0)] = OffsetAndMetadata(1, -1, "", 0, expire_timestamp=5500)

    writes: list[tuple[str, bytes]] = []
    n, w = expire(shard, 5500)
    writes += w
    assert n == 2  # stable's unsubscribed "old", explicit
    assert set(stable.offsets) == {("t", 0)}
    assert "explicit" not in groups  # empty and without offsets: removed
    n, w = expire(shard, 6000)
    writes += w
    assert n == 1  # simple: 1 s after its commit
    assert "simple" not in groups
    assert "empty" in groups  # consumer group: counted from when it became Empty
    n, w = expire(shard, 9000)
    writes += w
    assert n == 1 and "empty" not in groups
    assert set(stable.offsets) == {("t", 0)}  # subscribed offsets of a live group stay
    assert ("explicit", group_key("explicit")) in writes
    assert ("simple", offset_key("simple", "t", 0)) in writes


# -- end to end ----------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides={
        **GROUP_OVERRIDES, "offsets.retention.check.interval.ms": "200"})
    b.start()
    try:
        with Client(b.bootstrap) as c:
            c.request(10, 3, {"key": "x", "key_type": 0})
            c.create_topic("t", 2)
        yield b
    finally:
        b.stop()


def fetch(b: BrokerProcess, group: str) -> int:
    with Client(b.bootstrap) as c:
        r = c.request(9, 5, {"group_id": group, "topics": [
            {"name": "t", "partition_indexes": [0]}]})
    return int(r.topics[0].partitions[0].committed_offset)


def fetch_full(b: BrokerProcess, group: str) -> tuple[int, int, str | None]:
    """(offset, leader epoch, metadata) of t-0, with OffsetFetch v8."""
    with Client(b.bootstrap) as c:
        r = c.request(9, 8, {"groups": [{"group_id": group, "topics": [
            {"name": "t", "partition_indexes": [0]}]}], "require_stable": False})
    p = r.groups[0].topics[0].partitions[0]
    return int(p.committed_offset), int(p.committed_leader_epoch), p.metadata


@pytest.mark.timeout(60)
def test_stable_group_and_retention_survive_restart(broker: BrokerProcess) -> None:
    mid, gen = stable_single(broker, "g-dur")
    assert commit(broker, "g-dur", gen, mid, offset=11) == E.NONE
    with Client(broker.bootstrap) as c:
        r = c.request(8, 2, {"group_id": "g-ret", "generation_id_or_member_epoch": -1,
                             "member_id": "", "retention_time_ms": 300, "topics": [
                                 {"name": "t", "partitions": [{
                                     "partition_index": 0, "committed_offset": 9,
                                     "committed_metadata": ""}]}]})
        assert r.topics[0].partitions[0].error_code == 0
    assert fetch(broker, "g-ret") == 9
    deadline = time.monotonic() + 10
    while fetch(broker, "g-ret") != -1:
        assert time.monotonic() < deadline, "offset with retention_time_ms=300 never expired"
        time.sleep(0.2)
    broker.stop()
    broker.start()
    # the stable group is back with its member and generation: heartbeats just work
    assert heartbeat(broker, "g-dur", gen, mid) == E.NONE
    # the commit's metadata and leader epoch came back too (commit() sends 3, "md")
    assert fetch_full(broker, "g-dur") == (11, 3, "md")
    assert fetch(broker, "g-ret") == -1
    with Client(broker.bootstrap) as c:
        d = c.request(15, 5, {"groups": ["g-dur"], "include_authorized_operations": False})
        assert d.groups[0].group_state == "Stable"
        assert [m.member_id for m in d.groups[0].members] == [mid]
        names = {g.group_id for g in c.request(16, 4, {"states_filter": []}).groups}
    assert "g-dur" in names and "g-ret" not in names
    assert commit(broker, "g-dur", gen, mid, offset=12) == E.NONE
    # a hard crash keeps what was acknowledged
    assert broker.proc is not None
    broker.kill()
    broker.start()
    assert fetch_full(broker, "g-dur") == (12, 3, "md")


def simple_commit(b: BrokerProcess, group: str, offset: int) -> int:
    with Client(b.bootstrap) as c:
        r = c.request(8, 9, {"group_id": group, "generation_id_or_member_epoch": -1,
                             "member_id": "", "group_instance_id": None, "topics": [
                                 {"name": "t", "partitions": [{
                                     "partition_index": 0, "committed_offset": offset,
                                     "committed_leader_epoch": 3,
                                     "committed_metadata": f"md{offset}"}]}]})
    return int(r.topics[0].partitions[0].error_code)


def offsets_topic_end(b: BrokerProcess, partition: int) -> int:
    with Client(b.bootstrap) as c:
        return c.list_offset(OFFSETS_TOPIC, partition, -1)[0]


@pytest.mark.timeout(90)
def test_partitions_added_to_offsets_topic_do_not_move_groups(tmp_path: Any) -> None:
    """Kafka 3.9 accepts CreatePartitions on `__consumer_offsets`. The coordinator keeps
    the partition count it started with; after a restart the new count applies and
    the group's records are in two partitions: the newest must still win."""
    g = "g-grow-4"
    old_p, new_p = partition_for(g, 50), partition_for(g, 60)
    assert (old_p, new_p) == (10, 0)  # reloading in partition order would pick the older
    b = BrokerProcess(tmp_path / "data", overrides=GROUP_OVERRIDES)
    b.start()
    try:
        with Client(b.bootstrap) as c:
            assert c.request(10, 3, {"key": g, "key_type": 0}).error_code == 0
            c.create_topic("t", 1)
        assert simple_commit(b, g, 1) == E.NONE
        with Client(b.bootstrap) as c:
            r = c.request(37, 3, {"topics": [{"name": OFFSETS_TOPIC, "count": 60,
                                              "assignments": None}],
                                  "timeout_ms": 30000, "validate_only": False})
            assert r.results[0].error_code == E.NONE  # as Kafka answers
            assert len(c.metadata([OFFSETS_TOPIC]).topics[0].partitions) == 60
        assert simple_commit(b, g, 2) == E.NONE
        # still written where the group lives while this broker runs
        assert (offsets_topic_end(b, old_p), offsets_topic_end(b, new_p)) == (2, 0)
        assert fetch_full(b, g) == (2, 3, "md2")
        b.restart()
        assert fetch_full(b, g) == (2, 3, "md2")
        assert simple_commit(b, g, 3) == E.NONE
        assert offsets_topic_end(b, new_p) == 1  # the new count applies after a restart
        b.restart()
        assert fetch_full(b, g) == (3, 3, "md3")
        assert simple_commit(b, g, 4) == E.NONE
        b.kill()
        b.start()
        assert fetch_full(b, g) == (4, 3, "md4")
    finally:
        b.stop()


@pytest.mark.timeout(90)
def test_offsets_retention_minutes_from_broker_config(tmp_path: Any) -> None:
    """`offsets.retention.minutes` given to the broker expires the offsets of an Empty
    group. The smallest setting is one minute, so commits made 70 s and 52 s ago are
    written into `__consumer_offsets` while the broker is stopped (the coordinator
    stamps commits with its own clock); a fresh commit stays."""
    b = BrokerProcess(tmp_path / "data", overrides={
        **GROUP_OVERRIDES, "offsets.retention.minutes": "1",
        "offsets.retention.check.interval.ms": "200"})
    b.start()
    try:
        with Client(b.bootstrap) as c:
            assert c.request(10, 3, {"key": "x", "key_type": 0}).error_code == 0
            c.create_topic("t", 1)
        assert simple_commit(b, "g-fresh", 5) == E.NONE
        b.stop_gracefully()
        now = int(time.time() * 1000)
        for g, age_ms in (("g-old", 70_000), ("g-recent", 52_000)):
            ts = now - age_ms
            lg = Log.open(tmp_path / "data" / f"{OFFSETS_TOPIC}-{partition_for(g, 50)}",
                          LogConfig(cleanup_policy=("compact",)))
            lg.append(rb.build_batch([rb.NewRecord(
                offset_key(g, "t", 0), offset_value(OffsetAndMetadata(7, 1, "m", ts)), (), ts)]),
                0)
            lg.close()
        b.start()
        t0 = time.monotonic()
        deadline = t0 + 5
        while fetch(b, "g-old") != -1:
            assert time.monotonic() < deadline, "a commit 70 s old outlived a 1-minute retention"
            time.sleep(0.1)
        # 52 s old: 8 s left
        assert fetch_full(b, "g-recent") == (7, 1, "m")
        while fetch(b, "g-recent") != -1:
            assert time.monotonic() < t0 + 15, "a commit outlived a 1-minute retention"
            time.sleep(0.2)
        expired_after = time.monotonic() - t0
        assert expired_after > 4, \
            f"a commit 52 s old expired {expired_after:.1f}s later: retention under 1 minute"
        assert fetch_full(b, "g-fresh") == (5, 3, "md5")
        with Client(b.bootstrap) as c:
            names = {x.group_id for x in c.request(16, 4, {"states_filter": []}).groups}
        assert "g-fresh" in names and not names & {"g-old", "g-recent"}
    finally:
        b.stop()


@pytest.mark.timeout(60)
def test_consumer_offsets_is_compacted(tmp_path: Any) -> None:
    b = BrokerProcess(tmp_path / "data", overrides={
        **GROUP_OVERRIDES, "offsets.topic.segment.bytes": "4096", "log.cleaner.backoff.ms": "200"})
    b.start()
    try:
        with Client(b.bootstrap) as c:
            c.request(10, 3, {"key": "g-compact", "key_type": 0})
            c.create_topic("t", 2)
            for i in range(400):
                r = c.request(8, 9, {"group_id": "g-compact", "generation_id_or_member_epoch": -1,
                                     "member_id": "", "group_instance_id": None, "topics": [
                                         {"name": "t", "partitions": [
                                             {"partition_index": p, "committed_offset": i + p,
                                              "committed_leader_epoch": -1,
                                              "committed_metadata": "x" * 20} for p in (0, 1)]}]})
                assert all(p.error_code == 0 for p in r.topics[0].partitions)
        part = partition_for("g-compact", 50)
        pdir = tmp_path / "data" / f"__consumer_offsets-{part}"

        def size() -> int:
            return sum(f.stat().st_size for f in pdir.glob("*.log"))

        written = 400 * 150  # lower bound of what the commits wrote
        deadline = time.monotonic() + 20
        while size() > written / 4:
            assert time.monotonic() < deadline, f"not compacted: {size()} bytes"
            time.sleep(0.2)
        b.stop()
        b.start()
        assert fetch(b, "g-compact") == 399
    finally:
        b.stop()
