"""The transaction coordinator's decisions in process (broker/txn/shard.py on the
coordinator runtime, an in-memory `__transaction_state` log, a clock the test moves):
every transition Empty -> Ongoing -> PrepareCommit/PrepareAbort -> Complete*, the
answers while a transaction completes, fencing on the epoch, timeouts, the exhausted
epoch's producer id rollover, expiration, and a reload from the log mid-prepare that
resumes the markers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jocko_py.broker.coordinator.runtime import CoordinatorResult, CoordinatorRuntime, LogRecord
from jocko_py.broker.handlers.add_partitions_to_txn import fenced_as
from jocko_py.broker.txn.shard import MAX_EPOCH, MarkerJob, TxnAnswer, TxnConfig, TxnShard
from jocko_py.broker.txn.state import TxnMetadata, TxnState
from jocko_py.protocol.errors import ErrorCode as E

S = TxnState
TID = "tx-1"
A, B = ("t", 0), ("t", 1)
Op = Callable[[TxnShard, int], CoordinatorResult[Any]]


class MemLog:
    """One `__transaction_state` partition: records appended, committed on demand."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.refuse: E | None = None

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None, now: int) -> tuple[E, int]:
        if self.refuse is not None:
            return self.refuse, -1
        self.records.extend(records)
        return E.NONE, len(self.records) - 1


class Coord:
    def __init__(self, config: TxnConfig | None = None, log: MemLog | None = None,
                 now: int = 1_000_000, flexible: bool = True) -> None:
        self.config = config or TxnConfig(max_timeout_ms=60_000, abort_interval_ms=1_000,
                                          id_expiration_ms=100_000, expiry_interval_ms=10_000)
        self.log = log or MemLog()
        self.now = now
        self.next_pid = 1000
        self.epoch = 0
        self.effects: list[MarkerJob] = []
        self.flexible = flexible
        self.rt: CoordinatorRuntime[TxnShard] = CoordinatorRuntime(
            "transaction", lambda p: TxnShard(p, self.config, lambda: self.flexible),
            self.log)
        self.load()

    def load(self) -> None:
        self.epoch += 1
        self.rt = CoordinatorRuntime(
            "transaction", lambda p: TxnShard(p, self.config, lambda: self.flexible),
            self.log)
        self.rt.on_effect = lambda p, e: self.effects.append(e)  # type: ignore[arg-type]
        self.rt.schedule_load(0, self.epoch)
        self.rt.load(0, self.epoch, [LogRecord(k, v) for k, v in self.log.records],
                     self.now, len(self.log.records))

    def commit(self) -> None:
        self.rt.committed(0, len(self.log.records))

    def write(self, op: Op, commit: bool = True) -> list[tuple[Any, E]]:
        out: list[tuple[Any, E]] = []
        self.rt.write(0, op, lambda r, e: out.append((r, e)), self.now)
        if commit:
            self.commit()
        return out

    def run(self, make: Callable[[int], Op]) -> TxnAnswer:
        """An operation as the service runs it: again with a fresh producer id when asked."""
        fresh = -1
        while True:
            [(a, err)] = self.write(make(fresh))
            assert err == E.NONE and isinstance(a, TxnAnswer)
            if not a.need_producer_id:
                return a
            fresh = self.next_pid
            self.next_pid += 1

    def init(self, tid: str = TID, pid: int = -1, epoch: int = -1,
             timeout_ms: int = 30_000) -> TxnAnswer:
        return self.run(lambda f: lambda s, now: s.init_producer_id(
            now, tid, timeout_ms, pid, epoch, f))

    def add(self, pid: int, epoch: int, parts: list[tuple[str, int]], tid: str = TID,
            tv: int = 0) -> E:
        return self.run(lambda f: lambda s, now: s.add_partitions(
            now, tid, pid, epoch, parts, tv)).error

    def end(self, pid: int, epoch: int, commit: bool, tid: str = TID, v5: bool = False
            ) -> TxnAnswer:
        return self.run(lambda f: lambda s, now: s.end_txn(
            now, tid, pid, epoch, commit, v5, f))

    def complete(self, job: MarkerJob) -> TxnAnswer:
        return self.run(lambda f: lambda s, now: s.complete(
            now, job.transactional_id, job.producer_id, job.producer_epoch, job.commit))

    def state(self, tid: str = TID) -> TxnMetadata | None:
        sh = self.rt.shard(0)
        assert sh is not None
        return sh.txns.get(tid)

    def advance(self, ms: int) -> None:
        self.now += ms
        self.rt.fire_due(self.now)
        self.commit()


def test_a_new_id_gets_a_producer_id_at_epoch_0_and_each_init_bumps_it() -> None:
    c = Coord()
    a = c.init()
    assert (a.error, a.producer_id, a.producer_epoch) == (E.NONE, 1000, 0)
    m = c.state()
    assert m is not None and (m.state, m.producer_epoch) == (S.EMPTY, 0)
    b = c.init()
    assert (b.error, b.producer_id, b.producer_epoch) == (E.NONE, 1000, 1)
    assert c.init(timeout_ms=0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert c.init(timeout_ms=60_001).error == E.INVALID_TRANSACTION_TIMEOUT
    # v3+: naming the current producer; naming another one is fenced; a retry of the
    # last init (its answer lost) gets the same answer again
    assert c.init(pid=1000, epoch=1).producer_epoch == 2
    assert c.init(pid=1000, epoch=1) == TxnAnswer(E.NONE, 1000, 2)
    assert c.init(pid=1000, epoch=0).error == E.PRODUCER_FENCED


def test_commit_moves_through_every_state_and_the_markers_start_once_committed() -> None:
    c = Coord()
    a = c.init()
    pid, ep = a.producer_id, a.producer_epoch
    assert c.add(pid, ep, [A]) == E.NONE
    m = c.state()
    assert m is not None and m.state is S.ONGOING and m.partitions == {A}
    started = m.start_ms
    c.now += 5
    assert c.add(pid, ep, [B]) == E.NONE
    m = c.state()
    assert m is not None and m.partitions == {A, B} and m.start_ms == started
    # the prepare is answered, and its markers started, only once it is committed
    out = c.write(lambda s, now: s.end_txn(now, TID, pid, ep, True), commit=False)
    assert out == [] and c.effects == []
    m = c.state()
    assert m is not None and m.state is S.PREPARE_COMMIT
    c.commit()
    assert out == [(TxnAnswer(E.NONE, pid, ep), E.NONE)]
    assert c.effects == [MarkerJob(TID, pid, ep, True, 0, frozenset({A, B}))]
    assert c.complete(c.effects[0]).error == E.NONE
    m = c.state()
    assert m is not None and (m.state, m.partitions) == (S.COMPLETE_COMMIT, set())
    # a retry of that commit: the same answer; the other end: INVALID_TXN_STATE
    assert c.end(pid, ep, True).error == E.NONE
    assert c.end(pid, ep, False).error == E.INVALID_TXN_STATE
    # the next transaction starts from CompleteCommit
    assert c.add(pid, ep, [B]) == E.NONE
    m = c.state()
    assert m is not None and m.state is S.ONGOING and m.partitions == {B}


def test_abort_moves_to_prepare_abort_then_complete_abort() -> None:
    c = Coord()
    a = c.init()
    assert c.add(a.producer_id, 0, [A]) == E.NONE
    assert c.end(a.producer_id, 0, False).error == E.NONE
    m = c.state()
    assert m is not None and m.state is S.PREPARE_ABORT
    assert c.effects == [MarkerJob(TID, a.producer_id, 0, False, 0, frozenset({A}))]
    c.complete(c.effects[0])
    m = c.state()
    assert m is not None and m.state is S.COMPLETE_ABORT
    assert c.end(a.producer_id, 0, False).error == E.NONE
    assert c.end(a.producer_id, 0, True).error == E.INVALID_TXN_STATE


def test_an_end_of_an_empty_transaction_is_refused() -> None:
    c = Coord()
    a = c.init()
    assert c.end(a.producer_id, 0, True).error == E.INVALID_TXN_STATE
    assert c.end(a.producer_id + 1, 0, True).error == E.INVALID_PRODUCER_ID_MAPPING
    assert c.end(a.producer_id, 0, True, tid="unknown").error == E.INVALID_PRODUCER_ID_MAPPING


def test_while_the_markers_are_written_everything_gets_concurrent_transactions() -> None:
    c = Coord()
    a = c.init()
    pid = a.producer_id
    c.add(pid, 0, [A, B])
    assert c.end(pid, 0, True).error == E.NONE
    # (the markers are not done: the transaction stays PrepareCommit)
    assert c.add(pid, 0, [A]) == E.CONCURRENT_TRANSACTIONS
    assert c.init().error == E.CONCURRENT_TRANSACTIONS
    assert c.end(pid, 0, True).error == E.CONCURRENT_TRANSACTIONS
    # an abort arriving meanwhile is told to wait too, not fenced (KAFKA-18464)
    assert c.end(pid, 0, False).error == E.CONCURRENT_TRANSACTIONS
    sh = c.rt.shard(0)
    assert sh is not None and sh.verify(TID, pid, 0, [A]) == {A: E.CONCURRENT_TRANSACTIONS}
    c.complete(c.effects[0])
    assert c.add(pid, 0, [A]) == E.NONE


def test_v5_abort_during_prepare_commit_is_concurrent_and_a_retried_commit_succeeds() -> None:
    """franz-go's TestTxnEtl: the commit's answer (epoch + 1) reached the client, which
    aborts its next transaction while the commit's markers are still being written."""
    c = Coord()
    a = c.init()
    pid = a.producer_id
    c.add(pid, 0, [A], tv=2)
    assert c.end(pid, 0, True, v5=True) == TxnAnswer(E.NONE, pid, 1)
    m = c.state()
    assert m is not None and (m.state, m.producer_epoch) == (S.PREPARE_COMMIT, 1)
    assert c.effects[0] == MarkerJob(TID, pid, 1, True, 2, frozenset({A}))
    assert c.end(pid, 1, False, v5=True).error == E.CONCURRENT_TRANSACTIONS
    assert c.end(pid, 0, True, v5=True).error == E.CONCURRENT_TRANSACTIONS  # a retry
    c.complete(c.effects[0])
    # a retry of the commit (the epoch just below): the same answer
    assert c.end(pid, 0, True, v5=True) == TxnAnswer(E.NONE, pid, 1)
    assert c.end(pid, 0, False, v5=True).error == E.INVALID_TXN_STATE
    # the abort now: of the empty transaction at the current epoch, bumping it
    assert c.end(pid, 1, False, v5=True) == TxnAnswer(E.NONE, pid, 2)
    c.complete(c.effects[-1])
    assert c.end(pid, 5, False, v5=True).error == E.PRODUCER_FENCED


def test_a_new_producer_fences_the_ongoing_transaction_and_aborts_it() -> None:
    c = Coord()
    a = c.init()
    pid = a.producer_id
    c.add(pid, 0, [A])
    assert c.init().error == E.CONCURRENT_TRANSACTIONS
    m = c.state()
    assert m is not None and (m.state, m.producer_epoch) == (S.PREPARE_ABORT, 1)
    # the abort's markers carry the bumped epoch: the old producer's batches are fenced
    assert c.effects == [MarkerJob(TID, pid, 1, False, 0, frozenset({A}))]
    assert c.add(pid, 0, [B]) == E.PRODUCER_FENCED  # the epoch is looked at first
    assert c.add(pid, 1, [B]) == E.CONCURRENT_TRANSACTIONS
    assert c.init().error == E.CONCURRENT_TRANSACTIONS  # until the abort completes
    c.complete(c.effects[0])
    assert c.add(pid, 0, [B]) == E.PRODUCER_FENCED
    assert c.end(pid, 0, True).error == E.PRODUCER_FENCED
    assert c.init() == TxnAnswer(E.NONE, pid, 2)
    # an old client (AddPartitionsToTxn v0-v1) hears INVALID_PRODUCER_EPOCH
    assert fenced_as(1, 2, E.PRODUCER_FENCED) == E.INVALID_PRODUCER_EPOCH
    assert fenced_as(2, 2, E.PRODUCER_FENCED) == E.PRODUCER_FENCED


def test_a_transaction_past_its_timeout_is_aborted_by_the_timer() -> None:
    c = Coord()
    a = c.init(timeout_ms=3_000)
    c.add(a.producer_id, 0, [A])
    c.advance(2_000)
    m = c.state()
    assert m is not None and m.state is S.ONGOING and c.effects == []
    c.advance(1_500)  # past the timeout: the next pass of the abort timer fences it
    m = c.state()
    assert m is not None and (m.state, m.producer_epoch) == (S.PREPARE_ABORT, 1)
    assert c.effects == [MarkerJob(TID, a.producer_id, 1, False, 0, frozenset({A}))]
    assert c.end(a.producer_id, 0, True).error == E.CONCURRENT_TRANSACTIONS
    c.complete(c.effects[0])
    assert c.end(a.producer_id, 0, True).error == E.PRODUCER_FENCED
    # a prepared transaction whose markers stopped is asked for again by the timer
    b = c.init()
    c.add(b.producer_id, b.producer_epoch, [B])
    c.end(b.producer_id, b.producer_epoch, True)
    n = len(c.effects)
    c.advance(1_000)
    assert c.effects[n:] == [c.effects[n - 1]]


def test_an_exhausted_epoch_rolls_the_producer_id_over_durably() -> None:
    c = Coord()
    a = c.init()
    pid = a.producer_id
    m = c.state()
    assert m is not None
    new = m.copy()
    new.producer_epoch = MAX_EPOCH
    c.write(lambda s, now: s.put(now, new))
    # InitProducerId: a fresh producer id at epoch 0
    b = c.init()
    assert (b.producer_epoch, b.producer_id != pid) == (0, True)
    # EndTxn v5 at the exhausted epoch: the prepare names the next producer id
    m = c.state()
    assert m is not None
    new = m.copy()
    new.producer_epoch = MAX_EPOCH
    c.write(lambda s, now: s.put(now, new))
    pid = b.producer_id
    c.add(pid, MAX_EPOCH, [A], tv=2)
    end = c.end(pid, MAX_EPOCH, True, v5=True)
    assert end.error == E.NONE and end.producer_id not in (pid, -1) and end.producer_epoch == 0
    m = c.state()
    assert m is not None and (m.producer_id, m.producer_epoch, m.next_producer_id) == (
        pid, MAX_EPOCH + 1, end.producer_id)
    # a failover mid-prepare keeps it: the new coordinator finishes the roll
    c.load()
    m = c.state()
    assert m is not None and m.next_producer_id == end.producer_id
    c.complete(c.effects[-1])
    m = c.state()
    assert m is not None and (m.state, m.producer_id, m.producer_epoch) == (
        S.COMPLETE_COMMIT, end.producer_id, 0)
    assert m.last_producer_id == pid
    # a retry of that EndTxn with the old producer id: the same answer
    assert c.end(pid, MAX_EPOCH, True, v5=True) == TxnAnswer(E.NONE, end.producer_id, 0)
    c.load()
    assert c.end(pid, MAX_EPOCH, True, v5=True) == TxnAnswer(E.NONE, end.producer_id, 0)


def test_a_reload_mid_prepare_resends_the_markers() -> None:
    c = Coord()
    a = c.init()
    c.add(a.producer_id, 0, [A, B])
    c.end(a.producer_id, 0, False)
    job = c.effects[-1]
    c.load()  # another broker (or this one, restarted) becomes the coordinator
    assert c.effects[-1] == job and len(c.effects) == 2
    m = c.state()
    assert m is not None and m.state is S.PREPARE_ABORT
    c.complete(job)
    c.load()
    m = c.state()
    assert m is not None and m.state is S.COMPLETE_ABORT and len(c.effects) == 2


def test_an_uncommitted_prepare_lost_in_a_failover_sends_no_marker() -> None:
    c = Coord()
    a = c.init()
    c.add(a.producer_id, 0, [A])
    out = c.write(lambda s, now: s.end_txn(now, TID, a.producer_id, 0, True), commit=False)
    del c.log.records[-1]  # the new leader never had it
    c.rt.unload(0)
    assert [e for _, e in out] == [E.NOT_COORDINATOR]
    c.load()
    m = c.state()
    assert m is not None and m.state is S.ONGOING and c.effects == []


def test_a_refused_append_changes_nothing() -> None:
    c = Coord()
    a = c.init()
    c.log.refuse = E.NOT_LEADER_OR_FOLLOWER
    out = c.write(lambda s, now: s.add_partitions(now, TID, a.producer_id, 0, [A]))
    assert out == [(TxnAnswer(E.NOT_COORDINATOR), E.NONE)]
    m = c.state()
    assert m is not None and m.state is S.EMPTY and m.partitions == set()
    out = c.write(lambda s, now: s.init_producer_id(now, "other", 1000, -1, -1, 77))
    assert out == [(TxnAnswer(E.NOT_COORDINATOR), E.NONE)] and c.state("other") is None


def test_verification_is_a_read_of_the_ongoing_transaction() -> None:
    c = Coord()
    a = c.init()
    pid = a.producer_id
    c.add(pid, 0, [A])
    sh = c.rt.shard(0)
    assert sh is not None
    n = len(c.log.records)
    assert sh.verify(TID, pid, 0, [A, B]) == {A: E.NONE, B: E.TRANSACTION_ABORTABLE}
    assert sh.verify(TID, pid, 1, [A]) == {A: E.PRODUCER_FENCED}
    assert sh.verify(TID, pid + 1, 0, [A]) == {A: E.INVALID_PRODUCER_ID_MAPPING}
    assert sh.verify("nope", pid, 0, [A]) == {A: E.INVALID_PRODUCER_ID_MAPPING}
    assert len(c.log.records) == n


def test_an_idle_id_expires_and_a_busy_one_does_not() -> None:
    c = Coord()
    c.init("idle")
    busy = c.init("busy")
    c.add(busy.producer_id, 0, [A], tid="busy")
    c.advance(10_000)
    assert c.state("idle") is not None
    for _ in range(10):
        c.advance(10_000)
    assert c.state("idle") is None
    assert c.log.records[-1][1] is None  # a tombstone
    c.load()
    assert c.state("idle") is None
    # the busy one timed out meanwhile and was aborted, not expired
    m = c.state("busy")
    assert m is not None and m.state is S.PREPARE_ABORT
    # a new InitProducerId of an expired id: a fresh producer id
    assert c.init("idle").producer_id not in (busy.producer_id, 1000)


@pytest.mark.parametrize("flexible", [False, True])
def test_records_replay_to_the_same_state(flexible: bool) -> None:
    c = Coord(flexible=flexible)
    a = c.init()
    c.add(a.producer_id, 0, [A, B])
    before = c.state()
    c.load()
    after = c.state()
    assert before is not None and after is not None
    assert (after.producer_id, after.producer_epoch, after.state, after.partitions,
            after.start_ms, after.timeout_ms) == (
        before.producer_id, before.producer_epoch, before.state, before.partitions,
        before.start_ms, before.timeout_ms)
