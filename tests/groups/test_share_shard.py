"""Share groups (KIP-932) in the group shard, on the coordinator runtime with an in-memory
log and a clock the test moves: join, heartbeat, leave, session expiry, epoch fencing,
the simple assignor with more members than partitions, the share state's initialization
(effects released only after the commit, initializing -> initialized), deletion, and the
group loaded back from its records in __consumer_offsets."""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.coordinator.runtime import CoordinatorRuntime, LogRecord, Record
from jocko_py.broker.group.consumer import TopicInfo
from jocko_py.broker.group.offsets_store import decode_key
from jocko_py.broker.group.shard import GroupConfig, GroupShard
from jocko_py.broker.group.share import (
    HeartbeatRequest,
    InitRequest,
    ShareConfig,
    ShareGroupModel,
    simple_assign,
)
from jocko_py.broker.group.share_service import MemberLeft
from jocko_py.protocol.errors import ErrorCode as E

G = "sg"
T1 = uuid.UUID(int=11)
TOPICS = {"t": TopicInfo(T1, 2)}
# assignment_interval_ms=0: the target assignment is computed on every heartbeat that
# needs it (the interval's own tests set it through the group's config)
CONFIG = ShareConfig(session_timeout_ms=1000, heartbeat_interval_ms=300, max_size=3,
                     initialize_retry_interval_ms=5000, assignment_interval_ms=0)


class Log:
    def __init__(self) -> None:
        self.records: list[Record] = []

    def append(self, partition: int, records: list[Record], producer: tuple[int, int] | None,
               now: int) -> tuple[E, int]:
        self.records += records
        return E.NONE, len(self.records) - 1


class Harness:
    def __init__(self, records: list[Record] | None = None,
                 overrides: dict[str, str] | None = None) -> None:
        self.now = 10_000
        self.log = Log()
        self.log.records = list(records or [])
        self.effects: list[object] = []
        self.overrides = overrides or {}
        self.rt: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            "group", lambda p: GroupShard(p, GroupConfig(), lambda: TOPICS,
                                          share_config=CONFIG,
                                          group_configs=lambda g: self.overrides), self.log)
        self.rt.on_effect = lambda p, e: self.effects.append(e)
        self.rt.schedule_load(0, 1)
        self.rt.load(0, 1, [LogRecord(k, v) for k, v in self.log.records], self.now,
                     len(self.log.records))
        self.auto_commit = True

    @property
    def shard(self) -> GroupShard:
        s = self.rt.shard(0)
        assert s is not None
        return s

    @property
    def group(self) -> ShareGroupModel:
        sg = self.shard.groups[G].share
        assert sg is not None
        return sg

    def call(self, fn: Any) -> list[tuple[Any, E]]:
        got: list[tuple[Any, E]] = []
        self.rt.write(0, fn, lambda r, e: got.append((r, e)), self.now)
        if self.auto_commit:
            self.rt.committed(0, len(self.log.records))
        return got

    def hb(self, member: str, epoch: int, topics: list[str] | None = None) -> Any:
        got = self.call(lambda s, now: s.share_heartbeat(now, G, HeartbeatRequest(
            member, epoch, None, topics, "client", "/h")))
        assert len(got) == 1 and got[0][1] == E.NONE, got
        return got[0][0]

    def initialize_all(self) -> None:
        """Answer every pending InitRequest as the persister would (success)."""
        for e in [e for e in self.effects if isinstance(e, InitRequest)]:
            self.effects.remove(e)
            self.call(lambda s, now, e=e: s.share_initialized(now, e.group_id, e.topics, True))

    def advance(self, ms: int) -> None:
        end = self.now + ms
        while self.now < end:
            self.now = min(end, self.now + 100)
            self.rt.fire_due(self.now)
            if self.auto_commit:
                self.rt.committed(0, len(self.log.records))


def test_join_initializes_state_then_assigns() -> None:
    h = Harness()
    r = h.hb("m1", 0, ["t"])
    # nothing has share state yet: an empty assignment, and the state is asked for
    assert r.error == E.NONE and r.member_epoch == 1 and r.assignment == frozenset()
    assert r.heartbeat_interval_ms == 300
    inits = [e for e in h.effects if isinstance(e, InitRequest)]
    assert len(inits) == 1 and inits[0].topics == {T1: ("t", frozenset({0, 1}))}
    assert inits[0].state_epoch == 1
    assert h.group.initializing and not h.group.initialized
    h.initialize_all()
    assert set(h.group.initialized[T1].partitions) == {0, 1} and not h.group.initializing
    r = h.hb("m1", 1)
    # initialized partitions not in the target: the epoch is bumped and they are assigned
    assert r.member_epoch == 2 and r.assignment == frozenset({(T1, 0), (T1, 1)})
    assert h.group.state() == "Stable"
    # a heartbeat with nothing new sends no assignment
    r = h.hb("m1", 2)
    assert r.member_epoch == 2 and r.assignment is None


def test_effects_wait_for_the_commit() -> None:
    h = Harness()
    h.auto_commit = False
    got = h.call(lambda s, now: s.share_heartbeat(now, G, HeartbeatRequest(
        "m1", 0, None, ["t"], "c", "/h")))
    assert got == [] and h.effects == []  # neither answer nor effect before the commit
    h.rt.committed(0, len(h.log.records))
    assert got and got[0][1] == E.NONE
    assert any(isinstance(e, InitRequest) for e in h.effects)


def test_second_initialization_not_asked_until_retry_interval() -> None:
    h = Harness()
    h.hb("m1", 0, ["t"])
    h.effects.clear()
    h.hb("m1", 1)
    assert not [e for e in h.effects if isinstance(e, InitRequest)]
    for _ in range(CONFIG.initialize_retry_interval_ms // 500 - 1):
        h.advance(500)
        h.hb("m1", 1)
    assert not [e for e in h.effects if isinstance(e, InitRequest)]
    h.advance(600)
    h.hb("m1", 1)
    assert [e for e in h.effects if isinstance(e, InitRequest)]


def test_failed_initialization_is_asked_again() -> None:
    h = Harness()
    h.hb("m1", 0, ["t"])
    init = next(e for e in h.effects if isinstance(e, InitRequest))
    h.effects.clear()
    h.call(lambda s, now: s.share_initialized(now, G, init.topics, False))
    assert not h.group.initializing and not h.group.initialized
    h.hb("m1", 1)
    assert [e for e in h.effects if isinstance(e, InitRequest)]


def two_partitions_ready(h: Harness) -> None:
    h.hb("m1", 0, ["t"])
    h.initialize_all()
    h.hb("m1", 1)


def test_more_members_than_partitions_share_them() -> None:
    h = Harness()
    two_partitions_ready(h)
    h.hb("m2", 0, ["t"])
    r3 = h.hb("m3", 0, ["t"])
    for m in ("m1", "m2"):
        r = h.hb(m, h.group.members[m].member_epoch)
        assert r.error == E.NONE and r.member_epoch == r3.member_epoch
    got = {m: h.group.members[m].assigned for m in ("m1", "m2", "m3")}
    # Kafka's simple assignor: each partition to ceil(3/2) = 2 members, 4 assignments
    # over 3 members (2, 1, 1); m1, first in id order, keeps both of its partitions
    assert got["m1"] == {(T1, 0), (T1, 1)}, got
    assert len(got["m2"]) == len(got["m3"]) == 1, got
    held = [tp for a in got.values() for tp in a]
    assert sorted(held) == [(T1, 0), (T1, 0), (T1, 1), (T1, 1)], got


def test_simple_assign_spreads() -> None:
    parts = [(T1, p) for p in range(5)]
    a = simple_assign(["a", "b"], parts)
    assert sorted(len(v) for v in a.values()) == [2, 3]
    assert set().union(*a.values()) == set(parts)
    b = simple_assign(["a", "b", "c", "d"], parts[:2])
    assert all(len(v) == 1 for v in b.values()) and set().union(*b.values()) == set(parts[:2])


def test_fencing_and_unknown_member() -> None:
    h = Harness()
    two_partitions_ready(h)
    cur = h.group.members["m1"].member_epoch
    assert h.hb("m1", cur + 1).error == E.FENCED_MEMBER_EPOCH
    prev = h.group.members["m1"].previous_epoch
    assert h.hb("m1", prev).error == E.NONE  # the previous epoch: a lost response
    assert h.hb("m1", prev - 1 if prev > 1 else 0).error in (E.FENCED_MEMBER_EPOCH, E.NONE)
    assert h.hb("nobody", 3).error == E.UNKNOWN_MEMBER_ID
    assert h.hb("nobody", -1).error == E.UNKNOWN_MEMBER_ID


def test_stale_epoch_fenced() -> None:
    h = Harness()
    two_partitions_ready(h)
    h.hb("m2", 0, ["t"])
    h.hb("m3", 0, ["t"])
    m1 = h.group.members["m1"]
    h.hb("m1", m1.member_epoch)  # m1 moves to the newest epoch
    assert m1.previous_epoch > 1
    r = h.hb("m1", 1)
    assert r.error == E.FENCED_MEMBER_EPOCH and "smaller member epoch" in (r.message or "")


def test_max_size() -> None:
    h = Harness()
    for m in ("a", "b", "c"):
        assert h.hb(m, 0, ["t"]).error == E.NONE
    r = h.hb("d", 0, ["t"])
    assert r.error == E.GROUP_MAX_SIZE_REACHED


def test_leave_and_member_left_effect() -> None:
    h = Harness()
    two_partitions_ready(h)
    h.hb("m2", 0, ["t"])
    before = h.group.group_epoch
    r = h.hb("m2", -1)
    assert r.member_epoch == -1
    assert "m2" not in h.group.members and h.group.group_epoch == before + 1
    assert MemberLeft(G, "m2") in h.effects


def test_session_expiry_removes_member() -> None:
    h = Harness()
    two_partitions_ready(h)
    h.hb("m2", 0, ["t"])
    for _ in range(6):
        h.advance(200)
        h.hb("m1", h.group.members["m1"].member_epoch)
    assert "m2" not in h.group.members and "m1" in h.group.members
    assert MemberLeft(G, "m2") in h.effects


def test_group_config_session_timeout_used() -> None:
    h = Harness(overrides={"share.session.timeout.ms": "3000",
                           "share.heartbeat.interval.ms": "700"})
    r = h.hb("m1", 0, ["t"])
    assert r.heartbeat_interval_ms == 700
    h.advance(2000)
    assert "m1" in h.group.members  # 1000 (the broker's) passed, 3000 (the group's) not
    h.advance(1200)
    assert "m1" not in h.group.members


def test_other_protocols_refused() -> None:
    h = Harness()
    h.hb("m1", 0, ["t"])
    from jocko_py.broker.group.consumer import HeartbeatRequest as CHB
    got = h.call(lambda s, now: s.consumer_heartbeat(now, G, CHB(
        member_id="x", member_epoch=0, subscribed_names=["t"])))
    assert got[0][0].error == E.GROUP_ID_NOT_FOUND
    got = h.call(lambda s, now: s.join(
        now, group_id=G, member_id="", instance_id=None, client_id="c", client_host="/h",
        session_timeout_ms=10000, rebalance_timeout_ms=10000, protocol_type="consumer",
        protocols=[("range", b"")], require_known_member_id=False,
        supports_skip_assignment=False))
    assert got[0][0].error == E.INCONSISTENT_GROUP_PROTOCOL


def test_not_a_share_group() -> None:
    h = Harness()
    got = h.call(lambda s, now: s.share_heartbeat(now, "nope", HeartbeatRequest(
        "m", 1, None, None)))
    assert got[0][0].error == E.GROUP_ID_NOT_FOUND
    h.call(lambda s, now: s.join(
        now, group_id="classic", member_id="", instance_id=None, client_id="c",
        client_host="/h", session_timeout_ms=10000, rebalance_timeout_ms=10000,
        protocol_type="consumer", protocols=[("range", b"")], require_known_member_id=False,
        supports_skip_assignment=False))
    got = h.call(lambda s, now: s.share_heartbeat(now, "classic", HeartbeatRequest(
        "m", 0, None, ["t"])))
    assert got[0][0].error == E.GROUP_ID_NOT_FOUND
    assert "is not a share group" in (got[0][0].message or "")


def test_delete_group() -> None:
    h = Harness()
    two_partitions_ready(h)
    got = h.call(lambda s, now: s.delete_group(now, G))
    assert got[0][0] == E.NON_EMPTY_GROUP
    h.hb("m1", -1)
    assert h.group.state() == "Empty"
    got = h.call(lambda s, now: s.delete_group(now, G))
    assert got[0][0] == E.NONE and G not in h.shard.groups
    # reloaded: the tombstones leave nothing
    h2 = Harness(h.log.records)
    assert G not in h2.shard.groups


def test_records_replayed_after_reload() -> None:
    h = Harness()
    two_partitions_ready(h)
    h.hb("m2", 0, ["t"])
    r = h.hb("m2", h.group.members["m2"].member_epoch)
    kinds = {decode_key(k).kind for k, _ in h.log.records}  # type: ignore[union-attr]
    assert {"share_metadata", "share_member", "share_target", "share_current",
            "share_target_metadata", "share_state_partitions"} <= kinds
    before = h.group
    h2 = Harness(h.log.records)
    after = h2.shard.groups[G].share
    assert after is not None
    assert (after.group_epoch, after.assignment_epoch, after.metadata_hash) == \
        (before.group_epoch, before.assignment_epoch, before.metadata_hash)
    assert {m: (x.member_epoch, x.previous_epoch, x.assigned, x.subscribed, x.client_id)
            for m, x in after.members.items()} == \
        {m: (x.member_epoch, x.previous_epoch, x.assigned, x.subscribed, x.client_id)
         for m, x in before.members.items()}
    assert after.target == before.target
    assert {t: set(s.partitions) for t, s in after.initialized.items()} == {T1: {0, 1}}
    # the reloaded group serves the members at their epochs, and writes nothing new
    n = len(h2.log.records)
    assert h2.hb("m2", r.member_epoch).error == E.NONE
    assert len(h2.log.records) == n + 1 or len(h2.log.records) == n


def test_topic_growth_initializes_new_partitions_from_the_start() -> None:
    h = Harness()
    two_partitions_ready(h)
    TOPICS["t"] = TopicInfo(T1, 3)
    try:
        h.effects.clear()
        h.advance(200)  # the tick sees the new partition
        inits = [e for e in h.effects if isinstance(e, InitRequest)]
        assert inits and inits[0].topics == {T1: ("t", frozenset({2}))}
        assert T1 in inits[0].new_partitions
    finally:
        TOPICS["t"] = TopicInfo(T1, 2)
