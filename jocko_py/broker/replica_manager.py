"""The partitions this broker hosts and the two calls every handler goes through.

The replica manager owns the `Partition` objects (see partition.py, the sole owner
of each partition's role, epochs, ISR and high watermark), the logs behind them,
the replica fetchers, and the produce and fetch purgatories.

- `apply_delta(image, delta)`: the only way partitions change role. Called by the
  metadata publisher for every committed batch of metadata records: partitions this
  broker now leads become leaders, the ones it follows get a fetcher on their leader,
  deleted ones are stopped and their logs removed.
- `append_records(entries, acks, timeout_ms)`: Produce (and the group coordinator's
  own writes). Leader checks, min ISR and validation happen inside the partition;
  `acks=all` parks in the produce purgatory until the HW passes the batch. A
  transactional batch that would open its producer's transaction on a partition is
  first verified with the transaction coordinator (KIP-890 part 1, through the
  `txn_verifier` the transaction layer installs) and appended only if the partition
  is in the producer's ongoing transaction and no marker ended it meanwhile.
- `fetch_messages(params)`: Fetch, for consumers (up to the HW) and followers (up to
  the LEO, recording their position, moving the HW, expanding the ISR).
- A background task shrinks the ISR of followers that lag beyond
  `replica.lag.time.max.ms`; ISR changes go to the controller (AlterPartition)
  through the `alter_partition` callable the broker installs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jocko_py.broker.inter_broker import ClientSecurity
from jocko_py.broker.partition import (
    AppendResult,
    IsrChange,
    Partition,
    ReadResult,
    Role,
    now_ms,
)
from jocko_py.broker.purgatory import Purgatory, parked
from jocko_py.broker.replica_fetcher import ReplicaFetcher
from jocko_py.broker.stats import BrokerStats, count_records
from jocko_py.cluster.metadata import LocalChanges, MetadataDelta, MetadataImage, PartitionRef
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.errors import KafkaStorageError
from jocko_py.commitlog.leader_epoch import LeaderEpochCache
from jocko_py.commitlog.manager import LogManager
from jocko_py.commitlog.segment import FileRegion
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.replica_manager")
# a metadata delta making this broker leader of more partitions than this logs one line
# for all of them (the first ones named), not one each
_LEADER_LINES = 10

__all__ = ["AppendResult", "FetchParams", "FetchPartition", "Partition", "ReadResult",
           "ReplicaManager"]


@dataclass(slots=True)
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    max_bytes: int = 1 << 20
    topic_id: uuid.UUID | None = None  # Fetch v13+ names topics by id


@dataclass(slots=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    partitions: list[FetchPartition] = field(default_factory=list)
    # the follower process's incarnation, from its client id (see replica_fetcher)
    replica_incarnation: str | None = None
    # Fetch v18 (KIP-1166): the high watermark the follower knows, per partition it sent
    # one for; a leader whose HW is past it answers at once instead of waiting
    replica_high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)
    # big reads may be FileRegions, sent from the file (a plaintext connection's Fetch)
    zero_copy: bool = False

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0


AlterPartitionFn = Callable[[IsrChange], Awaitable[ErrorCode]]
# (transactional id, producer id, producer epoch, partitions) -> error per partition
# (transactional id, producer id, epoch, partitions, add): verify (KIP-890 part 1) or,
# with add, add the partitions to the transaction (part 2)
TxnVerifier = Callable[[str, int, int, list[tuple[str, int]], bool],
                       Awaitable[dict[tuple[str, int], ErrorCode]]]
# coordinator answers a produce cannot carry to every client: retriable for all of them
_VERIFY_RETRIABLE = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.REQUEST_TIMED_OUT})


class ReplicaManager:
    def __init__(self, data_dir: Path, base_config: LogConfig, broker_id: int,
                 image: Callable[[], MetadataImage], props: Callable[[str], str],
                 stats: BrokerStats | None = None,
                 extra_log_dirs: tuple[Path, ...] = (), *,
                 channel_security: ClientSecurity | None = None,
                 alter_partition: AlterPartitionFn | None = None,
                 incarnation: str = "", offline_on_failure: bool = True) -> None:
        self.base_config = base_config
        # bytes/records in and out per topic, ISR shrinks/expands (plain counters)
        self.stats = stats if stats is not None else BrokerStats()
        self.broker_id = broker_id
        self._image = image
        # TLS / SASL towards the inter-broker listener
        self.channel_security = channel_security
        self.logs = LogManager(data_dir, base_config, extra_log_dirs)
        self.logs.offline_on_failure = offline_on_failure
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_waiters = Purgatory()
        self.produce_waiters = Purgatory()
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.fetchers_stopped = False  # set once the broker is stopping: no new fetchers
        self.logs.failure_listeners.append(self._on_log_dir_failure)
        self.logs.dir_failure_listeners.append(self._on_one_log_dir_failure)
        self._group_flush: asyncio.Future[None] | None = None
        self.alter_partition = alter_partition
        self.txn_verifier: TxnVerifier | None = None
        # this process's incarnation (as registered), named in our fetchers' client ids
        self.incarnation = incarnation
        self.replica_lag_time_max_ms = int(props("replica.lag.time.max.ms") or 30000)
        self.replica_fetch_wait_max_ms = int(props("replica.fetch.wait.max.ms") or 500)
        self.replica_fetch_max_bytes = int(props("replica.fetch.max.bytes") or 1048576)
        # called with (topic, partition, became_leader) after every role change
        self.role_listeners: list[Callable[[Partition, bool], None]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle

    def start(self, image: MetadataImage) -> None:
        """Load the logs of every partition this broker hosts in ``image``."""
        configs = {
            (t.name, pid): self.log_config(t.name)
            for t in image.topics.values() for pid, p in t.partitions.items()
            if self.broker_id in p.replicas
        }
        self.logs.load_all(configs)

    def remove_stray_logs(self, image: MetadataImage) -> None:
        """Logs of partitions the metadata no longer places here: leftovers of a deletion
        (or a reassignment) interrupted by a crash."""
        for key in list(self.logs.logs):
            p = image.partition(*key)
            if p is None or self.broker_id not in p.replicas:
                log.info("removing log %s-%d: not a replica here", *key)
                self.logs.delete(*key)

    def log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_properties(self._image().topic_configs(topic), self.base_config)

    def set_base_config(self, cfg: LogConfig) -> None:
        """New broker-level log defaults (dynamic broker configs): every log follows."""
        self.base_config = cfg
        self.logs.default_config = cfg
        per_topic: dict[str, LogConfig] = {}
        for (t, _), p in self.partitions.items():
            c = per_topic.get(t)
            if c is None:
                c = per_topic[t] = self.log_config(t)
            p.log.update_config(c)

    def update_topic_config(self, topic: str) -> None:
        cfg = self.log_config(topic)
        for (t, _), p in self.partitions.items():
            if t == topic:
                p.log.update_config(cfg)

    # ------------------------------------------------------------------ metadata

    def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        self.apply_local_changes(image, delta.local_changes(self.broker_id))
        self.apply_broker_and_config_changes(image, delta)

    def apply_local_changes(self, image: MetadataImage, local: LocalChanges) -> None:
        """The partitions part of a delta (``delta.local_changes``): this broker's
        replicas that were deleted, became leaders or followers. The metadata publisher
        hands a big delta's over in slices (each partition once, in its delta's order),
        then the rest of the delta (`apply_broker_and_config_changes`)."""
        now = now_ms()
        for ref in local.deleted:
            self._stop_replica(ref)
        # many new leaders at once (topics created, a broker's leaders moved here): one
        # line for all of them instead of one each (each one at DEBUG)
        quiet = len(local.leaders) > _LEADER_LINES
        new_leaders: list[str] = []
        configs: dict[str, LogConfig] = {}  # the topics' log configs, for this delta
        # the new logs' files made at once on threads, and the new epochs' checkpoints
        # written at once after the loop (LogManager.CREATE_THREADS)
        self.logs.prepare_new_logs([
            (r.topic, r.partition) for r in (*local.leaders, *local.followers)
            if (p0 := self.partitions.get((r.topic, r.partition))) is None
            or p0.topic_id != r.topic_id])
        epoch_writes: list[LeaderEpochCache] = []
        try:
            for ref in local.leaders:
                p = self._get_or_create(ref, configs)
                assert ref.after is not None
                self._remove_from_fetchers((p.topic, p.partition))
                if p.make_leader(ref.after, now, quiet=quiet, epoch_writes=epoch_writes):
                    new_leaders.append(p.name)
                    self._notify_role(p, True)
                self._on_hw_maybe_moved(p)
        finally:
            self.logs.save_leader_epochs(epoch_writes)
        if quiet and new_leaders:
            log.info("leader of %d partitions at a new epoch: %s%s", len(new_leaders),
                     ", ".join(new_leaders[:_LEADER_LINES]),
                     ", ..." if len(new_leaders) > _LEADER_LINES else "")
        for ref in local.followers:
            p = self._get_or_create(ref, configs)
            assert ref.after is not None
            was_leader = p.role is Role.LEADER
            changed = p.make_follower(ref.after)
            key = (p.topic, p.partition)
            self._remove_from_fetchers(key, keep=ref.after.leader)
            if ref.after.leader >= 0 and not self.fetchers_stopped:
                b = image.brokers.get(ref.after.leader)
                if b is not None:
                    f = self.fetchers.get(b.broker_id)
                    if f is None or (f.channel.host, f.channel.port) != (b.host, b.port):
                        if f is not None:
                            self._spawn(f.close())
                        f = ReplicaFetcher(self, b.broker_id, b.host, b.port)
                        self.fetchers[b.broker_id] = f
                    f.add(p)
            if changed or was_leader:
                self._notify_role(p, False)
            # waiters on the old leader must learn that it is no longer the leader
            self.produce_waiters.notify(key)
            self.fetch_waiters.notify(key)

    def apply_broker_and_config_changes(self, image: MetadataImage,
                                        delta: MetadataDelta) -> None:
        """A delta's brokers (fetchers re-dial a moved broker) and topic configs."""
        for bid in delta.brokers:
            # a broker re-registered with a new address: fetchers re-dial
            b = image.brokers.get(bid)
            f = self.fetchers.get(bid)
            if f is not None and b is not None and not self.fetchers_stopped and (
                    f.channel.host, f.channel.port) != (b.host, b.port):
                self.fetchers.pop(bid)
                self._spawn(f.close())
                nf = ReplicaFetcher(self, b.broker_id, b.host, b.port)
                self.fetchers[bid] = nf
                for p in list(f.partitions.values()):
                    nf.add(p)
        for rtype, name in delta.configs:
            if rtype == 2 and name in image.topics:
                self.update_topic_config(name)

    def _get_or_create(self, ref: PartitionRef,
                       configs: dict[str, LogConfig] | None = None) -> Partition:
        key = (ref.topic, ref.partition)
        p = self.partitions.get(key)
        if p is None or p.topic_id != ref.topic_id:
            cfg = None if configs is None else configs.get(ref.topic)
            if cfg is None:
                cfg = self.log_config(ref.topic)
                if configs is not None:
                    configs[ref.topic] = cfg
            lg = self.logs.get_or_create(ref.topic, ref.partition, cfg)
            lg.update_config(cfg)
            p = Partition(ref.topic, ref.partition, ref.topic_id, lg, self.broker_id)
            p.on_storage_error = functools.partial(self._storage_error, key)
            self.partitions[key] = p
        return p

    def _storage_error(self, key: tuple[str, int], reason: str) -> None:
        self.logs.mark_offline(reason, self.logs.dir_of(*key))

    def _stop_replica(self, ref: PartitionRef) -> None:
        key = (ref.topic, ref.partition)
        self._remove_from_fetchers(key)
        p = self.partitions.pop(key, None)
        if p is not None:
            was_leader = p.role is Role.LEADER
            p.stop()
            if was_leader:
                self._notify_role(p, False)
        self.logs.delete(ref.topic, ref.partition)
        self.fetch_waiters.notify(key)
        self.produce_waiters.notify(key)

    def _remove_from_fetchers(self, key: tuple[str, int], keep: int = -1) -> None:
        for sid, f in list(self.fetchers.items()):
            if sid != keep and key in f.partitions:
                f.remove(key)

    def _notify_role(self, p: Partition, leader: bool) -> None:
        for fn in self.role_listeners:
            try:
                fn(p, leader)
            except Exception:
                log.exception("[partition=%s] role listener failed", p.name)

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def run() -> None:
            await coro

        t = asyncio.get_running_loop().create_task(run())
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        if isinstance(coro, Coroutine):
            # a task cancelled before it ran never awaited `coro`: close it quietly
            def close_unstarted(_t: asyncio.Task[None], c: Coroutine[Any, Any, None] = coro
                                ) -> None:
                c.close()
            t.add_done_callback(close_unstarted)

    # ------------------------------------------------------------------ lookups

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def get_partition_or_error(self, topic: str, partition: int) -> tuple[Partition | None,
                                                                            ErrorCode]:
        """The partition if this broker leads it, else the error a client must get."""
        if (topic, partition) in self.partitions and self.logs.is_offline(topic, partition):
            return None, ErrorCode.KAFKA_STORAGE_ERROR  # its log dir failed
        p = self.partitions.get((topic, partition))
        if p is not None and p.role is Role.LEADER:
            return p, ErrorCode.NONE
        if p is not None:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        img = self._image().partition(topic, partition)
        if img is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER

    # ------------------------------------------------------------------ produce

    async def append_records(
        self, entries: list[tuple[str, int, memoryview | bytes]], acks: int, timeout_ms: int,
        *, internal: bool = False, transactional_id: str | None = None,
        abortable_supported: bool = False, add_partitions: bool = False,
    ) -> list[AppendResult]:
        """Append each (topic, partition, records) as leader; wait as ``acks`` says.
        ``abortable_supported``: the producer knows TRANSACTION_ABORTABLE (Produce v11+);
        ``add_partitions``: a transactional batch adds its partition to the transaction
        instead of being verified (Produce v12 under transaction.version 2, KIP-890
        part 2)."""
        refused: dict[int, AppendResult] = {}
        if transactional_id is not None and not internal and self.txn_verifier is not None:
            refused = await self._verify_transactional(entries, transactional_id,
                                                       abortable_supported, add_partitions)
        now = now_ms()
        results: list[AppendResult] = []
        appended: list[tuple[Partition, AppendResult]] = []
        stats = self.stats
        for i, (topic, idx, data) in enumerate(entries):
            if i in refused:
                results.append(refused[i])
                continue
            p, err = self.get_partition_or_error(topic, idx)
            if p is None:
                results.append(AppendResult(err, message=None if err != ErrorCode.NOT_LEADER_OR_FOLLOWER
                                            else f"broker {self.broker_id} is not the leader"))
                stats.failed_produce[topic] += 1
                continue
            if internal:
                r = p.append_internal(bytes(data), now)
            else:
                r = p.append_as_leader(data, acks, p.log.config.max_message_bytes, now)
            results.append(r)
            if r.error == ErrorCode.NONE and r.last_offset >= 0:
                appended.append((p, r))
                self.fetch_waiters.notify((p.topic, p.partition))
                stats.bytes_in[topic] += len(data)
                stats.messages_in[topic] += r.last_offset - r.base_offset + 1
            elif r.error != ErrorCode.NONE:
                stats.failed_produce[topic] += 1
        if acks == 0 or not appended:
            return results
        barriers: list[tuple[asyncio.Future[None], AppendResult]] = []
        for p, r in appended:
            b = self.flush_barrier(p)
            if b is not None:
                barriers.append((b, r))
        for b, r in barriers:
            try:
                with parked():
                    await b
            except Exception:
                r.error = ErrorCode.KAFKA_STORAGE_ERROR
        if acks == -1:
            deadline = time.monotonic() + timeout_ms / 1000
            for p, r in appended:
                if r.error == ErrorCode.NONE:
                    r.error = await self.wait_replicated(p, r.last_offset, deadline)
        return results

    async def _verify_transactional(
        self, entries: list[tuple[str, int, memoryview | bytes]], transactional_id: str,
        abortable_supported: bool = False, add: bool = False,
    ) -> dict[int, AppendResult]:
        """KIP-890 part 1: the entries whose transactional batch would open its
        producer's transaction here, asked of the coordinator; the refused ones. A
        partition not in the transaction (the coordinator's TRANSACTION_ABORTABLE) is
        TRANSACTION_ABORTABLE for a producer that knows it (Produce v11+), else
        INVALID_TXN_STATE, as Kafka 4.x answers."""
        assert self.txn_verifier is not None
        wanted: dict[tuple[int, int], list[tuple[int, Partition]]] = {}
        for i, (topic, idx, data) in enumerate(entries):
            # attributes (int16 at byte 21): bit 4 transactional, bit 5 control
            if len(data) < rb.HEADER_SIZE or not data[22] & 0x10:
                continue
            p = self.partitions.get((topic, idx))
            if p is None or p.role is not Role.LEADER:
                continue  # the append answers that
            h = rb.parse_header(data)
            if h.producer_id < 0 or p.log.producer_state.in_transaction(h.producer_id,
                                                                        h.producer_epoch):
                continue
            # no later batch of this producer is appended here before this one (Kafka's
            # VerificationStateEntry)
            p.log.producer_state.begin_verification(h.producer_id, h.producer_epoch,
                                                    h.base_sequence)
            wanted.setdefault((h.producer_id, h.producer_epoch), []).append((i, p))
        refused: dict[int, AppendResult] = {}
        for (pid, epoch), items in wanted.items():
            tokens = {i: p.log.producer_state.verification_token(pid) for i, p in items}
            try:
                answers = await self.txn_verifier(transactional_id, pid, epoch,
                                                  [(p.topic, p.partition) for _, p in items], add)
            except Exception as e:
                log.info("transaction verification for %s failed: %s", transactional_id, e)
                answers = {}
            for i, p in items:
                err = answers.get((p.topic, p.partition), ErrorCode.COORDINATOR_NOT_AVAILABLE)
                if err == ErrorCode.NONE and not add and \
                        p.log.producer_state.verification_token(pid) != tokens[i]:
                    # a marker (or another epoch) ended that transaction while we asked
                    # (an added partition needs no such check: whatever ends the
                    # transaction it was added to carries a higher epoch than its batch,
                    # KIP-890 part 2, and the previous transaction's marker may land
                    # meanwhile)
                    err = ErrorCode.TRANSACTION_ABORTABLE
                if err == ErrorCode.NONE:
                    continue
                if err in _VERIFY_RETRIABLE:
                    err = ErrorCode.NOT_ENOUGH_REPLICAS
                elif err == ErrorCode.PRODUCER_FENCED:
                    err = ErrorCode.INVALID_PRODUCER_EPOCH
                elif err == ErrorCode.TRANSACTION_ABORTABLE and abortable_supported:
                    pass
                elif err != ErrorCode.INVALID_PRODUCER_EPOCH:
                    err = ErrorCode.INVALID_TXN_STATE
                refused[i] = AppendResult(
                    err, message=f"partition {p.name} is not in the ongoing transaction of "
                    f"{transactional_id!r} (producer {pid} epoch {epoch})"
                    if err == ErrorCode.INVALID_TXN_STATE else None)
        return refused

    async def wait_replicated(self, p: Partition, last_offset: int, deadline: float) -> ErrorCode:
        """Wait until the HW passes ``last_offset`` (acks=all) or the deadline."""
        key = (p.topic, p.partition)
        epoch = p.leader_epoch
        while p.high_watermark <= last_offset:
            if p.role is not Role.LEADER or p.leader_epoch != epoch \
                    or self.partitions.get(key) is not p:
                # leadership moved before the write was replicated: the client retries
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            left = deadline - time.monotonic()
            if left <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            await self.produce_waiters.wait_any([key], left)
        if p.under_min_isr():
            # Kafka: written and replicated to the ISR, but the ISR shrank below the
            # minimum meanwhile
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    # ------------------------------------------------------------------ fetch

    def _read_all(self, params: FetchParams, first: bool) -> tuple[list[ReadResult], int]:
        now = now_ms()
        current = False
        follower_epoch = -1
        if params.is_follower:
            # only the registered incarnation's fetches move the HW and the ISR (a
            # request left over from before a restart is served, not believed)
            b = self._image().brokers.get(params.replica_id)
            current = b is not None and not b.fenced and \
                str(b.incarnation_id) == params.replica_incarnation
            if current and b is not None:
                follower_epoch = b.broker_epoch
        total = 0
        out: list[ReadResult] = []
        for fp in params.partitions:
            p = self.partitions.get((fp.topic, fp.partition))
            if p is None:
                img = self._image().partition(fp.topic, fp.partition)
                err = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if img is None
                       else ErrorCode.NOT_LEADER_OR_FOLLOWER)
                out.append(ReadResult(err))
                continue
            if self.logs.is_offline(fp.topic, fp.partition):
                out.append(ReadResult(ErrorCode.KAFKA_STORAGE_ERROR))  # its log dir failed
                continue
            if p.role is not Role.LEADER:
                out.append(ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER))
                continue
            epoch_error = p.check_leader_epoch(fp.current_leader_epoch)
            if epoch_error:
                out.append(ReadResult(epoch_error))
                continue
            limit = max(0, min(fp.max_bytes, params.max_bytes - total))
            if params.is_follower:
                eff = p.read_for_follower(params.replica_id, fp.fetch_offset,
                                          fp.current_leader_epoch, fp.last_fetched_epoch,
                                          limit, now, record_fetch=first and current,
                                          min_one=total == 0, broker_epoch=follower_epoch,
                                          zero_copy=params.zero_copy)
                if eff.hw_advanced:
                    self._on_hw_maybe_moved(p)
                if eff.isr_change is not None:
                    self._send_isr_change(p, eff.isr_change)
                assert eff.result is not None
                r = eff.result
            elif params.isolation_level == 1:  # read_committed: up to the LSO
                r = p.read_committed(fp.fetch_offset, limit, min_one=total == 0,
                                     zero_copy=params.zero_copy)
            else:
                r = p.read(fp.fetch_offset, limit, upper=p.high_watermark, min_one=total == 0,
                           zero_copy=params.zero_copy)
            out.append(r)
            total += len(r.records) if r.records is not None else 0
        return out, total

    async def fetch_messages(self, params: FetchParams) -> list[ReadResult]:
        results = await self._fetch_messages(params)
        stats = self.stats
        if params.is_follower:
            for fp, r in zip(params.partitions, results, strict=True):
                if r.records:
                    stats.replication_bytes_out[fp.topic] += len(r.records)
        else:
            for fp, r in zip(params.partitions, results, strict=True):
                if r.records:
                    stats.bytes_out[fp.topic] += len(r.records)
                    stats.messages_out[fp.topic] += count_records(r.records) \
                        if not isinstance(r.records, FileRegion) else \
                        r.records.last_offset - r.records.first_offset + 1
                elif r.error:
                    stats.failed_fetch[fp.topic] += 1
        return results

    def _follower_hw_behind(self, params: FetchParams) -> bool:
        """KIP-1166: the follower's high watermark is behind ours for some partition."""
        for key, hw in params.replica_high_watermarks.items():
            p = self.partitions.get(key)
            if p is not None and p.role is Role.LEADER and p.high_watermark > hw:
                return True
        return False

    async def _fetch_messages(self, params: FetchParams) -> list[ReadResult]:
        results, total = self._read_all(params, True)
        wait = params.max_wait_ms / 1000
        if total >= params.min_bytes or wait <= 0 or any(r.error for r in results) \
                or any(r.diverging_epoch for r in results) or self._follower_hw_behind(params):
            return results
        keys = [(fp.topic, fp.partition) for fp in params.partitions]
        deadline = time.monotonic() + wait
        while total < params.min_bytes:
            left = deadline - time.monotonic()
            if left <= 0 or not await self.fetch_waiters.wait_any(keys, left):
                break
            await asyncio.sleep(0)  # let a burst of produces land before re-reading
            results, total = self._read_all(params, False)
            if any(r.error for r in results) or self._follower_hw_behind(params):
                break
        return results

    # ------------------------------------------------------------------ HW and ISR

    def _on_hw_maybe_moved(self, p: Partition) -> None:
        key = (p.topic, p.partition)
        self.produce_waiters.notify(key)
        self.fetch_waiters.notify(key)

    def notify_append(self, p: Partition) -> None:
        self.fetch_waiters.notify((p.topic, p.partition))

    def on_follower_appended(self, p: Partition) -> None:
        self.fetch_waiters.notify((p.topic, p.partition))

    def on_follower_truncated(self, p: Partition) -> None:
        pass

    def _send_isr_change(self, p: Partition, change: IsrChange) -> None:
        if self.alter_partition is None:
            p.isr_change_failed(change, ErrorCode.INVALID_REQUEST)  # no controller to ask
            return
        send = self.alter_partition
        before = len(p.isr)  # committed ISR when proposed (the delta may land first)

        async def run() -> None:
            backoff = 0.1
            while True:
                try:
                    err = await send(change)
                except Exception as e:
                    log.info("[partition=%s] AlterPartition failed: %s", p.name, e)
                    err = ErrorCode.REQUEST_TIMED_OUT
                if err == ErrorCode.NONE:
                    if len(change.new_isr) < before:
                        self.stats.isr_shrinks += 1
                    elif len(change.new_isr) > before:
                        self.stats.isr_expands += 1
                    return
                log.info("[partition=%s] ISR change to %s not confirmed: %s", p.name,
                         list(change.new_isr), getattr(err, "name", err))
                if not p.isr_change_failed(change, err):
                    return
                # no answer: it may or may not have been applied; ask again
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

        self._spawn(run())

    def check_isr(self) -> None:
        now = now_ms()
        for p in list(self.partitions.values()):
            change = p.maybe_shrink_isr(now, self.replica_lag_time_max_ms)
            if change is not None:
                self._send_isr_change(p, change)

    async def isr_expiration_loop(self) -> None:
        interval = max(0.05, self.replica_lag_time_max_ms / 2000)
        while True:
            await asyncio.sleep(interval)
            try:
                self.check_isr()
            except Exception:
                log.exception("ISR check failed")

    # ------------------------------------------------------------------ disk share

    def apply_disk_retention(self, percent: float,
                             committed: dict[tuple[str, int], int] | None = None) -> int:
        """Retention by share of disk over this broker's logs: never past a partition's
        high watermark, nor past ``committed`` (the lowest committed offset of any group,
        when the broker protects them). Returns the bytes deleted."""
        from jocko_py.commitlog.disk_retention import apply_disk_retention

        floors: dict[tuple[str, int], int] = {}
        weights: dict[str, float] = {}
        logs = {}
        for key, p in self.partitions.items():
            if self.logs.is_offline(*key):
                continue
            floor = p.high_watermark
            if committed is not None and key in committed:
                floor = min(floor, committed[key])
            floors[key] = floor
            logs[key] = p.log
            weights[p.topic] = p.log.config.disk_share
        try:
            return apply_disk_retention(self.logs.data_dir, logs, percent, weights, floors)
        except KafkaStorageError as e:
            self.logs.mark_offline(e.message)
            return 0

    # ------------------------------------------------------------------ flushing

    def flush_dirty(self) -> None:
        self.logs.flush_dirty()

    async def flush_due(self, *, all_dirty: bool = False) -> None:
        """fsync the logs whose flush is due, in a worker thread (the event loop that
        serves clients never waits on a disk); recovery points move afterwards."""
        tickets = self.logs.begin_flush_due(all_dirty=all_dirty)
        if tickets:
            await asyncio.to_thread(LogManager.run_flush_tickets, tickets)
            try:
                LogManager.end_flush_tickets(tickets)
            except KafkaStorageError as e:
                self.logs.mark_offline(e.message, getattr(e, "log_dir", None))
                raise

    def flush_barrier(self, p: Partition) -> asyncio.Future[None] | None:
        """A future for the next group flush if `p` reached `flush.messages`.

        Every produce that lands in the same loop turn shares one fsync pass
        (group commit): the flush runs once the turn's handlers have appended.
        """
        if not p.log.needs_flush:
            return None
        if self._group_flush is None:
            loop = asyncio.get_running_loop()
            self._group_flush = loop.create_future()
            loop.call_soon(self._start_group_flush)
        return self._group_flush

    def _start_group_flush(self) -> None:
        # once this loop turn's handlers have appended: one fsync pass for all of them
        fut, self._group_flush = self._group_flush, None
        if fut is not None:
            self._spawn(self._group_flush_pass(fut))

    async def _group_flush_pass(self, fut: asyncio.Future[None]) -> None:
        try:
            await self.flush_due()
        except Exception as e:
            log.error("group flush failed: %s", e)
            if not fut.done():
                fut.set_exception(e)
            return
        if not fut.done():
            fut.set_result(None)

    def _on_log_dir_failure(self, reason: str) -> None:
        """The data dir failed: no more replication into it; producers and fetchers of
        its partitions get KAFKA_STORAGE_ERROR (see get_partition_or_error), waiters
        are woken to find that out."""
        self._spawn(self.shutdown_fetchers())
        for key in list(self.partitions):
            self.produce_waiters.notify(key)
            self.fetch_waiters.notify(key)

    def _on_one_log_dir_failure(self, base: Path, reason: str) -> None:
        """One of several data dirs failed (single node): the waiters of its
        partitions are woken to answer KAFKA_STORAGE_ERROR; the rest carry on."""
        for key in list(self.partitions):
            if self.logs.is_offline(*key):
                self.produce_waiters.notify(key)
                self.fetch_waiters.notify(key)

    async def shutdown_fetchers(self) -> None:
        # no fetcher may start after this: metadata still arriving while the broker
        # stops must not restart replication into logs about to be closed
        self.fetchers_stopped = True
        for f in list(self.fetchers.values()):
            await f.close()
        self.fetchers.clear()
        me = asyncio.current_task()
        for t in list(self._tasks):
            if t is me:
                continue
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    def close(self, broker_epoch: int = -1) -> None:
        """Close every log; the clean-shutdown markers name ``broker_epoch``."""
        for p in self.partitions.values():
            with contextlib.suppress(Exception):
                p.log.save_producer_state()
        self.logs.close_all(broker_epoch)
