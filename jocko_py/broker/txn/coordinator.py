"""The transaction coordinator (KIP-98) on the replicated `__transaction_state` topic.

This module owns every transactional id's metadata on this broker and decides each
InitProducerId (with a transactional id), AddPartitionsToTxn, AddOffsetsToTxn and
EndTxn outcome; it writes the transaction markers (WriteTxnMarkers, or a local
append for partitions led here) and aborts transactions that outlive their timeout.
Metadata records (layout in `state.py`) are written through the partition's leader
with acks=all semantics before anything is answered.

Rules (Kafka's TransactionCoordinator, followed here)
-----------------------------------------------------
- The coordinator of a transactional id is the leader of partition
  `abs(javaHash(id)) % transaction.state.log.num.partitions` of `__transaction_state`
  (created on the first FindCoordinator of a transactional id: 50 partitions,
  `transaction.state.log.replication.factor` capped to the live brokers, compacted,
  min ISR `transaction.state.log.min.isr` capped to the replication factor). On
  election it loads the partition's records (the last one per id wins) and resumes
  the markers of every prepared transaction; on resignation it drops them. The
  coordinator epoch is the partition's leader epoch, carried by every marker so a
  deposed coordinator's markers are refused (TRANSACTION_COORDINATOR_FENCED).
- One transition at a time per id: while a record is being written (`pending`) any
  other request gets CONCURRENT_TRANSACTIONS. The in-memory state changes only once
  the record is replicated to the ISR; a failed write leaves it as it was.
- InitProducerId: timeout in (0, `transaction.max.timeout.ms`] or
  INVALID_TRANSACTION_TIMEOUT. A new id gets a fresh producer id at epoch 0; an
  Empty or Complete* id gets its epoch bumped (a fresh producer id once the epoch is
  exhausted), which fences the previous producer; an Ongoing one is fenced (epoch
  bumped at once, PrepareEpochFence) and aborted, and the caller gets
  CONCURRENT_TRANSACTIONS until the abort completes; a Prepare* one gets
  CONCURRENT_TRANSACTIONS. A v3+ request naming a producer id and epoch must name the
  current ones (or, while Empty, the previous ones: a retry whose answer was lost,
  answered with the current) else PRODUCER_FENCED.
- AddPartitionsToTxn / AddOffsetsToTxn (the group's `__consumer_offsets` partition):
  unknown id or another producer id INVALID_PRODUCER_ID_MAPPING, another epoch
  PRODUCER_FENCED; Prepare* / PrepareEpochFence CONCURRENT_TRANSACTIONS; otherwise the
  state becomes Ongoing (the start time set when it was not) with the partitions added.
- EndTxn: Ongoing -> PrepareCommit / PrepareAbort, answered once written; then the
  markers are written to every partition of the transaction, retried (with backoff,
  re-reading the leaders from metadata) until each is acknowledged with acks=all, and
  the state becomes CompleteCommit / CompleteAbort with no partitions. A retry of a
  completed end answers NONE; the other end of a completed or prepared transaction
  INVALID_TXN_STATE; a retry while prepared CONCURRENT_TRANSACTIONS; Empty
  INVALID_TXN_STATE.
- Transaction version 2 (KIP-890 part 2; EndTxn v5 while `transaction.version` 2 is
  finalized): the end prepares with the epoch bumped (the markers carry it, and say
  the transaction is a TV2 one, so a partition refuses a marker that is not above
  its batches' epoch) and answers with the next producer id and epoch. Once the
  epoch is exhausted (Short.MaxValue - 1) the prepare record names a fresh producer
  id (NextProducerId) and the completion switches to it (PreviousProducerId keeps the
  old one), so a coordinator failover or restart keeps both. Epochs as Kafka checks
  them: Ongoing / Empty / PrepareEpochFence need the current epoch; prepared ones
  only a retry (the epoch just below, answered CONCURRENT_TRANSACTIONS), completed
  ones a retry (answered the same as the end it repeats; also the last epoch of the
  previous producer id after a roll) or the current epoch (an abort of the empty
  transaction, which only bumps the epoch); else PRODUCER_FENCED. A partition leader
  adds partitions for a TV2 producer (Produce v12, TxnOffsetCommit v5: `verify` with
  ``add``, AddPartitionsToTxn v5 between brokers), which starts a TV2 transaction.
- Every `transaction.abort.timed.out.transaction.cleanup.interval.ms` an Ongoing
  transaction older than its timeout is fenced and aborted as InitProducerId would.
- Verification (KIP-890 part 1): a partition leader asks (AddPartitionsToTxn v4,
  VerifyOnly) before the first transactional batch of a producer's transaction on
  that partition; the answer is NONE only for a partition of the Ongoing transaction
  of that producer id and epoch (else INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
  CONCURRENT_TRANSACTIONS while prepared, INVALID_TXN_STATE). Nothing is written.
- An id idle (Empty or Complete*) for `transactional.id.expiration.ms` is removed (a
  tombstone record), checked every
  `transaction.remove.expired.transaction.cleanup.interval.ms`; its next
  InitProducerId gets a fresh producer id.
- Records are TransactionLogValue v1 (flexible, with the tagged fields) while
  `transaction.version` >= 1 is finalized, else v0, as Kafka writes them.
- A fence (InitProducerId over an Ongoing transaction, a timeout) bumps the epoch up
  to Short.MaxValue, as Kafka's prepareFenceProducerEpoch.
- Not implemented: the Dead state; KIP-939 two-phase commit (InitProducerId v6).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jocko_py.broker.features import TRANSACTION_VERSION, level
from jocko_py.broker.group.offsets_store import OFFSETS_TOPIC, partition_for
from jocko_py.broker.inter_broker import BrokerChannel
from jocko_py.broker.txn.state import (
    COMPLETED,
    PREPARED,
    TXN_TOPIC,
    VALID_PREVIOUS,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    txn_key,
    txn_value,
)
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from jocko_py.broker.interfaces import TxnHost
    from jocko_py.broker.partition import Partition

log = logging.getLogger("jocko_py.broker.txn")

E = ErrorCode
S = TxnState
MAX_EPOCH = 32766  # Short.MaxValue - 1: a bump past it takes a fresh producer id
WRITE_TIMEOUT_S = 10.0
MARKER_TIMEOUT_S = 10.0


VERIFY_TIMEOUT_S = 5.0
# Kafka's add.partitions.to.txn.retry.backoff.ms / .max.ms defaults (not configurable here)
ADD_RETRY_BACKOFF_S = 0.02
ADD_RETRY_MAX_S = 0.1


def now_ms() -> int:
    return int(time.time() * 1000)


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

    @classmethod
    def from_broker(cls, broker: TxnHost) -> TxnConfig:
        c = broker.config
        return cls(
            num_partitions=max(1, c.int("transaction.state.log.num.partitions")),
            replication_factor=max(1, c.int("transaction.state.log.replication.factor")),
            min_isr=max(1, c.int("transaction.state.log.min.isr")),
            segment_bytes=c.get("transaction.state.log.segment.bytes") or "104857600",
            max_timeout_ms=c.int("transaction.max.timeout.ms"),
            abort_interval_ms=max(
                10, c.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")),
            id_expiration_ms=c.int("transactional.id.expiration.ms"),
            expiry_interval_ms=max(
                10, c.int("transaction.remove.expired.transaction.cleanup.interval.ms")),
        )


async def write_markers(broker: TxnHost, producer_id: int, producer_epoch: int, commit: bool,
                        coordinator_epoch: int, partitions: list[tuple[str, int]],
                        transaction_version: int = 0) -> dict[tuple[str, int], ErrorCode]:
    """Append one marker to each partition led here (WriteTxnMarkers, and the
    coordinator's own partitions); acks=all. A marker of a ``transaction_version`` 2
    transaction must carry an epoch above the producer's (KIP-1228). Committed offsets
    in `__consumer_offsets` are materialised by the group coordinator once their
    marker is written."""
    replicas = broker.replicas
    out: dict[tuple[str, int], ErrorCode] = {}
    entries: list[tuple[str, int, memoryview | bytes]] = []
    keys: list[tuple[str, int]] = []
    ctype = rb.ControlType.COMMIT if commit else rb.ControlType.ABORT
    ts = now_ms()
    for tp in partitions:
        p, err = replicas.get_partition_or_error(*tp)
        if p is None:
            out[tp] = err
            continue
        check = p.log.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch,
                                                  transaction_version)
        if check != E.NONE:
            out[tp] = check
            continue
        if p.under_min_isr():
            out[tp] = E.NOT_ENOUGH_REPLICAS  # as any acks=all write: the coordinator retries
            continue
        entries.append((tp[0], tp[1], rb.build_control_batch(
            ctype, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, timestamp=ts)))
        keys.append(tp)
    if entries:
        results = await replicas.append_records(entries, -1, int(MARKER_TIMEOUT_S * 1000),
                                                internal=True)
        for tp, r in zip(keys, results, strict=True):
            out[tp] = r.error
    groups = broker.groups
    if groups is not None:
        for tp, err in out.items():
            if tp[0] == OFFSETS_TOPIC and err == E.NONE:
                groups.complete_txn(tp[1], producer_id, commit)
    return out


class TransactionCoordinator:
    def __init__(self, broker: TxnHost, config: TxnConfig | None = None) -> None:
        self.broker = broker
        self.config = config or TxnConfig.from_broker(broker)
        self.num_partitions = self.config.num_partitions
        self.pinned = False
        self.txns: dict[str, TxnMetadata] = {}
        # loaded partitions of __transaction_state -> coordinator epoch
        self.epochs: dict[int, int] = {}
        self._to_load: set[int] = set()
        self._channels: dict[int, BrokerChannel] = {}
        self._markers: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_expiry = now_ms()

    # -- topic and partitions ------------------------------------------------------------

    def topic_exists(self) -> bool:
        t = self.broker.image.topics.get(TXN_TOPIC)
        if t is not None and not self.pinned:
            self.num_partitions = len(t.partitions)
            self.pinned = True
        return t is not None

    async def ensure_topic(self) -> None:
        if self.topic_exists():
            return
        live = sum(not b.fenced for b in self.broker.image.brokers.values())
        rf = max(1, min(self.config.replication_factor, live))
        try:
            await self.broker.topics.create_topic(
                TXN_TOPIC, self.config.num_partitions, rf,
                {"cleanup.policy": "compact", "segment.bytes": self.config.segment_bytes,
                 "compression.type": "uncompressed", "unclean.leader.election.enable": "false",
                 "min.insync.replicas": str(min(self.config.min_isr, rf))})
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        log.info("created %s with %d partitions, replication factor %d", TXN_TOPIC,
                 self.config.num_partitions, rf)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def leader_of(self, transactional_id: str) -> int:
        img = self.broker.image.partition(TXN_TOPIC, self.partition_for(transactional_id))
        return img.leader if img is not None else -1

    def _partition(self, idx: int) -> Partition | None:
        p = self.broker.replicas.get(TXN_TOPIC, idx)
        return p if p is not None and p.is_leader else None

    def _error_for(self, transactional_id: str | None) -> ErrorCode | None:
        if not transactional_id:
            return E.INVALID_REQUEST
        if not self.topic_exists():
            return E.NOT_COORDINATOR
        idx = self.partition_for(transactional_id)
        if idx in self._to_load:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if idx not in self.epochs or self._partition(idx) is None:
            return E.NOT_COORDINATOR
        return None

    # -- election / resignation ------------------------------------------------------------

    def on_partition_role(self, p: Partition, leader: bool) -> None:
        if p.topic != TXN_TOPIC:
            return
        idx = p.partition
        if leader:
            if not self._to_load:
                asyncio.get_running_loop().call_soon(self._load_elected)
            self._to_load.add(idx)
            self.epochs.pop(idx, None)
            return
        self._to_load.discard(idx)
        if self.epochs.pop(idx, None) is None:
            return
        dropped = [tid for tid in self.txns if self.partition_for(tid) == idx]
        for tid in dropped:
            del self.txns[tid]
            task = self._markers.pop(tid, None)
            if task is not None:
                task.cancel()
        log.info("[partition=%s] resigned as transaction coordinator of %d id(s)", p.name,
                 len(dropped))

    def _load_elected(self) -> None:
        wanted, self._to_load = self._to_load, set()
        self.topic_exists()
        for idx in sorted(wanted):
            p = self._partition(idx)
            if p is None:
                continue
            loaded = self._read_partition(p)
            for tid, m in loaded.items():
                if self.partition_for(tid) == idx:
                    self.txns[tid] = m
                    old = self._markers.pop(tid, None)
                    if old is not None:
                        old.cancel()  # it serves the state before this election
            self.epochs[idx] = p.leader_epoch
            for m in loaded.values():
                if m.state in PREPARED:
                    self._start_markers(m)
            log.info("[partition=%s] elected transaction coordinator (epoch %d): %d id(s) "
                     "loaded", p.name, p.leader_epoch, len(loaded))

    @staticmethod
    def _read_partition(p: Partition) -> dict[str, TxnMetadata]:
        out: dict[str, TxnMetadata] = {}
        lg = p.log
        start = lg.log_start_offset
        for seg in list(lg.segments):
            for pos, h in seg.iter_headers():
                if h.is_control or h.next_offset <= start:
                    continue
                try:
                    recs = rb.decode_records(seg.read_batch_at(pos, h), h)
                except rb.RecordError:
                    log.exception("[partition=%s] skipping undecodable batch", p.name)
                    continue
                for rec in recs:
                    if rec.key is None or rec.offset < start:
                        continue
                    try:
                        tid = decode_key(rec.key)
                        if tid is None:
                            continue
                        if rec.value is None:
                            out.pop(tid, None)
                        else:
                            out[tid] = decode_value(tid, rec.value)
                    except Exception:
                        log.exception("[partition=%s] skipping undecodable record at %d",
                                      p.name, rec.offset)
        return out

    # -- the log -------------------------------------------------------------------------------

    async def _write(self, m: TxnMetadata, new: TxnMetadata, *, tombstone: bool = False
                     ) -> ErrorCode:
        """Persist ``new`` as ``m``'s next state (acks=all); on success ``m`` becomes it.
        A ``tombstone`` removes the id instead (expiry)."""
        tid = m.transactional_id
        if m.state not in VALID_PREVIOUS[new.state]:
            log.error("[txn=%s] refusing transition %s -> %s", tid, m.state.kafka_name,
                      new.state.kafka_name)
            return E.INVALID_TXN_STATE
        idx = self.partition_for(tid)
        epoch = self.epochs.get(idx)
        p = self._partition(idx)
        if p is None or epoch is None:
            return E.NOT_COORDINATOR
        if p.under_min_isr():
            return E.COORDINATOR_NOT_AVAILABLE
        ts = now_ms()
        value = None if tombstone else txn_value(
            new, level(self.broker.image.features, TRANSACTION_VERSION) >= 1)
        batch = rb.build_batch([rb.NewRecord(txn_key(tid), value, (), ts)])
        m.pending = new.state
        try:
            r = p.append_internal(batch, ts)
            if r.error != E.NONE:
                log.warning("[txn=%s] write to %s failed: %s", tid, p.name, r.error.name)
                return E.NOT_COORDINATOR if r.error in (
                    E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR) else E.COORDINATOR_NOT_AVAILABLE
            self.broker.replicas.notify_append(p)
            err = await self.broker.replicas.wait_replicated(
                p, r.last_offset, time.monotonic() + WRITE_TIMEOUT_S)
        finally:
            m.pending = None
        if err in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
            return E.NOT_COORDINATOR
        if err != E.NONE:
            return E.COORDINATOR_NOT_AVAILABLE
        if self.epochs.get(idx) != epoch or self.txns.get(tid) is not m:
            return E.NOT_COORDINATOR  # resigned meanwhile
        if tombstone:
            m.state = S.DEAD
            del self.txns[tid]
            return E.NONE
        m.producer_id, m.producer_epoch = new.producer_id, new.producer_epoch
        m.last_producer_id, m.last_producer_epoch = new.last_producer_id, new.last_producer_epoch
        m.timeout_ms, m.state, m.partitions = new.timeout_ms, new.state, set(new.partitions)
        m.start_ms, m.last_update_ms = new.start_ms, new.last_update_ms
        m.next_producer_id, m.client_tv = new.next_producer_id, new.client_tv
        return E.NONE

    # -- InitProducerId ---------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               producer_id: int = -1, producer_epoch: int = -1
                               ) -> tuple[ErrorCode, int, int]:
        err = self._error_for(transactional_id)
        if err is not None:
            return err, -1, -1
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1
        m = self.txns.get(transactional_id)
        if m is None:
            try:
                pid = await self.broker.topics.allocate_producer_id()
            except KafkaError as e:
                return (e.code if e.code != E.NOT_CONTROLLER else E.COORDINATOR_NOT_AVAILABLE,
                        -1, -1)
            m = self.txns.get(transactional_id)
            if m is None:
                m = TxnMetadata(transactional_id, pid, -1, timeout_ms)
                self.txns[transactional_id] = m
        if m.pending is not None:
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        if producer_id >= 0:
            if (producer_id, producer_epoch) == (m.last_producer_id, m.last_producer_epoch) \
                    and m.state is S.EMPTY:
                return E.NONE, m.producer_id, m.producer_epoch  # a retry: its answer was lost
            if (producer_id, producer_epoch) != (m.producer_id, m.producer_epoch):
                return E.PRODUCER_FENCED, -1, -1
        if m.state in PREPARED or m.state is S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        if m.state is S.ONGOING:
            self._fence_and_abort(m, "a new producer initialised")
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        new = m.copy()
        if m.producer_epoch >= MAX_EPOCH:
            try:
                new.producer_id = await self.broker.topics.allocate_producer_id()
            except KafkaError:
                return E.COORDINATOR_NOT_AVAILABLE, -1, -1
            new.producer_epoch = 0
        else:
            new.producer_epoch = m.producer_epoch + 1
        new.last_producer_id, new.last_producer_epoch = m.producer_id, m.producer_epoch
        new.state = S.EMPTY
        new.partitions = set()
        new.timeout_ms = timeout_ms
        new.last_update_ms = now_ms()
        new.start_ms = -1
        err2 = await self._write(m, new)
        if err2 != E.NONE:
            return err2, -1, -1
        log.info("[txn=%s] producer id %d epoch %d (timeout %d ms)", transactional_id,
                 m.producer_id, m.producer_epoch, timeout_ms)
        return E.NONE, m.producer_id, m.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> tuple[ErrorCode, TxnMetadata | None]:
        err = self._error_for(transactional_id)
        if err is not None:
            return err, None
        m = self.txns.get(transactional_id)
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if m.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED, None
        if m.pending is not None or m.state in PREPARED or m.state is S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS, None
        return E.NONE, m

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]], client_tv: int = 0) -> ErrorCode:
        """AddPartitionsToTxn / AddOffsetsToTxn; ``client_tv`` 2 when a partition leader
        adds them for a KIP-890 part 2 producer (Produce v12, TxnOffsetCommit v5): the
        transaction it starts ends with its epoch bumped."""
        err, m = self._check_producer(transactional_id, producer_id, producer_epoch)
        if m is None:
            return err
        wanted = set(partitions)
        if m.state is S.ONGOING and wanted <= m.partitions:
            return E.NONE
        new = m.copy()
        if m.state is not S.ONGOING:
            new.start_ms = now_ms()
            new.client_tv = client_tv
        new.state = S.ONGOING
        new.partitions |= wanted
        new.last_update_ms = now_ms()
        return await self._write(m, new)

    def verify_local(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890 part 1 (AddPartitionsToTxn v4+ with VerifyOnly): is each partition in
        the producer's ongoing transaction? One that is not: TRANSACTION_ABORTABLE (at v4
        and v5 alike, as Kafka 4.4; the partition leader tells an older producer
        INVALID_TXN_STATE). Nothing is written."""
        err = self._error_for(transactional_id)
        m = self.txns.get(transactional_id)
        if err is None:
            if m is None or m.producer_id != producer_id:
                err = E.INVALID_PRODUCER_ID_MAPPING
            elif m.producer_epoch != producer_epoch:
                err = E.PRODUCER_FENCED
            elif m.state in PREPARED or m.state is S.PREPARE_EPOCH_FENCE:
                err = E.CONCURRENT_TRANSACTIONS
        if err is not None or m is None:
            return {tp: err or E.INVALID_PRODUCER_ID_MAPPING for tp in partitions}
        ongoing = m.state is S.ONGOING
        return {tp: E.NONE if ongoing and tp in m.partitions else E.TRANSACTION_ABORTABLE
                for tp in partitions}

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]], add: bool = False
                     ) -> dict[tuple[str, int], ErrorCode]:
        """The partition leader's side of KIP-890: ask the coordinator of
        ``transactional_id`` (this broker, or another over AddPartitionsToTxn v5) whether
        the partitions are in the producer's ongoing transaction (part 1), or, with
        ``add`` (part 2: Produce v12, TxnOffsetCommit v5), add them to it. An add
        answered CONCURRENT_TRANSACTIONS (the previous transaction's markers are still
        being written) is asked again for a short while, as Kafka's
        AddPartitionsToTxnManager does (its add.partitions.to.txn.retry.backoff.ms and
        .max.ms defaults), before the producer is told to retry."""
        deadline = time.monotonic() + ADD_RETRY_MAX_S
        while True:
            out = await self._verify_once(transactional_id, producer_id, producer_epoch,
                                          partitions, add)
            if not add or any(e != E.CONCURRENT_TRANSACTIONS for e in out.values()) \
                    or time.monotonic() + ADD_RETRY_BACKOFF_S > deadline:
                return out
            await asyncio.sleep(ADD_RETRY_BACKOFF_S)

    async def _verify_once(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: list[tuple[str, int]], add: bool
                           ) -> dict[tuple[str, int], ErrorCode]:
        if not self.topic_exists():
            return {tp: E.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        leader = self.leader_of(transactional_id)
        if leader == self.broker.broker_id:
            if add:
                err = await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                                partitions, client_tv=2)
                return {tp: err for tp in partitions}
            return self.verify_local(transactional_id, producer_id, producer_epoch, partitions)
        ch = self._channel(leader)
        if ch is None:
            return {tp: E.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        by_topic: dict[str, list[int]] = {}
        for t, i in partitions:
            by_topic.setdefault(t, []).append(i)
        resp = await ch.request(24, 5, {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "verify_only": not add,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]},
            VERIFY_TIMEOUT_S)
        out: dict[tuple[str, int], ErrorCode] = {}
        if resp.error_code:
            return {tp: ErrorCode.of(resp.error_code) for tp in partitions}
        for r in resp.results_by_transaction:
            for t in r.topic_results:
                for pr in t.results_by_partition:
                    out[(t.name, pr.partition_index)] = ErrorCode.of(pr.partition_error_code)
        return out

    def _channel(self, broker_id: int) -> BrokerChannel | None:
        b = self.broker.image.brokers.get(broker_id)
        if b is None or b.fenced:
            return None
        ch = self._channels.get(broker_id)
        if ch is None or (ch.host, ch.port) != (b.host, b.port):
            if ch is not None:
                self._spawn(ch.close())
            # the broker's first registered endpoint is its inter-broker listener, reached
            # with the broker's TLS/SASL settings for it
            ch = self._channels[broker_id] = BrokerChannel(
                b.host, b.port, f"jocko-txn-coordinator-{self.broker.broker_id}",
                security=self.broker.replicas.channel_security)
        return ch

    def offsets_partition(self, group_id: str) -> tuple[str, int] | None:
        groups = self.broker.groups
        if groups is None or not groups.store.topic_exists():
            return None
        return OFFSETS_TOPIC, int(groups.store.partition_for(group_id))

    # -- EndTxn -----------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        err, _, _ = await self.end_txn_v(transactional_id, producer_id, producer_epoch, commit,
                                         bump_epoch=False)
        return err

    async def end_txn_v(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool, *, bump_epoch: bool) -> tuple[ErrorCode, int, int]:
        """EndTxn; with ``bump_epoch`` (v5 under transaction.version 2, KIP-890 part 2)
        the transaction ends with the epoch bumped (its markers carry the new one) and
        the answer names the producer id and epoch of the next transaction, so an
        EndTxn or produce of this one that arrives late is fenced. Kafka's rules: while
        Ongoing or Empty the epoch must be the current one; while prepared or complete
        only a retry (the epoch just below the current one, or the last epoch of the
        producer id the exhausted epoch rolled over from) is answered, the same answer
        again; an abort at the current epoch of a completed or empty transaction only
        bumps the epoch."""
        err = self._error_for(transactional_id)
        if err is not None:
            return err, -1, -1
        m = self.txns.get(transactional_id)
        if m is None:
            return E.INVALID_PRODUCER_ID_MAPPING, -1, -1
        st = m.state
        retry_overflow = bump_epoch and st in COMPLETED and m.producer_id != producer_id \
            and m.last_producer_id == producer_id and producer_epoch == MAX_EPOCH \
            and m.producer_epoch == 0
        if m.producer_id != producer_id and not retry_overflow:
            return E.INVALID_PRODUCER_ID_MAPPING, -1, -1
        if m.pending is not None:
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        is_retry = False
        if bump_epoch:
            retry_bump = m.producer_id == producer_id and m.producer_epoch == producer_epoch + 1
            if st in PREPARED:
                valid = retry_bump
            elif st in COMPLETED:
                valid = retry_bump or retry_overflow or producer_epoch == m.producer_epoch
            else:  # Ongoing, Empty, PrepareEpochFence
                valid = producer_epoch == m.producer_epoch
            if not valid:
                return E.PRODUCER_FENCED, -1, -1
            is_retry = st not in (S.ONGOING, S.EMPTY) and (retry_bump or retry_overflow)
        elif m.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED, -1, -1
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if st in COMPLETED and (is_retry or not bump_epoch):
            # a retry of the end that completed: the same answer (the other end: refused)
            return (E.NONE, m.producer_id, m.producer_epoch) if st is done \
                else (E.INVALID_TXN_STATE, -1, -1)
        if st is S.ONGOING or (bump_epoch and not commit and st in (S.EMPTY, *COMPLETED)):
            # (v5 may abort an empty transaction: a way to bump the epoch)
            new = m.copy()
            new.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            new.last_update_ms = now_ms()
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
                    try:
                        new.next_producer_id = await self.broker.topics.allocate_producer_id()
                    except KafkaError:
                        return E.COORDINATOR_NOT_AVAILABLE, -1, -1
                    if m.pending is not None or m.state is not st:
                        return E.CONCURRENT_TRANSACTIONS, -1, -1
            err2 = await self._write(m, new)
            if err2 == E.NONE:
                self._start_markers(m)
                return E.NONE, *self._next_producer(m)
            return err2, -1, -1
        return self._end_refused(st, commit), -1, -1

    @staticmethod
    def _next_producer(m: TxnMetadata) -> tuple[int, int]:
        """The producer id and epoch the next transaction must use (after a v5 end)."""
        if m.next_producer_id >= 0:
            return m.next_producer_id, 0
        return m.producer_id, m.producer_epoch

    @staticmethod
    def _end_refused(st: TxnState, commit: bool) -> ErrorCode:
        if st is S.COMPLETE_COMMIT:
            return E.NONE if commit else E.INVALID_TXN_STATE
        if st is S.COMPLETE_ABORT:
            return E.NONE if not commit else E.INVALID_TXN_STATE
        if st is S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE
        if st is S.PREPARE_ABORT:
            return E.CONCURRENT_TRANSACTIONS if not commit else E.INVALID_TXN_STATE
        if st is S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS
        return E.INVALID_TXN_STATE  # Empty, Dead

    # -- fencing and timeouts ------------------------------------------------------------------------

    def _fence_and_abort(self, m: TxnMetadata, reason: str) -> None:
        """Bump the epoch at once (the current producer is fenced from now on) and abort
        its transaction with the new epoch."""
        if m.state is S.ONGOING:
            if m.producer_epoch > MAX_EPOCH:
                # nothing above Short.MaxValue: the abort keeps it (the next
                # InitProducerId takes a fresh producer id)
                pass
            else:  # (to Short.MaxValue at most, as Kafka's prepareFenceProducerEpoch)
                m.last_producer_id, m.last_producer_epoch = m.producer_id, m.producer_epoch
                m.producer_epoch += 1
            m.state = S.PREPARE_EPOCH_FENCE
            log.info("[txn=%s] fencing producer %d (epoch now %d) and aborting: %s",
                     m.transactional_id, m.producer_id, m.producer_epoch, reason)
        self._spawn(self._abort_fenced(m))

    async def _abort_fenced(self, m: TxnMetadata) -> None:
        if m.state is not S.PREPARE_EPOCH_FENCE or m.pending is not None:
            return
        new = m.copy()
        new.state = S.PREPARE_ABORT
        new.last_update_ms = now_ms()
        if await self._write(m, new) == E.NONE:
            self._start_markers(m)

    def tick(self, now: int | None = None) -> None:
        """Abort timed-out transactions; retry a fence whose write failed and markers
        whose task ended without completing; every
        `transaction.remove.expired.transaction.cleanup.interval.ms`, remove the ids idle
        (Empty or Complete*) for `transactional.id.expiration.ms`."""
        ts = now_ms() if now is None else now
        if ts - self._last_expiry >= self.config.expiry_interval_ms:
            self._last_expiry = ts
            for m in list(self.txns.values()):
                if m.pending is None and m.state in (S.EMPTY, S.COMPLETE_COMMIT,
                                                     S.COMPLETE_ABORT) \
                        and self.partition_for(m.transactional_id) in self.epochs \
                        and m.last_update_ms + self.config.id_expiration_ms <= ts:
                    self._spawn(self._expire(m))
        for m in list(self.txns.values()):
            if m.pending is not None or self.partition_for(m.transactional_id) not in self.epochs:
                continue
            if m.state is S.ONGOING and m.start_ms >= 0 and ts > m.start_ms + m.timeout_ms:
                self._fence_and_abort(m, f"transaction timed out after {m.timeout_ms} ms")
            elif m.state is S.PREPARE_EPOCH_FENCE:
                self._spawn(self._abort_fenced(m))
            elif m.state in PREPARED and m.transactional_id not in self._markers:
                self._start_markers(m)

    async def _expire(self, m: TxnMetadata) -> None:
        if m.pending is not None or m.state not in (S.EMPTY, S.COMPLETE_COMMIT,
                                                    S.COMPLETE_ABORT):
            return
        new = m.copy()
        new.state = S.DEAD
        if await self._write(m, new, tombstone=True) == E.NONE:
            log.info("[txn=%s] expired: idle for %d ms (producer %d)", m.transactional_id,
                     self.config.id_expiration_ms, m.producer_id)

    # -- markers --------------------------------------------------------------------------------------

    def _start_markers(self, m: TxnMetadata) -> None:
        tid = m.transactional_id
        old = self._markers.get(tid)
        if old is not None and not old.done():
            return
        task = asyncio.get_running_loop().create_task(self._complete(m))
        self._markers[tid] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._markers.get(tid) is t:
                del self._markers[tid]

        task.add_done_callback(done)

    async def _complete(self, m: TxnMetadata) -> None:
        tid = m.transactional_id
        idx = self.partition_for(tid)
        coord_epoch = self.epochs.get(idx)
        if coord_epoch is None:
            return
        commit = m.state is S.PREPARE_COMMIT
        pid, epoch, tv = m.producer_id, m.producer_epoch, m.client_tv
        pending = set(m.partitions)
        backoff = 0.02
        while pending:
            if self.epochs.get(idx) != coord_epoch or self.txns.get(tid) is not m:
                return
            pending -= await self._send_markers(pid, epoch, commit, coord_epoch, pending, tv)
            if pending:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        while True:
            if self.epochs.get(idx) != coord_epoch or self.txns.get(tid) is not m \
                    or m.state not in PREPARED:
                return
            if m.pending is None:
                new = m.copy()
                new.state = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
                new.partitions = set()
                new.last_update_ms = now_ms()
                nxt = m.next_producer_id
                if nxt >= 0:  # the epoch is exhausted: the next transaction has a new id
                    new.last_producer_id, new.last_producer_epoch = m.producer_id, -1
                    new.producer_id, new.producer_epoch = nxt, 0
                    new.next_producer_id = -1
                err = await self._write(m, new)
                if err == E.NONE:
                    log.info("[txn=%s] %s (producer %d epoch %d)", tid,
                             "committed" if commit else "aborted", pid, epoch)
                    return
                if err == E.NOT_COORDINATOR:
                    return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def _send_markers(self, pid: int, epoch: int, commit: bool, coord_epoch: int,
                            partitions: set[tuple[str, int]], tv: int = 0
                            ) -> set[tuple[str, int]]:
        """One round: the partitions whose marker is now written (or need none)."""
        image = self.broker.image
        by_leader: dict[int, list[tuple[str, int]]] = {}
        done: set[tuple[str, int]] = set()
        for tp in partitions:
            pimg = image.partition(*tp)
            if pimg is None:
                done.add(tp)  # the topic was deleted: nothing to mark
                continue
            if pimg.leader >= 0:
                by_leader.setdefault(pimg.leader, []).append(tp)
        for leader, tps in by_leader.items():
            try:
                if leader == self.broker.broker_id:
                    res = await write_markers(self.broker, pid, epoch, commit, coord_epoch, tps,
                                              tv)
                else:
                    res = await self._remote_markers(leader, pid, epoch, commit, coord_epoch,
                                                     tps, tv)
            except (ConnectionError, OSError, TimeoutError) as e:
                log.info("markers for producer %d to broker %d failed: %s", pid, leader, e)
                continue
            for tp, err in res.items():
                if err == E.NONE:
                    done.add(tp)
                elif err in (E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED):
                    # a newer epoch or coordinator has been there: this marker is moot
                    log.warning("marker for producer %d epoch %d on %s-%d refused: %s", pid,
                                epoch, tp[0], tp[1], err.name)
                    done.add(tp)
        return done

    async def _remote_markers(self, broker_id: int, pid: int, epoch: int, commit: bool,
                              coord_epoch: int, tps: list[tuple[str, int]], tv: int = 0
                              ) -> dict[tuple[str, int], ErrorCode]:
        ch = self._channel(broker_id)
        if ch is None:
            return {}
        by_topic: dict[str, list[int]] = {}
        for t, i in tps:
            by_topic.setdefault(t, []).append(i)
        body: dict[str, Any] = {"markers": [{
            "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
            "coordinator_epoch": coord_epoch, "transaction_version": tv}]}
        resp = await ch.request(27, 2, body, MARKER_TIMEOUT_S + 2)
        out: dict[tuple[str, int], ErrorCode] = {}
        for mk in resp.markers:
            for t in mk.topics:
                for pr in t.partitions:
                    out[(t.name, pr.partition_index)] = ErrorCode.of(pr.error_code)
        return out

    # -- tasks ------------------------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for t in list(self._tasks) + list(self._markers.values()):
            t.cancel()
        for ch in self._channels.values():
            await ch.close()

    # -- admin views (DescribeTransactions, ListTransactions) ----------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        err = self._error_for(transactional_id)
        if err is not None:
            return err, None
        m = self.txns.get(transactional_id)
        if m is None or m.producer_epoch < 0:
            return E.TRANSACTIONAL_ID_NOT_FOUND, None
        return E.NONE, m

    def list_transactions(self, states: set[str] | None, producer_ids: set[int] | None,
                          min_duration_ms: int = -1) -> tuple[ErrorCode, list[TxnMetadata]]:
        """The transactions this broker coordinates (every loaded partition), filtered
        by state name, producer id and (v1) running for at least ``min_duration_ms``."""
        if self._to_load:
            return E.COORDINATOR_LOAD_IN_PROGRESS, []
        ts = now_ms()
        out = []
        for m in self.txns.values():
            if self.partition_for(m.transactional_id) not in self.epochs or m.producer_epoch < 0:
                continue
            if states and m.state.kafka_name not in states:
                continue
            if producer_ids and m.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (m.state is not S.ONGOING or m.start_ms < 0
                                         or ts - m.start_ms < min_duration_ms):
                continue
            out.append(m)
        return E.NONE, out
