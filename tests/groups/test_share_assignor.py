"""The share groups' simple assignor (Kafka 4.4's SimpleAssignor) and
``group.share.assignment.interval.ms``: the assignor alone (sharing, per-member counts,
stickiness, a seeded random check of its invariants) and through the group shard on the
coordinator runtime (tests/groups/test_share_shard.py's harness, a clock the test moves).
"""

from __future__ import annotations

import os
import random
import uuid

from jocko_py.broker.group.consumer import TopicInfo, TopicPartition
from jocko_py.broker.group.share import (
    ShareConfig,
    can_compute_target,
    desired_counts,
    simple_assign,
)
from tests.groups.test_share_shard import T1, G, Harness

T2 = uuid.UUID(int=12)


def parts(n: int, tid: uuid.UUID = T1) -> list[TopicPartition]:
    return [(tid, p) for p in range(n)]


def moved(before: dict[str, frozenset[TopicPartition]],
          after: dict[str, frozenset[TopicPartition]]) -> int:
    """Assignments members that stayed lost."""
    return sum(len(before[m] - after[m]) for m in before if m in after)


def test_desired_counts_as_kafka() -> None:
    assert desired_counts(2, 5) == (1, [3, 2])
    assert desired_counts(3, 2) == (2, [2, 1, 1])
    assert desired_counts(4, 2) == (2, [1, 1, 1, 1])
    assert desired_counts(3, 7) == (1, [3, 2, 2])
    assert desired_counts(5, 3) == (2, [2, 1, 1, 1, 1])
    assert desired_counts(0, 3) == (0, [])
    assert desired_counts(2, 0) == (0, [0, 0])


def test_first_assignment_is_round_robin() -> None:
    a = simple_assign(["a", "b"], parts(5))
    assert a == {"a": frozenset(parts(5)[0::2]), "b": frozenset(parts(5)[1::2])}
    # more members than partitions: each partition to `sharing` members in turn
    b = simple_assign(["a", "b", "c", "d"], parts(2))
    assert b == {"a": {(T1, 0)}, "b": {(T1, 0)}, "c": {(T1, 1)}, "d": {(T1, 1)}}
    c = simple_assign(["a", "b", "c"], parts(2))
    assert c == {"a": {(T1, 0), (T1, 1)}, "b": {(T1, 0)}, "c": {(T1, 1)}}
    assert simple_assign([], parts(3)) == {}
    assert simple_assign(["a"], []) == {"a": frozenset()}


def test_unchanged_membership_keeps_the_assignment() -> None:
    # a previous assignment that is balanced but not what a fresh round-robin gives
    prev = {"a": frozenset({(T1, 3), (T1, 1)}), "b": frozenset({(T1, 0), (T1, 2)})}
    assert simple_assign(["a", "b"], parts(4), prev) == prev
    assert simple_assign(["a", "b"], parts(4)) != prev


def test_join_and_leave_move_only_what_they_must() -> None:
    two = simple_assign(["a", "b"], parts(6))
    three = simple_assign(["a", "b", "c"], parts(6), two)
    assert [len(three[m]) for m in "abc"] == [2, 2, 2]
    assert three["a"] <= two["a"] and three["b"] <= two["b"]
    assert moved(two, three) == 2  # what c takes, and no more
    back = simple_assign(["a", "b"], parts(6), {m: three[m] for m in "ab"})
    assert back["a"] >= three["a"] and back["b"] >= three["b"]
    assert moved({m: three[m] for m in "ab"}, back) == 0
    assert sorted(tp for v in back.values() for tp in v) == parts(6)


def test_unassignable_partitions_are_dropped() -> None:
    prev = {"a": frozenset({(T1, 0), (T1, 5), (T2, 0)}), "b": frozenset({(T1, 1)})}
    got = simple_assign(["a", "b"], parts(3), prev)  # T1-5 and T2 went
    assert got["a"] == {(T1, 0), (T1, 2)} and got["b"] == {(T1, 1)}


def test_invariants_random() -> None:
    """Seeded: for random memberships and partition counts, each followed by random
    joins and leaves: every partition has from one to `sharing` holders and each member
    at most its count, and one short of its count only when every partition short of
    holders is its already (the round-robin cannot place more: Kafka's assignor stops
    there too); with one member per partition, all exact; assigning again with nothing
    changed changes nothing."""
    seed = int(os.environ.get("JOCKO_TEST_SEED", random.randrange(1 << 30)))
    print(f"assignor seed {seed} (JOCKO_TEST_SEED={seed} replays it)")
    rng = random.Random(seed)
    for _ in range(300):
        n_parts = rng.randrange(0, 12)
        members = sorted(rng.sample([f"m{i:02d}" for i in range(20)], rng.randrange(1, 9)))
        cur = simple_assign(members, parts(n_parts))
        prev_sharing = desired_counts(len(members), n_parts)[0]
        for _ in range(4):
            pool = [f"m{i:02d}" for i in range(20)]
            members = sorted(set(rng.sample(members, rng.randrange(0, len(members) + 1)))
                             | set(rng.sample(pool, rng.randrange(0, 3)))) or ["m00"]
            n_parts = max(0, n_parts + rng.choice((-1, 0, 0, 1)))
            nxt = simple_assign(members, parts(n_parts), cur)
            sharing, counts = desired_counts(len(members), n_parts)
            short = [tp for tp in parts(n_parts)
                     if sum(tp in v for v in nxt.values()) < sharing]
            for tp in parts(n_parts):
                assert 1 <= sum(tp in v for v in nxt.values()) <= sharing, (seed, nxt)
            for m, count in zip(members, counts, strict=True):
                assert len(nxt[m]) <= count, (seed, nxt)
                if len(nxt[m]) < count:
                    assert all(tp in nxt[m] for tp in short), (seed, nxt)
            if sharing <= 1:
                assert not short and [len(nxt[m]) for m in members] == counts, (seed, nxt)
            assert simple_assign(members, parts(n_parts), nxt) == nxt, seed
            # one member per partition before and after: a member that stays keeps
            # what is still assignable, up to its count
            if prev_sharing <= 1 and sharing <= 1:
                for m, count in zip(members, counts, strict=True):
                    kept = {tp for tp in cur.get(m, frozenset()) if tp[1] < n_parts}
                    assert len(nxt[m] & kept) == min(count, len(kept)), (seed, m, cur, nxt)
            cur, prev_sharing = nxt, sharing


# -- through the group shard -----------------------------------------------------------

def beat(h: Harness, members: list[str], ms: int = 0) -> None:
    """Heartbeats of `members` every 200 ms for `ms` (at least once)."""
    end = h.now + ms
    while True:
        for m in members:
            h.hb(m, h.group.members[m].member_epoch)
        if h.now >= end:
            return
        h.advance(min(200, end - h.now))


def ready(h: Harness, members: list[str]) -> None:
    """`members` joined, the partitions initialized, everyone on the current target."""
    for m in members:
        h.hb(m, 0, ["t"])
    h.initialize_all()
    beat(h, members, 1200)  # past the assignment interval
    beat(h, members)


def harness(n_partitions: int, overrides: dict[str, str] | None = None) -> Harness:
    h = Harness(overrides=overrides)
    topics = {"t": TopicInfo(T1, n_partitions)}
    h.shard.topics = lambda: topics  # type: ignore[method-assign]
    h.shard.share.topics = lambda: topics
    return h


def test_shard_keeps_assignments_when_a_member_joins() -> None:
    h = harness(6)
    ready(h, ["m1", "m2"])
    before = {m: h.group.members[m].assigned for m in ("m1", "m2")}
    assert sorted(len(v) for v in before.values()) == [3, 3]
    epoch = h.group.group_epoch
    for m in ("m1", "m2"):  # nothing changed: nothing moves, no new epoch
        r = h.hb(m, h.group.members[m].member_epoch)
        assert r.assignment is None and h.group.members[m].assigned == before[m]
    assert h.group.group_epoch == epoch
    h.hb("m3", 0, ["t"])
    beat(h, ["m1", "m2", "m3"])
    after = {m: h.group.members[m].assigned for m in ("m1", "m2", "m3")}
    assert [len(after[m]) for m in ("m1", "m2", "m3")] == [2, 2, 2]
    assert after["m1"] <= before["m1"] and after["m2"] <= before["m2"]


def test_assignment_interval_defers_the_target() -> None:
    """share.assignment.interval.ms (the group's config over the broker's): a member
    joining within it gets the last target (nothing) and its epoch; the next heartbeat
    after the interval computes the new target."""
    h = harness(6, {"share.assignment.interval.ms": "1000"})
    ready(h, ["m1"])
    assert h.group.members["m1"].assigned == frozenset(parts(6))
    beat(h, ["m1"], 1000)  # nothing pending: no computation
    h.hb("m2", 0, ["t"])  # the interval has passed: computed at once
    stamp, epoch = h.group.assignment_timestamp, h.group.assignment_epoch
    assert stamp == h.now and epoch == h.group.group_epoch
    assert len(h.group.members["m2"].assigned) == 3
    r1 = h.hb("m1", h.group.members["m1"].member_epoch)
    assert r1.member_epoch == epoch and len(r1.assignment or ()) == 3
    h.advance(200)
    r3 = h.hb("m3", 0, ["t"])  # 200 ms later: deferred
    assert h.group.group_epoch == epoch + 1 and h.group.assignment_epoch == epoch
    assert h.group.assignment_timestamp == stamp
    assert r3.member_epoch == epoch and r3.assignment == frozenset()
    r1 = h.hb("m1", h.group.members["m1"].member_epoch)
    assert r1.member_epoch == epoch and r1.assignment is None
    beat(h, ["m1", "m2", "m3"], 600)
    assert h.group.assignment_epoch == epoch and not h.group.members["m3"].assigned
    h.advance(200)  # 1000 ms since the last computation
    r1 = h.hb("m1", h.group.members["m1"].member_epoch)
    assert r1.member_epoch == epoch + 1 and h.group.assignment_timestamp == h.now
    assert r1.assignment is not None and len(r1.assignment) == 2
    r3 = h.hb("m3", h.group.members["m3"].member_epoch)
    assert r3.member_epoch == epoch + 1 and len(r3.assignment or ()) == 2


def test_assignment_interval_zero_and_timestamp_zero() -> None:
    assert can_compute_target(0, 1000, 5)  # never computed
    assert can_compute_target(100, 0, 100)  # no interval
    assert not can_compute_target(100, 1000, 1099)
    assert can_compute_target(100, 1000, 1100)
    assert ShareConfig().assignment_interval_ms == 1000  # Kafka's default


def test_deferred_target_does_not_bump_again() -> None:
    """While a computation waits for the interval, heartbeats finding initialized
    partitions outside the target do not bump the group epoch again (Kafka bumps for
    them only when the target is up to date)."""
    h = Harness(overrides={"share.assignment.interval.ms": "5000"})
    h.hb("m1", 0, ["t"])  # computed at once: nothing initialized yet
    h.initialize_all()
    h.hb("m1", 1)  # the initialized partitions: a new epoch, its computation deferred
    epoch = h.group.group_epoch
    assert h.group.assignment_epoch < epoch
    for _ in range(3):
        h.advance(500)
        r = h.hb("m1", h.group.members["m1"].member_epoch)
        assert r.assignment is None
    assert h.group.group_epoch == epoch
    beat(h, ["m1"], 3400)
    assert h.group.group_epoch == epoch and h.group.assignment_epoch < epoch
    h.advance(200)
    r = h.hb("m1", h.group.members["m1"].member_epoch)
    assert r.member_epoch == epoch and r.assignment == {(T1, 0), (T1, 1)}
    assert G in h.shard.groups
