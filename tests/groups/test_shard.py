"""Every transition of the classic group state machine (broker/group/state.py), driven
through the group shard on the coordinator runtime with an in-memory log and a clock
the test moves: the requests and timers that take a group from one state to the next,
the answers released only once the group's records are committed, the group loaded
back from its records, and the KIP-848 upgrade and downgrade (which replace the group
rather than bypass the transitions)."""

from __future__ import annotations

import struct
import uuid
from typing import Any

from jocko_py.broker.coordinator.runtime import CoordinatorRuntime, LogRecord, Record
from jocko_py.broker.group.consumer import HeartbeatRequest, TopicInfo
from jocko_py.broker.group.offsets import CommitRequest
from jocko_py.broker.group.offsets_store import decode_key, group_key
from jocko_py.broker.group.shard import GroupConfig, GroupShard
from jocko_py.broker.group.state import GroupState, JoinResult, SyncResult
from jocko_py.protocol import messages
from jocko_py.protocol.errors import ErrorCode as E

S = GroupState
G = "g"
SESSION = 1000
REBALANCE = 2000
DELAY = 300
TOPICS = {"t": TopicInfo(uuid.UUID(int=1), 4)}


def subscription(*topics: str) -> bytes:
    body = messages.data_schema("ConsumerProtocolSubscription", 0).build(
        {"topics": list(topics), "user_data": None})
    return struct.pack(">h", 0) + bytes(body)


class Log:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.refuse: E | None = None

    def append(self, partition: int, records: list[Record], producer: tuple[int, int] | None,
               now: int) -> tuple[E, int]:
        if self.refuse is not None:
            return self.refuse, -1
        self.records += records
        return E.NONE, len(self.records) - 1


class Harness:
    def __init__(self, records: list[Record] | None = None, **config: Any) -> None:
        self.now = 10_000
        self.log = Log()
        if records:
            self.log.records = list(records)
        ids = iter(range(1, 1000))
        self.config = GroupConfig(min_session_timeout_ms=100,
                                  initial_rebalance_delay_ms=DELAY, **config)
        self.rt: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            "group", lambda p: GroupShard(p, self.config, lambda: TOPICS,
                                          lambda: f"id{next(ids)}"), self.log)
        self.rt.schedule_load(0, 1)
        self.rt.load(0, 1, [LogRecord(k, v) for k, v in self.log.records], self.now,
                     len(self.log.records))
        self.auto_commit = True

    @property
    def shard(self) -> GroupShard:
        s = self.rt.shard(0)
        assert s is not None
        return s

    def state(self) -> GroupState:
        return self.shard.groups[G].state

    def call(self, fn: Any) -> list[tuple[Any, E]]:
        """Run one operation; its answer (a list, filled when released)."""
        got: list[tuple[Any, E]] = []
        self.rt.write(0, fn, lambda r, e: got.append((r, e)), self.now)
        self.commit()
        return got

    def commit(self) -> None:
        if self.auto_commit:
            self.rt.committed(0, len(self.log.records))

    def advance(self, ms: int) -> None:
        end = self.now + ms
        while self.now < end:
            self.now = min(end, self.now + 100)
            self.rt.fire_due(self.now)
            self.commit()

    def join(self, member_id: str = "", instance: str | None = None, client: str = "c",
             protocols: list[tuple[str, bytes]] | None = None) -> list[tuple[Any, E]]:
        return self.call(lambda s, now: s.join(
            now, group_id=G, member_id=member_id, instance_id=instance, client_id=client,
            client_host="/h", session_timeout_ms=SESSION, rebalance_timeout_ms=REBALANCE,
            protocol_type="consumer",
            protocols=protocols or [("range", subscription("t"))],
            require_known_member_id=False, supports_skip_assignment=False))

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None
             ) -> list[tuple[Any, E]]:
        return self.call(lambda s, now: s.sync(
            now, group_id=G, generation_id=generation, member_id=member_id, instance_id=None,
            protocol_type=None, protocol_name=None, assignments=assignments or {}))

    def heartbeat(self, member_id: str, generation: int) -> E:
        got = self.call(lambda s, now: s.heartbeat(now, G, member_id, None, generation))
        assert got and got[0][1] == E.NONE
        return got[0][0]  # type: ignore[no-any-return]

    def leave(self, member_id: str) -> list[E]:
        got = self.call(lambda s, now: s.leave(now, G, [(member_id, None)]))
        return got[0][0][1]  # type: ignore[no-any-return]


def answer(got: list[tuple[Any, E]]) -> Any:
    assert len(got) == 1 and got[0][1] == E.NONE, got
    return got[0][0]


def assignment(*parts: int) -> bytes:
    body = messages.data_schema("ConsumerProtocolAssignment", 0).build(
        {"assigned_partitions": [{"topic": "t", "partitions": list(parts)}],
         "user_data": None})
    return struct.pack(">h", 0) + bytes(body)


def stable_group(h: Harness, n: int = 1, assign: Any = str.encode) -> tuple[list[str], int]:
    """Members joined and synced: (member ids, generation)."""
    waits = [h.join(client=f"c{i}") for i in range(n)]
    assert h.state() is S.PREPARING_REBALANCE and all(w == [] for w in waits)
    # the initial delay, extended while members keep arriving (up to the rebalance timeout)
    h.advance(DELAY if n == 1 else 2 * DELAY)
    results: list[JoinResult] = [answer(w) for w in waits]
    assert h.state() is S.COMPLETING_REBALANCE
    ids = [r.member_id for r in results]
    gen = results[0].generation_id
    leader = results[0].leader_id
    syncs = [h.sync(mid, gen, {m: assign(m) for m in ids} if mid == leader else None)
             for mid in ids]
    assert h.state() is S.STABLE
    for mid, got in zip(ids, syncs, strict=True):
        r: SyncResult = answer(got)
        assert r.error == E.NONE and r.assignment == assign(mid)
    return ids, gen


def test_empty_to_preparing_to_completing_to_stable() -> None:
    h = Harness()
    got = h.join()
    assert got == [] and h.state() is S.PREPARING_REBALANCE  # held: the initial delay
    h.advance(DELAY - 100)
    assert got == []
    h.advance(100)
    r = answer(got)
    assert r.error == E.NONE and r.generation_id == 1 and r.leader_id == r.member_id
    assert h.state() is S.COMPLETING_REBALANCE
    # the leader's SyncGroup stores the group: answered once that record is committed
    h.auto_commit = False
    sync = h.sync(r.member_id, 1, {r.member_id: b"a"})
    assert h.state() is S.STABLE and sync == []
    assert decode_key(h.log.records[-1][0]).kind == "group"  # type: ignore[union-attr]
    h.auto_commit = True
    h.commit()
    assert answer(sync).assignment == b"a"


def test_stable_to_preparing_on_join_leave_and_session_expiry() -> None:
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    assert h.heartbeat(a, gen) == E.NONE
    # a new member
    got = h.join(client="new")
    assert h.state() is S.PREPARING_REBALANCE and got == []
    assert h.heartbeat(a, gen) == E.REBALANCE_IN_PROGRESS
    # the others rejoin: the rebalance completes
    ja, jb = h.join(a), h.join(b)
    r = answer(got)
    assert h.state() is S.COMPLETING_REBALANCE and r.generation_id == gen + 1
    assert answer(ja).generation_id == answer(jb).generation_id == gen + 1
    ids = [answer(ja).member_id, answer(jb).member_id, r.member_id]
    leader = answer(ja).leader_id
    for mid in [leader] + [m for m in ids if m != leader]:
        h.sync(mid, gen + 1, {m: b"x" for m in ids} if mid == leader else None)
    assert h.state() is S.STABLE
    # a member leaves
    assert h.leave(ids[2]) == [E.NONE]
    assert h.state() is S.PREPARING_REBALANCE
    j0, j1 = h.join(ids[0]), h.join(ids[1])
    assert answer(j0).generation_id == gen + 2 and j1 != []
    for mid in (leader, next(m for m in ids[:2] if m != leader)):
        h.sync(mid, gen + 2, {m: b"y" for m in ids[:2]} if mid == leader else None)
    assert h.state() is S.STABLE
    # a member's session expires (the other keeps heartbeating)
    for _ in range(SESSION // 200 + 2):
        h.advance(200)
        h.call(lambda s, now: s.heartbeat(now, G, ids[0], None, gen + 2))
    assert h.state() is S.PREPARING_REBALANCE
    assert ids[1] not in h.shard.groups[G].members


def test_completing_to_preparing() -> None:
    """A member leaving while the group waits for the leader's assignment, or a
    rebalance that times out in CompletingRebalance, sends the group back to
    PreparingRebalance; the members waiting in SyncGroup get REBALANCE_IN_PROGRESS."""
    h = Harness()
    ja, jb = h.join(client="a"), h.join(client="b")
    h.advance(2 * DELAY)
    a, b = answer(ja), answer(jb)
    follower = a if a.leader_id != a.member_id else b
    leader = b if follower is a else a
    waiting = h.sync(follower.member_id, follower.generation_id)
    assert waiting == [] and h.state() is S.COMPLETING_REBALANCE
    assert h.leave(follower.member_id) == [E.NONE]
    assert answer(waiting).error == E.UNKNOWN_MEMBER_ID
    assert h.state() is S.PREPARING_REBALANCE
    # only the leader is left; it rejoins; then never syncs: removed at the deadline
    rejoin = h.join(leader.member_id)
    r = answer(rejoin)
    assert h.state() is S.COMPLETING_REBALANCE
    h.advance(REBALANCE + 200)
    assert r.member_id not in h.shard.groups[G].members
    assert h.state() is S.EMPTY  # via PreparingRebalance: nobody left to rejoin


def test_preparing_to_empty() -> None:
    h = Harness()
    (a,), gen = stable_group(h)
    h.join(client="b")  # Stable -> PreparingRebalance
    assert h.state() is S.PREPARING_REBALANCE
    # the others never rejoin: removed at the rebalance timeout; the newcomer leaves
    pending = h.shard.groups[G]
    newcomer = next(m for m in pending.members if m != a)
    assert h.leave(newcomer) == [E.NONE]
    h.advance(REBALANCE + 200)
    g = h.shard.groups[G]
    assert g.state is S.EMPTY and not g.members and g.generation_id == gen + 1
    assert decode_key(h.log.records[-1][0]).kind == "group"  # type: ignore[union-attr]


def test_empty_to_dead_by_delete_and_by_expiry() -> None:
    h = Harness(offsets_retention_ms=1000)
    commit = h.call(lambda s, now: s.commit(
        now, group_id=G, generation_id=-1, member_id="", instance_id=None, retention_ms=-1,
        offsets={("t", 0): CommitRequest(5, -1, "")}))
    assert answer(commit) == {("t", 0): E.NONE}
    g = h.shard.groups[G]
    assert g.state is S.EMPTY and g.offsets[("t", 0)].offset == 5
    assert answer(h.call(lambda s, now: s.delete_group(now, G))) == E.NONE
    assert g.state is S.DEAD and G not in h.shard.groups
    assert h.log.records[-1] == (group_key(G), None)
    # expiry: an empty group whose offsets all expired goes the same way
    answer(h.call(lambda s, now: s.commit(
        now, group_id=G, generation_id=-1, member_id="", instance_id=None, retention_ms=-1,
        offsets={("t", 1): CommitRequest(7, -1, "")})))
    g = h.shard.groups[G]
    assert answer(h.call(lambda s, now: s.expire_offsets(now + 1000))) == 1
    assert g.state is S.DEAD and G not in h.shard.groups


def test_stable_to_dead_by_a_tombstone_in_the_log() -> None:
    h = Harness()
    stable_group(h)
    g = h.shard.groups[G]
    h.shard.replay(LogRecord(group_key(G), None))
    assert g.state is S.DEAD and G not in h.shard.groups


def test_refused_group_write_rebalances() -> None:
    """The leader's assignment could not be written: every member waiting in SyncGroup
    gets the error and the group goes back from Stable to PreparingRebalance."""
    h = Harness()
    ja, jb = h.join(client="a"), h.join(client="b")
    h.advance(2 * DELAY)
    a, b = answer(ja), answer(jb)
    follower = a if a.leader_id != a.member_id else b
    leader = b if follower is a else a
    waiting = h.sync(follower.member_id, follower.generation_id)
    h.log.refuse = E.NOT_ENOUGH_REPLICAS
    got = h.sync(leader.member_id, leader.generation_id, {a.member_id: b"1", b.member_id: b"2"})
    assert answer(got).error == E.COORDINATOR_NOT_AVAILABLE
    assert answer(waiting).error == E.COORDINATOR_NOT_AVAILABLE
    g = h.shard.groups[G]
    assert g.state is S.PREPARING_REBALANCE and all(m.assignment == b"" for m in
                                                    g.members.values())


def test_loaded_group_is_stable_through_the_transitions() -> None:
    h = Harness()
    (a,), gen = stable_group(h)
    answer(h.call(lambda s, now: s.commit(
        now, group_id=G, generation_id=gen, member_id=a, instance_id=None, retention_ms=-1,
        offsets={("t", 0): CommitRequest(9, 2, "m")})))
    h2 = Harness(records=h.log.records)
    g = h2.shard.groups[G]
    assert g.state is S.STABLE and g.generation_id == gen and list(g.members) == [a]
    assert g.offsets[("t", 0)].offset == 9
    assert h2.heartbeat(a, gen) == E.NONE
    # sessions start anew at the load; the only member's expires: Stable ->
    # PreparingRebalance -> (nobody left to wait for) Empty
    h2.advance(SESSION + 200)
    assert h2.state() is S.EMPTY and not h2.shard.groups[G].members


def test_stale_generation_commit_never_lands() -> None:
    h = Harness()
    (a,), gen = stable_group(h)
    got = h.call(lambda s, now: s.commit(
        now, group_id=G, generation_id=gen - 1, member_id=a, instance_id=None,
        retention_ms=-1, offsets={("t", 0): CommitRequest(3, -1, "")}))
    assert answer(got) == {("t", 0): E.ILLEGAL_GENERATION}
    assert ("t", 0) not in h.shard.groups[G].offsets
    # a refused write changes nothing either
    h.log.refuse = E.NOT_LEADER_OR_FOLLOWER
    got = h.call(lambda s, now: s.commit(
        now, group_id=G, generation_id=gen, member_id=a, instance_id=None,
        retention_ms=-1, offsets={("t", 0): CommitRequest(3, -1, "")}))
    assert answer(got) == {("t", 0): E.NOT_COORDINATOR}
    assert ("t", 0) not in h.shard.groups[G].offsets


def test_upgrade_and_downgrade_replace_the_group() -> None:
    """A consumer-protocol member joining a Stable classic group upgrades it in place: a
    new group (Empty, holding the consumer model and the offsets) replaces the classic
    one. When the last consumer-protocol member leaves, a new classic group is built
    Stable through the transitions and rebalances."""
    h = Harness()
    (a,), gen = stable_group(h, assign=lambda m: assignment(0, 1, 2, 3))
    classic = h.shard.groups[G]
    hb = HeartbeatRequest(member_id="k1", member_epoch=0, rebalance_timeout_ms=REBALANCE,
                          subscribed_names=["t"], client_id="k", client_host="/h")
    r = answer(h.call(lambda s, now: s.consumer_heartbeat(now, G, hb)))
    assert r.error == E.NONE
    g = h.shard.groups[G]
    assert g is not classic and g.state is S.EMPTY and g.consumer is not None
    assert set(g.consumer.members) == {a, "k1"}
    leave = HeartbeatRequest(member_id="k1", member_epoch=-1)
    assert answer(h.call(lambda s, now: s.consumer_heartbeat(now, G, leave))).error == E.NONE
    g2 = h.shard.groups[G]
    assert g2 is not g and g2.consumer is None
    assert g2.state is S.PREPARING_REBALANCE and list(g2.members) == [a]


def test_idle_shard_stops_ticking() -> None:
    """The group tick runs while some group has members, and stops when none has: an
    idle coordinator partition costs nothing; the next request arms it again."""
    h = Harness()
    assert h.rt.timer(0, "tick") is not None  # armed at the load
    h.advance(200)
    assert h.rt.timer(0, "tick") is None  # nothing to look after
    got = h.join()
    assert h.rt.timer(0, "tick") is not None
    h.advance(DELAY)
    r = answer(got)
    assert h.leave(r.member_id) == [E.NONE]
    h.advance(300)
    assert h.state() is S.EMPTY and h.rt.timer(0, "tick") is None


def test_refused_consumer_group_write_is_written_again() -> None:
    """A KIP-848 heartbeat whose records the log refused: the next write of the group
    writes them (the shard diffs against what the log holds, not against what it tried
    to write), so a coordinator loading the log knows the member. Regression of seed
    943178995 of the whole-broker simulation: the member records were never written, a
    new coordinator lost the member and gave its partitions to another live one."""
    h = Harness()
    hb = HeartbeatRequest(member_id="k1", member_epoch=0, rebalance_timeout_ms=REBALANCE,
                          subscribed_names=["t"], client_id="k", client_host="/h")
    h.log.refuse = E.MESSAGE_TOO_LARGE
    refused = h.call(lambda s, now: s.consumer_heartbeat(now, G, hb))
    assert answer(refused).error != E.NONE
    h.log.refuse = None
    again = HeartbeatRequest(member_id="k1", member_epoch=0, rebalance_timeout_ms=REBALANCE,
                             subscribed_names=["t"], client_id="k", client_host="/h")
    assert answer(h.call(lambda s, now: s.consumer_heartbeat(now, G, again))).error == E.NONE
    loaded = Harness(records=h.log.records)
    cg = loaded.shard.groups[G].consumer
    assert cg is not None and set(cg.members) == {"k1"}
    assert list(cg.members["k1"].subscribed_names or ()) == ["t"]
