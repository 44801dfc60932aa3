# mypy narrows ``k.p.elr`` after an assert, though each ``k.p`` reads the image anew
# mypy: disable-error-code="comparison-overlap"
"""KIP-966 eligible leader replicas in the controller (Kafka 4.x's PartitionChangeBuilder
rules), and the leader's HW held under min ISR."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from jocko_py.cluster.controller import (
    BrokerInfo,
    Controller,
    ControllerConfig,
    check_leader_in_isr,
)
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    MetadataImage,
    PartitionChangeRecord,
    PartitionImage,
    decode_record,
    encode_record,
)
from jocko_py.protocol.errors import ErrorCode


def _info(bid: int, inc: uuid.UUID | None = None) -> BrokerInfo:
    return BrokerInfo(bid, "127.0.0.1", 9000 + bid, None, inc or uuid.UUID(int=bid))


class Cluster:
    """Three brokers and topic ``t`` (one partition, RF 3) with ``min.insync.replicas``."""

    def __init__(self, min_isr: int = 2) -> None:
        self.c = Controller(ControllerConfig(min_insync_replicas=min_isr))
        self.img = MetadataImage()
        self.live = {b: _info(b) for b in (1, 2, 3)}
        self.reconcile()
        err, recs = self.c.create_topic(self.img, "t", 1, 3)
        assert err == ErrorCode.NONE
        self.img.apply_batch(recs)

    @property
    def p(self) -> PartitionImage:
        p = self.img.partition("t", 0)
        assert p is not None
        return p

    def reconcile(self) -> None:
        for _ in range(4):  # until settled, as the controller loop does
            recs = self.c.reconcile(self.img, self.live)
            for r in recs:
                assert check_leader_in_isr(self.img, r) is None, r
            if not recs:
                return
            self.img.apply_batch(recs)

    def shrink_to(self, *isr: int) -> None:
        p = self.p
        t = self.img.topics["t"]
        err, recs = self.c.alter_partition(self.img, t.topic_id, 0, p.leader, p.leader_epoch,
                                           p.partition_epoch, isr)
        assert err == ErrorCode.NONE
        self.img.apply_batch(recs)

    def die(self, b: int) -> None:
        del self.live[b]
        self.reconcile()

    def restart(self, b: int) -> None:
        self.live[b] = _info(b, uuid.uuid4())
        self.reconcile()

    def come_back(self, b: int) -> None:  # same process: it was only unreachable
        self.live[b] = _info(b)
        self.reconcile()


def _leader_first() -> tuple[Cluster, int, int, int]:
    k = Cluster()
    leader = k.p.leader
    a, b = [r for r in k.p.replicas if r != leader]
    return k, leader, a, b


def test_replicas_leaving_an_isr_under_min_isr_become_eligible() -> None:
    k, leader, a, b = _leader_first()
    k.shrink_to(leader, a)  # 2 >= min ISR: no ELR
    assert k.p.elr == ()
    k.shrink_to(leader)  # under min ISR: a keeps everything up to the (held) HW
    assert k.p.isr == (leader,) and k.p.elr == (a,)
    k.shrink_to(leader, a)  # back to min ISR: the ELR is cleared
    assert k.p.elr == ()


def test_a_restarted_last_isr_member_yields_to_an_eligible_replica() -> None:
    """The gap of simulation seeds 942727566 / 753185220 at min ISR 2: the leader alone
    in the ISR loses power and returns; the replica in the ELR must lead, not it."""
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    assert set(k.p.elr) == {a, b}
    k.restart(leader)
    assert k.p.leader in (a, b) and k.p.isr == (k.p.leader,)
    assert leader not in k.p.isr and leader not in k.p.elr


def test_a_fenced_last_isr_member_moves_to_the_elr_and_an_eligible_replica_leads() -> None:
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    k.die(leader)
    assert k.p.leader in (a, b) and k.p.isr == (k.p.leader,)
    assert leader in k.p.elr  # it left the ISR under min ISR: still electable


def test_with_every_eligible_replica_gone_the_partition_waits() -> None:
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    k.die(a)
    k.die(b)
    k.restart(leader)  # restarted: not eligible; a and b are fenced
    assert k.p.leader == -1 and k.p.isr == ()
    assert set(k.p.elr) == {a, b}
    k.come_back(a)
    assert k.p.leader == a and k.p.isr == (a,) and k.p.elr == (b,)


def test_the_last_known_leader_returns_when_nothing_else_is_eligible() -> None:
    """Min ISR 1: no ELR while the ISR has a member. A restarted last member leaves the
    ISR, and is elected again once back (balanced recovery: nothing holds more)."""
    k = Cluster(min_isr=1)
    leader = k.p.leader
    k.shrink_to(leader)
    assert k.p.elr == ()
    others = [r for r in (1, 2, 3) if r != leader]
    for r in others:
        k.die(r)
    k.restart(leader)
    assert k.p.leader == leader and k.p.isr == (leader,)
    assert k.p.last_known_elr == ()


def test_every_broker_restarting_at_once_elects_the_last_leader() -> None:
    k, leader, a, b = _leader_first()
    for r in (1, 2, 3):
        k.live[r] = _info(r, uuid.uuid4())
    k.reconcile()
    assert k.p.leader == leader and k.p.isr == (leader,)


def test_min_isr_comes_from_the_topic_config() -> None:
    k = Cluster(min_isr=1)
    t = k.img.topics["t"]
    k.img.apply_batch([ConfigRecord(CONFIG_RESOURCE_TOPIC, "t", "min.insync.replicas", "3")])
    assert k.c.min_insync_replicas(k.img, "t", 3) == 3
    assert k.c.min_insync_replicas(k.img, "t", 2) == 2  # at most the replica count
    leader = k.p.leader
    a = next(r for r in k.p.replicas if r != leader)
    k.shrink_to(leader, a)
    assert k.p.elr == tuple(r for r in k.p.replicas if r not in (leader, a))
    assert t.topic_id == k.img.topics["t"].topic_id


def test_unclean_election_clears_the_elr() -> None:
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    k.die(a)
    k.die(b)
    k.die(leader)
    assert k.p.leader == -1 and k.p.isr == () and set(k.p.elr) == {1, 2, 3}
    assert k.p.last_known_elr == (leader,)
    k.live[b] = _info(b, uuid.uuid4())  # only b returns, restarted: no longer eligible
    k.reconcile()
    assert k.p.leader == -1 and b not in k.p.elr
    res, recs = k.c.elect_leaders(k.img, [("t", 0)], unclean=True)
    assert res[("t", 0)] == ErrorCode.NONE
    k.img.apply_batch(recs)
    assert k.p.leader == b and k.p.isr == (b,) and k.p.elr == () and k.p.last_known_elr == ()


def test_an_unclean_election_with_no_live_replica_fails() -> None:
    k, leader, a, b = _leader_first()
    for r in (1, 2, 3):
        k.die(r)
    res, recs = k.c.elect_leaders(k.img, [("t", 0)], unclean=True)
    assert res[("t", 0)] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE and recs == []


def test_elr_fields_encode_only_when_set() -> None:
    tid = uuid.UUID(int=7)
    plain = PartitionChangeRecord(0, tid, isr=(1,))
    assert b"elr" not in encode_record(plain)
    rec = PartitionChangeRecord(0, tid, isr=(1,), elr=(2, 3), last_known_elr=())
    assert decode_record(encode_record(rec)) == rec


def test_a_snapshot_keeps_the_elr() -> None:
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    img = MetadataImage()
    img.apply_batch(k.img.snapshot())
    assert img.partition("t", 0) == k.p


def test_describe_topic_partitions_reports_the_elr() -> None:
    from jocko_py.broker.handlers import describe_topic_partitions as dtp
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    ctx = SimpleNamespace(broker=SimpleNamespace(image=k.img))
    req = SimpleNamespace(topics=[SimpleNamespace(name="t")], response_partition_limit=10,
                          cursor=None)
    out: dict[str, Any] = asyncio.run(dtp.handle(ctx, req))  # type: ignore[arg-type]
    from jocko_py.protocol import codec
    _, r = codec.decode_response(75, 0, bytes(codec.encode_response(75, 0, 1, out))[4:])
    part = r.topics[0].partitions[0]
    assert part.eligible_leader_replicas == list(k.p.elr) == sorted({a, b})
    assert part.last_known_elr == []


def test_when_every_eligible_replica_restarted_the_last_leader_leads_again() -> None:
    """Every ELR member restarted (each may have lost data): ISR and ELR are empty, and
    the last known leader, back already, is elected in the very record that takes the
    last ELR member out; the safety predicate (checked on every record by
    ``Cluster.reconcile``) must accept that (the whole-cluster simulation's seed
    60521458)."""
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    k.die(a)
    k.die(b)
    k.die(leader)
    assert k.p.leader == -1 and k.p.isr == () and k.p.last_known_elr == (leader,)
    k.restart(leader)  # back, but out of the ELR: a and b (fenced) are still eligible
    assert k.p.leader == -1 and set(k.p.elr) == {a, b}
    k.restart(a)
    assert k.p.leader == -1
    k.restart(b)
    assert k.p.leader == leader and k.p.isr == (leader,) and k.p.elr == ()
