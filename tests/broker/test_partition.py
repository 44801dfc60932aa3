"""The partition object on its own (real Log on disk, `now` passed in): high watermark,
ISR shrink and expand, min ISR, follower fetch bookkeeping, divergence."""

from __future__ import annotations

import uuid
from pathlib import Path

from jocko_py.broker.partition import Partition, Role
from jocko_py.cluster.metadata import PartitionImage
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.log import Log
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

TID = uuid.UUID(int=7)


def _batch(n: int = 1) -> bytes:
    return rb.build_batch([rb.NewRecord(None, b"v%d" % i, (), 1000) for i in range(n)])


def _leader(tmp_path: Path, isr: tuple[int, ...] = (1, 2, 3), min_isr: int = 2,
            now: int = 0) -> Partition:
    lg = Log.open(tmp_path / "t-0", LogConfig(min_insync_replicas=min_isr))
    p = Partition("t", 0, TID, lg, broker_id=1)
    p.make_leader(PartitionImage((1, 2, 3), isr, 1, 0, 0), now)
    return p


def test_high_watermark_is_the_minimum_leo_of_the_isr(tmp_path: Path) -> None:
    p = _leader(tmp_path)
    r = p.append_as_leader(_batch(3), -1, 1 << 20, now=0)
    assert r.error == ErrorCode.NONE and (r.base_offset, r.last_offset) == (0, 2)
    assert p.high_watermark == 0  # no follower has fetched it
    assert not p.update_follower_fetch(2, 3, now=10).hw_advanced
    eff = p.update_follower_fetch(3, 2, now=10)
    assert eff.hw_advanced and p.high_watermark == 2
    assert p.update_follower_fetch(3, 3, now=20).hw_advanced and p.high_watermark == 3
    # never backwards
    p.update_follower_fetch(3, 1, now=30)
    assert p.high_watermark == 3
    # consumers read up to the HW only; followers up to the LEO
    p.append_as_leader(_batch(1), -1, 1 << 20, now=40)
    assert p.read(3, 1 << 20, upper=p.high_watermark, min_one=True).records == b""
    assert p.read(3, 1 << 20, upper=p.log.log_end_offset, min_one=True).records


def test_lagging_follower_leaves_the_isr_and_rejoins_when_caught_up(tmp_path: Path) -> None:
    p = _leader(tmp_path, now=0)
    p.append_as_leader(_batch(2), -1, 1 << 20, now=0)
    p.update_follower_fetch(2, 2, now=100)
    p.update_follower_fetch(3, 0, now=100)  # follower 3 stays behind
    assert p.maybe_shrink_isr(now=5_000, lag_max_ms=10_000) is None
    p.update_follower_fetch(2, 2, now=10_000)  # follower 2 keeps fetching at the end
    change = p.maybe_shrink_isr(now=10_200, lag_max_ms=10_000)
    assert change is not None and change.new_isr == (1, 2)
    assert p.maximal_isr() == (1, 2, 3)  # a pending shrink keeps the larger set for the HW
    assert p.maybe_shrink_isr(now=20_000, lag_max_ms=10_000) is None  # one change at a time
    # the controller commits it: the image comes back with a newer partition epoch
    p.make_leader(PartitionImage((1, 2, 3), (1, 2), 1, 0, 1), now=10_300)
    assert p.isr == (1, 2) and p.pending_isr is None
    assert p.high_watermark == 2  # follower 3 no longer holds the HW back
    # follower 3 catches up: expand
    eff = p.update_follower_fetch(3, 2, now=11_000)
    assert eff.isr_change is not None and eff.isr_change.new_isr == (1, 2, 3)


def test_min_insync_replicas(tmp_path: Path) -> None:
    p = _leader(tmp_path, isr=(1,), min_isr=2)
    assert p.append_as_leader(_batch(), -1, 1 << 20, now=0).error == \
        ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.append_as_leader(_batch(), 1, 1 << 20, now=0).error == ErrorCode.NONE


def test_the_high_watermark_holds_while_the_isr_is_under_min_isr(tmp_path: Path) -> None:
    """KIP-966 (Kafka 4.x): replicas that left the ISR under min ISR stay eligible to
    lead, so the HW must not pass what they hold; acks=1 records wait, unseen."""
    p = _leader(tmp_path, isr=(1,), min_isr=2)
    assert p.append_as_leader(_batch(2), 1, 1 << 20, now=0).error == ErrorCode.NONE
    assert p.high_watermark == 0 and p.log.log_end_offset == 2
    p.update_follower_fetch(2, 2, now=10)  # caught up: asks to rejoin the ISR
    assert p.high_watermark == 0
    p.make_leader(PartitionImage((1, 2, 3), (1, 2), 1, 0, 1), now=20)
    assert p.high_watermark == 2  # back at min ISR: both members hold it


def test_min_isr_beyond_the_replica_count_does_not_hold_the_high_watermark(
        tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(min_insync_replicas=2))
    p = Partition("t", 0, TID, lg, broker_id=1)
    p.make_leader(PartitionImage((1,), (1,), 1, 0, 0), 0)  # RF 1: effective min ISR 1
    p.append_as_leader(_batch(), 1, 1 << 20, now=0)
    assert p.high_watermark == 1


def test_acks_all_is_held_to_the_effective_min_isr(tmp_path: Path) -> None:
    """Kafka's Partition.effectiveMinIsr: min.insync.replicas capped by the replica
    count, before the append as for the high watermark."""
    lg = Log.open(tmp_path / "t-0", LogConfig(min_insync_replicas=3))
    p = Partition("t", 0, TID, lg, broker_id=1)
    p.make_leader(PartitionImage((1, 2), (1,), 1, 0, 0), 0)  # RF 2: effective min ISR 2
    assert p.min_isr() == 2
    r = p.append_as_leader(_batch(), -1, 1 << 20, now=0)
    assert r.error == ErrorCode.NOT_ENOUGH_REPLICAS and r.message is not None
    assert r.message.endswith("min.insync.replicas=2")
    p.make_leader(PartitionImage((1,), (1,), 1, 0, 1), 1)  # RF 1: effective min ISR 1
    assert p.append_as_leader(_batch(), -1, 1 << 20, now=1).error == ErrorCode.NONE


def test_follower_refuses_produce_and_reports_divergence(tmp_path: Path) -> None:
    p = _leader(tmp_path)
    p.append_as_leader(_batch(3), 1, 1 << 20, now=0)  # epoch 0: offsets 0-2
    p.make_leader(PartitionImage((1, 2, 3), (1, 2, 3), 1, 1, 1), now=1)  # epoch 1 from 3
    p.append_as_leader(_batch(2), 1, 1 << 20, now=2)  # epoch 1: offsets 3-4
    # a follower that fetched up to offset 5 in epoch 0 diverged at 3
    assert p.diverging_epoch(0, 5) == (0, 3)
    assert p.diverging_epoch(1, 5) is None
    p.make_follower(PartitionImage((1, 2, 3), (2, 3), 2, 2, 2))
    assert p.role is Role.FOLLOWER
    assert p.append_as_leader(_batch(), 1, 1 << 20, now=3).error == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_unanswered_isr_expansion_stays_pending(tmp_path: Path) -> None:
    """An AlterPartition whose answer never came may have been applied: the expansion
    stays in the maximal ISR (the HW waits for the new member) and is sent again; only a
    refusal drops it, and the metadata's newer partition epoch settles it. Found by the
    replication simulation (seeds 91, 239): dropping it let the HW pass the LEO of a
    member the controller had added."""
    p = _leader(tmp_path, isr=(1, 2), min_isr=1)
    assert p.append_as_leader(_batch(2), -1, 1 << 20, now=0).error == ErrorCode.NONE
    p.update_follower_fetch(2, 2, now=0)
    eff = p.update_follower_fetch(3, 2, now=0)  # caught up: expand to {1, 2, 3}
    change = eff.isr_change
    assert change is not None and change.new_isr == (1, 2, 3)
    assert p.isr_change_failed(change, ErrorCode.REQUEST_TIMED_OUT)  # no answer: retry
    assert p.pending_isr == (1, 2, 3)
    assert not p.isr_change_failed(change, ErrorCode.INVALID_UPDATE_VERSION)  # a retry of
    assert p.pending_isr == (1, 2, 3)  # an applied change: wait for the metadata
    p.append_as_leader(_batch(1), -1, 1 << 20, now=1)
    p.update_follower_fetch(2, 3, now=1)
    assert p.high_watermark == 2  # 3 counts: it has 2 records only
    p.make_leader(PartitionImage((1, 2, 3), (1, 2, 3), 1, 0, 1), now=2)
    assert p.pending_isr is None and p.isr == (1, 2, 3)
    # a refusal judged at our epochs drops the change at once
    p.update_follower_fetch(3, 3, now=3)
    shrink = p.maybe_shrink_isr(now=100_000, lag_max_ms=10)
    assert shrink is not None
    assert not p.isr_change_failed(shrink, ErrorCode.INELIGIBLE_REPLICA)
    assert p.pending_isr is None


def test_an_isr_change_carries_the_broker_epochs_the_fetches_came_from(tmp_path: Path) -> None:
    """KIP-903: the leader remembers under which registration (broker epoch) each follower
    fetched, and an ISR change names those epochs, so the controller can refuse a member
    that registered anew since (see the controller's test of the same name)."""
    p = _leader(tmp_path, isr=(1, 2), min_isr=1)
    assert p.append_as_leader(_batch(2), -1, 1 << 20, now=0).error == ErrorCode.NONE
    p.update_follower_fetch(2, 2, now=0, broker_epoch=11)
    eff = p.update_follower_fetch(3, 2, now=0, broker_epoch=12)
    change = eff.isr_change
    assert change is not None and change.new_isr == (1, 2, 3)
    assert change.member_epochs == (-1, 11, 12)
    # a refusal (the member's registration moved on) drops the change
    assert not p.isr_change_failed(change, ErrorCode.INELIGIBLE_REPLICA)
    assert p.pending_isr is None
