"""ShareGroupHeartbeat / ShareGroupDescribe, ListGroups / DescribeGroups / DeleteGroups of a
share group and group configs (GROUP config resources) on the wire against one broker
process: members join, get the partitions whose share state was initialized (a partition
shared when there are more members than partitions, as Kafka's simple assignor shares it), heartbeat, are fenced, leave; the
group replayed from ``__consumer_offsets`` after a restart; ``share.version`` finalized
and 76/77 advertised as Kafka 4.4.0 does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jocko_py.client import Client
from jocko_py.protocol.errors import ErrorCode as E
from tests.groups.harness import BROKER_OVERRIDES, wait_until
from tests.support.broker import BrokerProcess

G = "q"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=dict(BROKER_OVERRIDES))
    b.start()
    try:
        yield b
    finally:
        b.stop()


def coordinator(b: BrokerProcess, group: str) -> Client:
    c = Client(b.bootstrap)
    wait_until(lambda: c.request(10, 3, {"key": group, "key_type": 0}).error_code == 0, 20,
               "a coordinator")
    return c


def heartbeat(c: Client, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    return c.request(76, 1, {"group_id": G, "member_id": member, "member_epoch": epoch,
                             "rack_id": None, "subscribed_topic_names": topics})


def describe(c: Client, group: str = G) -> Any:
    return c.request(77, 1, {"group_ids": [group],
                             "include_authorized_operations": False}).groups[0]


def parts(a: Any) -> set[int]:
    return {p for t in a.topic_partitions for p in t.partitions} if a is not None else set()


def assigned(c: Client, member: str, epoch: int, held: set[int] | None = None
             ) -> tuple[int, set[int]]:
    """Heartbeat until the member's assignment is not empty: (epoch, partitions);
    ``held`` is what it was last sent."""
    got: list[tuple[int, set[int]]] = [(epoch, held or set())]

    def ready() -> bool:
        r = heartbeat(c, member, got[-1][0])
        assert r.error_code == 0, r
        if r.assignment is not None:
            got.append((r.member_epoch, parts(r.assignment)))
        else:
            got.append((r.member_epoch, got[-1][1]))
        return bool(got[-1][1])

    wait_until(ready, 10, f"{member}'s partitions")
    return got[-1]


def test_share_group_on_the_wire(broker: BrokerProcess) -> None:
    c = coordinator(broker, G)
    versions = c.request(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert keys[76] == (1, 1) and keys[77] == (1, 1)
    assert {f.name: f.max_version_level for f in versions.finalized_features}[
        "share.version"] == 2
    c.create_topic("work", 2, 1)
    # Kafka's request checks
    assert heartbeat(c, "", 0, ["work"]).error_code == E.INVALID_REQUEST
    r = heartbeat(c, "m1", 0, None)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST,
                                               "SubscribedTopicNames must be set in first "
                                               "request.")
    r = heartbeat(c, "m1", 0, ["work"])
    assert r.error_code == 0 and r.member_epoch == 1 and r.heartbeat_interval_ms == 5000
    # the partitions come once their share state is initialized
    e1, p1 = assigned(c, "m1", 1)
    assert p1 == {0, 1}
    joined = {}
    for m in ("m2", "m3"):
        r = heartbeat(c, m, 0, ["work"])
        assert r.error_code == 0
        joined[m] = (r.member_epoch, parts(r.assignment))
    # three members, two partitions: Kafka's simple assignor gives each partition to
    # ceil(3/2) = 2 members, 4 assignments over 3 members (2, 1, 1), and m1, first in id
    # order, keeps both of its partitions (sticky). The new target may wait for
    # group.share.assignment.interval.ms (1000) after the last one: heartbeat until the
    # three members are on the group's epoch.
    state = {"m1": (e1, p1), **joined}

    def settled() -> bool:
        for m, (e, p) in list(state.items()):
            r = heartbeat(c, m, e)
            assert r.error_code == 0, r
            state[m] = (r.member_epoch, parts(r.assignment) if r.assignment is not None else p)
        epochs = {e for e, _ in state.values()}
        return len(epochs) == 1 and describe(c).group_epoch in epochs \
            and all(p for _, p in state.values())

    wait_until(settled, 15, "the three members on the group's epoch", interval=0.3)
    (e1, p1), (e2, p2), (e3, p3) = state["m1"], state["m2"], state["m3"]
    assert p1 == {0, 1} and len(p2) == len(p3) == 1 and sorted([*p1, *p2, *p3]) == [0, 0, 1, 1]
    assert heartbeat(c, "m1", e1 + 1).error_code == E.FENCED_MEMBER_EPOCH
    assert heartbeat(c, "stranger", 3).error_code == E.UNKNOWN_MEMBER_ID
    d = describe(c)
    assert (d.error_code, d.group_state, d.assignor_name, d.group_epoch) == \
        (0, "Stable", "simple", e1)
    assert {m.member_id: (m.member_epoch, parts(m.assignment), m.subscribed_topic_names)
            for m in d.members} == {"m1": (e1, p1, ["work"]), "m2": (e2, p2, ["work"]),
                                    "m3": (e3, p3, ["work"])}
    assert {t.topic_name for m in d.members for t in m.assignment.topic_partitions} == {"work"}
    # the other group APIs
    lg = c.request(16, 5, {"states_filter": [], "types_filter": ["share"]})
    assert [(g.group_id, g.group_type, g.group_state, g.protocol_type)
            for g in lg.groups] == [(G, "share", "Stable", "share")]
    assert c.request(16, 5, {"states_filter": ["Empty"], "types_filter": ["share"]}).groups == []
    dg = c.request(15, 6, {"groups": [G], "include_authorized_operations": False}).groups[0]
    assert (dg.error_code, dg.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                 f"Group {G} is not a classic group.")
    dg5 = c.request(15, 5, {"groups": [G], "include_authorized_operations": False}).groups[0]
    assert (dg5.error_code, dg5.group_state) == (0, "Dead")
    assert c.request(42, 2, {"groups_names": [G]}).results[0].error_code == E.NON_EMPTY_GROUP
    c.request(10, 3, {"key": "plain", "key_type": 0})
    assert describe(c, "plain").error_code == E.GROUP_ID_NOT_FOUND
    # a consumer-protocol member may not join a share group
    cg = c.request(68, 1, {"group_id": G, "member_id": "x", "member_epoch": 0,
                           "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["work"],
                           "topic_partitions": []})
    assert cg.error_code == E.GROUP_ID_NOT_FOUND
    # m3 leaves: the group epoch moves on
    r = heartbeat(c, "m3", -1)
    assert (r.error_code, r.member_epoch) == (0, -1)
    d = describe(c)
    assert sorted(m.member_id for m in d.members) == ["m1", "m2"] and d.group_epoch > e1
    c.close()
    # restart: the group comes back from __consumer_offsets with its members' epochs
    broker.stop_gracefully()
    broker.start()
    c = coordinator(broker, G)
    wait_until(lambda: describe(c).error_code == 0, 20, "the group loaded")
    d2 = describe(c)
    assert (d2.group_epoch, d2.assignment_epoch) == (d.group_epoch, d.assignment_epoch)
    assert {m.member_id: (m.member_epoch, parts(m.assignment)) for m in d2.members} == \
        {m.member_id: (m.member_epoch, parts(m.assignment)) for m in d.members}
    for m in d2.members:
        assert heartbeat(c, m.member_id, m.member_epoch).error_code == 0
        assert heartbeat(c, m.member_id, -1).error_code == 0
    d3 = describe(c)
    assert (d3.group_state, d3.members) == ("Empty", [])
    assert c.request(42, 2, {"groups_names": [G]}).results[0].error_code == 0
    assert describe(c).error_code == E.GROUP_ID_NOT_FOUND
    c.close()


def alter(c: Client, group: str, configs: dict[str, str | None]) -> Any:
    return c.request(44, 1, {"resources": [{
        "resource_type": 32, "resource_name": group,
        "configs": [{"name": k, "config_operation": 0 if v is not None else 1, "value": v}
                    for k, v in configs.items()]}], "validate_only": False}).responses[0]


def group_configs(c: Client, group: str) -> dict[str, tuple[str, int]]:
    r = c.request(32, 4, {"resources": [{"resource_type": 32, "resource_name": group,
                                         "configuration_keys": None}],
                          "include_synonyms": False, "include_documentation": False})
    res = r.results[0]
    assert res.error_code == 0, res
    return {x.name: (x.value, x.config_source) for x in res.configs}


def test_group_configs_on_the_wire(broker: BrokerProcess) -> None:
    c = coordinator(broker, G)
    cfg = group_configs(c, G)
    assert cfg["share.session.timeout.ms"] == ("45000", 5)
    assert cfg["share.auto.offset.reset"] == ("latest", 5)
    assert cfg["consumer.session.timeout.ms"] == ("45000", 5)
    r = alter(c, G, {"share.heartbeat.interval.ms": "6000",
                     "share.record.lock.duration.ms": "20000",
                     "share.auto.offset.reset": "earliest"})
    assert r.error_code == 0, r
    cfg = group_configs(c, G)
    assert cfg["share.heartbeat.interval.ms"] == ("6000", 8)
    assert cfg["share.record.lock.duration.ms"] == ("20000", 8)
    # limits are the broker's group.share.* ones
    r = alter(c, G, {"share.record.lock.duration.ms": "1000"})
    assert r.error_code == E.INVALID_CONFIG and "group.share.min.record.lock.duration.ms" in \
        r.error_message
    assert alter(c, G, {"share.delivery.count.limit": "11"}).error_code == E.INVALID_CONFIG
    assert alter(c, G, {"nope": "1"}).error_code == E.INVALID_CONFIG
    assert alter(c, G, {"share.isolation.level": "dirty"}).error_code == E.INVALID_CONFIG
    # the group's heartbeat interval is what its members are told
    c.create_topic("work", 1, 1)
    r = heartbeat(c, "m1", 0, ["work"])
    assert r.error_code == 0 and r.heartbeat_interval_ms == 6000
    assert alter(c, G, {"share.heartbeat.interval.ms": None}).error_code == 0
    assert group_configs(c, G)["share.heartbeat.interval.ms"] == ("5000", 5)
    assert heartbeat(c, "m1", r.member_epoch).heartbeat_interval_ms == 5000
    # consumer groups have theirs too
    assert alter(c, "cg", {"consumer.session.timeout.ms": "50000"}).error_code == 0
    assert group_configs(c, "cg")["consumer.session.timeout.ms"] == ("50000", 8)
    assert alter(c, "cg", {"consumer.session.timeout.ms": "1"}).error_code == E.INVALID_CONFIG
    assert alter(c, "cg", {"consumer.heartbeat.interval.ms": "7000"}).error_code == 0
    c.request(10, 3, {"key": "cg", "key_type": 0})
    r = c.request(68, 1, {"group_id": "cg", "member_id": "c1", "member_epoch": 0,
                          "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["work"],
                          "topic_partitions": []})
    assert (r.error_code, r.heartbeat_interval_ms) == (0, 7000)
    c.close()
