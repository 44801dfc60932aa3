"""The transaction coordinator service (KIP-98) on the replicated `__transaction_state` topic.

This module owns the entry points the handlers call (Kafka's TransactionCoordinator
front and TransactionMarkerChannelManager): it checks the transactional id, finds its
`__transaction_state` partition and runs each request as an operation of that
partition's ``TxnShard`` (``shard.py``, where every decision is) on the coordinator
runtime (``broker/coordinator/``), which answers once the operation's records are
committed (acks=all), NOT_COORDINATOR when this broker does not lead the partition and
COORDINATOR_LOAD_IN_PROGRESS while it loads it. Reads (DescribeTransactions,
ListTransactions, KIP-890 verification) look at the shard's state directly.

Markers are written here, outside the shard: the ``MarkerJob`` effect of a committed
PrepareCommit / PrepareAbort (and of every prepared transaction when a partition is
loaded) starts a task that writes the markers (WriteTxnMarkers to each partition's
leader, or a local append for partitions led here), retried with backoff and fresh
leaders from metadata until each is acknowledged, then runs the shard's ``complete``
(CompleteCommit / CompleteAbort). The coordinator epoch (the partition's leader epoch)
rides on every marker, so a deposed coordinator's markers are refused
(TRANSACTION_COORDINATOR_FENCED); a task stops when its partition's epoch changes.

The coordinator of a transactional id is the leader of partition
`abs(javaHash(id)) % transaction.state.log.num.partitions` of `__transaction_state`
(created on the first FindCoordinator of a transactional id: 50 partitions,
`transaction.state.log.replication.factor` capped to the live brokers, compacted, min
ISR `transaction.state.log.min.isr` capped to the replication factor). Producer ids
come from the controller (`allocate_producer_id`); an operation that needs one answers
``need_producer_id`` and is run again with one. Records are TransactionLogValue v1
while `transaction.version` >= 1 is finalized, else v0, as Kafka writes them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jocko_py.broker.coordinator.runtime import CoordinatorResult, CoordinatorRuntime, Record
from jocko_py.broker.coordinator.shell import CoordinatorShell, ReplicaLog, SystemClock
from jocko_py.broker.features import TRANSACTION_VERSION, level
from jocko_py.broker.group.offsets_store import OFFSETS_TOPIC, partition_for
from jocko_py.broker.inter_broker import BrokerChannel
from jocko_py.broker.txn.shard import MAX_EPOCH, MarkerJob, TxnAnswer, TxnConfig, TxnShard
from jocko_py.broker.txn.state import TXN_TOPIC, TxnMetadata, TxnState
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from jocko_py.broker.interfaces import TxnHost
    from jocko_py.broker.partition import Partition

__all__ = ["MAX_EPOCH", "TransactionCoordinator", "TxnConfig", "config_from", "marker_batch",
           "write_markers"]

log = logging.getLogger("jocko_py.broker.txn")

E = ErrorCode
S = TxnState
WRITE_TIMEOUT_MS = 10_000
MARKER_TIMEOUT_S = 10.0
VERIFY_TIMEOUT_S = 5.0
# Kafka's add.partitions.to.txn.retry.backoff.ms / .max.ms defaults (not configurable here)
ADD_RETRY_BACKOFF_S = 0.02
ADD_RETRY_MAX_S = 0.1


def now_ms() -> int:
    return int(time.time() * 1000)


def config_from(broker: TxnHost) -> TxnConfig:
    c = broker.config
    return TxnConfig(
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


def marker_batch(p: Partition, producer_id: int, producer_epoch: int, commit: bool,
                 coordinator_epoch: int, transaction_version: int, ts: int
                 ) -> tuple[ErrorCode, bytes | None]:
    """The decision of one partition's leader on one marker (WriteTxnMarkers): the
    control batch to append (acks=all), or why none is: a marker of an older producer
    epoch or coordinator epoch is refused (Kafka's rules, ``check_marker``), and so is
    any marker while the partition is under its min ISR (the coordinator retries)."""
    check = p.log.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch,
                                              transaction_version)
    if check != E.NONE:
        return check, None
    if p.under_min_isr():
        return E.NOT_ENOUGH_REPLICAS, None  # as any acks=all write: the coordinator retries
    ctype = rb.ControlType.COMMIT if commit else rb.ControlType.ABORT
    return E.NONE, rb.build_control_batch(
        ctype, producer_id=producer_id, producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch, timestamp=ts)


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
    ts = now_ms()
    for tp in partitions:
        p, err = replicas.get_partition_or_error(*tp)
        if p is None:
            out[tp] = err
            continue
        check, batch = marker_batch(p, producer_id, producer_epoch, commit, coordinator_epoch,
                                    transaction_version, ts)
        if batch is None:
            out[tp] = check
            continue
        entries.append((tp[0], tp[1], batch))
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


class _TxnLog(ReplicaLog):
    """The coordinator's writes, refused while the partition is under its min ISR (as
    Kafka's acks=all append: NOT_ENOUGH_REPLICAS, answered COORDINATOR_NOT_AVAILABLE)."""

    def append(self, partition: int, records: list[Record],
               producer: tuple[int, int] | None, now: int) -> tuple[ErrorCode, int]:
        p = self.partition(partition)
        if p is not None and p.is_leader and p.under_min_isr():
            return E.NOT_ENOUGH_REPLICAS, -1
        return super().append(partition, records, producer, now)


class TransactionCoordinator:
    def __init__(self, broker: TxnHost, config: TxnConfig | None = None) -> None:
        self.broker = broker
        self.config = config or config_from(broker)
        self.num_partitions = self.config.num_partitions
        self.pinned = False
        self._channels: dict[int, BrokerChannel] = {}
        # transactional id -> (partition, coordinator epoch, job, its task)
        self._markers: dict[str, tuple[int, int, MarkerJob, asyncio.Task[None]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.clock = SystemClock()
        log_ = _TxnLog(broker.replicas, TXN_TOPIC)
        self.runtime: CoordinatorRuntime[TxnShard] = CoordinatorRuntime(
            "transaction", self._new_shard, log_)
        self.runtime.on_effect = self._on_effect
        self.shell = CoordinatorShell(
            self.runtime, log_,
            lambda wanted: {i: [r for _, _, r in log_.read(i)] for i in wanted},
            self.clock, lambda: WRITE_TIMEOUT_MS)

    def _new_shard(self, partition: int) -> TxnShard:
        return TxnShard(partition, self.config, self._flexible)

    def _flexible(self) -> bool:
        return level(self.broker.image.features, TRANSACTION_VERSION) >= 1

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
            await self.broker.controller_channel.create_topic(
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

    def _status(self, transactional_id: str | None) -> tuple[int, ErrorCode]:
        if not transactional_id:
            return -1, E.INVALID_REQUEST
        if not self.topic_exists():
            return -1, E.NOT_COORDINATOR
        idx = self.partition_for(transactional_id)
        return idx, self.runtime.status(idx)

    # -- election / resignation ----------------------------------------------------------

    def on_partition_role(self, p: Partition, leader: bool) -> None:
        if p.topic != TXN_TOPIC:
            return
        self.topic_exists()
        self.shell.on_partition_role(p, leader)
        if not leader:
            for tid, (idx, _, _, task) in list(self._markers.items()):
                if idx == p.partition:
                    task.cancel()
                    del self._markers[tid]

    # -- running operations ----------------------------------------------------------------

    async def _run(self, transactional_id: str,
                   op: Callable[[int], Callable[[TxnShard, int], CoordinatorResult[TxnAnswer]]]
                   ) -> TxnAnswer:
        """Run ``op(fresh_producer_id)`` on the id's shard; again with a producer id from
        the controller when it asks for one."""
        idx, err = self._status(transactional_id)
        if err != E.NONE:
            return TxnAnswer(err)
        fresh = -1
        for _ in range(3):
            pending = self.shell.write(idx, op(fresh))
            resp, err = await pending
            if err != E.NONE or resp is None:
                return TxnAnswer(err if err != E.NONE else E.UNKNOWN_SERVER_ERROR)
            if not resp.need_producer_id:
                return resp
            try:
                fresh = await self.broker.controller_channel.allocate_producer_id()
            except KafkaError as e:
                return TxnAnswer(e.code if e.code not in (E.NOT_CONTROLLER, E.NONE)
                                 else E.COORDINATOR_NOT_AVAILABLE)
        return TxnAnswer(E.COORDINATOR_NOT_AVAILABLE)

    # -- InitProducerId ----------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               producer_id: int = -1, producer_epoch: int = -1
                               ) -> tuple[ErrorCode, int, int]:
        a = await self._run(transactional_id, lambda fresh: lambda s, now: s.init_producer_id(
            now, transactional_id, timeout_ms, producer_id, producer_epoch, fresh))
        return a.error, a.producer_id, a.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]], client_tv: int = 0) -> ErrorCode:
        """AddPartitionsToTxn / AddOffsetsToTxn; ``client_tv`` 2 when a partition leader
        adds them for a KIP-890 part 2 producer (Produce v12, TxnOffsetCommit v5)."""
        a = await self._run(transactional_id, lambda _fresh: lambda s, now: s.add_partitions(
            now, transactional_id, producer_id, producer_epoch, partitions, client_tv))
        return a.error

    def verify_local(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890 part 1 (AddPartitionsToTxn v4+ with VerifyOnly): is each partition in
        the producer's ongoing transaction? One that is not: TRANSACTION_ABORTABLE (at v4
        and v5 alike, as Kafka 4.4; the partition leader tells an older producer
        INVALID_TXN_STATE). Nothing is written."""
        idx, err = self._status(transactional_id)
        if err != E.NONE:
            return {tp: err for tp in partitions}
        out, err = self.runtime.read(idx, lambda s: s.verify(
            transactional_id, producer_id, producer_epoch, partitions))
        return out if out is not None else {tp: err for tp in partitions}

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

    # -- EndTxn ---------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        err, _, _ = await self.end_txn_v(transactional_id, producer_id, producer_epoch, commit,
                                         bump_epoch=False)
        return err

    async def end_txn_v(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool, *, bump_epoch: bool) -> tuple[ErrorCode, int, int]:
        """EndTxn; with ``bump_epoch`` (v5 under transaction.version 2, KIP-890 part 2)
        the answer names the producer id and epoch of the next transaction."""
        a = await self._run(transactional_id, lambda fresh: lambda s, now: s.end_txn(
            now, transactional_id, producer_id, producer_epoch, commit, bump_epoch, fresh))
        return a.error, a.producer_id, a.producer_epoch

    # -- markers ----------------------------------------------------------------------------------

    def _on_effect(self, partition: int, effect: object) -> None:
        if isinstance(effect, MarkerJob):
            self._start_markers(partition, effect)

    def _start_markers(self, idx: int, job: MarkerJob) -> None:
        ctx = self.runtime.contexts.get(idx)
        if ctx is None:
            return
        tid = job.transactional_id
        old = self._markers.get(tid)
        if old is not None and not old[3].done():
            if (old[0], old[1], old[2]) == (idx, ctx.epoch, job):
                return  # already being written
            old[3].cancel()
        task = asyncio.get_running_loop().create_task(self._complete(idx, ctx.epoch, job))
        self._markers[tid] = (idx, ctx.epoch, job, task)

        def done(t: asyncio.Task[None]) -> None:
            cur = self._markers.get(tid)
            if cur is not None and cur[3] is t:
                del self._markers[tid]

        task.add_done_callback(done)

    def _current(self, idx: int, coord_epoch: int) -> bool:
        ctx = self.runtime.contexts.get(idx)
        return ctx is not None and ctx.epoch == coord_epoch

    async def _complete(self, idx: int, coord_epoch: int, job: MarkerJob) -> None:
        """Write the job's markers until every partition has one, then complete it."""
        pending = set(job.partitions)
        backoff = 0.02
        while pending:
            if not self._current(idx, coord_epoch):
                return
            pending -= await self._send_markers(job.producer_id, job.producer_epoch, job.commit,
                                                coord_epoch, pending, job.transaction_version)
            if pending:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        tid = job.transactional_id
        while self._current(idx, coord_epoch):
            completing = self.shell.write(idx, lambda s, now: s.complete(
                now, tid, job.producer_id, job.producer_epoch, job.commit))
            a, err = await completing
            if err == E.NONE and a is not None:
                err = a.error  # (a refused append answers its error)
            if err in (E.NONE, E.NOT_COORDINATOR):
                return
            log.info("[txn=%s] completing the transaction failed (%s): retrying", tid,
                     err.name)
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

    # -- tasks --------------------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self.shell.close()
        for t in list(self._tasks) + [m[3] for m in self._markers.values()]:
            t.cancel()
        for ch in self._channels.values():
            await ch.close()

    # -- admin views (DescribeTransactions, ListTransactions) ------------------------------------

    @property
    def txns(self) -> dict[str, TxnMetadata]:
        """Every transactional id coordinated here (a snapshot over the loaded shards)."""
        out: dict[str, TxnMetadata] = {}
        for idx in list(self.runtime.contexts):
            shard = self.runtime.shard(idx)
            if shard is not None:
                out.update(shard.txns)
        return out

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        idx, err = self._status(transactional_id)
        if err != E.NONE:
            return err, None
        m, err = self.runtime.read(idx, lambda s: s.txns.get(transactional_id))
        if err != E.NONE:
            return err, None
        if m is None or m.producer_epoch < 0:
            return E.TRANSACTIONAL_ID_NOT_FOUND, None
        return E.NONE, m

    def list_transactions(self, states: set[str] | None, producer_ids: set[int] | None,
                          min_duration_ms: int = -1) -> tuple[ErrorCode, list[TxnMetadata]]:
        """The transactions this broker coordinates (every loaded partition), filtered
        by state name, producer id and (v1) running for at least ``min_duration_ms``."""
        if self.runtime.loading():
            return E.COORDINATOR_LOAD_IN_PROGRESS, []
        ts = self.clock.now_ms()
        out = []
        for m in self.txns.values():
            if m.producer_epoch < 0:
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
