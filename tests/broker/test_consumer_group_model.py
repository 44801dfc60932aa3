"""The KIP-848 consumer group model alone (broker/group/consumer.py): epochs, the
two-step reconciliation, fencing, static members, assignors, offsets' member epochs;
and a seeded random schedule checking that no partition is ever held by two members
and that a quiet group converges to its target."""

from __future__ import annotations

import os
import random
import uuid

import pytest

from jocko_py.broker.group.consumer import (
    ConsumerGroupModel,
    HeartbeatRequest,
    MemberState,
    TopicInfo,
    TopicPartition,
    range_assign,
    uniform_assign,
)
from jocko_py.protocol.errors import ErrorCode as E

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": TopicInfo(T1, 6), "b": TopicInfo(T2, 3)}
SESSION = 45_000


def join(g: ConsumerGroupModel, mid: str, topics: list[str] | None = None, now: int = 0,
         **kw: object) -> tuple[int, set[TopicPartition]]:
    r = g.heartbeat(HeartbeatRequest(mid, 0, subscribed_names=topics or ["a"],
                                     rebalance_timeout_ms=30_000, owned=[], **kw),  # type: ignore[arg-type]
                    TOPICS, now, SESSION)
    assert r.error == E.NONE, r
    assert r.assignment is not None
    return r.member_epoch, {(t, p) for t, ps in r.assignment.items() for p in ps}


def beat(g: ConsumerGroupModel, mid: str, epoch: int, owned: set[TopicPartition] | None,
         now: int = 0) -> tuple[E, int, set[TopicPartition] | None]:
    r = g.heartbeat(HeartbeatRequest(mid, epoch, owned=None if owned is None else list(owned)),
                    TOPICS, now, SESSION)
    got = None if r.assignment is None else \
        {(t, p) for t, ps in r.assignment.items() for p in ps}
    return r.error, r.member_epoch, got


def test_first_member_gets_everything_at_epoch_1() -> None:
    g = ConsumerGroupModel("g")
    epoch, parts = join(g, "m1")
    assert epoch == 1 and parts == {(T1, p) for p in range(6)}
    assert g.state().value == "Stable"


def test_a_second_member_waits_for_the_first_to_revoke() -> None:
    g = ConsumerGroupModel("g")
    e1, p1 = join(g, "m1")
    e2, p2 = join(g, "m2")
    # m2 is at the new epoch but every partition it targets is still held by m1
    assert e2 == 2 and p2 == set()
    assert g.state().value == "Reconciling"
    # m1 learns what it keeps; it stays at its epoch until it has revoked the rest
    err, e, keep = beat(g, "m1", e1, p1)
    assert err == E.NONE and e == e1 and keep is not None and len(keep) == 3
    assert g.members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    # still owning the revoked partitions: nothing moves
    err, e, again = beat(g, "m1", e1, p1)
    assert e == e1 and again in (None, keep)
    # revoked: m1 moves to epoch 2, and m2 gets the released partitions
    err, e, _ = beat(g, "m1", e1, keep)
    assert err == E.NONE and e == 2
    err, e, got = beat(g, "m2", 2, set())
    assert got == {(T1, p) for p in range(6)} - keep
    assert g.state().value == "Stable"


def test_fencing_and_the_previous_epoch() -> None:
    g = ConsumerGroupModel("g")
    e1, p1 = join(g, "m1")
    assert beat(g, "m1", e1 + 5, p1)[0] == E.FENCED_MEMBER_EPOCH
    assert beat(g, "nobody", 1, None)[0] == E.UNKNOWN_MEMBER_ID
    join(g, "m2")
    _, _, keep = beat(g, "m1", e1, p1)
    assert keep is not None
    _, e, _ = beat(g, "m1", e1, keep)
    assert e == 2
    # the answer that moved m1 to epoch 2 was lost: its previous epoch, owning a subset
    # of its assignment, is still accepted
    assert beat(g, "m1", e1, keep)[0] == E.NONE
    # the previous epoch claiming partitions it does not hold is not
    assert beat(g, "m1", e1, p1)[0] == E.FENCED_MEMBER_EPOCH


def test_leave_frees_the_partitions_and_bumps_the_epoch() -> None:
    g = ConsumerGroupModel("g")
    join(g, "m1")
    e2, _ = join(g, "m2")
    epoch = g.group_epoch
    r = g.heartbeat(HeartbeatRequest("m2", -1), TOPICS, 0, SESSION)
    assert r.error == E.NONE and r.member_epoch == -1
    assert g.group_epoch == epoch + 1 and "m2" not in g.members


def test_session_and_revocation_timeouts() -> None:
    g = ConsumerGroupModel("g")
    e1, p1 = join(g, "m1", now=0)
    join(g, "m2", now=0)
    beat(g, "m1", e1, p1, now=1000)  # told to revoke, never does
    assert g.expired(1000 + 30_001, SESSION) == [
        ("m1", "partitions not revoked within 30000 ms")]
    assert "m2" in [m for m, _ in g.expired(SESSION + 1, SESSION)]
    assert "m2" not in [m for m, _ in g.expired(SESSION, SESSION)]
    g.remove_member("m1")
    assert "m1" not in g.members


def test_static_member_comes_back_under_a_new_id_without_a_rebalance() -> None:
    g = ConsumerGroupModel("g")
    e1, p1 = join(g, "m1", instance_id="i-1")
    r = g.heartbeat(HeartbeatRequest("m1", -2, instance_id="i-1"), TOPICS, 0, SESSION)
    assert r.member_epoch == -2
    epoch = g.group_epoch
    # a different process may not take the instance while it is held
    e2, _ = join(g, "m2", instance_id="i-2")
    g2 = g.group_epoch
    r = g.heartbeat(HeartbeatRequest("m3", 0, instance_id="i-2", subscribed_names=["a"],
                                     rebalance_timeout_ms=1), TOPICS, 0, SESSION)
    assert r.error == E.UNRELEASED_INSTANCE_ID
    ep, parts = join(g, "m1b", instance_id="i-1")
    assert "m1" not in g.members and "m1b" in g.members
    assert g.group_epoch == g2 and epoch < g2  # the return itself bumped nothing
    assert parts <= p1


def test_offsets_carry_the_member_epoch() -> None:
    g = ConsumerGroupModel("g")
    assert g.check_commit("", -1) == E.NONE  # empty group: a simple commit
    e1, _ = join(g, "m1")
    assert g.check_commit("m1", e1) == E.NONE
    assert g.check_commit("m1", e1 - 1) == E.STALE_MEMBER_EPOCH
    assert g.check_commit("zz", e1) == E.UNKNOWN_MEMBER_ID
    assert g.check_commit("", -1) == E.UNKNOWN_MEMBER_ID


def test_unsupported_assignor_and_bad_regex() -> None:
    g = ConsumerGroupModel("g")
    r = g.heartbeat(HeartbeatRequest("m", 0, subscribed_names=["a"], rebalance_timeout_ms=1,
                                     server_assignor="sticky"), TOPICS, 0, SESSION)
    assert r.error == E.UNSUPPORTED_ASSIGNOR
    r = g.heartbeat(HeartbeatRequest("m", 0, subscribed_regex="(", rebalance_timeout_ms=1),
                    TOPICS, 0, SESSION)
    assert r.error == E.INVALID_REGULAR_EXPRESSION


def test_regex_and_new_partitions_bump_the_group_epoch() -> None:
    g = ConsumerGroupModel("g")
    r = g.heartbeat(HeartbeatRequest("m", 0, subscribed_regex="[ab]", rebalance_timeout_ms=1,
                                     owned=[]), TOPICS, 0, SESSION)
    assert r.assignment is not None and set(r.assignment) == {T1, T2}
    epoch = g.group_epoch
    grown = {**TOPICS, "b": TopicInfo(T2, 5), "__consumer_offsets": TopicInfo(uuid.uuid4(), 50)}
    g.refresh_topics(grown)
    assert g.group_epoch == epoch + 1
    assert len(g.target["m"]) == 11  # `[ab]` does not match `__consumer_offsets`


def test_regex_matches_internal_topics_too() -> None:
    """As Kafka's coordinator resolves a KIP-848 regex: a full match over every topic
    name, internal ones included (franz-go's Test848RegexBrokerResolves)."""
    g = ConsumerGroupModel("g")
    offsets = uuid.uuid4()
    topics = {**TOPICS, "__consumer_offsets": TopicInfo(offsets, 4)}
    r = g.heartbeat(HeartbeatRequest("m", 0, subscribed_regex=".*(?:(?:a)|(?:__consumer_offsets)).*",
                                     rebalance_timeout_ms=1, owned=[]), topics, 0, SESSION)
    assert r.assignment is not None and set(r.assignment) == {T1, offsets}
    assert g.subscribed_topics(g.members["m"], topics) == {"a", "__consumer_offsets"}
    # a full match, not a search: `consumer` alone matches nothing
    g2 = ConsumerGroupModel("g2")
    r = g2.heartbeat(HeartbeatRequest("m", 0, subscribed_regex="consumer",
                                      rebalance_timeout_ms=1, owned=[]), topics, 0, SESSION)
    assert r.assignment is not None and not r.assignment


def test_range_and_uniform_assignors() -> None:
    subs = {"m1": {T1, T2}, "m2": {T1, T2}, "m3": {T1}}
    parts = {T1: 6, T2: 3}
    r = range_assign(subs, parts)
    assert r["m1"] >= {(T1, 0), (T1, 1), (T2, 0), (T2, 1)} and r["m3"] == {(T1, 4), (T1, 5)}
    u = uniform_assign(subs, parts, {})
    assert sorted(len(v) for v in u.values()) == [3, 3, 3]
    assert set().union(*u.values()) == {(T1, p) for p in range(6)} | {(T2, p) for p in range(3)}
    # sticky: removing m3 keeps what m1 and m2 had
    u2 = uniform_assign({"m1": {T1, T2}, "m2": {T1, T2}}, parts, u)
    assert u["m1"] <= u2["m1"] and u["m2"] <= u2["m2"]


SEED = int(os.environ.get("JOCKO_GROUP_SIM_SEED", random.randrange(1 << 30)))


@pytest.mark.parametrize("seed", [SEED, SEED + 1, SEED + 2, 7])
def test_random_schedules_never_share_a_partition(seed: int) -> None:
    """Members join, leave, crash, heartbeat late and revoke after random delays; after
    every step no partition is held (assigned or being revoked) by two members; once
    faults stop and everyone heartbeats, the group is Stable and covers every partition.
    Replay: JOCKO_GROUP_SIM_SEED=<seed>."""
    print(f"consumer group schedule seed {seed}")
    rng = random.Random(seed)
    g = ConsumerGroupModel("g", ("uniform",) if seed % 2 else ("range",))
    owned: dict[str, set[TopicPartition]] = {}
    epochs: dict[str, int] = {}
    n = 0

    def check() -> None:
        held: dict[TopicPartition, str] = {}
        for m in g.members.values():
            for tp in m.assigned | m.revoking:
                assert tp not in held, f"seed {seed}: {tp} held by {held[tp]} and {m.member_id}"
                held[tp] = m.member_id
        for mid, tps in owned.items():  # what clients think they own is theirs
            for tp in tps:
                assert held.get(tp) == mid, f"seed {seed}: {mid} owns {tp} held by {held.get(tp)}"

    def step(mid: str) -> None:
        err, e, got = beat(g, mid, epochs[mid], owned[mid])
        if err != E.NONE:
            owned.pop(mid)
            epochs.pop(mid)
            return
        epochs[mid] = e
        if got is not None:
            # the client drops what it lost at once, and takes what it was given
            owned[mid] = set(got)

    for _ in range(300):
        r = rng.random()
        if r < 0.15 and len(owned) < 5:
            mid = f"m{n}"
            n += 1
            epochs[mid], owned[mid] = join(g, mid, rng.choice([["a"], ["a", "b"]]))
        elif r < 0.22 and owned:
            mid = rng.choice(sorted(owned))
            g.heartbeat(HeartbeatRequest(mid, -1), TOPICS, 0, SESSION)
            owned.pop(mid), epochs.pop(mid)
        elif r < 0.27 and owned:
            mid = rng.choice(sorted(owned))  # crash: the session timeout removes it
            owned.pop(mid), epochs.pop(mid)
            g.remove_member(mid)
        elif owned:
            step(rng.choice(sorted(owned)))
        check()
    for _ in range(20):
        for mid in sorted(owned):
            step(mid)
            check()
    if owned:
        assert g.state().value == "Stable", (seed, g.state())
        subscribed = set().union(*(g.subscribed_topics(m, TOPICS) for m in g.members.values()))
        want = {(TOPICS[t].topic_id, p) for t in subscribed for p in range(TOPICS[t].partitions)}
        assert set().union(*owned.values()) == want, seed


def test_a_classic_member_reconciles_by_rejoining() -> None:
    """Online migration: a classic member (JoinGroup/SyncGroup/Heartbeat) in a consumer
    group gets its partitions at its JoinGroup, is told REBALANCE_IN_PROGRESS by its
    heartbeat when it must give some up or can take more, and gives them up by joining
    again without them."""
    from jocko_py.broker.group.consumer import ClassicInfo
    g = ConsumerGroupModel("g")
    info = ClassicInfo([("range", b"")], 10_000, "range")
    m = g.classic_join("c1", None, "c", "/h", ["a"], frozenset(), info, 30_000, TOPICS, 0)
    assert m.member_epoch == 1 and len(m.assigned) == 6
    assert g.classic_heartbeat("c1", 1, 0) == E.NONE
    assert g.classic_heartbeat("c1", 0, 0) == E.ILLEGAL_GENERATION
    e2, got = join(g, "n1")  # a consumer-protocol member arrives
    assert got == set()
    assert g.classic_heartbeat("c1", 1, 0) == E.REBALANCE_IN_PROGRESS
    # an eager member rejoins having revoked everything: it gets its target at once
    m = g.classic_join("c1", None, "c", "/h", ["a"], frozenset(), info, 30_000, TOPICS, 0)
    assert m.member_epoch == e2 and len(m.assigned) == 3
    assert g.classic_heartbeat("c1", e2, 0) == E.NONE
    _, _, got2 = beat(g, "n1", e2, set())
    assert got2 is not None and len(got2) == 3 and not got2 & m.assigned
    assert g.expired(10_001, SESSION) == [("c1", "no heartbeat for 10000 ms")]


def test_a_stable_classic_member_rejoining_at_the_same_epoch_gets_its_partitions_back() -> None:
    """Regression (CI 2026-11-28, test_classic_group_upgraded_in_place_and_back): an eager
    classic member (kafka-python) rejoins having revoked everything while the assignment
    epoch has not moved. It used to be answered 'stable at this epoch' with nothing, its
    heartbeat then said REBALANCE_IN_PROGRESS (its target is free), and it rejoined every
    heartbeat interval forever with 0 partitions."""
    from jocko_py.broker.group.consumer import ClassicInfo
    g = ConsumerGroupModel("g")
    info = ClassicInfo([("range", b"")], 10_000, "range")
    m = g.classic_join("c1", None, "c", "/h", ["a"], frozenset(), info, 30_000, TOPICS, 0)
    assert m.member_epoch == 1 and len(m.assigned) == 6
    for _ in range(3):
        m = g.classic_join("c1", None, "c", "/h", ["a"], frozenset(), info, 30_000, TOPICS, 0)
        assert m.member_epoch == 1 and len(m.assigned) == 6, m
        assert g.classic_heartbeat("c1", 1, 0) == E.NONE
