"""The streams group model (KIP-1071, broker/group/streams.py) in process: every transition
of a group and its members, the task assignor and the records round trip."""

from __future__ import annotations

import random
from dataclasses import replace

from jocko_py.broker.group import streams_records
from jocko_py.broker.group.streams import (
    CopartitionGroup,
    GroupStateName,
    HeartbeatRequest,
    MemberState,
    Status,
    StreamsConfig,
    StreamsGroupModel,
    Subtopology,
    TopicInfo,
    Topology,
    configure,
    invalid_topology,
    validate,
)
from jocko_py.broker.group.streams_assignor import AssignorMember, assign
from jocko_py.protocol.errors import ErrorCode as E

# no initial rebalance delay, no assignment interval: every heartbeat may assign
CFG = StreamsConfig(initial_rebalance_delay_ms=0, assignment_interval_ms=0)
SUB = Subtopology("0", source_topics=("input",),
                  state_changelog_topics=(TopicInfo("app-store-changelog"),))
TOPOLOGY = Topology.of(1, [SUB])
TOPICS = {"input": 4, "app-store-changelog": 4}


def join(g: StreamsGroupModel, mid: str, now: int = 0, process: str | None = None,
         topics: dict[str, int] | None = None, topology: Topology = TOPOLOGY,
         **kw: object) -> object:
    req = HeartbeatRequest(member_id=mid, member_epoch=0, rebalance_timeout_ms=1000,
                           topology=topology, process_id=process or f"p-{mid}",
                           active=frozenset(), standby=frozenset(), warmup=frozenset(),
                           **kw)  # type: ignore[arg-type]
    return g.heartbeat(req, TOPICS if topics is None else topics, now)


def beat(g: StreamsGroupModel, mid: str, epoch: int, now: int = 0,
         owned: tuple[frozenset[tuple[str, int]], ...] | None = None,
         topics: dict[str, int] | None = None) -> object:
    req = HeartbeatRequest(member_id=mid, member_epoch=epoch)
    if owned is not None:
        req.active, req.standby, req.warmup = owned
    return g.heartbeat(req, TOPICS if topics is None else topics, now)


def owned_of(g: StreamsGroupModel, mid: str) -> tuple[frozenset[tuple[str, int]], ...]:
    a = g.members[mid].assigned
    return a.active, a.standby, a.warmup


def settle(g: StreamsGroupModel, now: int = 0) -> None:
    """Every member heartbeats with what it holds until nothing moves."""
    for _ in range(10):
        for mid in list(g.members):
            m = g.members[mid]
            r = beat(g, mid, m.member_epoch, now, owned_of(g, mid))
            assert r.error == E.NONE, r  # type: ignore[attr-defined]
        if g.state() is GroupStateName.STABLE:
            return
    raise AssertionError(f"group did not settle: {g.state()}")


def test_first_member_initializes_topology_and_gets_every_task() -> None:
    g = StreamsGroupModel("app", CFG)
    r = join(g, "a")
    assert r.error == E.NONE and r.member_epoch == 1  # type: ignore[attr-defined]
    assert g.topology == TOPOLOGY and g.group_epoch == 1 and g.assignment_epoch == 1
    assert r.assignment.active == {("0", p) for p in range(4)}  # type: ignore[attr-defined]
    assert g.state() is GroupStateName.STABLE
    # an unchanged heartbeat carries no assignment
    r2 = beat(g, "a", 1, owned=owned_of(g, "a"))
    assert r2.error == E.NONE and r2.assignment is None  # type: ignore[attr-defined]


def test_second_member_revocation_then_assignment() -> None:
    g = StreamsGroupModel("app", CFG)
    join(g, "a")
    r = join(g, "b")
    assert g.group_epoch == 2
    # b gets nothing yet: a still holds every task
    assert r.member_epoch == 2 and r.assignment.active == frozenset()  # type: ignore[attr-defined]
    assert g.members["b"].state is MemberState.UNRELEASED_TASKS
    # a is told to revoke two tasks and keeps its epoch until it has
    ra = beat(g, "a", 1, owned=owned_of(g, "a"))
    assert ra.member_epoch == 1 and len(ra.assignment.active) == 2  # type: ignore[attr-defined]
    assert g.members["a"].state is MemberState.UNREVOKED_TASKS
    assert g.state() is GroupStateName.RECONCILING
    # still reporting the revoked tasks: nothing moves
    full = (frozenset(("0", p) for p in range(4)), frozenset(), frozenset())
    assert beat(g, "a", 1, owned=full).member_epoch == 1  # type: ignore[attr-defined]
    # revoked: a takes epoch 2, then b gets the freed tasks
    ra = beat(g, "a", 1, owned=owned_of(g, "a"))
    assert ra.member_epoch == 2 and g.members["a"].state is MemberState.STABLE  # type: ignore[attr-defined]
    rb = beat(g, "b", 2, owned=owned_of(g, "b"))
    assert len(rb.assignment.active) == 2  # type: ignore[attr-defined]
    assert g.state() is GroupStateName.STABLE
    a, b = g.members["a"].assigned.active, g.members["b"].assigned.active
    assert not a & b and len(a | b) == 4


def test_fencing_and_lost_answer() -> None:
    g = StreamsGroupModel("app", CFG)
    join(g, "a")
    join(g, "b")
    beat(g, "a", 1, owned=owned_of(g, "a"))
    beat(g, "a", 1, owned=owned_of(g, "a"))
    assert g.members["a"].member_epoch == 2
    # the answer that moved a to epoch 2 was lost: its previous epoch with owned tasks
    # within its assignment is accepted
    assert beat(g, "a", 1, owned=owned_of(g, "a")).error == E.NONE  # type: ignore[attr-defined]
    assert beat(g, "a", 3).error == E.FENCED_MEMBER_EPOCH  # type: ignore[attr-defined]
    assert beat(g, "a", 0 + 1).error == E.FENCED_MEMBER_EPOCH  # type: ignore[attr-defined]
    assert beat(g, "zz", 2).error == E.UNKNOWN_MEMBER_ID  # type: ignore[attr-defined]


def test_leave_and_session_timeout_free_tasks() -> None:
    cfg = replace(CFG, session_timeout_ms=45000)
    g = StreamsGroupModel("app", cfg)
    join(g, "a", now=0)
    join(g, "b", now=0)
    settle(g)
    epoch = g.group_epoch
    r = g.heartbeat(HeartbeatRequest(member_id="b", member_epoch=-1), TOPICS, 10)
    assert r.error == E.NONE and r.member_epoch == -1
    assert "b" not in g.members and g.group_epoch == epoch + 1
    settle(g, 100)
    assert len(g.members["a"].assigned.active) == 4
    # no heartbeat for the session timeout: removed
    assert g.expired(45000) == []
    [(mid, reason)] = g.expired(45101)
    assert mid == "a" and "45000" in reason
    g.remove_member("a")
    assert g.state() is GroupStateName.EMPTY


def test_revocation_timeout_removes_the_member() -> None:
    g = StreamsGroupModel("app", CFG)
    join(g, "a", now=0)
    join(g, "b", now=0)
    beat(g, "a", 1, now=10, owned=owned_of(g, "a"))
    assert g.members["a"].state is MemberState.UNREVOKED_TASKS
    assert g.expired(500) == []
    assert [m for m, _ in g.expired(1011)] == ["a"]


def test_topology_mismatch_and_stale_topology() -> None:
    g = StreamsGroupModel("app", CFG)
    join(g, "a")
    other = Topology.of(1, [Subtopology("0", source_topics=("input", "extra"))])
    r = join(g, "b", topology=other)
    assert r.error == E.INVALID_REQUEST  # type: ignore[attr-defined]
    assert r.message == "Topology updates are not supported yet."  # type: ignore[attr-defined]
    assert "b" not in g.members
    older = Topology.of(0, [SUB])
    r = join(g, "c", topology=older)
    assert r.error == E.NONE  # type: ignore[attr-defined]
    assert (Status.STALE_TOPOLOGY, "The member's topology epoch 0 is behind the group's "
            "topology epoch 1.") in r.status  # type: ignore[attr-defined]


def test_missing_source_topic_then_created() -> None:
    g = StreamsGroupModel("app", CFG)
    r = join(g, "a", topics={})
    assert r.error == E.NONE and r.assignment.empty()  # type: ignore[attr-defined]
    assert (Status.MISSING_SOURCE_TOPICS, "Source topics input are missing.") in r.status  # type: ignore[attr-defined]
    assert g.state() is GroupStateName.NOT_READY
    epoch = g.group_epoch
    # the source topic appears (the internal one too): the group becomes ready
    r = beat(g, "a", g.members["a"].member_epoch, owned=owned_of(g, "a"))
    assert g.group_epoch == epoch + 1 and g.state() is GroupStateName.STABLE
    assert len(r.assignment.active) == 4  # type: ignore[attr-defined]


def test_missing_internal_topics_reported_and_returned_for_creation() -> None:
    g = StreamsGroupModel("app", CFG)
    r = join(g, "a", topics={"input": 3})
    assert r.assignment.empty()  # type: ignore[attr-defined]
    assert (Status.MISSING_INTERNAL_TOPICS,
            "Internal topics are missing: [app-store-changelog]") in r.status  # type: ignore[attr-defined]
    assert [(t.name, t.partitions) for t in r.to_create] == [("app-store-changelog", 3)]  # type: ignore[attr-defined]
    assert g.state() is GroupStateName.NOT_READY
    r = beat(g, "a", g.members["a"].member_epoch, owned=owned_of(g, "a"),
             topics={"input": 3, "app-store-changelog": 3})
    assert not r.status and len(r.assignment.active) == 3  # type: ignore[attr-defined]


def test_incorrectly_partitioned_internal_topic() -> None:
    g = StreamsGroupModel("app", CFG)
    r = join(g, "a", topics={"input": 4, "app-store-changelog": 2})
    assert (Status.INCORRECTLY_PARTITIONED_TOPICS,
            "Existing topic app-store-changelog has different number of partitions: "
            "expected 4, found 2") in r.status  # type: ignore[attr-defined]
    assert g.state() is GroupStateName.NOT_READY


def test_repartition_and_copartition_partition_counts() -> None:
    s0 = Subtopology("0", source_topics=("words",), repartition_sink_topics=("app-rep",))
    s1 = Subtopology("1", repartition_source_topics=(TopicInfo("app-rep"),),
                     state_changelog_topics=(TopicInfo("app-counts-changelog"),))
    c = configure(Topology.of(0, [s0, s1]), {"words": 6})
    assert c.num_tasks == {"0": 6, "1": 6}
    assert {t.name: t.partitions for t in c.to_create} == {"app-rep": 6,
                                                           "app-counts-changelog": 6}
    join2 = Subtopology("2", source_topics=("left", "right"),
                        copartition_groups=(CopartitionGroup(source_topics=(0, 1)),))
    bad = configure(Topology.of(0, [join2]), {"left": 2, "right": 3})
    assert bad.problem is not None and bad.problem[0] is Status.INCORRECTLY_PARTITIONED_TOPICS
    assert "left=2, right=3" in bad.problem[1]


def test_request_validation_and_invalid_topology() -> None:
    assert validate(HeartbeatRequest(member_id="", member_epoch=0)) == "MemberId can't be empty."
    assert validate(HeartbeatRequest(member_id="a", member_epoch=0, topology=TOPOLOGY)) == \
        "RebalanceTimeoutMs must be provided in first request."
    assert validate(HeartbeatRequest(member_id="a", member_epoch=0,
                                     rebalance_timeout_ms=1)) == \
        "Topology must be non-null when (re-)joining."
    assert validate(HeartbeatRequest(member_id="a", member_epoch=3, topology=TOPOLOGY)) == \
        "Topology can only be provided when (re-)joining."
    assert validate(HeartbeatRequest(member_id="a", member_epoch=-3)) == \
        "MemberEpoch is -3, but must be greater than or equal to -2."
    assert validate(HeartbeatRequest(member_id="a", member_epoch=2,
                                     active=frozenset())) == \
        "If one task-type is non-null, all must be non-null."
    bad = Topology.of(0, [Subtopology("0", ("in",), state_changelog_topics=(
        TopicInfo("c", partitions=3),))])
    assert invalid_topology(bad) == ("Changelog topic c must have an undefined partition "
                                     "count, but it is set to 3.")


def test_max_size_and_static_members() -> None:
    g = StreamsGroupModel("app", replace(CFG, max_size=1))
    join(g, "a", instance_id="i1")
    r = join(g, "b")
    assert r.error == E.GROUP_MAX_SIZE_REACHED  # type: ignore[attr-defined]
    g.config = CFG
    assert join(g, "b", instance_id="i1").error == E.UNRELEASED_INSTANCE_ID  # type: ignore[attr-defined]
    tasks = g.members["a"].assigned
    r = g.heartbeat(HeartbeatRequest(member_id="a", member_epoch=-2, instance_id="i1"),
                    TOPICS, 0)
    assert r.member_epoch == -2 and "a" in g.members
    r = join(g, "a2", instance_id="i1")
    assert r.error == E.NONE and "a" not in g.members  # type: ignore[attr-defined]
    assert g.members["a2"].assigned == tasks


def test_standby_tasks_on_other_processes() -> None:
    g = StreamsGroupModel("app", replace(CFG, num_standby_replicas=1))
    join(g, "a", process="p1")
    join(g, "b", process="p2")
    settle(g)
    for mid in ("a", "b"):
        m = g.members[mid]
        assert len(m.assigned.active) == 2 and len(m.assigned.standby) == 2
        assert not m.assigned.active & m.assigned.standby


def test_shutdown_application_status_reaches_every_member() -> None:
    g = StreamsGroupModel("app", CFG)
    join(g, "a")
    join(g, "b")
    req = HeartbeatRequest(member_id="a", member_epoch=1, shutdown_application=True)
    r = g.heartbeat(req, TOPICS, 0)
    assert any(c == Status.SHUTDOWN_APPLICATION for c, _ in r.status)
    r = beat(g, "b", g.members["b"].member_epoch)
    assert any(c == Status.SHUTDOWN_APPLICATION for c, _ in r.status)  # type: ignore[attr-defined]


def test_commit_epoch_checks() -> None:
    g = StreamsGroupModel("app", CFG)
    assert g.check_commit("", -1)[0] == E.NONE
    join(g, "a")
    assert g.check_commit("a", 1)[0] == E.NONE
    assert g.check_commit("a", 0)[0] == E.STALE_MEMBER_EPOCH
    assert g.check_commit("x", 1)[0] == E.UNKNOWN_MEMBER_ID
    assert g.check_commit("", -1)[0] == E.UNKNOWN_MEMBER_ID


def test_records_round_trip_restores_the_group() -> None:
    g = StreamsGroupModel("app", replace(CFG, num_standby_replicas=1))
    join(g, "a", process="p1")
    join(g, "b", process="p2", user_endpoint=("h", 9), client_tags=(("az", "1"),))
    beat(g, "a", 1, owned=owned_of(g, "a"))
    encoded = streams_records.entries_for("app", g.records())
    decoded: dict[tuple[str, str], object] = {}
    for k, v in encoded.items():
        assert v is not None
        kind, group, mid = streams_records.decode_key(int.from_bytes(k[:2], "big"), k[2:])
        assert group == "app"
        decoded[(kind, mid)] = streams_records.decode_value(kind, v)
    r = StreamsGroupModel.restore("app", decoded, 0, g.config)
    assert (r.group_epoch, r.assignment_epoch, r.topology) == \
        (g.group_epoch, g.assignment_epoch, g.topology)
    for mid, m in g.members.items():
        n = r.members[mid]
        assert (n.member_epoch, n.state, n.assigned, n.revoking, n.process_id,
                n.user_endpoint, n.client_tags) == (m.member_epoch, m.state, m.assigned,
                                                     m.revoking, m.process_id,
                                                     m.user_endpoint, m.client_tags)
        assert r.target[mid] == g.target[mid]
    assert streams_records.entries_for("app", r.records()) == encoded


def test_sticky_assignor_keeps_tasks_and_balances() -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rnd = random.Random(seed)
    num = {"0": rnd.randint(1, 12), "1": rnd.randint(1, 12)}
    members = {f"m{i}": AssignorMember(f"p{i % 3}") for i in range(rnd.randint(1, 6))}
    first, _ = assign(members, num, 1)
    total = sum(num.values())
    actives = [t for m in first.values() for t in m.active]
    assert len(actives) == total == len(set(actives))
    sizes = [len(m.active) for m in first.values()]
    assert max(sizes) - min(sizes) <= 1
    # the same members again: nothing moves
    again = {mid: AssignorMember(m.process_id, frozenset(first[mid].active),
                                 frozenset(first[mid].standby)) for mid, m in members.items()}
    second, _ = assign(again, num, 1)
    assert {m: t.active for m, t in second.items()} == {m: t.active for m, t in first.items()}
    # standbys never share a process with the active copy
    proc = {mid: m.process_id for mid, m in members.items()}
    owner = {t: proc[mid] for mid, m in second.items() for t in m.active}
    for mid, m in second.items():
        assert all(owner[t] != proc[mid] for t in m.standby)


def test_initial_rebalance_delay_and_assignment_interval() -> None:
    g = StreamsGroupModel("app", StreamsConfig(initial_rebalance_delay_ms=3000,
                                               assignment_interval_ms=1000))
    r = join(g, "a", now=0)
    # no tasks yet, but an epoch: a Kafka Streams member cannot heartbeat at epoch 0
    assert r.error == E.NONE and r.assignment.empty()  # type: ignore[attr-defined]
    assert r.member_epoch == 1  # type: ignore[attr-defined]
    assert (Status.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial "
            "rebalance delay.") in r.status  # type: ignore[attr-defined]
    assert g.next_deadline() == 3000
    r = join(g, "b", now=1000)  # joins within the delay: one assignment for both
    assert r.member_epoch == 1 and g.state() is GroupStateName.ASSIGNING  # type: ignore[attr-defined]
    assert not g.assignment_due(2999)
    assert g.assignment_due(3000) and g.assignment_epoch == g.group_epoch == 3
    assert {len(g.target[m].active) for m in ("a", "b")} == {2}
    settle(g, 3100)
    # a third member within the assignment interval waits for it
    r = join(g, "c", now=3500)
    assert (Status.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured "
            "assignment interval.") in r.status  # type: ignore[attr-defined]
    assert not g.assignment_due(3999) and g.assignment_due(4000)
    assert g.assignment_epoch == g.group_epoch == 4
    # the group emptied and joined again: the initial delay applies again
    for mid in list(g.members):
        g.remove_member(mid)
    r = join(g, "d", now=10000)
    assert any(c == Status.ASSIGNMENT_DELAYED for c, _ in r.status)  # type: ignore[attr-defined]


def test_sticky_assignor_keeps_partitions_of_every_subtopology_together() -> None:
    every = frozenset((s, p) for s in ("0", "1") for p in range(6))
    members = {"a": AssignorMember("p1", every), "b": AssignorMember("p2")}
    out, missing = assign(members, {"0": 6, "1": 6}, 0)
    assert out["a"].active == {(s, p) for s in ("0", "1") for p in range(3)}
    assert out["b"].active == {(s, p) for s in ("0", "1") for p in range(3, 6)}
    assert missing == 0
    # one standby per task and only two processes: every task has its copy elsewhere
    out, missing = assign(members, {"0": 6, "1": 6}, 1)
    assert out["a"].standby == out["b"].active and out["b"].standby == out["a"].active
    # two standbys wanted, two processes: the second copies cannot be placed
    assert assign(members, {"0": 6, "1": 6}, 2)[1] == 12
