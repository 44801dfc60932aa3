"""Every transition of the share partition state machine (broker/share/partition.py),
in process: acquisition, the in-flight limit, acknowledgement types, lock expiry and
renew, release of a member, the delivery count limit, read_committed, pending writes
and their rollback, start offset movement and the persisted snapshot."""

from __future__ import annotations

import time
from dataclasses import replace

from jocko_py.broker.share.partition import (
    AckBatch,
    AcquiredRange,
    FetchedBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
)
from jocko_py.broker.share.persister import DeliveryState, ShareState, StateBatch
from jocko_py.protocol.errors import ErrorCode as E

LOCK = 1000


def sp(start: int = 0, **kw: int | bool) -> SharePartition:
    return SharePartition(SharePartitionConfig(lock_duration_ms=LOCK, **kw), start)  # type: ignore[arg-type]


def batches(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    return [FetchedBatch(a, b) for a, b in ranges]


def commit(p: SharePartition) -> None:
    w = p.begin_write()
    p.complete_write(w, E.NONE)


def test_acquire_new_records_locks_them_to_the_member_with_count_one() -> None:
    p = sp()
    got = p.acquire("m1", 0, batches((0, 4), (5, 9)), 100, now=0)
    assert got == [AcquiredRange(0, 9, 1)]
    assert p.end_offset == 10 and p.start_offset == 0
    r = p.state_of(3)
    assert r is not None and r.state is RecordState.ACQUIRED and r.member_id == "m1"
    assert r.deadline == LOCK
    assert p.next_fetch_offset() == 10


def test_acquired_records_are_not_acquired_again_by_another_member() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 4)), 100, now=0)
    assert p.acquire("m2", 0, batches((0, 4)), 100, now=1) == []


def test_max_records_whole_batch_unless_strict() -> None:
    p = sp()
    assert p.acquire("m1", 0, batches((0, 4), (5, 9)), 3, now=0) == [AcquiredRange(0, 4, 1)]
    q = sp()
    assert q.acquire("m1", 0, batches((0, 4), (5, 9)), 3, now=0, strict_limit=True) == [
        AcquiredRange(0, 2, 1)]


def test_in_flight_limit_stops_new_acquisition() -> None:
    p = sp(max_in_flight=4)
    assert p.acquire("m1", 0, batches((0, 9)), 100, now=0) == [AcquiredRange(0, 3, 1)]
    assert p.next_fetch_offset() is None
    # done records free room: the start offset moves up
    assert p.acknowledge("m1", [AckBatch(0, 1, (1,))], now=1).error == E.NONE
    commit(p)
    assert p.start_offset == 2 and p.next_fetch_offset() == 4


def test_accept_acknowledges_and_start_offset_moves() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 4)), 100, now=0)
    res = p.acknowledge("m1", [AckBatch(0, 2, (1,))], now=1)
    assert res.error == E.NONE and res.pending
    # pending: in the new state, but the start offset waits for the write
    assert p.start_offset == 0
    assert p.complete_write(p.begin_write(), E.NONE) == {res.pending: E.NONE}
    assert p.start_offset == 3


def test_release_makes_available_and_count_grows_on_next_acquire() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 4)), 100, now=0)
    p.acknowledge("m1", [AckBatch(2, 2, (2,))], now=1)
    commit(p)
    r = p.state_of(2)
    assert r is not None and r.state is RecordState.AVAILABLE and r.member_id == ""
    assert p.next_fetch_offset() == 2
    assert p.acquire("m2", 2, batches((0, 4)), 100, now=2) == [AcquiredRange(2, 2, 2)]


def test_reject_and_gap_archive() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 4)), 100, now=0)
    p.acknowledge("m1", [AckBatch(0, 1, (3, 0))], now=1)
    commit(p)
    assert p.start_offset == 2
    assert p.acquire("m2", 0, batches((0, 4)), 100, now=2) == []


def test_per_offset_types() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 2)), 100, now=0)
    assert p.acknowledge("m1", [AckBatch(0, 2, (1, 2, 3))], now=1).error == E.NONE
    commit(p)
    assert p.start_offset == 1
    r1, r2 = p.state_of(1), p.state_of(2)
    assert r1 is not None and r1.state is RecordState.AVAILABLE
    assert r2 is not None and r2.state is RecordState.ARCHIVED


def test_acknowledge_errors_change_nothing() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 4)), 100, now=0)
    # not the owner
    assert p.acknowledge("m2", [AckBatch(0, 0, (1,))], 1).error == E.INVALID_RECORD_STATE
    # never acquired (past the end)
    assert p.acknowledge("m1", [AckBatch(3, 7, (1,))], 1).error == E.INVALID_REQUEST
    # wrong number of types, unknown type, inverted range
    assert p.acknowledge("m1", [AckBatch(0, 2, (1, 1))], 1).error == E.INVALID_REQUEST
    assert p.acknowledge("m1", [AckBatch(0, 0, (9,))], 1).error == E.INVALID_REQUEST
    assert p.acknowledge("m1", [AckBatch(2, 1, (1,))], 1).error == E.INVALID_REQUEST
    # all or nothing: the valid first batch was not applied
    assert p.acknowledge("m1", [AckBatch(0, 0, (1,)), AckBatch(0, 0, (1,))], 1).error \
        == E.INVALID_REQUEST
    assert all(p.records[o].state is RecordState.ACQUIRED for o in range(5))
    # acknowledged already (pending, then done)
    assert p.acknowledge("m1", [AckBatch(0, 0, (1,))], 1).error == E.NONE
    assert p.acknowledge("m1", [AckBatch(0, 0, (1,))], 1).error == E.INVALID_RECORD_STATE
    commit(p)
    assert p.acknowledge("m1", [AckBatch(0, 0, (1,))], 1).error == E.INVALID_RECORD_STATE


def test_lock_expiry_releases_and_renew_extends() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 1)), 100, now=0)
    assert p.next_deadline() == LOCK
    assert p.acknowledge("m1", [AckBatch(1, 1, (4,))], now=500).pending == 0  # renew
    assert p.expire_locks(LOCK) == 1
    assert p.records[0].state is RecordState.AVAILABLE
    assert p.records[1].state is RecordState.ACQUIRED and p.next_deadline() == 500 + LOCK
    assert p.expire_locks(500 + LOCK) == 1
    assert p.next_deadline() is None


def test_delivery_count_limit_archives_on_release_and_expiry() -> None:
    p = sp(delivery_count_limit=2)
    p.acquire("m1", 0, batches((0, 0)), 100, now=0)
    p.expire_locks(LOCK)
    assert p.acquire("m2", 0, batches((0, 0)), 100, now=LOCK) == [AcquiredRange(0, 0, 2)]
    p.acknowledge("m2", [AckBatch(0, 0, (2,))], now=LOCK + 1)
    commit(p)
    assert p.start_offset == 1  # archived: count reached the limit


def test_available_record_at_the_limit_is_archived_not_acquired() -> None:
    state = ShareState(start_offset=0, batches=(StateBatch(0, 0, DeliveryState.AVAILABLE, 3),))
    p = SharePartition.from_state(SharePartitionConfig(delivery_count_limit=3), state)
    assert p.start_offset == 1 and p.dirty  # archived on load
    q = SharePartition.from_state(SharePartitionConfig(delivery_count_limit=9), state)
    q.config = SharePartitionConfig(delivery_count_limit=3)  # the group's limit lowered
    assert q.acquire("m1", 0, batches((0, 1)), 100, now=0) == [AcquiredRange(1, 1, 1)]
    assert q.start_offset == 1


def test_release_member_releases_only_its_records() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 1)), 100, now=0)
    p.acquire("m2", 2, batches((2, 3)), 100, now=0)
    assert p.release_member("m1") == 2
    assert [p.records[o].state for o in range(4)] == [
        RecordState.AVAILABLE, RecordState.AVAILABLE, RecordState.ACQUIRED,
        RecordState.ACQUIRED]


def test_failed_write_rolls_back_pending_acknowledgements() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 2)), 100, now=0)
    res = p.acknowledge("m1", [AckBatch(0, 2, (1,))], now=1)
    w = p.begin_write()
    assert w.covers == {res.pending}
    assert p.complete_write(w, E.COORDINATOR_NOT_AVAILABLE) == {
        res.pending: E.COORDINATOR_NOT_AVAILABLE}
    assert p.start_offset == 0
    assert all(p.records[o].state is RecordState.ACQUIRED and p.records[o].member_id == "m1"
               for o in range(3))
    # ... and may be acknowledged again
    assert p.acknowledge("m1", [AckBatch(0, 2, (1,))], now=2).error == E.NONE


def test_pending_release_is_not_acquired_before_its_write() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 0)), 100, now=0)
    p.acknowledge("m1", [AckBatch(0, 0, (2,))], now=1)
    assert p.acquire("m2", 0, batches((0, 0)), 100, now=2) == []
    assert p.expire_locks(10 * LOCK) == 0
    commit(p)
    assert p.acquire("m2", 0, batches((0, 0)), 100, now=3) == [AcquiredRange(0, 0, 2)]


def test_write_covers_only_acknowledgements_made_before_it() -> None:
    p = sp()
    p.acquire("m1", 0, batches((0, 1)), 100, now=0)
    a = p.acknowledge("m1", [AckBatch(0, 0, (1,))], now=1).pending
    w = p.begin_write()
    b = p.acknowledge("m1", [AckBatch(1, 1, (1,))], now=2).pending
    assert p.complete_write(w, E.NONE) == {a: E.NONE}
    assert p.pending_ids() == {b}


def test_snapshot_batches_and_reload() -> None:
    p = sp(start=10)
    p.acquire("m1", 10, batches((10, 19)), 100, now=0)
    p.acknowledge("m1", [AckBatch(10, 11, (1,)), AckBatch(13, 14, (3,)),
                         AckBatch(15, 15, (2,))], now=1)
    w = p.begin_write()
    # the start offset written is where the pending acknowledgements will move it
    assert w.start_offset == 12 and p.start_offset == 10
    p.complete_write(w, E.NONE)
    assert p.start_offset == 12
    w2 = p.begin_write()
    assert w2 == replace(w, covers=frozenset())
    assert w2.delivery_complete_count == 2  # 13-14 archived
    assert w2.batches == (
        StateBatch(12, 12, DeliveryState.AVAILABLE, 1),  # acquired: written available
        StateBatch(13, 14, DeliveryState.ARCHIVED, 1),
        StateBatch(15, 19, DeliveryState.AVAILABLE, 1),
    )
    q = SharePartition.from_state(p.config, ShareState(
        start_offset=w2.start_offset, batches=w2.batches))
    assert q.start_offset == 12 and q.end_offset == 20
    assert q.next_fetch_offset() == 12
    assert q.acquire("m2", 12, batches((10, 19)), 100, now=5) == [
        AcquiredRange(12, 12, 2), AcquiredRange(15, 19, 2)]


def test_load_fills_gaps_as_never_delivered() -> None:
    state = ShareState(start_offset=5, batches=(StateBatch(8, 9, DeliveryState.ACKNOWLEDGED, 1),))
    p = SharePartition.from_state(SharePartitionConfig(), state)
    assert p.start_offset == 5 and p.end_offset == 10
    assert p.acquire("m", 5, batches((5, 12)), 100, now=0) == [
        AcquiredRange(5, 7, 1), AcquiredRange(10, 12, 1)]


def test_holes_between_batches_are_acquired_for_gap_acks() -> None:
    p = sp()
    assert p.acquire("m", 0, batches((0, 1), (5, 6)), 100, now=0) == [AcquiredRange(0, 6, 1)]
    assert p.acknowledge("m", [AckBatch(0, 1, (1,)), AckBatch(2, 4, (0,)),
                               AckBatch(5, 6, (1,))], 1).error == E.NONE
    commit(p)
    assert p.start_offset == 7


def test_read_committed_archives_aborted_transactions() -> None:
    p = sp(read_committed=True)
    bs = [FetchedBatch(0, 1, 7, True), FetchedBatch(2, 2, 8, False),
          FetchedBatch(3, 3, 7, True, True),  # producer 7's abort marker
          FetchedBatch(4, 5, 7, True)]          # a later transaction of 7: not aborted
    got = p.acquire("m", 0, bs, 100, now=0, aborted=[(7, 0)])
    assert got == [AcquiredRange(2, 5, 1)]
    assert p.start_offset == 2
    q = sp()  # read_uncommitted acquires them
    assert q.acquire("m", 0, bs, 100, now=0, aborted=[(7, 0)]) == [AcquiredRange(0, 5, 1)]


def test_log_start_moved_archives_below() -> None:
    p = sp()
    p.acquire("m", 0, batches((0, 3)), 100, now=0)
    p.log_start_moved(2)
    assert p.start_offset == 2
    p.log_start_moved(9)
    assert p.start_offset == 9 and p.end_offset == 9


def test_huge_acknowledgement_ranges_are_refused_without_iterating() -> None:
    p = sp()
    p.acquire("m", 0, batches((0, 4)), 100, now=0)
    t0 = time.monotonic()
    assert p.acknowledge("m", [AckBatch(0, 2**62, (1,))], 1).error == E.INVALID_REQUEST
    assert p.acknowledge("m", [AckBatch(-2**62, 2, (1,))], 1).error == E.INVALID_RECORD_STATE
    assert time.monotonic() - t0 < 0.5
    p.log_start_moved(2**40)  # retention far past everything: no entry per offset
    assert p.start_offset == p.end_offset == 2**40 and not p.records
