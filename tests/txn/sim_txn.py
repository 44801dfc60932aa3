"""Seeded simulation of the transaction coordinator on the coordinator runtime.

The real ``CoordinatorRuntime`` and ``TxnShard`` (``jocko_py/broker/coordinator/``,
``jocko_py/broker/txn/shard.py``) run on one simulated clock with an in-memory
``__transaction_state`` partition whose high watermark follows a (simulated)
replication delay (``SimLog`` of the group simulation). Simulated transactional
producers (a few per transactional id, so they fence each other; some KIP-890 part 2
clients, EndTxn v5) initialise, add partitions, produce to them, commit or abort, retry
what they are told to retry, pause past their transaction timeout (a zombie that comes
back), and sometimes give up waiting for a commit's answer and abort instead. The
markers are written outside the shard, as the broker's shell does: the ``MarkerJob``
effect of a committed prepare is delivered to each data partition after a random delay
(sometimes lost and sent again), then ``complete`` runs on the shard. The coordinator
fails over: the shard is unloaded, the log loses its uncommitted tail (or part of it),
marker jobs of the old coordinator epoch die (or arrive late), and a new shard loads
from the log after a delay and resumes the markers of prepared transactions.

A data partition keeps, per producer id, its open transaction (the producer's batches
since the last marker), the highest epoch and coordinator epoch it has seen; a marker
below either is refused, a marker closes the open transaction (its outcome recorded)
or, with none open, is a no-op, as a Kafka partition leader does.

One checker per invariant:

- ``atomic``: a transaction is all or nothing: every partition it wrote gets one marker
  closing it, all with the same outcome; one that was answered NONE to EndTxn(commit)
  is never aborted anywhere, and once the run quiesces is committed everywhere.

Seeds: ``run_schedule(seed)``; a failure raises ``InvariantViolation`` naming the seed,
the checker and the last events.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jocko_py.broker.coordinator.runtime import CoordinatorRuntime, LogRecord
from jocko_py.broker.txn.shard import MarkerJob, TxnAnswer, TxnConfig, TxnShard
from jocko_py.protocol.errors import ErrorCode as E
from tests.groups.sim_groups import SimLog

TOPIC = "t"
PARTITIONS = 5
TIMEOUT_MS = 1500
CHECKS = ("atomic",)


class InvariantViolation(AssertionError):
    pass


@dataclass
class SimParams:
    steps: int = 1500
    ids: int = 3
    producers_per_id: int = 2
    v5_share: float = 0.5
    replication_delay_ms: tuple[int, int] = (0, 60)
    marker_delay_ms: tuple[int, int] = (1, 80)
    p_marker_lost: float = 0.05
    p_pause: float = 0.003
    p_give_up: float = 0.05  # a commit whose answer the producer stops waiting for
    p_failover: float = 0.003
    checks: tuple[str, ...] = CHECKS


def schedule_params(seed: int) -> SimParams:
    rnd = random.Random(seed * 7919 + 3)
    return SimParams(
        ids=rnd.randint(1, 4), producers_per_id=rnd.randint(1, 3),
        v5_share=rnd.choice((0.0, 0.5, 1.0)),
        replication_delay_ms=(0, rnd.choice((0, 30, 150))),
        marker_delay_ms=(1, rnd.choice((10, 80, 400))),
        p_failover=rnd.choice((0.0, 0.003, 0.008)),
        p_pause=rnd.choice((0.0, 0.003, 0.008)))


# -- the data partitions ---------------------------------------------------------------


@dataclass
class DataPartition:
    index: int
    # producer id -> (epoch, transaction serial) of the batches since its last marker
    open: dict[int, tuple[int, int]] = field(default_factory=dict)
    epoch: dict[int, int] = field(default_factory=dict)
    coordinator_epoch: dict[int, int] = field(default_factory=dict)

    def produce(self, pid: int, epoch: int, serial: int) -> E:
        if epoch < self.epoch.get(pid, -1):
            return E.INVALID_PRODUCER_EPOCH
        cur = self.open.get(pid)
        if cur is not None and cur[1] != serial:
            # a batch of a new transaction while the last one has no marker: the
            # coordinator let the producer start it too early
            return E.INVALID_TXN_STATE
        self.epoch[pid] = epoch
        self.open[pid] = (epoch, serial)
        return E.NONE

    def marker(self, pid: int, epoch: int, coord_epoch: int, commit: bool
               ) -> tuple[E, int | None]:
        """(error, serial of the transaction it closed)."""
        if coord_epoch < self.coordinator_epoch.get(pid, -1):
            return E.TRANSACTION_COORDINATOR_FENCED, None
        if epoch < self.epoch.get(pid, -1):
            return E.INVALID_PRODUCER_EPOCH, None
        self.epoch[pid] = epoch
        self.coordinator_epoch[pid] = coord_epoch
        cur = self.open.pop(pid, None)
        return E.NONE, None if cur is None else cur[1]


# -- the producers ------------------------------------------------------------------------


@dataclass
class Producer:
    name: str
    tid: str
    v5: bool
    pid: int = -1
    epoch: int = -1
    phase: str = "init"  # init, begin, produce, end
    serial: int = -1
    parts: list[int] = field(default_factory=list)
    commit: bool = True
    waiting: bool = False
    incarnation: int = 0
    paused_until: int = -1
    next_at: int = 0


class TxnSim:
    def __init__(self, seed: int, params: SimParams) -> None:
        self.seed = seed
        self.p = params
        self.rnd = random.Random(seed)
        self.now = 1_000_000
        self.log = SimLog(random.Random(seed + 1), params.replication_delay_ms)
        self.config = TxnConfig(max_timeout_ms=60_000, abort_interval_ms=200,
                                id_expiration_ms=3_600_000, expiry_interval_ms=600_000)
        self.epoch = 0
        self.runtime = self._new_runtime()
        self.events: deque[str] = deque(maxlen=80)
        self.parts = [DataPartition(i) for i in range(PARTITIONS)]
        self.producers = [
            Producer(f"p{i}.{j}", f"tx{i}", self.rnd.random() < params.v5_share)
            for i in range(params.ids) for j in range(params.producers_per_id)]
        self.next_pid = 5000
        self.next_serial = 0
        # the markers in flight: (due, seq, partition, job, coordinator epoch)
        self.deliveries: list[tuple[int, int, int, MarkerJob, int]] = []
        self.jobs: dict[tuple[str, MarkerJob], tuple[int, set[int]]] = {}
        self.seq = 0
        self.down_until = -1
        self.faults_on = True
        # checkers' memory
        self.wrote: dict[int, set[int]] = {}  # serial -> partitions with its batches
        self.outcome: dict[int, dict[int, bool]] = {}  # serial -> partition -> commit
        self.acked_commit: set[int] = set()
        self.stats: dict[str, int] = {k: 0 for k in (
            "commits", "aborts", "fenced", "concurrent", "failovers", "pauses", "give_ups",
            "markers", "resumed")}

    def _new_runtime(self) -> CoordinatorRuntime[TxnShard]:
        rt: CoordinatorRuntime[TxnShard] = CoordinatorRuntime(
            "transaction", lambda p: TxnShard(p, self.config), self.log)
        rt.on_effect = self.on_effect
        return rt

    def note(self, what: str) -> None:
        self.events.append(f"t={self.now} {what}")

    def fail(self, check: str, what: str) -> None:
        raise InvariantViolation(
            f"seed={self.seed} check={check}: {what}\nlast events:\n  "
            + "\n  ".join(self.events))

    # -- the coordinator and its marker sending ---------------------------------------

    def write(self, pr: Producer, op: Callable[[int], Callable[[TxnShard, int], Any]],
              then: Callable[[TxnAnswer], None]) -> None:
        """Run ``op(fresh producer id)`` as the service does; ``then`` gets the answer."""
        pr.waiting = True
        incarnation = pr.incarnation

        def attempt(fresh: int) -> None:
            def deliver(resp: Any, err: E) -> None:
                if pr.incarnation != incarnation:
                    return  # an answer nobody waits for any more
                if err == E.NONE and isinstance(resp, TxnAnswer) and resp.need_producer_id:
                    self.next_pid += 1
                    attempt(self.next_pid)
                    return
                pr.waiting = False
                then(resp if err == E.NONE and isinstance(resp, TxnAnswer)
                     else TxnAnswer(err if err != E.NONE else E.UNKNOWN_SERVER_ERROR))
            self.runtime.write(0, op(fresh), deliver, self.now)

        attempt(-1)

    def on_effect(self, partition: int, effect: object) -> None:
        if not isinstance(effect, MarkerJob):
            return
        ctx = self.runtime.contexts.get(partition)
        if ctx is None:
            return
        key = (effect.transactional_id, effect)
        cur = self.jobs.get(key)
        if cur is not None and cur[0] == ctx.epoch:
            return  # already being written
        self.jobs[key] = (ctx.epoch, {i for t, i in effect.partitions})
        self.note(f"markers {effect} start (coordinator epoch {ctx.epoch})")
        for _t, i in sorted(effect.partitions):
            self._send(i, effect, ctx.epoch)
        if not effect.partitions:
            self._done(effect, ctx.epoch)

    def _send(self, partition: int, job: MarkerJob, coord_epoch: int) -> None:
        self.seq += 1
        self.deliveries.append((self.now + self.rnd.randint(*self.p.marker_delay_ms),
                                self.seq, partition, job, coord_epoch))

    def deliver_markers(self) -> None:
        due = [d for d in self.deliveries if d[0] <= self.now]
        self.deliveries = [d for d in self.deliveries if d[0] > self.now]
        for _, _, i, job, coord_epoch in sorted(due, key=lambda d: d[:2]):
            if i < 0:  # a completion to write again
                self._done(job, coord_epoch)
                continue
            key = (job.transactional_id, job)
            cur = self.jobs.get(key)
            if self.faults_on and self.rnd.random() < self.p.p_marker_lost:
                if cur is not None and cur[0] == coord_epoch:
                    self._send(i, job, coord_epoch)  # lost on the way: sent again
                continue
            # (a marker of a deposed coordinator may still arrive: it is written or
            # refused by the partition as any other)
            err, serial = self.parts[i].marker(job.producer_id, job.producer_epoch,
                                               coord_epoch, job.commit)
            self.stats["markers"] += 1
            self.note(f"marker {'COMMIT' if job.commit else 'ABORT'} pid={job.producer_id} "
                      f"epoch={job.producer_epoch} on {i}: {err.name} closes {serial}")
            if serial is not None:
                self.on_outcome(serial, i, job.commit)
            if cur is None or cur[0] != coord_epoch:
                continue
            cur[1].discard(i)
            if not cur[1]:
                self._done(job, coord_epoch)

    def _done(self, job: MarkerJob, coord_epoch: int) -> None:
        def retry(resp: Any, err: E) -> None:
            if err != E.NONE and err != E.NOT_COORDINATOR:
                self.seq += 1  # not written: try again later (as the shell does)
                self.deliveries.append((self.now + 50, self.seq, -1, job, coord_epoch))
            else:
                self.jobs.pop((job.transactional_id, job), None)

        ctx = self.runtime.contexts.get(0)
        if ctx is None or ctx.epoch != coord_epoch:
            return
        self.runtime.write(0, lambda s, now: s.complete(
            now, job.transactional_id, job.producer_id, job.producer_epoch, job.commit),
            retry, self.now)

    def failover(self) -> None:
        self.stats["failovers"] += 1
        self.note("coordinator fails over")
        self.runtime.unload(0)
        self.jobs.clear()  # the old coordinator's marker tasks stop (sent ones arrive)
        self.log.up = False
        self.log.fail_over()
        self.down_until = self.now + self.rnd.randint(50, 800)

    def maybe_elect(self) -> None:
        if self.runtime.status(0) != E.NOT_COORDINATOR or self.now < self.down_until:
            return
        self.epoch += 1
        self.log.up = True
        self.runtime = self._new_runtime()
        self.runtime.schedule_load(0, self.epoch)
        before = len(self.jobs)
        # the log as compaction may leave it: the last record of each id (replay keeps
        # the last one anyway), in their order
        last: dict[bytes, LogRecord] = {}
        for rec in self.log.records():
            last.pop(rec.key, None)
            last[rec.key] = rec
        self.runtime.load(0, self.epoch, list(last.values()), self.now, self.log.hw)
        self.stats["resumed"] += max(0, len(self.jobs) - before)
        self.note(f"coordinator elected (epoch {self.epoch}, {len(self.log.entries)} records)")

    # -- checkers -------------------------------------------------------------------------

    def on_outcome(self, serial: int, partition: int, commit: bool) -> None:
        if "atomic" not in self.p.checks:
            return
        got = self.outcome.setdefault(serial, {})
        if partition in got:
            self.fail("atomic", f"transaction {serial} got a second marker on partition "
                      f"{partition}")
        got[partition] = commit
        if len(set(got.values())) > 1:
            self.fail("atomic", f"transaction {serial} was committed on some partitions and "
                      f"aborted on others: {self.outcome_of(serial)}")
        if serial in self.acked_commit and not commit:
            self.fail("atomic", f"transaction {serial} was answered NONE to its commit but "
                      f"aborted on partition {partition}")

    def outcome_of(self, serial: int) -> dict[int, bool]:
        return self.outcome.get(serial, {})

    def check_complete(self) -> None:
        """After the run has quiesced: every acknowledged commit is committed on every
        partition it wrote, and no transaction is left open on a partition."""
        if "atomic" not in self.p.checks:
            return
        for serial in sorted(self.acked_commit):
            got = self.outcome_of(serial)
            missing = self.wrote.get(serial, set()) - {p for p, c in got.items() if c}
            if missing:
                self.fail("atomic", f"transaction {serial} was answered NONE to its commit "
                          f"but has no commit marker on partition(s) {sorted(missing)}")
        for dp in self.parts:
            for pid, (epoch, serial) in dp.open.items():
                if serial in self.acked_commit:
                    self.fail("atomic", f"transaction {serial} (pid {pid} epoch {epoch}) "
                              f"is still open on partition {dp.index}")

    # -- the producers ----------------------------------------------------------------

    def act(self, pr: Producer) -> None:
        if pr.waiting or pr.paused_until > self.now or pr.next_at > self.now:
            return
        if pr.phase == "init":
            if self.faults_on:
                self.init(pr)
        elif pr.phase == "begin":
            if not self.faults_on:
                return  # quiescing: no new transaction
            pr.serial = self.next_serial
            self.next_serial += 1
            pr.parts = sorted(self.rnd.sample(range(PARTITIONS), self.rnd.randint(1, 3)))
            pr.commit = self.rnd.random() < 0.8
            self.add(pr)
        elif pr.phase == "produce":
            self.produce(pr)
        elif pr.phase == "end":
            self.end(pr)

    def later(self, pr: Producer, ms: int = 20) -> None:
        pr.next_at = self.now + self.rnd.randint(1, ms)

    def reinit(self, pr: Producer, why: str) -> None:
        self.note(f"{pr.name} re-initialises: {why}")
        pr.phase = "init"
        self.later(pr, 100)

    def init(self, pr: Producer) -> None:
        def done(a: TxnAnswer) -> None:
            if a.error == E.NONE:
                pr.pid, pr.epoch, pr.phase = a.producer_id, a.producer_epoch, "begin"
                self.note(f"{pr.name} init: pid={pr.pid} epoch={pr.epoch}")
            else:
                self.stats["concurrent"] += a.error == E.CONCURRENT_TRANSACTIONS
                self.later(pr, 100)

        self.write(pr, lambda fresh: lambda s, now: s.init_producer_id(
            now, pr.tid, TIMEOUT_MS, -1, -1, fresh), done)

    def add(self, pr: Producer) -> None:
        def done(a: TxnAnswer) -> None:
            if a.error == E.NONE:
                pr.phase = "produce"
                self.note(f"{pr.name} added {pr.parts} for transaction {pr.serial}")
            elif a.error in (E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR,
                             E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE):
                self.later(pr)
            else:
                self.stats["fenced"] += 1
                self.reinit(pr, f"AddPartitions: {a.error.name}")

        parts = [(TOPIC, i) for i in pr.parts]
        self.write(pr, lambda _f: lambda s, now: s.add_partitions(
            now, pr.tid, pr.pid, pr.epoch, parts, 2 if pr.v5 else 0), done)

    def produce(self, pr: Producer) -> None:
        for i in pr.parts:
            err = self.parts[i].produce(pr.pid, pr.epoch, pr.serial)
            if err != E.NONE:
                self.note(f"{pr.name} produce to {i} refused: {err.name}")
                if err == E.INVALID_TXN_STATE:
                    self.fail("atomic", f"{pr.name} started transaction {pr.serial} on "
                              f"partition {i} before the previous one's marker")
                pr.commit = False
                break
            self.wrote.setdefault(pr.serial, set()).add(i)
        pr.phase = "end"
        self.later(pr, 40)

    def end(self, pr: Producer) -> None:
        commit = pr.commit
        serial = pr.serial

        def done(a: TxnAnswer) -> None:
            if a.error == E.NONE:
                if commit:
                    self.acked_commit.add(serial)
                    if "atomic" in self.p.checks and not all(self.outcome_of(serial).values()):
                        self.fail("atomic", f"transaction {serial} was answered NONE to its "
                                  f"commit but was aborted: {self.outcome_of(serial)}")
                self.stats["commits" if commit else "aborts"] += 1
                if pr.v5:
                    pr.pid, pr.epoch = a.producer_id, a.producer_epoch
                pr.phase = "begin"
                self.note(f"{pr.name} {'committed' if commit else 'aborted'} {serial} "
                          f"(next pid={pr.pid} epoch={pr.epoch})")
            elif a.error in (E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR,
                             E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE):
                self.stats["concurrent"] += a.error == E.CONCURRENT_TRANSACTIONS
                self.later(pr, 60)
            else:
                self.stats["fenced"] += 1
                self.reinit(pr, f"EndTxn: {a.error.name}")

        self.write(pr, lambda fresh: lambda s, now: s.end_txn(
            now, pr.tid, pr.pid, pr.epoch, commit, pr.v5, fresh), done)
        if commit and self.faults_on and self.rnd.random() < self.p.p_give_up:
            # the producer stops waiting for the commit's answer and aborts instead
            self.stats["give_ups"] += 1
            pr.incarnation += 1
            pr.waiting = False
            pr.commit = False
            self.note(f"{pr.name} gives up on the commit of {serial}, aborts it")

    def faults(self) -> None:
        for pr in self.producers:
            if pr.paused_until <= self.now and self.rnd.random() < self.p.p_pause:
                self.stats["pauses"] += 1
                pr.paused_until = self.now + self.rnd.randint(TIMEOUT_MS, 3 * TIMEOUT_MS)
                self.note(f"{pr.name} pauses until {pr.paused_until}")
        if self.runtime.status(0) == E.NONE and self.rnd.random() < self.p.p_failover:
            self.failover()

    def step(self) -> None:
        self.now += self.rnd.randint(1, 40)
        if self.log.up and self.log.advance(self.now):
            self.runtime.committed(0, self.log.hw)
        self.runtime.fire_due(self.now)
        self.maybe_elect()
        self.deliver_markers()
        if self.faults_on:
            self.faults()
        for pr in self.rnd.sample(self.producers, len(self.producers)):
            self.act(pr)

    def run(self) -> TxnSim:
        self.runtime.schedule_load(0, self.epoch)
        self.runtime.load(0, self.epoch, [], self.now, 0)
        for _ in range(self.p.steps):
            self.step()
        # quiesce: no new transactions, no faults; what was started completes
        self.faults_on = False
        for pr in self.producers:
            pr.paused_until = -1
        for _ in range(2000):
            self.step()
            if not self.deliveries and not self.jobs and all(
                    pr.phase in ("begin", "init") for pr in self.producers):
                break
        for _ in range(100):  # the last completions' commits
            self.step()
        self.check_complete()
        return self


def run_schedule(seed: int, params: SimParams | None = None) -> TxnSim:
    return TxnSim(seed, params or schedule_params(seed)).run()
