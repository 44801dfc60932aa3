"""Deterministic, seeded simulation of the whole broker: replicated partitions, the group
coordinator and the transaction coordinator on one simulated clock and network.

It composes the three simulations below it rather than re-implementing them:

- ``sim_replication.ReplicationSim`` runs three brokers with the real controller and
  metadata image and, on each broker, real ``Partition``s over real ``Log``s on disk,
  with its network (delays, loss, cut links), crashes (kill, power loss, clean stop),
  pauses, isolations and its fault model. The simulated topic's partitions play three
  parts: ``DATA`` partitions are the data topic the transactional producers write,
  partition ``OFFSETS`` is ``__consumer_offsets`` partition 0 and ``TXN_STATE`` is
  ``__transaction_state`` partition 0 (one topic for the three keeps the replication
  simulation's machinery unchanged; every partition is replicated, elected and
  faulted on its own, as a topic's partitions are).
- Every broker process runs a real ``CoordinatorRuntime`` hosting a ``GroupShard`` and
  one hosting a ``TxnShard``, as the broker's shells do: when the broker becomes leader
  of the coordinator partition it schedules the load and loads the shard from its own
  replica's log (``ReplicaLog.read``, the broker's reader) a few ms later; when it stops
  leading (or dies) the shard is unloaded. The shard's writes are the broker's:
  ``ReplicaLog.append`` (and the transaction log's ``_TxnLog.append``, refused under
  min ISR) as the partition's leader, answered only once the high watermark passed them
  with the ISR at least ``min.insync.replicas`` (the shell's ``wait_committed``), so a
  failover loses an unacknowledged tail, as in Kafka.
- The consumers of ``sim_groups`` (classic and KIP-848) and the transactional producers
  of ``sim_txn`` are the clients. Their requests travel the simulated network to the
  broker they believe is the coordinator (found from a broker's metadata, kept until
  NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a timeout makes them look again;
  COORDINATOR_LOAD_IN_PROGRESS makes them retry; the committed offsets a member starts
  from are read directly from the sitting coordinator's shard, as ``sim_groups`` reads
  them). Transactional data is produced with
  acks=all to the data partitions' leaders (``append_as_leader``, sequence numbers,
  producer epochs). The ``MarkerJob`` effects of the transaction coordinator are sent,
  as WriteTxnMarkers requests over the network, to each data partition's leader, which
  decides with the broker's own ``marker_batch`` (producer and coordinator epoch
  fencing, min ISR) and appends the control batch acks=all; the job completes on the
  shard once every partition answered, and resumes on a new coordinator after a
  failover. A few marker requests are slow (0.1-1.5 s), so a deposed coordinator's
  marker may land after its successor's.

The clients stop ``QUIET_MS`` before the end and the coordinators' timers a little
later, so that the replication simulation's final convergence check (every replica
identical, HW at the log end) holds for the coordinator partitions too.

One checker per invariant (``checks`` selects them, for the mutation tests):

- ``offsets``: an acknowledged offset commit is never served lower later: the sitting
  coordinator (the leader of ``__consumer_offsets`` at the controller's current epoch,
  once loaded) never answers an OffsetFetch below it. (Stronger than "for the generation
  that committed it": the simulated consumers only move forward, from the committed
  offsets, so no later generation legitimately commits lower.)
- ``owners``: no partition is owned by two members of one generation (classic) or one
  member epoch (KIP-848), from the assignments the members were handed.
- ``live_owners``: no partition of a KIP-848 group owned by two live members at once.
- ``atomic``: a read_committed reader of the real data logs (the sitting leader's log up
  to its last stable offset, markers deciding each transaction) sees each transaction
  all or nothing: no transaction committed on one partition and aborted on another; a
  transaction whose EndTxn(commit) was acknowledged is never aborted and, once the
  cluster has healed, is committed on every partition its data was acknowledged on; one
  whose EndTxn(abort) was acknowledged is never committed. Transactional data is
  verified with the coordinator before it opens a transaction on a partition (KIP-890
  part 1), and a few produce requests arrive late, after the producer gave up on them.
- ``markers_once``: what Kafka guarantees of markers (a marker re-sent after a failover
  is a legitimate duplicate, a no-op closing nothing): on a partition, each
  transaction's data is closed by one marker (never reopened and closed again), a
  producer's markers never go back in producer epoch or in coordinator epoch (the
  fencing of zombie coordinators and producers), and under transaction version 2, where
  every transaction has its own producer epoch (KIP-890 part 2), one epoch's markers all
  have one outcome. (Before version 2 one epoch spans many transactions, and a marker of
  a transaction that wrote nothing to the partition closes nothing there whatever its
  outcome, so the log alone cannot tell a wrong duplicate from a legitimate one.)

The replication simulation's own invariants (``committed``, ``isr``, ``epochs``,
``acked``) and its convergence check run too. A failure raises ``InvariantViolation``
naming the seed; ``run_broker_schedule(seed)`` replays it exactly.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from jocko_py.broker.coordinator.runtime import CoordinatorRuntime, LogRecord
from jocko_py.broker.coordinator.shell import ReplicaLog
from jocko_py.broker.group.shard import GroupShard
from jocko_py.broker.partition import Partition, Role
from jocko_py.broker.txn.coordinator import _TxnLog, marker_batch
from jocko_py.broker.txn.shard import MarkerJob, TxnAnswer, TxnShard
from jocko_py.commitlog.errors import OffsetOutOfRangeError
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode as E
from tests.cluster import sim_replication as sr
from tests.cluster.sim_replication import Broker, InvariantViolation, ReplicationSim, SimParams
from tests.groups import sim_groups as sg
from tests.txn import sim_txn as st

DATA = 3  # data partitions 0..2
OFFSETS = DATA  # __consumer_offsets-0
TXN_STATE = DATA + 1  # __transaction_state-0
OFFSETS_TOPIC, TXN_TOPIC = "__consumer_offsets", "__transaction_state"
BROKER_CHECKS = frozenset({"offsets", "owners", "live_owners", "atomic", "markers_once"})
ALL_CHECKS = sr.ALL_CHECKS | BROKER_CHECKS
CLIENT_TIMEOUT_MS = 2500  # request.timeout.ms of the simulated clients (a JoinGroup waits)
MARKER_TIMEOUT_MS = 1000
# produce errors the producer retries (with the same batch: same sequence numbers)
RETRIABLE = frozenset({E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                       E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.KAFKA_STORAGE_ERROR})
# the share of inter-broker marker requests delayed by 0.1-1.5 s
SLOW_SHARE = 0.05
# the clients stop this long before the end, for the logs to converge
QUIET_MS = 2000  # the coordinator re-sends a marker without an answer by then

__all__ = ["ALL_CHECKS", "BrokerSim", "InvariantViolation", "broker_schedule_params",
           "run_broker_schedule"]


def broker_schedule_params(seed: int, calm: bool = True) -> SimParams:
    """The replication parameters of schedule ``seed``: three brokers, min ISR 2 (the
    coordinators' acks=all writes mean something), the data and coordinator partitions,
    the rest drawn as the replication simulation draws them. ``calm=False``: the fault
    rates as drawn before they were calmed (the first regression seeds)."""
    p = sr.schedule_params(seed)
    if not calm:
        return replace(p, brokers=3, partitions=DATA + 2, min_isr=2, chaos_ms=4000,
                       heal_ms=5000)
    # calmer than the replication simulation's draws: with min ISR 2 on three brokers,
    # its fastest fault rates keep most partitions under min ISR and the coordinators'
    # writes refused, and few transactions would finish
    r = random.Random(seed ^ 0xB40C)
    return replace(p, brokers=3, partitions=DATA + 2, min_isr=2, chaos_ms=5000,
                   heal_ms=4500, fault_every_ms=r.choice(((80, 400), (200, 800), (400, 1500))),
                   overlaps=r.random() < 0.25)


class _Replicas:
    """What ``ReplicaLog`` needs of the replica manager, over one simulated broker."""

    def __init__(self, b: Broker, part: int) -> None:
        self.b = b
        self.part = part

    def get(self, topic: str, idx: int) -> Partition | None:
        return self.b.parts.get(self.part) if idx == 0 else None

    def notify_append(self, p: Partition) -> None:
        pass


class _Sitting:
    """The coordinator a reader asks, for the direct reads of ``sim_groups``: the
    runtime of the broker that leads the partition at the controller's current epoch."""

    def __init__(self, sim: BrokerSim, part: int,
                 runtimes: Callable[[], dict[int, CoordinatorRuntime[Any]]]) -> None:
        self.sim = sim
        self.part = part
        self.runtimes = runtimes

    def shard(self, _idx: int) -> Any:
        bid = self.sim.sitting_leader(self.part)
        if bid is None:
            return None
        return self.runtimes()[bid].shard(0)

    def status(self, _idx: int) -> E:
        return E.NONE if self.shard(0) is not None else E.NOT_COORDINATOR


class Consumers(sg.GroupSim):
    """``sim_groups``' members, their requests sent to the brokers of ``BrokerSim``."""

    def __init__(self, world: BrokerSim, seed: int, params: sg.SimParams) -> None:
        super().__init__(seed, params)
        self.world = world
        self.runtime = cast(Any, _Sitting(world, OFFSETS, lambda: world.group_rt))

    def write(self, m: sg.Member, op: Callable[[GroupShard, int], Any],
              then: Callable[[Any, E], None]) -> None:
        m.waiting = True
        incarnation = m.incarnation

        def answer(resp: Any, err: E) -> None:
            if m.incarnation != incarnation:
                return  # an answer to a process that crashed since
            m.waiting = False
            then(resp, err)

        def serve(b: Broker, reply: Callable[[Any, E], None]) -> None:
            self.world.group_rt[b.bid].write(0, op, reply, self.world.now)

        self.world.request(("group", m.name), OFFSETS, serve, answer)

    def failover(self) -> None:  # the brokers fail over, not a simulated log
        pass

    def maybe_elect(self) -> None:
        pass


class Producers(st.TxnSim):
    """``sim_txn``'s transactional producers, on the brokers of ``BrokerSim``: their
    requests go over the network, their data to the real data partitions."""

    def __init__(self, world: BrokerSim, seed: int, params: st.SimParams) -> None:
        super().__init__(seed, params)
        self.world = world
        self.runtime = cast(Any, _Sitting(world, TXN_STATE, lambda: world.txn_rt))
        self.seqs: dict[tuple[int, int, int], int] = {}  # (pid, epoch, partition) -> next
        self.acked_parts: dict[int, set[int]] = {}  # serial -> partitions acked its data
        self.acked_abort: set[int] = set()  # serials whose EndTxn(abort) was answered NONE
        self.produce_failed: set[str] = set()  # producers to re-initialise after this txn

    def write(self, pr: st.Producer, op: Callable[[int], Callable[[TxnShard, int], Any]],
              then: Callable[[TxnAnswer], None]) -> None:
        pr.waiting = True
        incarnation = pr.incarnation

        def answer(resp: Any, err: E) -> None:
            if pr.incarnation != incarnation:
                return
            pr.waiting = False
            if err == E.REQUEST_TIMED_OUT:
                err = E.COORDINATOR_NOT_AVAILABLE  # the client retries it
            then(resp if err == E.NONE and isinstance(resp, TxnAnswer)
                 else TxnAnswer(err if err != E.NONE else E.UNKNOWN_SERVER_ERROR))

        def serve(b: Broker, reply: Callable[[Any, E], None]) -> None:
            rt = self.world.txn_rt[b.bid]

            def attempt(fresh: int) -> None:
                def deliver(resp: Any, err: E) -> None:
                    if err == E.NONE and isinstance(resp, TxnAnswer) and resp.need_producer_id:
                        self.next_pid += 1  # the producer id manager's next block
                        attempt(self.next_pid)
                        return
                    reply(resp, err)
                rt.write(0, op(fresh), deliver, self.world.now)
            attempt(-1)

        self.world.request(("txn", pr.name), TXN_STATE, serve, answer)

    def act(self, pr: st.Producer) -> None:
        if pr.phase == "begin" and not (pr.waiting or pr.paused_until > self.now
                                        or pr.next_at > self.now):
            if not self.faults_on:
                return  # quiescing: no new transaction
            if pr.name in self.produce_failed:
                self.produce_failed.discard(pr.name)
                self.reinit(pr, "a produce failed: a new epoch resets the sequences")
                return
            pr.serial = self.next_serial
            self.next_serial += 1
            pr.parts = sorted(self.rnd.sample(range(DATA), self.rnd.randint(1, DATA)))
            pr.commit = self.rnd.random() < 0.8
            self.add(pr)
            return
        super().act(pr)

    def produce(self, pr: st.Producer) -> None:
        """The transaction's data, acks=all, one batch per partition; EndTxn once every
        partition answered (the producer flushes before committing)."""
        pr.waiting = True
        incarnation = pr.incarnation
        left = set(pr.parts)
        ok: set[int] = set()
        serial, pid, epoch = pr.serial, pr.pid, pr.epoch

        for i in pr.parts:
            key = (pid, epoch, i)
            seq = self.seqs.get(key, 0)
            batch = rb.build_batch(
                [rb.NewRecord(None, b"s%d" % serial, (), self.world.now)],
                producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                is_transactional=True)

            def answer(resp: Any, err: E, i: int = i, key: tuple[int, int, int] = key,
                       seq: int = seq) -> None:
                if pr.incarnation != incarnation or i not in left:
                    return
                left.discard(i)
                if err == E.NONE:
                    ok.add(i)
                    self.seqs[key] = seq + 1
                    self.acked_parts.setdefault(serial, set()).add(i)
                else:
                    self.note(f"{pr.name} produce of {serial} to {i}: {err.name}")
                    self.produce_failed.add(pr.name)
                if not left:
                    pr.waiting = False
                    if ok != set(pr.parts):
                        pr.commit = False
                    pr.phase = "end"
                    self.later(pr, 40)

            self.world.send_produce(i, batch, pr.tid, pr.v5, answer)

    def end(self, pr: st.Producer) -> None:
        """``sim_txn``'s EndTxn, remembering the acknowledged aborts too."""
        commit, serial, incarnation = pr.commit, pr.serial, pr.incarnation
        orig_then = self.write

        def write(pr2: st.Producer, op: Callable[[int], Callable[[TxnShard, int], Any]],
                  then: Callable[[TxnAnswer], None]) -> None:
            def noted(a: TxnAnswer) -> None:
                if a.error == E.NONE and not commit and pr.incarnation == incarnation:
                    self.acked_abort.add(serial)
                then(a)
            orig_then(pr2, op, noted)

        self.write = write  # type: ignore[method-assign]
        try:
            super().end(pr)
        finally:
            del self.write

    def on_effect(self, partition: int, effect: object) -> None:
        pass  # per broker: BrokerSim.start_markers

    def deliver_markers(self) -> None:
        pass

    def failover(self) -> None:
        pass

    def maybe_elect(self) -> None:
        pass


class _Scan:
    """The read_committed view of one data partition, read up to the LSO."""

    def __init__(self) -> None:
        self.cursor = 0
        self.open: dict[int, list[int]] = {}  # producer id -> serials of its open txn
        self.closed: dict[int, bool] = {}  # serial -> outcome here
        self.marker_outcome: dict[tuple[int, int], bool] = {}  # (pid, epoch) -> commit
        self.last_marker: dict[int, tuple[int, int]] = {}  # pid -> (epoch, coord epoch)


class BrokerSim(ReplicationSim):
    def __init__(self, seed: int, params: SimParams, root: Path,
                 checks: Iterable[str] = ALL_CHECKS) -> None:
        super().__init__(seed, params, root, checks)
        self.crng = random.Random(seed ^ 0xB40C3)  # the clients' and coordinators' stream
        self.group_rt: dict[int, CoordinatorRuntime[GroupShard]] = {}
        self.txn_rt: dict[int, CoordinatorRuntime[TxnShard]] = {}
        self.belief: dict[tuple[str, str], int] = {}  # client -> the coordinator it uses
        # acks=all waits of this layer: (broker, gen, partition, p, epoch, last, deadline, cb)
        self.waits: list[tuple[Broker, int, int, Partition, int, int, int,
                               Callable[[E], None]]] = []
        self.marker_jobs: dict[tuple[int, str], tuple[int, MarkerJob, int]] = {}
        self._token = 0
        self.connections: dict[int, list[Callable[[], None]]] = {}  # clients' requests
        self.verification = True  # transaction.partition.verification.enable
        gchecks = tuple(c for c in ("offsets", "owners", "live_owners") if c in self.checks)
        gp = sg.schedule_params(seed)
        self.consumers = Consumers(self, seed, replace(
            gp, p_failover=0.0, checks=gchecks,
            classic_members=min(gp.classic_members, 4), consumer_members=min(
                gp.consumer_members, 3)))
        tp = st.schedule_params(seed)
        self.producers = Producers(self, seed, replace(
            tp, p_failover=0.0, checks=tuple(c for c in ("atomic",) if c in self.checks),
            # a second producer of one transactional id (fencing the first) in a third of
            # the schedules: over the network two of them mostly fence each other
            ids=max(2, min(tp.ids, 3)), producers_per_id=1 + (tp.producers_per_id == 3)))
        self.scans = {i: _Scan() for i in range(DATA)}
        self.outcomes: dict[int, dict[int, bool]] = {}  # serial -> partition -> commit
        self.producers.outcome = self.outcomes  # sim_txn's EndTxn answer check reads it
        self.next_scan = 0
        # (producer id, epoch) of transaction version 2 markers: an epoch is one
        # transaction (KIP-890 part 2 bumps it on every EndTxn)
        self.tv2_epochs: set[tuple[int, int]] = set()

    # ------------------------------------------------------------------ brokers

    def new_runtimes(self, b: Broker) -> None:
        g: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            "group", lambda p: GroupShard(p, self.consumers.config,
                                          lambda: self.consumers.topics,
                                          self.consumers.new_id),
            ReplicaLog(cast(Any, _Replicas(b, OFFSETS)), OFFSETS_TOPIC))
        t: CoordinatorRuntime[TxnShard] = CoordinatorRuntime(
            "transaction", lambda p: TxnShard(p, self.producers.config),
            _TxnLog(cast(Any, _Replicas(b, TXN_STATE)), TXN_TOPIC))
        for rt, part in ((g, OFFSETS), (t, TXN_STATE)):
            rt.on_append = self._on_append(b, rt, part)
        t.on_effect = lambda _p, eff: self.start_markers(b, t, eff)
        self.group_rt[b.bid] = g
        self.txn_rt[b.bid] = t

    def _on_append(self, b: Broker, rt: CoordinatorRuntime[Any], part: int
                   ) -> Callable[[int, int], None]:
        def on_append(_idx: int, offset: int) -> None:
            p = b.parts[part]
            self.touched(p.log)

            def done(err: E) -> None:
                if err == E.NONE:
                    rt.committed(0, p.high_watermark)
                else:
                    rt.write_failed(0, offset, err)
            self.wait(b, part, p, offset, 5000, done)  # offsets.commit.timeout.ms
        return on_append

    def wait(self, b: Broker, part: int, p: Partition, last: int, timeout: int,
             cb: Callable[[E], None]) -> None:
        """``ReplicaManager.wait_replicated``: ``cb`` once the HW passed ``last`` (the
        ISR at least min ISR), or the error; nothing if the process died."""
        self.waits.append((b, b.gen, part, p, p.leader_epoch, last, self.now + timeout, cb))

    def resolve_waits(self) -> None:
        keep = []
        fire: list[tuple[Callable[[E], None], E]] = []
        for w in self.waits:
            b, gen, part, p, epoch, last, deadline, cb = w
            if not b.up or b.gen != gen or b.parts.get(part) is not p:
                continue
            if b.paused:
                keep.append(w)
                continue
            if p.high_watermark > last:
                fire.append((cb, E.NONE if len(p.isr) >= self.params.min_isr
                             else E.NOT_ENOUGH_REPLICAS_AFTER_APPEND))
            elif p.role is not Role.LEADER or p.leader_epoch != epoch:
                fire.append((cb, E.NOT_LEADER_OR_FOLLOWER))
            elif self.now > deadline:
                fire.append((cb, E.REQUEST_TIMED_OUT))
            else:
                keep.append(w)
        self.waits = keep
        for cb, err in fire:
            cb(err)

    def crash(self, b: Broker, *, power_loss: bool, clean_epoch: int | None = None) -> None:
        super().crash(b, power_loss=power_loss, clean_epoch=clean_epoch)
        for fail in self.connections.pop(b.bid, []):
            self.at(self.delay(), fail)  # (a request already answered ignores it)
        self.new_runtimes(b)  # the process is gone with its shards and their answers
        for key in [k for k in self.marker_jobs if k[0] == b.bid]:
            del self.marker_jobs[key]

    def sync_coordinators(self) -> None:
        """The replica manager's role listeners: load a shard on becoming leader of its
        partition, unload it on losing the leadership."""
        for b in self.brokers.values():
            if not b.up or b.paused:
                continue
            for part, rts in ((OFFSETS, self.group_rt), (TXN_STATE, self.txn_rt)):
                rt = cast(CoordinatorRuntime[Any], rts[b.bid])
                p = b.parts.get(part)
                ctx = rt.contexts.get(0)
                if p is None or p.role is not Role.LEADER:
                    if ctx is not None:
                        rt.unload(0)
                        self.note(f"b{b.bid} resigns as {rt.name} coordinator")
                    continue
                if ctx is None or ctx.epoch != p.leader_epoch:
                    rt.schedule_load(0, p.leader_epoch)
                    self.at(self.crng.randint(1, 30), self.for_process(
                        b, self._loader(b, rt, part, p.leader_epoch)))
                if ctx is not None and ctx.shard is not None:
                    rt.committed(0, p.high_watermark)  # the partition's HW listener
                if self.now < self.params.chaos_ms + self.params.heal_ms - QUIET_MS // 2:
                    # (then no timer writes: the logs converge for the final check)
                    rt.fire_due(self.now)

    def _loader(self, b: Broker, rt: CoordinatorRuntime[Any], part: int, epoch: int
                ) -> Callable[[], None]:
        def load() -> None:
            p = b.parts.get(part)
            if p is None or p.role is not Role.LEADER or p.leader_epoch != epoch:
                return
            reader = ReplicaLog(cast(Any, _Replicas(b, part)), "")
            recs: list[LogRecord] = [r for _, _, r in reader.read(0)]
            n = rt.load(0, epoch, recs, self.now, p.high_watermark)
            if n >= 0:
                self.count(f"{rt.name}_loads")
                self.note(f"b{b.bid} loads the {rt.name} coordinator at epoch {epoch}: "
                          f"{n} records, HW {p.high_watermark} LEO {p.log.log_end_offset}")
        return load

    def sitting_leader(self, part: int) -> int | None:
        img = self.partition_image(part)
        b = self.brokers.get(img.leader)
        if b is None or not b.up:
            return None
        p = b.parts.get(part)
        if p is None or p.role is not Role.LEADER or p.leader_epoch != img.leader_epoch:
            return None
        return b.bid

    # ------------------------------------------------------------------ clients' requests

    def client_lost(self, bid: int) -> bool:
        return not self.healing and self.crng.random() < self.params.loss / 4

    def slow_delay(self) -> int:
        """A broker-to-broker request's delay, now and then a slow one (a congested link,
        TCP retransmissions): a marker of a deposed coordinator may arrive after the
        new coordinator's."""
        if self.crng.random() < SLOW_SHARE:
            return self.crng.randint(100, 1500)
        return self.delay()

    def refused(self, b: Broker, fail: Callable[[], None]) -> bool:
        """A client's connection to ``b``: refused now if the process is down, reset
        when it dies with the request in it (the client sees a network error at once,
        not its timeout)."""
        if not b.up:
            self.at(self.delay(), fail)
            return True
        self.connections.setdefault(b.bid, []).append(fail)
        return False

    def request(self, client: tuple[str, str], part: int,
                serve: Callable[[Broker, Callable[[Any, E], None]], None],
                answer: Callable[[Any, E], None]) -> None:
        """A coordinator request: to the broker the client believes is the coordinator
        (FindCoordinator from a broker's metadata when it has none); the answer, an
        error or the client's timeout, once."""
        target = self.belief.get(client)
        if target is None:
            ups = [b for b in self.brokers.values() if b.up and b.image.topics]
            pimg = self.crng.choice(ups).image.partition(sr.TOPIC, part) if ups else None
            if pimg is None or pimg.leader < 0:
                self.at(50, lambda: answer(None, E.COORDINATOR_NOT_AVAILABLE))
                return
            target = self.belief[client] = pimg.leader
        done = [False]

        def finish(resp: Any, err: E) -> None:
            if done[0]:
                return
            done[0] = True
            if err in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.REQUEST_TIMED_OUT):
                self.belief.pop(client, None)
            answer(resp, err)

        self.at(CLIENT_TIMEOUT_MS, lambda: finish(None, E.REQUEST_TIMED_OUT))
        b = self.brokers[target]
        if self.refused(b, lambda: finish(None, E.COORDINATOR_NOT_AVAILABLE)) \
                or self.client_lost(target):
            return

        def arrive() -> None:
            gen = b.gen

            def reply(resp: Any, err: E) -> None:
                if b.gen != gen or not b.up or self.client_lost(target):
                    return  # the connection died with the process
                self.at(self.delay(), lambda: finish(resp, err))
            serve(b, reply)

        self.at(self.delay(), self.for_process(b, arrive))

    def send_produce(self, part: int, batch: bytes, tid: str, abortable: bool,
                     answer: Callable[[Any, E], None]) -> None:
        """A transactional Produce (acks=all) of ``tid`` to the leader of ``part`` as the
        client's metadata has it (sometimes stale); retried with the same batch on a
        retriable error. ``abortable``: the producer knows TRANSACTION_ABORTABLE."""
        done = [False]
        deadline = self.now + CLIENT_TIMEOUT_MS

        def finish(resp: Any, err: E) -> None:
            if done[0]:
                return
            if err in RETRIABLE and self.now + 50 < deadline:
                # the producer refreshes its metadata and sends the same batch again
                self.at(self.crng.randint(10, 50), lambda: self._send_produce(
                    part, batch, tid, abortable, finish, stale=False))
                return
            done[0] = True
            answer(resp, err)

        self.at(CLIENT_TIMEOUT_MS, lambda: finish(None, E.REQUEST_TIMED_OUT))
        self._send_produce(part, batch, tid, abortable, finish, stale=True)

    def _send_produce(self, part: int, batch: bytes, tid: str, abortable: bool,
                      finish: Callable[[Any, E], None], stale: bool) -> None:
        target = self.partition_image(part).leader
        if stale and self.crng.random() < 0.1:
            target = self.crng.choice(list(self.brokers))
        b = self.brokers.get(target)
        if b is None or self.refused(b, lambda: finish(None, E.NOT_LEADER_OR_FOLLOWER)) \
                or self.client_lost(target):
            return

        def arrive() -> None:
            gen = b.gen

            def reply(err: E) -> None:
                if b.gen == gen and b.up and not self.client_lost(target):
                    self.at(self.delay(), lambda: finish(None, err))
            p = b.parts.get(part)
            if p is None or p.role is not Role.LEADER:
                reply(E.NOT_LEADER_OR_FOLLOWER)
                return
            self.produce_verified(b, p, part, batch, tid, abortable, reply)

        # now and then a request stuck in a congested link reaches the broker after the
        # producer gave up on it (and perhaps ended the transaction)
        late = self.crng.random() < SLOW_SHARE
        self.at(self.crng.randint(100, 3000) if late else self.delay(),
                self.for_process(b, arrive))

    def produce_verified(self, b: Broker, p: Partition, part: int, batch: bytes, tid: str,
                         abortable: bool, reply: Callable[[E], None]) -> None:
        """``ReplicaManager.append_records`` for one transactional batch: one that would
        open its producer's transaction here is first verified with the transaction
        coordinator (KIP-890 part 1, ``_verify_transactional``: the producer state's
        verification entry and token, the coordinator's ``TxnShard.verify``), then
        appended as leader and answered once replicated."""
        def append() -> None:
            if b.parts.get(part) is not p or p.role is not Role.LEADER:
                reply(E.NOT_LEADER_OR_FOLLOWER)
                return
            r = p.append_as_leader(batch, -1, 1 << 20, self.now)
            self.touched(p.log)
            if r.error != E.NONE:
                reply(r.error)
                return
            self.wait(b, part, p, r.last_offset, 5000, reply)

        h = rb.parse_header(memoryview(batch))
        ps = p.log.producer_state
        if not self.verification or ps.in_transaction(h.producer_id, h.producer_epoch):
            append()
            return
        ps.begin_verification(h.producer_id, h.producer_epoch, h.base_sequence)
        token = ps.verification_token(h.producer_id)

        def verified(err: E) -> None:
            if err == E.NONE and ps.verification_token(h.producer_id) != token:
                err = E.TRANSACTION_ABORTABLE  # a marker ended it while we asked
            if err == E.NONE:
                append()
                return
            if err in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS,
                       E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.REQUEST_TIMED_OUT):
                err = E.NOT_ENOUGH_REPLICAS
            elif err == E.PRODUCER_FENCED:
                err = E.INVALID_PRODUCER_EPOCH
            elif err == E.TRANSACTION_ABORTABLE and abortable:
                pass
            elif err != E.INVALID_PRODUCER_EPOCH:
                err = E.INVALID_TXN_STATE
            self.count(f"verify_{err.name}")
            reply(err)

        self.verify_txn(b, tid, h.producer_id, h.producer_epoch, part, verified)

    def verify_txn(self, b: Broker, tid: str, pid: int, epoch: int, part: int,
                   cb: Callable[[E], None]) -> None:
        """AddPartitionsToTxn (VerifyOnly) from the partition leader ``b`` to the
        coordinator its metadata names; the answer (or a timeout) comes back to ``b``."""
        done = [False]

        def answer(err: E) -> None:
            if not done[0]:
                done[0] = True
                cb(err)

        self.at(MARKER_TIMEOUT_MS, self.for_process(b, lambda: answer(E.REQUEST_TIMED_OUT)))
        pimg = b.image.partition(sr.TOPIC, TXN_STATE)
        t = self.brokers.get(pimg.leader if pimg is not None else -1)
        if t is None or not t.up or self.lost(b.bid, t.bid):
            return

        def at_coordinator() -> None:
            out, err = self.txn_rt[t.bid].read(0, lambda s: s.verify(
                tid, pid, epoch, [(st.TOPIC, part)]))
            if out is not None:
                err = out.get((st.TOPIC, part), E.UNKNOWN_SERVER_ERROR)
            if not self.lost(t.bid, b.bid):
                self.at(0 if t is b else self.slow_delay(),
                        self.for_process(b, lambda: answer(err)))

        self.at(0 if t is b else self.slow_delay(), self.for_process(t, at_coordinator))

    # ------------------------------------------------------------------ markers

    def start_markers(self, b: Broker, rt: CoordinatorRuntime[TxnShard], effect: object
                      ) -> None:
        """The transaction coordinator's marker writer (``_start_markers``/``_complete``):
        one WriteTxnMarkers per data partition, re-sent until answered, then
        ``complete`` on the shard, while this process still coordinates at that epoch."""
        if not isinstance(effect, MarkerJob):
            return
        ctx = rt.contexts.get(0)
        if ctx is None:
            return
        key = (b.bid, effect.transactional_id)
        cur = self.marker_jobs.get(key)
        if cur is not None and cur[0] == ctx.epoch and cur[1] == effect:
            return  # already being written
        self._token += 1
        token = self._token
        self.marker_jobs[key] = (ctx.epoch, effect, token)
        epoch = ctx.epoch
        self.note(f"b{b.bid} markers {'COMMIT' if effect.commit else 'ABORT'} "
                  f"pid={effect.producer_id} epoch={effect.producer_epoch} to "
                  f"{sorted(i for _, i in effect.partitions)} (coordinator epoch {epoch})")
        pending = {i for _, i in effect.partitions}
        gen = b.gen

        def current() -> bool:
            c = rt.contexts.get(0)
            return (b.gen == gen and self.txn_rt.get(b.bid) is rt and c is not None
                    and c.epoch == epoch and self.marker_jobs.get(key, (0, 0, 0))[2] == token)

        def complete() -> None:
            if not current():
                return

            def retried(resp: Any, err: E) -> None:
                if err == E.NONE and isinstance(resp, TxnAnswer):
                    err = resp.error
                if err in (E.NONE, E.NOT_COORDINATOR):
                    if self.marker_jobs.get(key, (0, 0, 0))[2] == token:
                        del self.marker_jobs[key]
                    return
                self.at(50, self.for_process(b, complete))
            job = effect
            rt.write(0, lambda s, now: s.complete(now, job.transactional_id, job.producer_id,
                                                  job.producer_epoch, job.commit),
                     retried, self.now)

        def send(i: int, backoff: int) -> None:
            if not current() or i not in pending:
                return
            answered = [False]

            def on_answer(err: E) -> None:
                if answered[0] or not current():
                    return
                answered[0] = True
                if err in (E.NONE, E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED):
                    pending.discard(i)
                    if not pending:
                        complete()
                else:
                    self.at(backoff, self.for_process(b, lambda: send(i, min(backoff * 2,
                                                                             1000))))
            self.at(MARKER_TIMEOUT_MS, self.for_process(
                b, lambda: on_answer(E.REQUEST_TIMED_OUT)))
            pimg = b.image.partition(sr.TOPIC, i)
            leader = pimg.leader if pimg is not None else -1
            t = self.brokers.get(leader)
            if t is None or not t.up or self.lost(b.bid, leader):
                return
            self.at(0 if leader == b.bid else self.slow_delay(), self.for_process(
                t, lambda: self.write_marker(t, i, effect, epoch, b, on_answer)))

        if not pending:
            complete()
        for i in sorted(pending):
            send(i, 20)

    def write_marker(self, t: Broker, i: int, job: MarkerJob, coord_epoch: int,
                     coordinator: Broker, on_answer: Callable[[E], None]) -> None:
        """The data partition's leader: the broker's own decision (``marker_batch``),
        the control batch appended as leader and answered once replicated (acks=all)."""
        gen = t.gen

        def reply(err: E) -> None:
            if t.gen != gen or not t.up or self.lost(t.bid, coordinator.bid):
                return
            self.at(0 if t is coordinator else self.delay(),
                    self.for_process(coordinator, lambda: on_answer(err)))
        p = t.parts.get(i)
        if p is None or p.role is not Role.LEADER:
            reply(E.NOT_LEADER_OR_FOLLOWER)
            return
        err, batch = marker_batch(p, job.producer_id, job.producer_epoch, job.commit,
                                  coord_epoch, job.transaction_version, self.now)
        if batch is None:
            self.note(f"b{t.bid} p{i}: marker pid={job.producer_id} refused: {err.name}")
            reply(err)
            return
        r = p.append_internal(batch, self.now)
        self.touched(p.log)
        if r.error != E.NONE:
            reply(r.error)
            return
        self.count("markers")
        if job.transaction_version >= 2:
            self.tv2_epochs.add((job.producer_id, job.producer_epoch))
        self.note(f"b{t.bid} p{i}: {'COMMIT' if job.commit else 'ABORT'} marker "
                  f"pid={job.producer_id} epoch={job.producer_epoch} at {r.last_offset}")
        self.wait(t, i, p, r.last_offset, 10_000, reply)

    # ------------------------------------------------------------------ the read_committed view

    def scan(self) -> None:
        for i in range(DATA):
            bid = self.sitting_leader(i)
            if bid is None:
                continue
            p = self.brokers[bid].parts[i]
            self.scan_partition(i, p)

    def scan_partition(self, i: int, p: Partition) -> None:
        sc = self.scans[i]
        upto = p.last_stable_offset
        while sc.cursor < upto:
            try:
                info = p.log.read(sc.cursor, 1 << 20, max_offset=upto, min_one_batch=True)
            except OffsetOutOfRangeError:
                return
            data = bytes(info.records) if info.records is not None else b""
            if not data:
                return
            for h, view in rb.split_batches(data, validate_crc=True):
                if h.next_offset <= sc.cursor:
                    continue
                if h.next_offset > upto:
                    return
                self.scan_batch(i, sc, h, view)
                sc.cursor = h.next_offset

    def scan_batch(self, i: int, sc: _Scan, h: rb.RecordBatchHeader, view: memoryview) -> None:
        pid = h.producer_id
        if h.is_control:
            ctype, coord_epoch = rb.control_marker(view, h)
            commit = ctype == rb.ControlType.COMMIT
            if "markers_once" in self.checks:
                prev = sc.marker_outcome.get((pid, h.producer_epoch))
                if prev is not None and prev != commit \
                        and (pid, h.producer_epoch) in self.tv2_epochs:
                    self.fail("markers_once", f"p{i}: producer {pid} epoch {h.producer_epoch}"
                              f" has a {'COMMIT' if prev else 'ABORT'} marker and a "
                              f"{'COMMIT' if commit else 'ABORT'} one (at {h.base_offset})")
                last = sc.last_marker.get(pid)
                if last is not None and (h.producer_epoch < last[0] or coord_epoch < last[1]):
                    self.fail("markers_once", f"p{i}: producer {pid}'s marker at "
                              f"{h.base_offset} (epoch {h.producer_epoch}, coordinator epoch "
                              f"{coord_epoch}) follows one of epoch {last[0]}, coordinator "
                              f"epoch {last[1]}")
            sc.marker_outcome[(pid, h.producer_epoch)] = commit
            sc.last_marker[pid] = (h.producer_epoch, coord_epoch)
            for serial in sc.open.pop(pid, []):
                if serial in sc.closed and "markers_once" in self.checks:
                    self.fail("markers_once", f"p{i}: transaction {serial}'s data closed a "
                              f"second time (by the marker at {h.base_offset})")
                sc.closed[serial] = commit
                self.on_outcome(serial, i, commit)
            return
        if not h.is_transactional:
            return
        for rec in rb.decode_records(view, h):
            if rec.value and rec.value.startswith(b"s"):
                serial = int(rec.value[1:])
                held = sc.open.setdefault(pid, [])
                if serial not in held:
                    held.append(serial)

    def on_outcome(self, serial: int, i: int, commit: bool) -> None:
        got = self.outcomes.setdefault(serial, {})
        got[i] = commit
        self.count("txn_closed")
        if "atomic" not in self.checks:
            return
        if len(set(got.values())) > 1:
            self.fail("atomic", f"transaction {serial} is committed on some partitions and "
                      f"aborted on others: {got}")
        if not commit and serial in self.producers.acked_commit:
            self.fail("atomic", f"transaction {serial} was answered NONE to its commit but "
                      f"is aborted on partition {i}")
        if commit and serial in self.producers.acked_abort:
            self.fail("atomic", f"transaction {serial} was answered NONE to its abort but "
                      f"is committed on partition {i}")

    def check_final(self) -> None:
        self.scan()
        if "atomic" not in self.checks:
            return
        for serial in sorted(self.producers.acked_commit):
            got = self.outcomes.get(serial, {})
            missing = sorted(i for i in self.producers.acked_parts.get(serial, set())
                             if got.get(i) is not True)
            if missing:
                self.fail("atomic", f"transaction {serial} was answered NONE to its commit "
                          f"but its data is not committed on partition(s) {missing} after "
                          f"healing ({got})")

    # ------------------------------------------------------------------ run

    def produce(self) -> None:
        """The replication simulation's plain produce, to the data partitions only."""
        saved = self.params.partitions
        self.params.partitions = DATA
        try:
            super().produce()
        finally:
            self.params.partitions = saved

    def setup(self) -> None:
        for b in self.brokers.values():
            self.new_runtimes(b)
        super().setup()
        self.at(50, self.client_tick)

    def heal(self) -> None:
        super().heal()
        self.producers.faults_on = False  # no new transaction: what was started completes
        for pr in self.producers.producers:
            pr.paused_until = -1

    def client_tick(self) -> None:
        g, t = self.consumers, self.producers
        g.now = t.now = self.now
        if not self.healing:
            g.faults()
            t.faults()
        for m in g.rnd.sample(g.members, len(g.members)):
            g.act(m)
        for pr in t.rnd.sample(t.producers, len(t.producers)):
            t.act(pr)
        g.check_offsets()
        g.check_live_owners()
        if self.now < self.params.chaos_ms + self.params.heal_ms - QUIET_MS:
            self.at(self.crng.randint(5, 40), self.client_tick)

    def after_event(self) -> None:
        self.resolve_acks()
        self.resolve_waits()
        self.sync_coordinators()
        self.check()
        if self.now >= self.next_scan:
            self.scan()
            self.next_scan = self.now + 50

    def run(self) -> None:
        try:
            super().run()
            self.check_final()
        except (sg.InvariantViolation, st.InvariantViolation) as e:
            msg = str(e)
            kind = msg.split("check=", 1)[1].split(":", 1)[0] if "check=" in msg else "client"
            tail = "\n  ".join(self.trace[-25:])
            raise InvariantViolation(kind, f"seed={self.seed} t={self.now}ms {msg}\n"
                                           f"  broker events:\n  {tail}") from None


def run_broker_schedule(seed: int, params: SimParams | None = None,
                        checks: Iterable[str] = ALL_CHECKS) -> BrokerSim:
    """Replay one schedule; raises InvariantViolation naming the seed on failure."""
    root = Path(tempfile.mkdtemp(prefix=f"jocko-broker-{seed}-", dir=sr._TMP_ROOT))
    sim = BrokerSim(seed, params if params is not None else broker_schedule_params(seed),
                    root, checks)
    try:
        sim.run()
    finally:
        sim.close()
        shutil.rmtree(root, ignore_errors=True)
    return sim
