"""The transactions of one `__transaction_state` partition: every decision, no I/O.

This module owns the ``TxnMetadata`` of the transactional ids whose partition this is
and decides each InitProducerId, AddPartitionsToTxn / AddOffsetsToTxn, EndTxn and each
step of a transaction's completion, as operations of the coordinator runtime
(``broker/coordinator/runtime.py``): ``op(shard, now) -> CoordinatorResult`` whose
records are the transaction's next state (``state.py``'s layout), answered once they
are committed. The markers are not written here: a committed PrepareCommit /
PrepareAbort carries a ``MarkerJob`` in its ``effects``, the shell (``coordinator.py``,
or the simulation) writes the markers and then runs ``complete`` here, which writes
CompleteCommit / CompleteAbort. Time is the ``now`` of each operation; the timeouts
and expirations are timers on the runtime's clock.

Rules (Kafka's TransactionCoordinator and TransactionStateManager)
-----------------------------------------------------------------
- The state changes when the operation runs (later operations of the shard see it)
  and the records persist it; a refused append puts the previous state back
  (``on_append_error``). Operations of one shard run one at a time, so Kafka's
  "pending transition" is only the Prepare* state while the markers are written: any
  EndTxn, AddPartitions or InitProducerId then gets CONCURRENT_TRANSACTIONS (KAFKA-18464:
  before the epoch is looked at).
- InitProducerId: timeout in (0, `transaction.max.timeout.ms`] or
  INVALID_TRANSACTION_TIMEOUT. A new id gets a fresh producer id at epoch 0; an Empty
  or Complete* id gets its epoch bumped (a fresh producer id once the epoch is
  exhausted), which fences the previous producer; an Ongoing one is fenced (PrepareAbort
  written at once with the epoch bumped, Kafka's PrepareEpochFence) and the caller gets
  CONCURRENT_TRANSACTIONS until the abort completes. A v3+ request naming a producer id
  and epoch must name the current ones (or, while Empty, the previous ones: a retry
  whose answer was lost, answered with the current) else PRODUCER_FENCED.
- AddPartitionsToTxn / AddOffsetsToTxn: unknown id or another producer id
  INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED, Prepare*
  CONCURRENT_TRANSACTIONS; otherwise Ongoing (started now if it was not) with the
  partitions added. Verification (KIP-890 part 1, ``verify``) is a read.
- EndTxn: Ongoing -> PrepareCommit / PrepareAbort; then markers; then Complete*. A retry
  of a completed end answers NONE, the other end INVALID_TXN_STATE; Empty
  INVALID_TXN_STATE. With ``bump_epoch`` (EndTxn v5, KIP-890 part 2) the prepare bumps
  the epoch (the markers carry it) and the answer names the next producer id and epoch;
  once the epoch is exhausted the prepare record names a fresh producer id
  (NextProducerId) that the completion switches to (PreviousProducerId keeps the old
  one). Epochs as Kafka checks them: Ongoing / Empty need the current epoch; completed
  ones a retry (the epoch just below, or the last epoch of the previous producer id
  after a roll) or the current epoch (an abort of the empty transaction, which only
  bumps the epoch); else PRODUCER_FENCED.
- Timeouts: every `transaction.abort.timed.out.transaction.cleanup.interval.ms` an
  Ongoing transaction older than its timeout is fenced and aborted as InitProducerId
  would, and the markers of every prepared transaction are asked for again (the shell
  ignores a job it is already doing). Every
  `transaction.remove.expired.transaction.cleanup.interval.ms` an id idle (Empty or
  Complete*) for `transactional.id.expiration.ms` is removed (a tombstone).
- A fence bumps the epoch up to Short.MaxValue at most (prepareFenceProducerEpoch).
- Not implemented: KIP-939 two-phase commit (InitProducerId v6 keepPreparedTxn).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from jocko_py.broker.coordinator.runtime import CoordinatorResult, LogRecord, Record, Timer
from jocko_py.broker.txn.state import (
    COMPLETED,
    PREPARED,
    VALID_PREVIOUS,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    txn_key,
    txn_value,
)
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.txn")

E = ErrorCode
S = TxnState
MAX_EPOCH = 32766  # Short.MaxValue - 1: a bump past it takes a fresh producer id
IDLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


@dataclass(frozen=True)
class TxnConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: str = "104857600"
    max_timeout_ms: int = 900000
    abort_interval_ms: int = 10000
    id_expiration_ms: int = 604800000
    expiry_interval_ms: int = 3600000


@dataclass(frozen=True)
class TxnAnswer:
    """An operation's answer; ``need_producer_id``: run it again with a fresh one."""

    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    need_producer_id: bool = False


@dataclass(frozen=True)
class MarkerJob:
    """The markers of a prepared transaction (an effect of its committed prepare)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    transaction_version: int
    partitions: frozenset[tuple[str, int]]


Result = CoordinatorResult[TxnAnswer]


def _job(m: TxnMetadata) -> MarkerJob:
    return MarkerJob(m.transactional_id, m.producer_id, m.producer_epoch,
                     m.state is S.PREPARE_COMMIT, m.client_tv, frozenset(m.partitions))


def _abort_timed_out_op(s: TxnShard, now: int) -> CoordinatorResult[None]:
    return s.abort_timed_out(now)


def _expire_op(s: TxnShard, now: int) -> CoordinatorResult[None]:
    return s.expire(now)


class TxnShard:
    """The transactional ids of one partition (see the module's rules). ``flexible``
    tells whether records are written as TransactionLogValue v1 (`transaction.version`
    >= 1 finalized)."""

    def __init__(self, partition: int, config: TxnConfig,
                 flexible: Callable[[], bool] = lambda: True) -> None:
        self.partition = partition
        self.config = config
        self.flexible = flexible
        self.txns: dict[str, TxnMetadata] = {}

    # -- loading (runtime.CoordinatorShard) ----------------------------------------------

    def replay(self, rec: LogRecord) -> None:
        tid = decode_key(rec.key)
        if tid is None:
            return
        if rec.value is None:
            self.txns.pop(tid, None)
        else:
            self.txns[tid] = decode_value(tid, rec.value)

    def on_loaded(self, now: int) -> CoordinatorResult[None]:
        """Resume the markers of every prepared transaction; start the timers."""
        jobs: list[object] = [_job(m) for m in self.txns.values() if m.state in PREPARED]
        if jobs:
            log.info("[partition=%d] resuming the markers of %d prepared transaction(s)",
                     self.partition, len(jobs))
        return CoordinatorResult(None, effects=jobs, timers=[
            Timer("abort-timed-out", now + self.config.abort_interval_ms, _abort_timed_out_op),
            Timer("expire", now + self.config.expiry_interval_ms, _expire_op)])

    def on_unloaded(self) -> list[tuple[int, object]]:
        return []

    # -- writing -------------------------------------------------------------------------

    def _persist(self, changes: list[tuple[TxnMetadata | None, TxnMetadata]],
                 response: TxnAnswer | None, *, tombstone: bool = False,
                 effects: list[object] | None = None, timers: list[Timer] | None = None,
                 ) -> CoordinatorResult[TxnAnswer | None]:
        """Make each (old, new) the id's state now and persist it (``tombstone``: remove
        the ids); a refused append puts the old states back and answers its error."""
        records: list[Record] = []
        flexible = self.flexible()
        for old, new in changes:
            tid = new.transactional_id
            if old is not None and old.state not in VALID_PREVIOUS[new.state] \
                    and not tombstone:
                # a bug, never a client's doing: refuse it as Kafka does
                log.error("[txn=%s] refusing transition %s -> %s", tid, old.state.kafka_name,
                          new.state.kafka_name)
                return CoordinatorResult(TxnAnswer(E.INVALID_TXN_STATE), timers=timers or [])
            records.append((txn_key(tid), None if tombstone else txn_value(new, flexible)))
        for _old, new in changes:
            if tombstone:
                self.txns.pop(new.transactional_id, None)
            else:
                self.txns[new.transactional_id] = new

        def undo(err: ErrorCode) -> CoordinatorResult[TxnAnswer | None]:
            for old, new in changes:
                if old is None:
                    self.txns.pop(new.transactional_id, None)
                else:
                    self.txns[new.transactional_id] = old
            return CoordinatorResult(None if response is None else TxnAnswer(err),
                                     timers=timers or [])

        return CoordinatorResult(response, records, effects=effects or [],
                                 timers=timers or [], on_append_error=undo)

    def put(self, now: int, new: TxnMetadata) -> Result:
        """Write ``new`` as its id's next state as is (tests and tools)."""
        r = self._persist([(self.txns.get(new.transactional_id), new)], TxnAnswer(E.NONE))
        return r  # type: ignore[return-value]

    # -- InitProducerId --------------------------------------------------------------------

    def init_producer_id(self, now: int, transactional_id: str, timeout_ms: int,
                         producer_id: int = -1, producer_epoch: int = -1,
                         fresh_producer_id: int = -1) -> Result:
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return CoordinatorResult(TxnAnswer(E.INVALID_TRANSACTION_TIMEOUT))
        known = self.txns.get(transactional_id)
        m = known
        if m is None:
            if fresh_producer_id < 0:
                return CoordinatorResult(TxnAnswer(E.NONE, need_producer_id=True))
            m = TxnMetadata(transactional_id, fresh_producer_id, -1, timeout_ms,
                            last_update_ms=now)
        if producer_id >= 0:
            if (producer_id, producer_epoch) == (m.last_producer_id, m.last_producer_epoch) \
                    and m.state is S.EMPTY:
                # a retry whose answer was lost
                return CoordinatorResult(TxnAnswer(E.NONE, m.producer_id, m.producer_epoch))
            if (producer_id, producer_epoch) != (m.producer_id, m.producer_epoch):
                return CoordinatorResult(TxnAnswer(E.PRODUCER_FENCED))
        if m.state in PREPARED or m.state is S.PREPARE_EPOCH_FENCE:
            return CoordinatorResult(TxnAnswer(E.CONCURRENT_TRANSACTIONS))
        if m.state is S.ONGOING:
            return self._fence(now, m, "a new producer initialised",
                               TxnAnswer(E.CONCURRENT_TRANSACTIONS))
        new = m.copy()
        if m.producer_epoch >= MAX_EPOCH:
            if fresh_producer_id < 0:
                return CoordinatorResult(TxnAnswer(E.NONE, need_producer_id=True))
            new.producer_id, new.producer_epoch = fresh_producer_id, 0
        else:
            new.producer_epoch = m.producer_epoch + 1
        new.last_producer_id, new.last_producer_epoch = m.producer_id, m.producer_epoch
        new.state = S.EMPTY
        new.partitions = set()
        new.timeout_ms = timeout_ms
        new.last_update_ms = now
        new.start_ms = -1
        new.next_producer_id = -1
        log.info("[txn=%s] producer id %d epoch %d (timeout %d ms)", transactional_id,
                 new.producer_id, new.producer_epoch, timeout_ms)
        return self._persist(  # type: ignore[return-value]
            [(known, new)], TxnAnswer(E.NONE, new.producer_id, new.producer_epoch))

    # -- fencing and timeouts ------------------------------------------------------------

    def _fenced(self, now: int, m: TxnMetadata, reason: str) -> TxnMetadata:
        """``m`` (Ongoing) aborted with its epoch bumped: the producer is fenced."""
        new = m.copy()
        if m.producer_epoch <= MAX_EPOCH:  # to Short.MaxValue at most
            new.last_producer_id, new.last_producer_epoch = m.producer_id, m.producer_epoch
            new.producer_epoch = m.producer_epoch + 1
        new.state = S.PREPARE_ABORT
        new.last_update_ms = now
        log.info("[txn=%s] fencing producer %d (epoch now %d) and aborting: %s",
                 m.transactional_id, m.producer_id, new.producer_epoch, reason)
        return new

    def _fence(self, now: int, m: TxnMetadata, reason: str, answer: TxnAnswer) -> Result:
        new = self._fenced(now, m, reason)
        return self._persist([(m, new)], answer,  # type: ignore[return-value]
                             effects=[_job(new)])

    def abort_timed_out(self, now: int) -> CoordinatorResult[None]:
        """The timer: abort the transactions older than their timeout; ask again for the
        markers of the prepared ones."""
        timers = [Timer("abort-timed-out", now + self.config.abort_interval_ms,
                        _abort_timed_out_op)]
        changes: list[tuple[TxnMetadata | None, TxnMetadata]] = []
        jobs: list[object] = []
        for m in self.txns.values():
            if m.state is S.ONGOING and m.start_ms >= 0 and now > m.start_ms + m.timeout_ms:
                new = self._fenced(now, m, f"transaction timed out after {m.timeout_ms} ms")
                changes.append((m, new))
                jobs.append(_job(new))
            elif m.state in PREPARED:
                jobs.append(_job(m))
        if not changes:
            return CoordinatorResult(None, effects=jobs, timers=timers)
        return self._persist(changes, None, effects=jobs,  # type: ignore[return-value]
                             timers=timers)

    def expire(self, now: int) -> CoordinatorResult[None]:
        """The timer: remove the ids idle for `transactional.id.expiration.ms`."""
        timers = [Timer("expire", now + self.config.expiry_interval_ms, _expire_op)]
        gone = [m for m in self.txns.values() if m.state in IDLE
                and m.last_update_ms + self.config.id_expiration_ms <= now]
        if not gone:
            return CoordinatorResult(None, timers=timers)
        for m in gone:
            log.info("[txn=%s] expired: idle for %d ms (producer %d)", m.transactional_id,
                     self.config.id_expiration_ms, m.producer_id)
        return self._persist([(m, m) for m in gone], None,  # type: ignore[return-value]
                             tombstone=True, timers=timers)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> tuple[ErrorCode, TxnMetadata | None]:
        m = self.txns.get(transactional_id)
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if m.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED, None
        if m.state in PREPARED or m.state is S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS, None
        return E.NONE, m

    def add_partitions(self, now: int, transactional_id: str, producer_id: int,
                       producer_epoch: int, partitions: list[tuple[str, int]],
                       client_tv: int = 0) -> Result:
        """``client_tv`` 2 when a partition leader adds them for a KIP-890 part 2
        producer: the transaction it starts ends with its epoch bumped."""
        err, m = self._check_producer(transactional_id, producer_id, producer_epoch)
        if m is None:
            return CoordinatorResult(TxnAnswer(err))
        wanted = set(partitions)
        if m.state is S.ONGOING and wanted <= m.partitions:
            return CoordinatorResult(TxnAnswer(E.NONE))
        new = m.copy()
        if m.state is not S.ONGOING:
            new.start_ms = now
            new.client_tv = client_tv
        new.state = S.ONGOING
        new.partitions |= wanted
        new.last_update_ms = now
        return self._persist([(m, new)], TxnAnswer(E.NONE))  # type: ignore[return-value]

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890 part 1 (AddPartitionsToTxn v4+ VerifyOnly): is each partition in the
        producer's ongoing transaction? One that is not: TRANSACTION_ABORTABLE."""
        err, m = self._check_producer(transactional_id, producer_id, producer_epoch)
        if m is None:
            return {tp: err for tp in partitions}
        ongoing = m.state is S.ONGOING
        return {tp: E.NONE if ongoing and tp in m.partitions else E.TRANSACTION_ABORTABLE
                for tp in partitions}

    # -- EndTxn ----------------------------------------------------------------------------

    def end_txn(self, now: int, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool, bump_epoch: bool = False, fresh_producer_id: int = -1
                ) -> Result:
        m = self.txns.get(transactional_id)
        if m is None:
            return CoordinatorResult(TxnAnswer(E.INVALID_PRODUCER_ID_MAPPING))
        st = m.state
        retry_overflow = bump_epoch and st in COMPLETED and m.producer_id != producer_id \
            and m.last_producer_id == producer_id and producer_epoch == MAX_EPOCH \
            and m.producer_epoch == 0
        if st in PREPARED or st is S.PREPARE_EPOCH_FENCE:
            # the previous end is still completing (its markers are being written): the
            # client retries once it is done (Kafka 4.4 checks its pending transition
            # first, KAFKA-18464)
            return CoordinatorResult(TxnAnswer(E.CONCURRENT_TRANSACTIONS))
        if m.producer_id != producer_id and not retry_overflow:
            return CoordinatorResult(TxnAnswer(E.INVALID_PRODUCER_ID_MAPPING))
        is_retry = False
        if bump_epoch:
            retry_bump = m.producer_id == producer_id and m.producer_epoch == producer_epoch + 1
            if st in COMPLETED:
                valid = retry_bump or retry_overflow or producer_epoch == m.producer_epoch
            else:  # Ongoing, Empty
                valid = producer_epoch == m.producer_epoch
            if not valid:
                return CoordinatorResult(TxnAnswer(E.PRODUCER_FENCED))
            is_retry = st in COMPLETED and (retry_bump or retry_overflow)
        elif m.producer_epoch != producer_epoch:
            return CoordinatorResult(TxnAnswer(E.PRODUCER_FENCED))
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if st in COMPLETED and (is_retry or not bump_epoch):
            if st is done:  # a retry of the end that completed: the same answer
                return CoordinatorResult(TxnAnswer(E.NONE, m.producer_id, m.producer_epoch))
            return CoordinatorResult(TxnAnswer(E.INVALID_TXN_STATE))
        if st is S.ONGOING or (bump_epoch and not commit and st in IDLE):
            # (v5 may abort an empty transaction: a way to bump the epoch)
            new = m.copy()
            new.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            new.last_update_ms = now
            if st is not S.ONGOING:
                new.partitions = set()
            # the end decides the markers' transaction version, as Kafka's
            # prepareAbortOrCommit (a v4 end writes markers at the batches' epoch)
            new.client_tv = 2 if bump_epoch else 0
            if bump_epoch:
                new.last_producer_id, new.last_producer_epoch = m.producer_id, m.producer_epoch
                new.producer_epoch = m.producer_epoch + 1
                if m.producer_epoch >= MAX_EPOCH:
                    # the epoch is exhausted: the next transaction takes a fresh producer
                    # id, named in the prepare record (NextProducerId) so it survives a
                    # coordinator failover
                    if fresh_producer_id < 0:
                        return CoordinatorResult(TxnAnswer(E.NONE, need_producer_id=True))
                    new.next_producer_id = fresh_producer_id
            pid, epoch = _next_producer(new)
            return self._persist([(m, new)],  # type: ignore[return-value]
                                 TxnAnswer(E.NONE, pid, epoch), effects=[_job(new)])
        return CoordinatorResult(TxnAnswer(E.INVALID_TXN_STATE))  # Empty, Dead

    def complete(self, now: int, transactional_id: str, producer_id: int, producer_epoch: int,
                 commit: bool) -> Result:
        """The markers of the prepared transaction are written: CompleteCommit /
        CompleteAbort (nothing if it is no longer that transaction)."""
        m = self.txns.get(transactional_id)
        want = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if m is None or m.state is not want \
                or (m.producer_id, m.producer_epoch) != (producer_id, producer_epoch):
            return CoordinatorResult(TxnAnswer(E.NONE))
        new = m.copy()
        new.state = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        new.partitions = set()
        new.last_update_ms = now
        if m.next_producer_id >= 0:  # the epoch is exhausted: the next transaction has a new id
            new.last_producer_id, new.last_producer_epoch = m.producer_id, -1
            new.producer_id, new.producer_epoch = m.next_producer_id, 0
            new.next_producer_id = -1
        log.info("[txn=%s] %s (producer %d epoch %d)", transactional_id,
                 "committed" if commit else "aborted", producer_id, producer_epoch)
        return self._persist([(m, new)], TxnAnswer(E.NONE))  # type: ignore[return-value]


def _next_producer(m: TxnMetadata) -> tuple[int, int]:
    """The producer id and epoch the next transaction must use (after a v5 end)."""
    if m.next_producer_id >= 0:
        return m.next_producer_id, 0
    return m.producer_id, m.producer_epoch
