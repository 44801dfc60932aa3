"""Gossip core rule 7 (cluster id): members of another cluster never enter the view."""

from __future__ import annotations

import dataclasses

from jocko_py.cluster.gossip.core import GossipConfig, GossipCore, State
from jocko_py.cluster.gossip.messages import (
    MemberEvent,
    MemberMeta,
    Ping,
    Send,
    Sync,
    Update,
    decode_datagram,
    encode_datagram,
)

MINE, THEIRS = "q1Sh-9_ISia_zwGINzRvyQ", "MkU3OEVBNTcwNTJENDM2Qg"
CFG = GossipConfig(probe_interval_ms=100, probe_timeout_ms=40)


def _meta(i: int, cid: str) -> MemberMeta:
    return MemberMeta(i, f"127.0.0.1:{9000 + i}", f"127.0.0.1:{9100 + i}", None, f"inc-{i}", cid)


def _core(i: int, cid: str) -> GossipCore:
    return GossipCore(f"broker-{i}", f"127.0.0.1:{9200 + i}", _meta(i, cid), CFG, seed=i)


class Net:
    def __init__(self, *cores: GossipCore) -> None:
        self.by_addr = {c.addr: c for c in cores}
        self.queue: list[tuple[str, object]] = []
        self.now = 0

    def run(self, actions: list[Send | MemberEvent]) -> None:
        for a in actions:
            if isinstance(a, Send):
                # through the datagram encoding, as on the wire
                self.queue.append((a.addr, decode_datagram(encode_datagram(a.message))))

    def step(self, ms: int) -> None:
        for _ in range(ms // 10):
            self.now += 10
            while self.queue:
                addr, msg = self.queue.pop(0)
                c = self.by_addr.get(addr)
                if c is not None:
                    self.run(c.receive(msg, self.now))  # type: ignore[arg-type]
            for c in self.by_addr.values():
                self.run(c.tick(self.now))


def test_the_cluster_id_survives_the_datagram_encoding() -> None:
    u = Update("alive", "broker-1", "a:1", 3, _meta(1, MINE))
    msg = Sync("broker-1", "a:1", True, (u, dataclasses.replace(u, meta=_meta(2, ""))))
    assert decode_datagram(encode_datagram(msg)) == msg


def test_members_of_another_cluster_are_ignored_and_the_rest_converge() -> None:
    a, b, x = _core(1, MINE), _core(2, MINE), _core(3, THEIRS)
    net = Net(a, b, x)
    net.run(a.join([b.addr], 0))
    net.run(b.join([a.addr], 0))
    net.run(x.join([a.addr, b.addr], 0))  # a broker of another cluster seeded with ours
    net.step(2000)
    assert set(a.members) == set(b.members) == {"broker-1", "broker-2"}
    assert set(x.members) == {"broker-3"}  # and it ignores ours
    assert all(m.state is State.ALIVE for m in a.members.values())


def test_a_member_without_an_id_yet_is_accepted_and_learning_one_drops_the_foreign() -> None:
    fresh = _core(4, "")
    a, x = _core(1, MINE), _core(3, THEIRS)
    net = Net(fresh, a, x)
    net.run(a.join([fresh.addr], 0))
    net.run(x.join([fresh.addr], 0))
    net.run(fresh.join([a.addr, x.addr], 0))
    net.step(1000)
    assert {"broker-1", "broker-3"} <= set(fresh.members)  # no id: it cannot tell yet
    assert "broker-4" in a.members  # a member without an id is accepted
    me = fresh.members[fresh.name].meta
    net.run(fresh.update_meta(dataclasses.replace(me, cluster_id=MINE), net.now))
    assert set(fresh.members) == {"broker-1", "broker-4"}
    net.step(1000)
    assert set(fresh.members) == {"broker-1", "broker-4"}
    assert a.members["broker-4"].meta.cluster_id == MINE


def test_a_message_from_a_foreign_sender_is_dropped_whole() -> None:
    """Its piggybacked news about our members (here: one declared dead) is not taken."""
    a, b = _core(1, MINE), _core(2, MINE)
    a.join([], 0)
    a.receive(Sync(b.name, b.addr, False, (Update("alive", b.name, b.addr, 1, _meta(2, MINE)),)),
              1)
    x = _meta(3, THEIRS)
    acts = a.receive(Ping("broker-3", "127.0.0.1:9203", 7, a.name, (
        Update("alive", "broker-3", "127.0.0.1:9203", 1, x),
        Update("dead", b.name, b.addr, 5, _meta(2, MINE)))), 2)
    assert acts == []  # not even an ack
    assert a.members[b.name].state is State.ALIVE and "broker-3" not in a.members
