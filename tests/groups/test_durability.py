"""Durable group state: `__consumer_offsets` layout, reload on restart, offset retention."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from jocko_py.broker.group.coordinator import GroupConfig, GroupCoordinator
from jocko_py.broker.group.offsets_store import (
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
from jocko_py.broker.group.state import Group, GroupState, Member, OffsetAndMetadata
from jocko_py.client import Client
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
    g.generation_id, g.protocol_name, g.state = 4, "range", GroupState.STABLE
    back = decode_group_value("g", group_value(g), time.monotonic())
    assert back.state is GroupState.STABLE and back.generation_id == 4
    assert back.leader_id == "m1" and back.protocol_type == "consumer"
    m = back.members["m1"]
    assert (m.group_instance_id, m.assignment, m.metadata("range")) == ("i1", b"asg", b"sub")
    assert back.static_members == {"i1": "m1"}


# -- offset expiry (coordinator with a recording store) ---------------------------------


class RecordingStore:
    def __init__(self) -> None:
        self.writes: list[tuple[str, list[tuple[bytes, bytes | None]]]] = []

    def append(self, group_id: str, entries: list[tuple[bytes, bytes | None]]) -> E:
        self.writes.append((group_id, entries))
        return E.NONE

    def topic_exists(self) -> bool:
        return True


def make_coordinator(retention_ms: int) -> tuple[GroupCoordinator, RecordingStore]:
    broker: Any = SimpleNamespace(config=SimpleNamespace(int=lambda k: 1, get=lambda k: ""))
    gc = GroupCoordinator(broker, GroupConfig(offsets_retention_ms=retention_ms))
    store = RecordingStore()
    gc.store = store  # type: ignore[assignment]
    gc.loaded = True
    return gc, store


def subscription(*topics: str) -> bytes:
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


def test_offset_expiry_rules() -> None:
    gc, store = make_coordinator(retention_ms=1000)
    simple = gc.groups["simple"] = Group("simple", 0)
    simple.offsets[("t", 0)] = OffsetAndMetadata(1, -1, "", commit_timestamp=5000)
    empty = gc.groups["empty"] = Group("empty", 8000)
    empty.protocol_type = "consumer"
    empty.offsets[("t", 0)] = OffsetAndMetadata(1, -1, "", commit_timestamp=1000)
    stable = gc.groups["stable"] = Group("stable", 0)
    stable.add(Member("m", None, "c", "/h", 1, 1, "consumer", [("range", subscription("t"))]))
    stable.protocol_name, stable.state = "range", GroupState.STABLE
    stable.offsets[("t", 0)] = OffsetAndMetadata(1, -1, "", commit_timestamp=0)
    stable.offsets[("old", 0)] = OffsetAndMetadata(1, -1, "", commit_timestamp=0)
    explicit = gc.groups["explicit"] = Group("explicit", 0)
    explicit.offsets[("t", 0)] = OffsetAndMetadata(1, -1, "", 0, expire_timestamp=5500)

    assert gc.expire_offsets(now=5500) == 2  # stable's unsubscribed "old", explicit
    assert set(stable.offsets) == {("t", 0)}
    assert "explicit" not in gc.groups  # empty and without offsets: removed
    assert gc.expire_offsets(now=6000) == 1  # simple: 1 s after its commit
    assert "simple" not in gc.groups
    assert "empty" in gc.groups  # consumer group: counted from when it became Empty
    assert gc.expire_offsets(now=9000) == 1 and "empty" not in gc.groups
    assert set(stable.offsets) == {("t", 0)}  # subscribed offsets of a live group stay
    tombstones = [(g, k) for g, es in store.writes for k, v in es if v is None]
    assert ("explicit", group_key("explicit")) in tombstones
    assert ("simple", offset_key("simple", "t", 0)) in tombstones


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
    assert fetch(broker, "g-dur") == 11
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
    assert fetch(broker, "g-dur") == 12


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
