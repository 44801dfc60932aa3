"""TxnOffsetCommit into a KIP-848 (consumer protocol) group, through the group shard:
checked against the consumer group's member and its member epoch, as Kafka's
ConsumerGroup.validateOffsetCommit does. (It was checked against the classic members,
which a consumer group never has: every transactional commit of a KIP-848 member got
UNKNOWN_MEMBER_ID, so franz-go's GroupTransactSession aborted every transaction and
TestTxnEtl's 848 sub-tests never finished.)"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.group.consumer import ClassicInfo, HeartbeatRequest
from jocko_py.broker.group.offsets import CommitRequest
from jocko_py.protocol.errors import ErrorCode as E
from tests.groups.test_shard import REBALANCE, G, Harness, answer

TP = ("t", 0)
PID, PEPOCH = 7, 0


def member(h: Harness, mid: str, instance: str | None = None) -> int:
    """``mid`` joins the consumer group: its member epoch."""
    hb = HeartbeatRequest(member_id=mid, member_epoch=0, instance_id=instance,
                          rebalance_timeout_ms=REBALANCE, subscribed_names=["t"],
                          client_id="k", client_host="/h")
    r = answer(h.call(lambda s, now: s.consumer_heartbeat(now, G, hb)))
    assert r.error == E.NONE
    return int(r.member_epoch)


def txn_commit(h: Harness, member_id: str, epoch: int, instance: str | None = None,
               offset: int = 5) -> E:
    got: Any = answer(h.call(lambda s, now: s.txn_commit(
        now, group_id=G, producer_id=PID, producer_epoch=PEPOCH, generation_id=epoch,
        member_id=member_id, instance_id=instance, offsets={TP: CommitRequest(offset, -1, "")})))
    return got[TP]  # type: ignore[no-any-return]


def test_a_member_commits_in_a_transaction_at_its_member_epoch() -> None:
    h = Harness()
    epoch = member(h, "k1")
    assert txn_commit(h, "k1", epoch) == E.NONE
    assert h.shard.has_pending_txn_offset(G, TP)  # counts once the marker lands
    h.call(lambda s, now: s.complete_txn(now, PID, True))
    assert h.shard.groups[G].offsets[TP].offset == 5
    assert not h.shard.has_pending_txn_offset(G, TP)


def test_a_static_member_commits_with_its_instance_id() -> None:
    h = Harness()
    epoch = member(h, "k1", instance="i1")
    assert txn_commit(h, "k1", epoch, instance="i1") == E.NONE


def test_stale_epoch_and_unknown_member_are_refused() -> None:
    h = Harness()
    epoch = member(h, "k1")
    assert txn_commit(h, "k1", epoch + 1) == E.STALE_MEMBER_EPOCH
    assert txn_commit(h, "k1", epoch - 1) == E.STALE_MEMBER_EPOCH
    assert txn_commit(h, "nobody", epoch) == E.UNKNOWN_MEMBER_ID
    assert not h.shard.has_pending_txn_offset(G, TP)


def test_without_a_member() -> None:
    """Kafka: no member id, epoch -1 and no instance id is a producer committing outside
    group management, accepted even while the group has members; an instance id (even
    empty) without a member is UNKNOWN_MEMBER_ID."""
    h = Harness()
    assert txn_commit(h, "", -1) == E.NONE  # the group has no member yet
    member(h, "k1")
    assert txn_commit(h, "", -1) == E.NONE
    assert txn_commit(h, "", -1, instance="") == E.UNKNOWN_MEMBER_ID


def test_a_classic_member_of_a_consumer_group_gets_illegal_generation() -> None:
    h = Harness()
    epoch = member(h, "k1")
    cg = h.shard.groups[G].consumer
    assert cg is not None
    cg.members["k1"].classic = ClassicInfo([("range", b"")], 1000, "range")
    assert txn_commit(h, "k1", epoch + 1) == E.ILLEGAL_GENERATION
    assert cg.check_commit("k1", epoch + 1) == E.ILLEGAL_GENERATION  # OffsetCommit too
    assert txn_commit(h, "k1", epoch) == E.NONE
