"""The pure group state: legal transitions, protocol selection, leader election."""

from __future__ import annotations

import pytest

from jocko_py.broker.group.state import (
    Group,
    GroupState,
    IllegalStateTransition,
    Member,
    parse_subscription_topics,
)

S = GroupState


def member(mid: str, protocols: list[str], instance: str | None = None) -> Member:
    return Member(mid, instance, "c", "/h", 1000, 1000, "consumer",
                  [(p, b"") for p in protocols])


def test_transitions_follow_kafka() -> None:
    g = Group("g", 0)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(S.STABLE, 1)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(S.COMPLETING_REBALANCE, 1)
    g.transition_to(S.PREPARING_REBALANCE, 1)
    g.transition_to(S.COMPLETING_REBALANCE, 2)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(S.EMPTY, 3)
    g.transition_to(S.STABLE, 3)
    assert g.state_timestamp == 3
    g.transition_to(S.PREPARING_REBALANCE, 4)
    g.transition_to(S.EMPTY, 5)
    g.transition_to(S.DEAD, 6)
    g.transition_to(S.DEAD, 7)


def test_protocol_selection_and_support() -> None:
    g = Group("g", 0)
    assert not g.supports_protocols("consumer", [])
    g.add(member("a", ["range", "roundrobin"]))
    g.add(member("b", ["roundrobin", "range"]))
    g.add(member("c", ["roundrobin"]))
    assert g.supports_protocols("consumer", ["roundrobin", "sticky"])
    assert not g.supports_protocols("consumer", ["range"])
    assert not g.supports_protocols("connect", ["roundrobin"])
    assert g.select_protocol() == "roundrobin"


def test_leader_moves_to_a_joined_member() -> None:
    g = Group("g", 0)
    a, b = member("a", ["range"]), member("b", ["range"], "i-b")
    g.add(a)
    g.add(b)
    assert g.leader_id == "a" and g.static_members == {"i-b": "b"}
    b.join_waiter = 1
    assert g.maybe_elect_joined_leader() and g.leader_id == "b"
    g.remove("b")
    assert g.leader_id == "a" and g.static_members == {}


def test_subscription_topics() -> None:
    sub = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bb" + b"\xff\xff\xff\xff"
    assert parse_subscription_topics(sub) == {"a", "bb"}
    for bad in (b"\x00", b"\x00\x00\x00\x00\x00\x05\x00", b"\x00\x00\x00\x00\x00\x01\x00\x09ab"):
        with pytest.raises(ValueError):
            parse_subscription_topics(bad)
