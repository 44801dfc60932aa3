"""Controller rules added with the broker's cluster mode: restarted brokers, heartbeat
caught-up gating, preferred leader election, reassignment; and metadata deltas."""

from __future__ import annotations

import uuid

from jocko_py.cluster.controller import (
    BrokerInfo,
    Controller,
    ControllerConfig,
)
from jocko_py.cluster.metadata import (
    MetadataImage,
    MetadataRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
)
from jocko_py.protocol.errors import ErrorCode


def _info(bid: int, inc: uuid.UUID | None = None) -> BrokerInfo:
    return BrokerInfo(bid, "127.0.0.1", 9000 + bid, None, inc or uuid.UUID(int=bid))


def _apply(img: MetadataImage, recs: list[MetadataRecord]) -> None:
    img.apply_batch(recs)


def _three() -> tuple[Controller, MetadataImage, dict[int, BrokerInfo]]:
    c = Controller(ControllerConfig())
    img = MetadataImage()
    live = {b: _info(b) for b in (1, 2, 3)}
    _apply(img, c.reconcile(img, live))
    err, recs = c.create_topic(img, "t", 1, 3)
    assert err == ErrorCode.NONE
    _apply(img, recs)
    return c, img, live


def test_a_fast_restart_leaves_the_isr_and_moves_leadership() -> None:
    c, img, live = _three()
    p = img.partition("t", 0)
    assert p is not None
    leader, epoch = p.leader, p.leader_epoch
    live[leader] = _info(leader, uuid.uuid4())  # back before gossip saw it die
    _apply(img, c.reconcile(img, live))
    p = img.partition("t", 0)
    assert p is not None
    assert p.leader not in (leader, -1) and p.leader_epoch == epoch + 1
    assert leader not in p.isr
    # once only: the next round changes nothing for it
    assert not [r for r in c.reconcile(img, live) if isinstance(r, PartitionChangeRecord)]


def test_a_broker_is_unfenced_only_once_caught_up() -> None:
    c, img, live = _three()
    live[4] = _info(4)
    _apply(img, c.reconcile(img, live, caught_up={1, 2, 3}))
    assert img.brokers[4].fenced
    _apply(img, c.reconcile(img, live, caught_up={1, 2, 3}))
    assert img.brokers[4].fenced
    _apply(img, c.reconcile(img, live, caught_up={1, 2, 3, 4}))
    assert not img.brokers[4].fenced


def test_a_fenced_broker_awaiting_catch_up_is_never_elected() -> None:
    c, img, live = _three()
    p = img.partition("t", 0)
    assert p is not None
    leader = p.leader
    others = [b for b in (1, 2, 3) if b != leader]
    # every other ISR member restarts and has not caught up yet; the leader dies
    for b in others:
        live[b] = _info(b, uuid.uuid4())
    del live[leader]
    _apply(img, c.reconcile(img, live, caught_up=set()))
    p = img.partition("t", 0)
    assert p is not None and p.leader == -1, p


def test_preferred_leader_election() -> None:
    c, img, live = _three()
    p = img.partition("t", 0)
    assert p is not None
    preferred = p.replicas[0]
    res, recs = c.elect_leaders(img, [("t", 0)])
    assert res[("t", 0)] == ErrorCode.ELECTION_NOT_NEEDED and not recs
    _apply(img, [PartitionChangeRecord(0, img.topics["t"].topic_id, leader=p.replicas[1])])
    res, recs = c.elect_leaders(img, [("t", 0)])
    assert res[("t", 0)] == ErrorCode.NONE
    _apply(img, recs)
    p2 = img.partition("t", 0)
    assert p2 is not None and p2.leader == preferred and p2.leader_epoch == 2
    _apply(img, [PartitionChangeRecord(0, img.topics["t"].topic_id, leader=p.replicas[1],
                                       isr=(p.replicas[1], p.replicas[2]))])
    res, _ = c.elect_leaders(img, [("t", 0)])
    assert res[("t", 0)] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_reassignment_adds_waits_for_isr_then_drops() -> None:
    c = Controller(ControllerConfig())
    img = MetadataImage()
    live = {b: _info(b) for b in (1, 2, 3)}
    _apply(img, c.reconcile(img, live))
    _, recs = c.create_topic(img, "r", 1, 1)
    _apply(img, recs)
    p = img.partition("r", 0)
    assert p is not None
    old = p.leader
    new = next(b for b in (1, 2, 3) if b != old)
    err, recs = c.reassign(img, "r", 0, (new,))
    assert err == ErrorCode.NONE
    _apply(img, recs)
    p = img.partition("r", 0)
    assert p is not None
    assert p.replicas == (new, old) and p.adding_replicas == (new,)
    assert p.removing_replicas == (old,)
    assert not c.reconcile(img, live)  # the new replica is not in the ISR yet
    _apply(img, [PartitionChangeRecord(0, img.topics["r"].topic_id, isr=(old, new))])
    _apply(img, c.reconcile(img, live))
    p = img.partition("r", 0)
    assert p is not None
    assert p.replicas == (new,) and p.isr == (new,) and p.leader == new
    assert not p.adding_replicas and not p.removing_replicas


def test_delta_sorts_local_changes() -> None:
    c, img, live = _three()
    tid = img.topics["t"].topic_id
    p = img.partition("t", 0)
    assert p is not None
    leader = p.leader
    follower = next(b for b in p.replicas if b != leader)
    d = img.apply_batch([PartitionChangeRecord(0, tid, leader=follower)])
    assert [r.topic for r in d.local_changes(follower).leaders] == ["t"]
    assert [r.topic for r in d.local_changes(leader).followers] == ["t"]
    old = MetadataImage.from_records(img.snapshot())
    d = img.apply_batch([RemoveTopicRecord(tid)])
    assert {r.partition for r in d.local_changes(leader).deleted} == {0}
    diff = MetadataImage.diff(old, img)
    assert tid in diff.deleted_topics and diff.local_changes(leader).deleted


def test_an_isr_expansion_naming_a_stale_broker_epoch_is_refused() -> None:
    """KIP-903. The leader saw follower 3 catch up and asks to add it to the ISR; before
    the request arrives, 3 loses power, restarts (its unflushed tail gone) and registers
    anew, and is unfenced. The request names 3's old broker epoch: refused with
    INELIGIBLE_REPLICA, so the new process cannot enter the ISR on the old one's log end.
    Found by the replication simulation (CI run of 2026-11-24, seed 987075179)."""
    c, img, live = _three()
    p = img.partition("t", 0)
    assert p is not None
    leader = p.leader
    follower = next(r for r in p.replicas if r != leader)
    # the follower leaves the ISR (lag), then catches up under its current registration
    isr = tuple(r for r in p.isr if r != follower)
    t = img.topics["t"]
    err, recs = c.alter_partition(img, t.topic_id, 0, leader, p.leader_epoch,
                                  p.partition_epoch, isr)
    assert err == ErrorCode.NONE
    _apply(img, recs)
    p = img.partition("t", 0)
    assert p is not None
    old_epoch = img.brokers[follower].broker_epoch
    expand = p.isr + (follower,)
    epochs = tuple(-1 if r == leader else img.brokers[r].broker_epoch for r in expand)
    # the follower restarts and is registered (fenced), then unfenced, meanwhile
    live[follower] = _info(follower, uuid.uuid4())
    _apply(img, c.reconcile(img, live))
    _apply(img, c.reconcile(img, live))
    assert not img.brokers[follower].fenced
    assert img.brokers[follower].broker_epoch != old_epoch
    p = img.partition("t", 0)
    assert p is not None
    err, recs = c.alter_partition(img, t.topic_id, 0, leader, p.leader_epoch,
                                  p.partition_epoch, expand, epochs)
    assert (err, recs) == (ErrorCode.INELIGIBLE_REPLICA, [])
    # without epochs (AlterPartition v2) the same request would have been taken
    err, _ = c.alter_partition(img, t.topic_id, 0, leader, p.leader_epoch,
                               p.partition_epoch, expand)
    assert err == ErrorCode.NONE
    # with the current registration's epoch it is taken
    fresh = tuple(-1 if r == leader else img.brokers[r].broker_epoch for r in expand)
    err, recs = c.alter_partition(img, t.topic_id, 0, leader, p.leader_epoch,
                                  p.partition_epoch, expand, fresh)
    assert err == ErrorCode.NONE and recs
