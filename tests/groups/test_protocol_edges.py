"""Group protocol edge cases on the wire: each returns Kafka's error code.

Raw requests through the project's small client against a real broker process.
JoinGroup and SyncGroup block until the rebalance phase completes, so members
that must wait run on their own connection in a thread.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jocko_py.client import Client, KafkaError
from jocko_py.protocol.errors import ErrorCode as E
from tests.support.broker import BrokerProcess

# ConsumerProtocolSubscription v0: topics ["other"], null user data
SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x05other" + b"\xff\xff\xff\xff"
PROTO = [{"name": "range", "metadata": SUBSCRIPTION}]
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0",
                   "group.min.session.timeout.ms": "1000", "group.max.size": "2"}


class External(BrokerProcess):
    """An already running broker (to check these tests against Apache Kafka: run it with
    group.min.session.timeout.ms=1000, group.initial.rebalance.delay.ms=0 and
    group.max.size=2, then set
    JOCKO_TEST_GROUPS_BOOTSTRAP=host:port)."""

    def __init__(self, addr: str) -> None:
        super().__init__(Path("/nonexistent"), port=int(addr.rpartition(":")[2]))

    def start(self, timeout: float = 0) -> BrokerProcess:
        return self

    def stop(self, timeout: float = 0) -> int | None:
        return None


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    ext = os.environ.get("JOCKO_TEST_GROUPS_BOOTSTRAP", "")
    b = External(ext) if ext else BrokerProcess(
        tmp_path_factory.mktemp("edges") / "data", overrides=GROUP_OVERRIDES)
    b.start()
    try:
        with Client(b.bootstrap) as c:
            # Kafka answers COORDINATOR_NOT_AVAILABLE while it creates the offsets topic;
            # jocko-py creates it synchronously and answers at once
            deadline = time.monotonic() + 30
            while c.request(10, 4, {"key_type": 0, "coordinator_keys": ["warmup"]}
                            ).coordinators[0].error_code != 0:
                assert time.monotonic() < deadline, "no group coordinator"
                time.sleep(0.2)
            try:
                c.create_topic("t", 2)
            except KafkaError as e:
                if e.code != E.TOPIC_ALREADY_EXISTS:
                    raise
        yield b
    finally:
        b.stop()


@pytest.fixture
def pool() -> Iterator[cf.ThreadPoolExecutor]:
    with cf.ThreadPoolExecutor(4) as ex:
        yield ex


def join(b: BrokerProcess, group: str, member: str = "", *, version: int = 9,
         session: int = 6000, rebalance: int = 6000, instance: str | None = None,
         ptype: str = "consumer", protocols: list[dict[str, Any]] | None = None) -> Any:
    with Client(b.bootstrap, client_id="edge") as c:
        return c.request(11, version, {
            "group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "member_id": member, "group_instance_id": instance, "protocol_type": ptype,
            "protocols": protocols if protocols is not None else PROTO, "reason": None})


def join_new(b: BrokerProcess, group: str, **kw: Any) -> Any:
    r = join(b, group, **kw)
    if r.error_code == E.MEMBER_ID_REQUIRED:
        r = join(b, group, r.member_id, **kw)
    return r


def sync(b: BrokerProcess, group: str, gen: int, member: str,
         assignments: dict[str, bytes] | None = None, instance: str | None = None) -> Any:
    with Client(b.bootstrap) as c:
        return c.request(14, 5, {
            "group_id": group, "generation_id": gen, "member_id": member,
            "group_instance_id": instance, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a}
                            for m, a in (assignments or {}).items()]})


def heartbeat(b: BrokerProcess, group: str, gen: int, member: str,
              instance: str | None = None) -> int:
    with Client(b.bootstrap) as c:
        return int(c.request(12, 4, {"group_id": group, "generation_id": gen,
                                     "member_id": member,
                                     "group_instance_id": instance}).error_code)


def commit(b: BrokerProcess, group: str, gen: int, member: str, offset: int = 5) -> int:
    with Client(b.bootstrap) as c:
        r = c.request(8, 9, {"group_id": group, "generation_id_or_member_epoch": gen,
                             "member_id": member, "group_instance_id": None, "topics": [
                                 {"name": "t", "partitions": [{
                                     "partition_index": 0, "committed_offset": offset,
                                     "committed_leader_epoch": 3,
                                     "committed_metadata": "md"}]}]})
    return int(r.topics[0].partitions[0].error_code)


def stable_single(b: BrokerProcess, group: str, **kw: Any) -> tuple[str, int]:
    r = join_new(b, group, **kw)
    assert r.error_code == 0, r
    s = sync(b, group, r.generation_id, r.member_id, {r.member_id: b"A1"},
             instance=kw.get("instance"))
    assert s.error_code == 0 and s.assignment == b"A1", s
    return r.member_id, r.generation_id


def test_member_id_required_then_join_sync(broker: BrokerProcess) -> None:
    r = join(broker, "g-mid")
    assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id.startswith("edge-")
    r2 = join(broker, "g-mid", r.member_id)
    assert r2.error_code == 0
    assert r2.generation_id == 1 and r2.leader == r.member_id
    assert [(m.member_id, m.metadata) for m in r2.members] == [(r.member_id, SUBSCRIPTION)]
    assert r2.protocol_name == "range" and r2.protocol_type == "consumer"
    # v3 joins get their member id in one round trip
    r3 = join(broker, "g-v3", version=3)
    assert r3.error_code == 0 and r3.member_id


def test_unknown_member_and_generation_errors(broker: BrokerProcess) -> None:
    assert heartbeat(broker, "nope", 1, "ghost") == E.UNKNOWN_MEMBER_ID
    assert join(broker, "nope2", "ghost").error_code == E.UNKNOWN_MEMBER_ID
    mid, gen = stable_single(broker, "g-gen")
    assert heartbeat(broker, "g-gen", gen, mid) == E.NONE
    assert heartbeat(broker, "g-gen", gen, "ghost") == E.UNKNOWN_MEMBER_ID
    assert heartbeat(broker, "g-gen", gen - 1, mid) == E.ILLEGAL_GENERATION
    assert heartbeat(broker, "g-gen", gen + 1, mid) == E.ILLEGAL_GENERATION
    assert sync(broker, "g-gen", gen + 5, mid).error_code == E.ILLEGAL_GENERATION
    assert sync(broker, "g-gen", gen, "ghost").error_code == E.UNKNOWN_MEMBER_ID
    assert commit(broker, "g-gen", gen - 1, mid) == E.ILLEGAL_GENERATION
    assert commit(broker, "g-gen", gen, "ghost") == E.UNKNOWN_MEMBER_ID
    assert commit(broker, "g-gen", -1, "") == E.UNKNOWN_MEMBER_ID  # non-empty group
    assert commit(broker, "g-gen", gen, mid) == E.NONE
    # a stable member's sync again returns its assignment
    assert sync(broker, "g-gen", gen, mid).assignment == b"A1"


def subscription(user_data: bytes) -> bytes:
    """ConsumerProtocolSubscription v0 for topic "other" with the given user data."""
    return SUBSCRIPTION[:-4] + len(user_data).to_bytes(4, "big") + user_data


def test_leader_gets_every_members_subscription(broker: BrokerProcess,
                                                pool: cf.ThreadPoolExecutor) -> None:
    """The leader's JoinGroup response carries each member's metadata bytes, as sent
    for the selected protocol (and not another protocol's)."""
    g = "g-leader-md"
    md_a, md_b = subscription(b"member-a"), subscription(b"member-b \x00\xff")
    protos_a = [{"name": "range", "metadata": md_a},
                {"name": "roundrobin", "metadata": subscription(b"not-this")}]
    protos_b = [{"name": "range", "metadata": md_b}]
    a, gen = stable_single(broker, g, protocols=protos_a)
    fut_b = pool.submit(join_new, broker, g, protocols=protos_b)
    deadline = time.monotonic() + 10
    while heartbeat(broker, g, gen, a) != E.REBALANCE_IN_PROGRESS:
        assert time.monotonic() < deadline, "b's join did not start a rebalance"
        time.sleep(0.05)
    ra = join(broker, g, a, protocols=protos_a)
    rb_ = fut_b.result(10)
    assert ra.error_code == rb_.error_code == 0
    assert ra.leader == a and ra.protocol_name == "range"
    assert {m.member_id: m.metadata for m in ra.members} == {a: md_a, rb_.member_id: md_b}
    assert rb_.members == []
    assert leave(broker, g, a, rb_.member_id) == [E.NONE, E.NONE]


def leave(b: BrokerProcess, group: str, *members: str) -> list[int]:
    with Client(b.bootstrap) as c:
        r = c.request(13, 5, {"group_id": group, "members": [
            {"member_id": m, "group_instance_id": None, "reason": None} for m in members]})
    return [int(m.error_code) for m in r.members]


def test_sync_checks_member_and_generation_before_protocol(broker: BrokerProcess) -> None:
    """Kafka (3.9, checked against the reference broker) answers SyncGroup in this order:
    unknown member, then generation, then protocol type/name."""
    g = "g-sync-order"
    mid, gen = stable_single(broker, g)

    def sync_p(member: str, generation: int, ptype: str, pname: str) -> int:
        with Client(broker.bootstrap) as c:
            return int(c.request(14, 5, {
                "group_id": g, "generation_id": generation, "member_id": member,
                "group_instance_id": None, "protocol_type": ptype, "protocol_name": pname,
                "assignments": []}).error_code)

    assert sync_p("ghost", gen, "connect", "range") == E.UNKNOWN_MEMBER_ID
    assert sync_p("ghost", gen, "consumer", "roundrobin") == E.UNKNOWN_MEMBER_ID
    assert sync_p(mid, gen + 1, "connect", "range") == E.ILLEGAL_GENERATION
    assert sync_p(mid, gen, "connect", "range") == E.INCONSISTENT_GROUP_PROTOCOL
    assert sync_p(mid, gen, "consumer", "roundrobin") == E.INCONSISTENT_GROUP_PROTOCOL
    assert sync_p(mid, gen, "consumer", "range") == E.NONE
    assert leave(broker, g, mid) == [E.NONE]


def test_simple_commit_to_empty_group_ignores_member_id(broker: BrokerProcess) -> None:
    """Generation -1 is a simple commit: Kafka 3.9 accepts it into an Empty (or new)
    group even with a member id; with a generation the member must exist."""
    g = "g-simple-mid"
    assert commit(broker, g, -1, "someone") == E.NONE  # new group
    assert commit(broker, g, -1, "someone-else", offset=6) == E.NONE  # Empty group
    assert commit(broker, g, 3, "someone") == E.UNKNOWN_MEMBER_ID
    assert commit(broker, "g-simple-none", 1, "someone") == E.ILLEGAL_GENERATION
    with Client(broker.bootstrap) as c:
        f = c.request(9, 5, {"group_id": g, "topics": [
            {"name": "t", "partition_indexes": [0]}]})
    assert f.topics[0].partitions[0].committed_offset == 6
    # a group with members: only its members may commit
    mid, gen = stable_single(broker, "g-simple-active")
    assert commit(broker, "g-simple-active", -1, "someone") == E.UNKNOWN_MEMBER_ID
    assert commit(broker, "g-simple-active", -1, "") == E.UNKNOWN_MEMBER_ID
    assert leave(broker, "g-simple-active", mid) == [E.NONE]


def test_rebalance_in_progress(broker: BrokerProcess, pool: cf.ThreadPoolExecutor) -> None:
    g = "g-rip"
    a, gen = stable_single(broker, g)
    fut_b = pool.submit(join_new, broker, g)
    deadline = time.monotonic() + 10
    while heartbeat(broker, g, gen, a) != E.REBALANCE_IN_PROGRESS:
        assert time.monotonic() < deadline, "no REBALANCE_IN_PROGRESS"
        time.sleep(0.05)
    assert sync(broker, g, gen, a).error_code == E.REBALANCE_IN_PROGRESS
    # the current generation may still commit while the group prepares to rebalance
    assert commit(broker, g, gen, a) == E.NONE
    ra = join(broker, g, a)
    rb_ = fut_b.result(10)
    assert ra.error_code == rb_.error_code == 0
    assert ra.generation_id == rb_.generation_id == gen + 1
    assert ra.leader == a and len(ra.members) == 2 and rb_.members == []
    # CompletingRebalance: commits are refused until the assignment is out
    assert commit(broker, g, gen + 1, a) == E.REBALANCE_IN_PROGRESS
    assert heartbeat(broker, g, gen + 1, rb_.member_id) == E.NONE
    fb = pool.submit(sync, broker, g, gen + 1, rb_.member_id)
    time.sleep(0.2)
    assert not fb.done(), "follower SyncGroup must wait for the leader"
    sa = sync(broker, g, gen + 1, a, {a: b"x", rb_.member_id: b"y"})
    assert sa.error_code == 0 and sa.assignment == b"x"
    sb = fb.result(10)
    assert sb.error_code == 0 and sb.assignment == b"y"


def test_protocol_checks(broker: BrokerProcess) -> None:
    stable_single(broker, "g-proto")
    r = join_new(broker, "g-proto", ptype="connect")
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = join_new(broker, "g-proto", protocols=[{"name": "roundrobin", "metadata": b""}])
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(broker, "g-empty", ptype="consumer", protocols=[]).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert join(broker, "g-sess", session=10).error_code == E.INVALID_SESSION_TIMEOUT
    assert join(broker, "", session=6000).error_code == E.INVALID_GROUP_ID


def test_session_timeout_enforced(broker: BrokerProcess) -> None:
    mid, gen = stable_single(broker, "g-sto", session=1200)
    time.sleep(2.0)
    assert heartbeat(broker, "g-sto", gen, mid) == E.UNKNOWN_MEMBER_ID
    with Client(broker.bootstrap) as c:
        d = c.request(15, 5, {"groups": ["g-sto"], "include_authorized_operations": False})
    assert d.groups[0].group_state == "Empty" and list(d.groups[0].members) == []


def test_rebalance_timeout_enforced(broker: BrokerProcess, pool: cf.ThreadPoolExecutor) -> None:
    g = "g-rto"
    a, gen = stable_single(broker, g, rebalance=1000, session=6000)
    t0 = time.monotonic()
    rb_ = pool.submit(join_new, broker, g, rebalance=1000).result(10)
    # a never rejoined: removed after its rebalance timeout, b leads alone
    assert 0.5 < time.monotonic() - t0 < 5
    assert rb_.error_code == 0 and rb_.leader == rb_.member_id and len(rb_.members) == 1
    assert heartbeat(broker, g, gen, a) == E.UNKNOWN_MEMBER_ID


def test_static_membership_fencing(broker: BrokerProcess) -> None:
    g = "g-static"
    r = join(broker, g, instance="i-1")
    assert r.error_code == 0, "static members skip MEMBER_ID_REQUIRED"
    s = sync(broker, g, r.generation_id, r.member_id, {r.member_id: b"S"}, instance="i-1")
    assert s.error_code == 0
    # the same instance restarts: new member id, same generation, its assignment back
    r2 = join(broker, g, instance="i-1")
    assert r2.error_code == 0 and r2.member_id != r.member_id
    assert r2.generation_id == r.generation_id
    assert r2.skip_assignment and [m.member_id for m in r2.members] == [r2.member_id]
    s2 = sync(broker, g, r2.generation_id, r2.member_id, instance="i-1")
    assert s2.error_code == 0 and s2.assignment == b"S"
    # the old incarnation is fenced
    assert heartbeat(broker, g, r.generation_id, r.member_id, "i-1") == E.FENCED_INSTANCE_ID
    assert commit(broker, g, r.generation_id, r.member_id) in (
        E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID)
    with Client(broker.bootstrap) as c:
        lv = c.request(13, 5, {"group_id": g, "members": [
            {"member_id": r.member_id, "group_instance_id": "i-1", "reason": None},
            {"member_id": "", "group_instance_id": "i-404", "reason": None},
            {"member_id": r2.member_id, "group_instance_id": "i-1", "reason": "bye"}]})
    assert lv.error_code == 0
    assert [m.error_code for m in lv.members] == [
        E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID, E.NONE]


def test_leave_and_admin(broker: BrokerProcess) -> None:
    g = "g-admin"
    mid, gen = stable_single(broker, g)
    assert commit(broker, g, gen, mid, offset=42) == E.NONE
    with Client(broker.bootstrap) as c:
        lg = c.request(16, 5, {"states_filter": ["stable"], "types_filter": []})
        assert g in {x.group_id for x in lg.groups}
        assert all(x.group_state == "Stable" for x in lg.groups)
        d = c.request(15, 5, {"groups": [g, "g-none"], "include_authorized_operations": False})
        dg = d.groups[0]
        assert dg.group_state == "Stable" and dg.protocol_data == "range"
        assert dg.members[0].member_id == mid and dg.members[0].member_assignment == b"A1"
        assert d.groups[1].group_state == "Dead" and d.groups[1].error_code == 0
        dl = c.request(42, 2, {"groups_names": [g, "g-none"]})
        assert [x.error_code for x in dl.results] == [E.NON_EMPTY_GROUP, E.GROUP_ID_NOT_FOUND]
        od = c.request(47, 0, {"group_id": g, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}]}]})
        assert od.topics[0].partitions[0].error_code == E.NONE  # "t" is not subscribed
        assert commit(broker, g, gen, mid, offset=43) == E.NONE
        # LeaveGroup v0: one member, top-level error
        assert c.request(13, 0, {"group_id": g, "member_id": "ghost"}).error_code == \
            E.UNKNOWN_MEMBER_ID
        assert c.request(13, 0, {"group_id": g, "member_id": mid}).error_code == 0
        assert heartbeat(broker, g, gen, mid) == E.UNKNOWN_MEMBER_ID
        lg = c.request(16, 5, {"states_filter": ["Empty"], "types_filter": ["classic"]})
        assert g in {x.group_id for x in lg.groups}
        f = c.request(9, 8, {"groups": [
            {"group_id": g, "topics": None},
            {"group_id": "g-none", "topics": [{"name": "t", "partition_indexes": [0]}]}],
            "require_stable": False})
        p = f.groups[0].topics[0].partitions[0]
        assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (43, 3, "md")
        assert f.groups[1].topics[0].partitions[0].committed_offset == -1
        assert c.request(42, 2, {"groups_names": [g]}).results[0].error_code == 0
        f = c.request(9, 8, {"groups": [{"group_id": g, "topics": None}],
                             "require_stable": False})
        assert list(f.groups[0].topics) == []


def test_describe_groups_v6_and_delete_groups_v3_as_kafka_44(broker: BrokerProcess) -> None:
    """KIP-1043: an unknown or consumer-protocol group is Dead with no error up to
    DescribeGroups v5, GROUP_ID_NOT_FOUND with Kafka's message from v6; DeleteGroups v3
    carries a null per-group message; ConsumerGroupDescribe v1 types its members
    (KIP-1099) and names what it cannot describe as Kafka does."""
    import uuid

    g, cg = "g-v6-classic", f"g-v6-consumer-{uuid.uuid4().hex[:6]}"
    stable_single(broker, g)
    with Client(broker.bootstrap) as c:
        hb = c.request(68, 1, {
            "group_id": cg, "member_id": str(uuid.uuid4()), "member_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []})
        assert hb.error_code == 0
        groups = [g, "g-v6-none", cg]
        # (Kafka 4.4 does not keep the request's order)
        old = {x.group_id: (x.error_code, x.group_state) for x in c.request(
            15, 5, {"groups": groups, "include_authorized_operations": False}).groups}
        assert old == {g: (0, "Stable"), "g-v6-none": (0, "Dead"), cg: (0, "Dead")}
        new = {x.group_id: (x.error_code, x.group_state, x.error_message) for x in c.request(
            15, 6, {"groups": groups, "include_authorized_operations": False}).groups}
        assert new == {
            g: (0, "Stable", None),
            "g-v6-none": (E.GROUP_ID_NOT_FOUND, "Dead", "Group g-v6-none not found."),
            cg: (E.GROUP_ID_NOT_FOUND, "Dead", f"Group {cg} is not a classic group.")}
        cd = c.request(69, 1, {"group_ids": [cg, g, "g-v6-none"],
                               "include_authorized_operations": False})
        by_id = {x.group_id: x for x in cd.groups}
        assert by_id[cg].error_code == 0
        assert [m.member_type for m in by_id[cg].members] == [1]
        assert (by_id[g].error_code, by_id[g].error_message) == (
            E.GROUP_ID_NOT_FOUND, f"Group {g} is not a consumer group.")
        assert (by_id["g-v6-none"].error_code, by_id["g-v6-none"].error_message) == (
            E.GROUP_ID_NOT_FOUND, "Group g-v6-none not found.")
        dl = c.request(42, 3, {"groups_names": [g, "g-v6-none"]})
        assert {x.group_id: (x.error_code, x.error_message) for x in dl.results} == {
            g: (E.NON_EMPTY_GROUP, None), "g-v6-none": (E.GROUP_ID_NOT_FOUND, None)}


def test_offset_commit_and_fetch_v10_name_topics_by_id(broker: BrokerProcess) -> None:
    """KIP-848's v10, as Apache Kafka 4.4.0 answers: topics by id; an unknown id is
    UNKNOWN_TOPIC_ID on each partition, a partition the topic lacks
    UNKNOWN_TOPIC_OR_PARTITION; fetching every offset lists topics by id."""
    import uuid

    g, bogus = f"g-v10-{uuid.uuid4().hex[:6]}", uuid.uuid4()
    with Client(broker.bootstrap) as c:
        md = c.request(3, 12, {"topics": [{"name": "t", "topic_id": uuid.UUID(int=0)}],
                               "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        tid = md.topics[0].topic_id

        def part(i: int, offset: int) -> dict[str, Any]:
            return {"partition_index": i, "committed_offset": offset,
                    "committed_leader_epoch": -1, "committed_metadata": "m"}
        r = c.request(8, 10, {"group_id": g, "generation_id_or_member_epoch": -1,
                              "member_id": "", "group_instance_id": None, "topics": [
                                  {"topic_id": tid, "partitions": [part(0, 7), part(9, 7)]},
                                  {"topic_id": bogus, "partitions": [part(0, 1)]}]})
        assert {(t.topic_id, p.partition_index): p.error_code
                for t in r.topics for p in t.partitions} == {
            (tid, 0): 0, (tid, 9): E.UNKNOWN_TOPIC_OR_PARTITION,
            (bogus, 0): E.UNKNOWN_TOPIC_ID}

        def fetch(version: int, topics: Any) -> dict[Any, tuple[int, int, str]]:
            r = c.request(9, version, {"groups": [{
                "group_id": g, "member_id": None, "member_epoch": -1, "topics": topics}],
                "require_stable": False})
            [gr] = r.groups
            assert gr.error_code == 0
            return {(t.topic_id if version >= 10 else t.name, p.partition_index):
                    (p.error_code, p.committed_offset, p.metadata)
                    for t in gr.topics for p in t.partitions}
        assert fetch(10, [{"topic_id": tid, "partition_indexes": [0, 1]},
                          {"topic_id": bogus, "partition_indexes": [0]}]) == {
            (tid, 0): (0, 7, "m"), (tid, 1): (0, -1, ""),
            (bogus, 0): (E.UNKNOWN_TOPIC_ID, -1, "")}
        assert fetch(10, None) == {(tid, 0): (0, 7, "m")}
        assert fetch(9, None) == {("t", 0): (0, 7, "m")}


def test_simple_commits_and_unknown_topics(broker: BrokerProcess) -> None:
    with Client(broker.bootstrap) as c:
        r = c.request(8, 2, {"group_id": "g-simple", "generation_id_or_member_epoch": -1,
                             "member_id": "", "retention_time_ms": -1, "topics": [
                                 {"name": "t", "partitions": [
                                     {"partition_index": 1, "committed_offset": 7,
                                      "committed_metadata": None}]},
                                 {"name": "missing", "partitions": [
                                     {"partition_index": 0, "committed_offset": 1,
                                      "committed_metadata": ""}]}]})
        codes = {t.name: t.partitions[0].error_code for t in r.topics}
        assert codes == {"t": 0, "missing": E.UNKNOWN_TOPIC_OR_PARTITION}
        f = c.request(9, 1, {"group_id": "g-simple", "topics": [
            {"name": "t", "partition_indexes": [0, 1]}]})
        got = {p.partition_index: p.committed_offset for p in f.topics[0].partitions}
        assert got == {0: -1, 1: 7}
        big = "x" * 5000
        r = c.request(8, 8, {"group_id": "g-simple", "generation_id_or_member_epoch": -1,
                             "member_id": "", "topics": [{"name": "t", "partitions": [
                                 {"partition_index": 0, "committed_offset": 1,
                                  "committed_metadata": big}]}]})
        assert r.topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE


def test_find_coordinator_and_internal_topic(broker: BrokerProcess) -> None:
    with Client(broker.bootstrap) as c:
        r0 = c.request(10, 0, {"key": "g"})
        assert r0.error_code == 0 and r0.node_id >= 0 and r0.port == broker.port
        r4 = c.request(10, 6, {"key_type": 0, "coordinator_keys": ["a", "b"]})
        assert [(x.key, x.error_code, x.port) for x in r4.coordinators] == [
            ("a", 0, broker.port), ("b", 0, broker.port)]
        bad = c.request(10, 4, {"key_type": 7, "coordinator_keys": ["a"]})
        assert bad.coordinators[0].error_code == E.INVALID_REQUEST
        md = c.metadata(["__consumer_offsets"])
        t = md.topics[0]
        assert t.is_internal and len(t.partitions) == 50
    from jocko_py.protocol import records as rb

    with Client(broker.bootstrap) as c, pytest.raises(KafkaError) as ei:
        c.produce("__consumer_offsets", 0, rb.build_batch([rb.NewRecord(b"k", b"v")]))
    # Kafka 3.9 answers INVALID_TOPIC_EXCEPTION ("Cannot append to internal topic")
    assert ei.value.code == E.INVALID_TOPIC_EXCEPTION


def test_internal_topic_admin_answers_like_kafka(broker: BrokerProcess) -> None:
    """What Apache Kafka 3.9 (KRaft) answers for admin operations on
    `__consumer_offsets`, checked against the reference broker: DeleteRecords is
    refused (INVALID_TOPIC_EXCEPTION), CreateTopics finds it existing, config
    changes (even cleanup.policy) and CreatePartitions are accepted. Changes are
    validate-only here; what an added partition does to the groups is in
    test_durability.py."""
    from jocko_py.broker.group.offsets_store import partition_for

    topic, g = "__consumer_offsets", "g-internal-admin"
    assert commit(broker, g, -1, "", offset=17) == E.NONE
    with Client(broker.bootstrap) as c:
        n = len(c.metadata([topic]).topics[0].partitions)
        part = partition_for(g, n)
        start = c.list_offset(topic, part, -2)[0]
        assert c.list_offset(topic, part, -1)[0] > start
        r = c.request(21, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": part, "offset": -1}]}], "timeout_ms": 30000})
        p = r.topics[0].partitions[0]
        assert (p.error_code, p.low_watermark) == (E.INVALID_TOPIC_EXCEPTION, -1)
        assert c.list_offset(topic, part, -2)[0] == start, "records were deleted"
        r = c.request(19, 7, {"topics": [{
            "name": topic, "num_partitions": 3, "replication_factor": 1, "assignments": [],
            "configs": [{"name": "cleanup.policy", "value": "delete"}]}],
            "timeout_ms": 30000, "validate_only": False})
        assert r.topics[0].error_code == E.TOPIC_ALREADY_EXISTS
        r = c.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": topic,
                                             "configs": [{"name": "cleanup.policy",
                                                          "config_operation": 0,
                                                          "value": "delete"}]}],
                              "validate_only": True})
        assert r.responses[0].error_code == E.NONE
        r = c.request(33, 2, {"resources": [{"resource_type": 2, "resource_name": topic,
                                             "configs": [{"name": "cleanup.policy",
                                                          "value": "delete"}]}],
                              "validate_only": True})
        assert r.responses[0].error_code == E.NONE
        r = c.request(37, 3, {"topics": [{"name": topic, "count": n + 10, "assignments": None}],
                              "timeout_ms": 30000, "validate_only": True})
        assert r.results[0].error_code == E.NONE
        assert len(c.metadata([topic]).topics[0].partitions) == n
        assert {x.name: x.value for x in c.describe_configs(topic)}["cleanup.policy"] == \
            "compact"


def test_member_that_never_syncs_is_removed(broker: BrokerProcess) -> None:
    g = "g-nosync"
    r = join_new(broker, g, rebalance=1000, session=6000)
    assert r.error_code == 0
    # it heartbeats but never sends SyncGroup: gone after the rebalance timeout
    deadline = time.monotonic() + 10
    while heartbeat(broker, g, r.generation_id, r.member_id) != E.UNKNOWN_MEMBER_ID:
        assert time.monotonic() < deadline, "a member that never synced was kept"
        time.sleep(0.2)


def test_group_max_size_turns_away_the_last_to_rejoin(
        broker: BrokerProcess, pool: cf.ThreadPoolExecutor) -> None:
    g = "g-max"  # group.max.size=2
    a, gen = stable_single(broker, g)
    fb = pool.submit(join, broker, g, version=3)
    deadline = time.monotonic() + 10
    while heartbeat(broker, g, gen, a) != E.REBALANCE_IN_PROGRESS:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    fc = pool.submit(join, broker, g, version=3)
    time.sleep(0.5)
    # b and c rejoined first: a, rejoining third, is turned away and removed
    ra = join(broker, g, a)
    assert ra.error_code == E.GROUP_MAX_SIZE_REACHED
    rb_, rc = fb.result(10), fc.result(10)
    assert rb_.error_code == rc.error_code == 0
    assert rb_.generation_id == rc.generation_id == gen + 1
    leader = rb_ if rb_.leader == rb_.member_id else rc
    assert sorted(m.member_id for m in leader.members) == sorted([rb_.member_id, rc.member_id])
    # a full stable group turns new members away
    assert join(broker, g, version=3).error_code == E.GROUP_MAX_SIZE_REACHED


def test_consumer_group_regex_matches_internal_topics_too(broker: BrokerProcess) -> None:
    """KIP-848: the broker resolves ConsumerGroupHeartbeat v1's SubscribedTopicRegex as
    Kafka's coordinator does, a full match over every topic name, internal topics
    included (franz-go's Test848RegexBrokerResolves): the regex franz-go sends for
    `rx-orders` and `__consumer_offsets` is assigned both, and `rx-orders-v2`, and
    nothing else; a bare name fully matches only itself."""
    import uuid

    pfx = f"rx{uuid.uuid4().hex[:6]}-"
    with Client(broker.bootstrap) as c:
        for name in (pfx + "orders", pfx + "orders-v2", pfx + "other"):
            c.create_topic(name, 1)
        md = c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        ids = {t.name: t.topic_id for t in md.topics}
        assert "__consumer_offsets" in ids

        def assigned(regex: str) -> set[str]:
            group, mid = f"g-rx-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())
            req: dict[str, Any] = {
                "group_id": group, "member_id": mid, "member_epoch": 0,
                "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": [], "subscribed_topic_regex": regex,
                "server_assignor": None, "topic_partitions": []}
            deadline = time.monotonic() + 15
            while True:
                hb = c.request(68, 1, req)
                assert hb.error_code == 0, hb
                names = {n for n, i in ids.items() for tp in
                         (hb.assignment.topic_partitions if hb.assignment else [])
                         if tp.topic_id == i}
                if names or time.monotonic() > deadline:
                    c.request(68, 1, {**req, "member_epoch": -1, "subscribed_topic_regex": None,
                                      "rebalance_timeout_ms": -1, "topic_partitions": None})
                    return names
                req = {**req, "member_epoch": hb.member_epoch, "topic_partitions": []}
                time.sleep(0.2)

        franz = f".*(?:(?:{pfx}orders)|(?:__consumer_offsets)).*"
        assert assigned(franz) == {pfx + "orders", pfx + "orders-v2", "__consumer_offsets"}
        assert assigned("__consumer_offsets|" + pfx + "other") == {
            "__consumer_offsets", pfx + "other"}
        assert assigned(pfx + "orders") == {pfx + "orders"}
