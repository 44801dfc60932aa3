"""Deterministic, seeded simulation of partition replication (leaders, followers, HW,
ISR, leader epochs, truncation) on the real cores.

What is real: every replica is a real ``Partition`` over a real ``Log`` in its own
directory on disk (segments, indexes, leader-epoch checkpoint, producer state); the
controller is the real ``Controller`` over a real ``MetadataImage`` (reconcile on
membership, ``alter_partition`` for ISR changes), and every broker applies the
committed metadata records to its own ``MetadataImage`` and hands its partitions their
roles from ``delta.local_changes`` exactly as ``ReplicaManager.apply_delta`` does. A
follower fetch is the exchange the broker performs: the follower's request from
``replica_fetcher.fetch_position``, the leader's answer from
``Partition.read_for_follower`` (epoch checks, diverging epoch, follower position, HW,
ISR expansion), the follower's decision from ``replica_fetcher.handle_fetch_response``
(truncate on divergence, append, follow the HW) once ``response_applies``. Produce is
``append_as_leader`` with acks=all, acknowledged as ``ReplicaManager.wait_replicated``
does (the HW passed the batch while leading at that epoch; the ISR at least
``min.insync.replicas``).

What is simulated: time (ms), the network between brokers and between each broker and
the controller (delays, loss, links cut and healed), metadata propagation (each broker
applies the committed records with its own lag), ISR expiry ticks, flushes, and crashes:
a *kill* keeps what the OS had (page cache survives, no snapshot is written), a *power
loss* cuts every log at a random batch boundary at or after its recovery point (its
last flush), sometimes leaving a torn partial batch behind, while the fsynced
leader-epoch checkpoint survives as it was. A *clean stop* (SIGTERM; drawn from its
own stream, share ``clean_stop_share``, so schedules without clean stops replay as
before them) tells the controller first (controlled shutdown: it is fenced at once when
it reaches the controller), flushes every log and restarts naming the broker epoch it
was registered under as its previous one (the clean-shutdown marker); a crash restarts
naming none. Restarts are fast (often before the controller noticed the crash) and
register a new incarnation: the controller keeps a cleanly restarted broker's eligible
leader replica places (KIP-966) and takes any other out of every ISR and ELR. Elections
are clean only.
The fault model (``fault_allowed``) is the one under which Kafka promises that an
acknowledged acks=all write survives: a fault that takes a broker out of the replicas
holding everything committed, the ISR and the eligible leader replicas (KIP-966; a crash
of either kind, a cut from the controller), is only scheduled while another *sound* one
remains (up, reaching the controller, and not one that lost data while in the ISR or ELR
and is still counted in them); a sole such replica may be killed or fenced but never
lose data. With ``min.insync.replicas=1`` there is no ELR while the ISR is not empty, so a
power loss is also refused when the victim's own ISR shrink, still in flight, would leave
it the last member: one replica losing data is beyond what Kafka promises at min ISR 1.

Half the schedules (``SimParams.overlaps``) also put two replicas under a fault at once:
a *pause* (SIGSTOP: the process runs nothing, requests to it wait in its sockets, its
controller session lapses; on SIGCONT it runs what waited, with its stale view, and
heartbeats again), a kill, a power loss or an *isolation* (cut from the controller and
every other broker), each held from 20 ms to 2.5 s. The second fault is judged by
``fault_allowed`` with the first in effect, and a paused replica is not a sound one, so
two faults never take more than Kafka's promise allows (RF-1 replicas may lose their
unflushed data only while another intact one stays in the ISR or ELR).

Invariants, checked after every event (``checks`` selects them, for the mutation
tests):

- ``committed``: a record below any replica's HW is never lost or changed. The
  committed prefix of a partition is what some replica held below its HW; every
  replica's log below its own HW must equal it, and the sitting leader (the leader of
  the controller's current epoch, once it applied it) must hold all of it.
- ``isr``: ISR members agree up to the HW: every live member of the current ISR (and
  ELR, unless it lost data) that follows the current epoch has at least the leader's HW
  and the same batches below it.
- ``epochs``: at most one leader per partition epoch (a broker acting as leader at an
  epoch the controller gave to another, or two brokers at one epoch), and a batch of a
  given (leader epoch, offset) is the same in every log that ever held it.
- ``acked``: an acknowledged acks=all record is never lost: it is committed, at the
  offset it was acknowledged at.

At the end the network heals, everyone restarts and catches up, and the run demands
convergence: every replica in the ISR, identical logs, every acknowledged record there.
A failure raises ``InvariantViolation`` naming the seed; ``run_replication_schedule(seed)``
replays it exactly.
"""

from __future__ import annotations

import bisect
import heapq
import os
import random
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from jocko_py.broker.partition import IsrChange, Partition, Role
from jocko_py.broker.replica_fetcher import (
    fetch_position,
    handle_fetch_response,
    response_applies,
)
from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.metadata import MetadataImage, MetadataRecord, PartitionImage
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE
from jocko_py.commitlog.log import Log
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

TOPIC = "r"
ALL_CHECKS = frozenset({"committed", "isr", "epochs", "acked"})
_TMP_ROOT = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class InvariantViolation(AssertionError):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# (base offset, last offset, leader epoch, crc): a batch's identity. The CRC covers the
# records and attributes, not the offset or epoch, so both are kept alongside.
Batch = tuple[int, int, int, int]


def log_batches(lg: Log, upto: int | None = None) -> list[Batch]:
    """The batches of ``lg`` (below ``upto`` when given), from the log start."""
    out: list[Batch] = []
    for h in lg._iter_headers(lg.log_start_offset):
        if upto is not None and h.next_offset > upto:
            break
        out.append((h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc))
    return out


@dataclass
class SimParams:
    brokers: int = 3
    partitions: int = 1
    min_isr: int = 2
    segment_bytes: int = 1 << 20
    chaos_ms: int = 4000
    heal_ms: int = 6000
    produce_every_ms: tuple[int, int] = (5, 60)
    net_delay_ms: tuple[int, int] = (1, 15)
    loss: float = 0.02
    lag_max_ms: int = 300
    flush_every_ms: tuple[int, int] = (50, 600)
    meta_every_ms: tuple[int, int] = (5, 80)
    fault_every_ms: tuple[int, int] = (80, 400)
    power_loss_share: float = 0.5
    torn_share: float = 0.5
    # of the crashes that would be kills, the share turned into clean stops
    clean_stop_share: float = 0.0
    # two faults at once on two replicas (pause, kill, power loss, isolation), besides
    # the single faults; drawn apart from the rest so a schedule without them is the
    # schedule it was before they existed
    overlaps: bool = False
    overlap_every_ms: tuple[int, int] = (150, 700)


def schedule_params(seed: int, clean_stops: bool = True) -> SimParams:
    """The randomized parameters of schedule ``seed``; ``clean_stops=False`` replays it
    as drawn before clean stops existed (the regression seeds)."""
    r = random.Random(seed ^ 0x5EED5)
    brokers = r.choice((3, 3, 4))
    return SimParams(
        clean_stop_share=(random.Random(seed ^ 0xC1EA).choice((0.0, 0.3, 0.6))
                          if clean_stops else 0.0),
        brokers=brokers,
        partitions=r.choice((1, 1, 2)),
        min_isr=r.choice((1, 2, 2)),
        segment_bytes=r.choice((400, 2000, 1 << 20)),
        loss=r.choice((0.0, 0.02, 0.1)),
        lag_max_ms=r.choice((150, 300, 600)),
        flush_every_ms=r.choice(((20, 200), (50, 600), (300, 2000))),
        meta_every_ms=r.choice(((1, 20), (5, 80), (20, 300))),
        fault_every_ms=r.choice(((40, 200), (80, 400), (200, 800))),
        power_loss_share=r.choice((0.2, 0.5, 0.8)),
        overlaps=random.Random(seed ^ 0x0BE1A9).random() < 0.5,
    )


@dataclass
class LogView:
    key: tuple[int, int]
    batches: list[Batch]
    lasts: list[int]
    by_base: dict[int, Batch]
    fresh: bool


@dataclass
class Pending:
    """A produce waiting for the HW (ReplicaManager.wait_replicated)."""

    part: int
    broker: int
    p: Partition
    epoch: int
    base: int
    last: int
    crc: int
    deadline: int


@dataclass
class Broker:
    bid: int
    root: Path
    up: bool = True
    incarnation: uuid.UUID = field(default_factory=uuid.uuid4)
    image: MetadataImage = field(default_factory=MetadataImage)
    applied: int = 0  # metadata batches applied
    parts: dict[int, Partition] = field(default_factory=dict)
    # one fetch in flight per followed partition: request id
    inflight: dict[int, int] = field(default_factory=dict)
    gen: int = 0  # bumped on every crash: events of an older process are dropped
    # the broker epoch the clean-shutdown markers name (-1: none, the last stop crashed)
    previous_epoch: int = -1
    paused: bool = False  # SIGSTOP: nothing runs; what arrives waits for the resume
    deferred: list[Callable[[], None]] = field(default_factory=list)


class ReplicationSim:
    def __init__(self, seed: int, params: SimParams, root: Path,
                 checks: Iterable[str] = ALL_CHECKS) -> None:
        self.seed = seed
        self.params = params
        self.checks = frozenset(checks)
        self.rng = random.Random(seed)
        self.xrng = random.Random(seed ^ 0x57095)  # clean stops' own stream
        self.root = root
        self.now = 0
        self._q: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self._req = 0
        self.ctl = Controller(ControllerConfig(min_insync_replicas=params.min_isr))
        self.cimg = MetadataImage()
        self.meta_log: list[list[MetadataRecord]] = []
        self.brokers = {b: Broker(b, root / f"broker-{b}") for b in range(1, params.brokers + 1)}
        self.ctl_live: dict[int, BrokerInfo] = {}
        self.ctl_link: dict[int, bool] = {b: True for b in self.brokers}
        self.cut: set[tuple[int, int]] = set()  # broker links cut (both directions)
        self.cfg = LogConfig(min_insync_replicas=params.min_isr,
                             segment_bytes=params.segment_bytes)
        self.healing = False
        # invariant state, per partition
        self.committed: dict[int, list[Batch]] = {}
        self.acked: dict[int, dict[int, Batch]] = {}
        self.epoch_leader: dict[tuple[int, int], int] = {}  # (part, epoch) -> leader
        self.ctl_epoch_leader: dict[tuple[int, int], int] = {}
        self.batch_at: dict[tuple[int, int, int], Batch] = {}  # (part, epoch, base)
        self.pending: list[Pending] = []
        self.damaged: set[tuple[int, int]] = set()  # (broker, partition) lost data in ISR
        # AlterPartition requests on their way to the controller: (partition, new ISR)
        self.isr_inflight: list[tuple[int, tuple[int, ...]]] = []
        self.errors: list[str] = []  # exceptions a fetcher would have logged
        self._versions: dict[int, int] = {}
        self._views: dict[int, LogView] = {}
        self._last_state: dict[int, object] = {}
        self.produced = 0
        self.stats: dict[str, int] = {}
        self.trace: list[str] = []

    # ------------------------------------------------------------------ plumbing

    def fail(self, kind: str, why: str) -> None:
        tail = "\n  ".join(self.trace[-int(os.environ.get("JOCKO_SIM_TRACE", "25")):])
        raise InvariantViolation(
            kind, f"seed={self.seed} t={self.now}ms [{kind}] {why}\n  last events:\n  {tail}")

    def note(self, s: str) -> None:
        self.trace.append(f"{self.now}: {s}")
        if len(self.trace) > 200:
            del self.trace[:100]

    def count(self, k: str) -> None:
        self.stats[k] = self.stats.get(k, 0) + 1

    def at(self, delay: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._q, (self.now + max(0, delay), self._seq, fn))

    def for_process(self, b: Broker, fn: Callable[[], None]) -> Callable[[], None]:
        """``fn`` runs only if ``b`` is still the same process (not crashed since)."""
        gen = b.gen

        def run() -> None:
            if b.up and b.gen == gen:
                if b.paused:
                    b.deferred.append(run)
                    return
                fn()
        return run

    def delay(self) -> int:
        lo, hi = self.params.net_delay_ms
        return self.rng.randint(lo, hi)

    def lost(self, a: int, b: int) -> bool:
        if (min(a, b), max(a, b)) in self.cut:
            return True
        return not self.healing and self.rng.random() < self.params.loss

    def ctl_reachable(self, b: int) -> bool:
        return self.ctl_link[b] and (self.healing or self.rng.random() >= self.params.loss)

    # ------------------------------------------------------------------ controller

    def commit(self, recs: list[MetadataRecord]) -> None:
        if not recs:
            return
        self.cimg.apply_batch(recs)
        self.meta_log.append(recs)
        t = self.cimg.topics.get(TOPIC)
        if t is not None:
            self.damaged = {(b, pid) for b, pid in self.damaged
                            if pid in t.partitions and (b in t.partitions[pid].isr
                                                        or b in t.partitions[pid].elr
                                                        or b in t.partitions[pid].last_known_elr
                                                        or any(q == pid and b in isr for q, isr
                                                               in self.isr_inflight))}
            for pid, p in t.partitions.items():
                key = (pid, p.leader_epoch)
                if p.leader >= 0 and key not in self.ctl_epoch_leader:
                    self.ctl_epoch_leader[key] = p.leader

    def reconcile(self) -> None:
        caught_up = {b.bid for b in self.brokers.values()
                     if b.up and self.ctl_link[b.bid] and b.applied == len(self.meta_log)}
        for _ in range(4):
            recs = self.ctl.reconcile(self.cimg, self.ctl_live, caught_up=caught_up)
            if not recs:
                break
            self.note(f"controller: {[type(r).__name__ for r in recs]}")
            self.commit(recs)

    def controller_tick(self) -> None:
        self.reconcile()
        self.at(self.rng.randint(20, 150), self.controller_tick)

    def partition_image(self, part: int) -> PartitionImage:
        p = self.cimg.partition(TOPIC, part)
        assert p is not None
        return p

    # ------------------------------------------------------------------ brokers

    def open_partition(self, b: Broker, part: int, topic_id: uuid.UUID) -> Partition:
        lg = Log.open(b.root / f"{TOPIC}-{part}", self.cfg)
        self.touched(lg)  # a new object may reuse an old one's id: never a stale view
        p = Partition(TOPIC, part, topic_id, lg, b.bid)
        b.parts[part] = p
        return p

    def deliver_metadata(self, b: Broker) -> None:
        """The broker applies committed metadata (ReplicaManager.apply_delta)."""
        if not self.ctl_reachable(b.bid) or b.applied == len(self.meta_log):
            return
        if b.applied == 0:
            upto = len(self.meta_log)  # a starting broker loads what is committed at once
        else:
            upto = self.rng.randint(b.applied + 1, len(self.meta_log))
        recs = [r for batch in self.meta_log[b.applied:upto] for r in batch]
        b.applied = upto
        delta = b.image.apply_batch(recs)
        local = delta.local_changes(b.bid)
        for ref in local.leaders:
            assert ref.after is not None
            p = b.parts.get(ref.partition) or self.open_partition(b, ref.partition, ref.topic_id)
            b.inflight.pop(ref.partition, None)
            if p.make_leader(ref.after, self.now):
                self.note(f"b{b.bid} p{ref.partition}: leader at epoch {ref.after.leader_epoch}"
                          f" ISR {list(ref.after.isr)} LEO {p.log.log_end_offset}")
        for ref in local.followers:
            assert ref.after is not None
            p = b.parts.get(ref.partition) or self.open_partition(b, ref.partition, ref.topic_id)
            if p.make_follower(ref.after):
                self.note(f"b{b.bid} p{ref.partition}: follows {ref.after.leader} at epoch "
                          f"{ref.after.leader_epoch}")
                b.inflight.pop(ref.partition, None)
        for ref in local.followers:
            self.maybe_fetch(b, ref.partition)

    # ---- follower fetches

    def maybe_fetch(self, b: Broker, part: int) -> None:
        p = b.parts.get(part)
        if not b.up or p is None or p.role is not Role.FOLLOWER or p.leader_id < 0:
            return
        if part in b.inflight:
            return
        self._req += 1
        req = self._req
        b.inflight[part] = req
        fetch_offset, epoch, last_epoch = fetch_position(p)
        leader = p.leader_id
        self.count("fetches")

        def timeout() -> None:
            if b.inflight.get(part) == req:
                del b.inflight[part]
                self.maybe_fetch(b, part)
        self.at(200, self.for_process(b, timeout))
        if self.lost(b.bid, leader):
            return
        # A request dies with its sender's connection: the leader never serves a fetch
        # of a process that crashed meanwhile. It names the sender's incarnation (as the
        # fetcher's client id does); the leader believes it only from the registration
        # it knows, and an ISR change carries that registration's broker epoch, so a late
        # proposal built on the old process's position cannot re-add it (KIP-903).
        inc = b.incarnation
        self.at(self.delay(), self.for_process(b, lambda: self.serve_fetch(
            leader, b, part, req, fetch_offset, epoch, last_epoch, inc)))

    def serve_fetch(self, leader_id: int, f: Broker, part: int, req: int, fetch_offset: int,
                    epoch: int, last_epoch: int, inc: uuid.UUID) -> None:
        lb = self.brokers[leader_id]
        if not lb.up:
            return  # no answer: the follower times out
        if lb.paused:  # the request waits in the socket until the leader runs again
            lb.deferred.append(lambda: self.serve_fetch(leader_id, f, part, req, fetch_offset,
                                                        epoch, last_epoch, inc))
            return
        lp = lb.parts.get(part)
        if lp is None:
            hw, lso, res = -1, -1, None
            err: int = ErrorCode.NOT_LEADER_OR_FOLLOWER
        else:
            reg = lb.image.brokers.get(f.bid)  # ReplicaManager._read_all's check
            current = reg is not None and not reg.fenced and reg.incarnation_id == inc
            eff = lp.read_for_follower(f.bid, fetch_offset, epoch, last_epoch, 1 << 20, self.now,
                                       record_fetch=current,
                                       broker_epoch=reg.broker_epoch if current and reg else -1)
            if eff.isr_change is not None:
                self.send_isr_change(lb, lp, eff.isr_change)
            res = eff.result
            assert res is not None
            err, hw, lso = res.error, res.high_watermark, res.log_start_offset
        records = bytes(res.records) if res is not None and res.records is not None else None
        div = res.diverging_epoch if res is not None else None
        if self.lost(leader_id, f.bid):
            return
        self.at(self.delay(), self.for_process(f, lambda: self.on_fetch_response(
            f, part, req, fetch_offset, epoch, err, hw, lso, records, div)))

    def on_fetch_response(self, f: Broker, part: int, req: int, fetch_offset: int, epoch: int,
                          err: int, hw: int, lso: int, records: bytes | None,
                          div: tuple[int, int] | None) -> None:
        if f.inflight.get(part) != req:
            return  # timed out and re-sent meanwhile
        del f.inflight[part]
        p = f.parts.get(part)
        wait = 0
        if p is not None and response_applies(p, fetch_offset, epoch):
            before = p.log.log_end_offset
            try:
                outcome = handle_fetch_response(p, err, hw, lso, records, div)
            except Exception as e:  # the fetcher logs it and backs off (ReplicaFetcher._run)
                self.errors.append(f"t={self.now} b{f.bid} p{part}: {type(e).__name__}: {e}")
                self.touched(p.log)
                self.at(200, self.for_process(f, lambda: self.maybe_fetch(f, part)))
                return
            self.touched(p.log)
            if p.log.log_end_offset < before:
                self.count("truncations")
                self.note(f"b{f.bid} p{part}: truncated {before} -> {p.log.log_end_offset} "
                          f"(div {div}, err {err})")
            if outcome.value == "back off":
                wait = 100
            elif outcome.value == "idle":
                wait = self.rng.randint(5, 40)  # the leader's long poll, roughly
        self.at(wait, self.for_process(f, lambda: self.maybe_fetch(f, part)))

    # ---- ISR changes (AlterPartition)

    def send_isr_change(self, b: Broker, p: Partition, change: IsrChange,
                        backoff: int = 100) -> None:
        """ReplicaManager._send_isr_change: AlterPartition to the controller; a refusal or
        no answer goes to ``isr_change_failed``, which says whether to ask again."""
        self.note(f"b{b.bid} p{p.partition}: AlterPartition {list(change.new_isr)} "
                  f"(epochs {change.leader_epoch}/{change.partition_epoch})")

        def answered(err: int) -> None:
            if err == 0 or b.parts.get(p.partition) is not p:
                return
            if p.isr_change_failed(change, err):
                self.at(backoff, self.for_process(b, lambda: self.send_isr_change(
                    b, p, change, min(backoff * 2, 2000))))

        def no_answer() -> None:
            answered(ErrorCode.REQUEST_TIMED_OUT)
        if not self.ctl_reachable(b.bid):
            self.at(self.delay() * 3, self.for_process(b, no_answer))
            return

        proposal = (p.partition, tuple(change.new_isr))
        self.isr_inflight.append(proposal)

        def at_controller() -> None:
            self.isr_inflight.remove(proposal)
            code, recs = self.ctl.alter_partition(
                self.cimg, change.topic_id, change.partition, b.bid, change.leader_epoch,
                change.partition_epoch, change.new_isr, change.member_epochs)
            self.note(f"controller: AlterPartition {list(change.new_isr)} from b{b.bid} "
                      f"-> {code}")
            if code == 0:
                self.commit(recs)
                self.count("isr_changes")
            if self.ctl_reachable(b.bid):
                self.at(self.delay(), self.for_process(b, lambda: answered(code)))
            else:
                self.at(self.delay() * 3, self.for_process(b, no_answer))
        self.at(self.delay(), at_controller)

    # ---- produce (acks=all)

    def produce_tick(self) -> None:
        if not self.healing:
            self.produce()
        lo, hi = self.params.produce_every_ms
        self.at(self.rng.randint(lo, hi), self.produce_tick)

    def produce(self) -> None:
        part = self.rng.randrange(self.params.partitions)
        target = self.partition_image(part).leader
        if self.rng.random() < 0.1:  # a client with stale metadata
            target = self.rng.choice(list(self.brokers))
        if target < 0:
            return
        self.produced += 1
        n = self.produced
        batch = rb.build_batch([rb.NewRecord(None, b"p%d-%d-%d" % (part, n, i), (), 1000)
                                for i in range(self.rng.randint(1, 3))])
        crc = rb.parse_header(batch).crc
        b = self.brokers[target]
        if not b.up or self.lost(0, target):
            return

        def arrive() -> None:
            if b.up and b.paused:
                b.deferred.append(arrive)
                return
            p = b.parts.get(part)
            if not b.up or p is None:
                return
            r = p.append_as_leader(batch, -1, 1 << 20, self.now)
            self.touched(p.log)
            if r.error != ErrorCode.NONE:
                self.count(f"produce_{r.error.name}")
                return
            self.count("appended")
            self.pending.append(Pending(part, b.bid, p, p.leader_epoch, r.base_offset,
                                        r.last_offset, crc, self.now + 2000))
        self.at(self.delay(), arrive)

    def resolve_acks(self) -> None:
        keep: list[Pending] = []
        for w in self.pending:
            b = self.brokers[w.broker]
            alive = b.up and b.parts.get(w.part) is w.p
            if not alive:
                continue  # the connection died with the process
            p = w.p
            if p.high_watermark > w.last:
                if len(p.isr) >= self.params.min_isr:
                    self.acked.setdefault(w.part, {})[w.base] = (w.base, w.last, w.epoch, w.crc)
                    self.count("acked")
                    self.note(f"ack p{w.part} [{w.base}, {w.last}] epoch {w.epoch} by b{w.broker}")
                else:
                    self.count("not_enough_after_append")
                continue
            if p.role is not Role.LEADER or p.leader_epoch != w.epoch or self.now > w.deadline:
                continue
            keep.append(w)
        self.pending = keep

    # ---- faults

    def sound(self, r: int, part: int) -> bool:
        """``r`` holds everything committed and stays in the ISR for now."""
        b = self.brokers[r]
        return b.up and not b.paused and self.ctl_link[r] and (r, part) not in self.damaged

    def fault_allowed(self, victim: int, *, loses_data: bool) -> bool:
        """The fault model: a fault that takes ``victim`` out of the replicas holding
        everything committed (the ISR and the ELR; a crash, a fencing) leaves a sound one
        of them; a replica that lost data stays out of the count until the controller
        removed it from both. A sole such replica may be killed or fenced (it keeps its
        log, and the controller elects it again as the last known leader), never lose
        data, and not while the last known leader is a replica that lost data (the
        victim's restart takes it out of the ELR, and the controller would fall back on
        that one: two unclean failures, beyond Kafka's promise; seed 978810423). With min ISR 1 there is no ELR to fall back on, so a power loss is also
        refused when an ISR shrink the victim sent (the controller may apply it after
        the crash) would leave it alone in the ISR: that is one replica losing data,
        beyond what Kafka promises. Every ISR change on its way to the controller (sent
        by any leader, even one that crashed since) may still apply, so the rule must
        hold for the ISR as it is and for the ISR each of them would make: two faults at
        once showed both ways. A leader that lost power had asked to drop the one intact,
        lagging follower, and the other member lost power too (seed 28599824); a leader
        had asked to add a follower that then lost power, and the leader was fenced (seed
        16738118): either way the ISR ends with only replicas that lost data."""
        for part in range(self.params.partitions):
            img = self.partition_image(part)
            for isr in [set(img.isr)] + [set(i) for pid, i in self.isr_inflight if pid == part]:
                if not self._fault_allowed_in(victim, part, img, isr | set(img.elr),
                                              loses_data):
                    return False
        return True

    def _fault_allowed_in(self, victim: int, part: int, img: PartitionImage,
                          holders: set[int], loses_data: bool) -> bool:
        """``fault_allowed`` for one partition whose ISR and ELR are ``holders``."""
        if victim not in holders:
            return True
        if loses_data and self.params.min_isr == 1:
            p = self.brokers[victim].parts.get(part)
            if p is not None and p.role is Role.LEADER and p.pending_isr is not None:
                holders &= set(p.pending_isr) | set(img.elr)
        if any(r != victim and self.sound(r, part) for r in holders):
            return True
        # the last known leader is what the controller falls back on once the
        # victim, restarted (unclean), leaves the ELR: a damaged one would lead
        lke_damaged = any(r != victim and (r, part) in self.damaged
                          for r in img.last_known_elr)
        return not (loses_data or len(holders) > 1 or lke_damaged)

    def may_join(self, b: int, part: int) -> bool:
        """``b`` is in the ISR or ELR of ``part``, or an ISR change on its way to the
        controller would put it there."""
        img = self.partition_image(part)
        return b in img.isr or b in img.elr or any(
            pid == part and b in isr for pid, isr in self.isr_inflight)

    def fault_tick(self) -> None:
        if self.healing:
            return
        lo, hi = self.params.fault_every_ms
        self.at(self.rng.randint(lo, hi), self.fault_tick)
        r = self.rng.random()
        ups = [b for b in self.brokers.values() if b.up]
        downs = [b for b in self.brokers.values() if not b.up]
        if r < 0.3 and ups and len(downs) < self.params.brokers - 1:
            b = self.rng.choice(ups)
            power = self.rng.random() < self.params.power_loss_share
            if not self.fault_allowed(b.bid, loses_data=power):
                power = False
                if not self.fault_allowed(b.bid, loses_data=False):
                    return
            if (not power and self.params.clean_stop_share
                    and self.xrng.random() < self.params.clean_stop_share):
                self.stop_cleanly(b)
            else:
                self.crash(b, power_loss=power)
            self.at(self.rng.choice((1, 5, 30, 200, 800)), lambda: self.restart(b))
        elif r < 0.45:
            a, c = self.rng.sample(list(self.brokers), 2)
            self.cut.add((min(a, c), max(a, c)))
            self.note(f"cut b{a} <-> b{c}")
        elif r < 0.6 and self.cut:
            link = self.rng.choice(sorted(self.cut))
            self.cut.discard(link)
            self.note(f"heal b{link[0]} <-> b{link[1]}")
        elif r < 0.7:
            b = self.rng.choice(list(self.brokers.values()))
            if not self.fault_allowed(b.bid, loses_data=False):
                return
            self.ctl_link[b.bid] = False
            self.note(f"b{b.bid} cut from the controller")

            def lapse() -> None:  # broker.session.timeout.ms: fenced
                if not self.ctl_link[b.bid] and b.bid in self.ctl_live:
                    del self.ctl_live[b.bid]
                    self.note(f"controller: b{b.bid} session expired")
            self.at(self.rng.randint(50, 400), lapse)
        elif r < 0.85:
            for b in self.brokers.values():
                if not self.ctl_link[b.bid]:
                    self.ctl_link[b.bid] = True
                    if b.up and not b.paused:
                        self.register(b)
                    self.note(f"b{b.bid} reaches the controller again")
        else:
            self.produce()

    # ---- overlapping faults

    def faulty(self) -> set[int]:
        """Brokers under a fault now: down, paused, or cut from the controller."""
        return {b.bid for b in self.brokers.values()
                if not b.up or b.paused or not self.ctl_link[b.bid]}

    def overlap_tick(self) -> None:
        """Two faults at once on two replicas, each within the fault model given the
        other (the second is judged with the first in effect): a pause (SIGSTOP, then
        SIGCONT), a kill, a power loss, or an isolation (cut from the controller and
        from every other broker), each held for a while."""
        if self.healing:
            return
        lo, hi = self.params.overlap_every_ms
        self.at(self.rng.randint(lo, hi), self.overlap_tick)
        first, second = self.rng.sample(list(self.brokers.values()), 2)
        applied = 0
        for b in (first, second):
            kind = self.rng.choice(("pause", "pause", "kill", "power loss", "isolate"))
            if self.apply_fault(b, kind):
                applied += 1
        if applied == 2:
            self.count("double_faults")

    def apply_fault(self, b: Broker, kind: str) -> bool:
        if not b.up or b.paused or not self.ctl_link[b.bid]:
            return False
        if kind in ("kill", "power loss") and sum(not x.up for x in self.brokers.values()) \
                >= self.params.brokers - 1:
            return False
        if not self.fault_allowed(b.bid, loses_data=kind == "power loss"):
            return False
        if self.faulty() - {b.bid}:
            self.count("overlapping_faults")
        hold = self.rng.choice((20, 150, 400, 900, 2500))
        if kind == "pause":
            self.pause(b)
            self.at(hold, lambda: self.resume(b))
        elif kind == "isolate":
            self.ctl_link[b.bid] = False
            for o in self.brokers:
                if o != b.bid:
                    self.cut.add((min(o, b.bid), max(o, b.bid)))
            self.note(f"b{b.bid} isolated")
            self.count("isolations")
            self.at(self.rng.randint(50, 400), self.session_lapse(b))

            def rejoin() -> None:
                self.cut -= {(min(o, b.bid), max(o, b.bid)) for o in self.brokers}
                if not self.ctl_link[b.bid]:
                    self.ctl_link[b.bid] = True
                    if b.up and not b.paused:
                        self.register(b)
                self.note(f"b{b.bid} rejoins the network")
            self.at(hold, rejoin)
        else:
            self.crash(b, power_loss=kind == "power loss")
            self.at(hold, lambda: self.restart(b))
        return True

    def session_lapse(self, b: Broker) -> Callable[[], None]:
        """broker.session.timeout.ms: no heartbeat reached the controller; fenced."""
        gen = b.gen

        def lapse() -> None:
            silent = not b.up or b.paused or not self.ctl_link[b.bid]
            if silent and b.gen == gen and b.bid in self.ctl_live:
                del self.ctl_live[b.bid]
                self.note(f"controller: b{b.bid} session expired")
        return lapse

    def pause(self, b: Broker) -> None:
        b.paused = True
        self.count("pauses")
        self.note(f"b{b.bid} paused")
        self.at(self.rng.randint(50, 400), self.session_lapse(b))

    def resume(self, b: Broker) -> None:
        if not b.paused:
            return
        b.paused = False
        self.note(f"b{b.bid} resumes ({len(b.deferred)} events waited)")
        waiting, b.deferred = b.deferred, []
        for fn in waiting:
            self.at(0, fn)
        if b.up and self.ctl_link[b.bid] and b.bid not in self.ctl_live:
            self.register(b)  # its next heartbeat: the same process, unfenced again

    def stop_cleanly(self, b: Broker) -> None:
        """SIGTERM: controlled shutdown (the controller, when reachable, fences the broker
        and moves its leaderships first), every log flushed, then the process ends; the
        markers name the broker epoch it is registered under in its own image."""
        self.count("clean_stops")
        reg = b.image.brokers.get(b.bid)
        epoch = reg.broker_epoch if reg is not None and reg.incarnation_id == b.incarnation \
            else -1
        self.note(f"b{b.bid} stops cleanly (registered at epoch {epoch})")
        if self.ctl_reachable(b.bid) and b.bid in self.ctl_live:
            del self.ctl_live[b.bid]
            self.reconcile()
        for p in b.parts.values():
            p.log.flush()
        self.crash(b, power_loss=False, clean_epoch=epoch)

    def crash(self, b: Broker, *, power_loss: bool, clean_epoch: int | None = None) -> None:
        """The process ends: with ``clean_epoch`` after a clean stop, else a crash."""
        b.previous_epoch = -1 if clean_epoch is None else clean_epoch
        if clean_epoch is None:
            self.count("power_losses" if power_loss else "kills")
            self.note(f"b{b.bid} {'loses power' if power_loss else 'killed'}")
        for part, p in b.parts.items():
            lg = p.log
            if power_loss and self.lose_unflushed(lg) and self.may_join(b.bid, part):
                self.damaged.add((b.bid, part))
            for seg in lg.segments:  # no flush, no producer snapshot: the process died
                seg.close()
        b.parts.clear()
        b.inflight.clear()
        b.up = False
        b.paused = False  # a stopped process can be killed too
        b.deferred.clear()
        b.gen += 1

        def lapse() -> None:
            if not b.up and b.bid in self.ctl_live:
                del self.ctl_live[b.bid]
                self.note(f"controller: b{b.bid} session expired")
        self.at(self.rng.randint(20, 500), lapse)

    def lose_unflushed(self, lg: Log) -> bool:
        rp, leo = lg.recovery_point, lg.log_end_offset
        if rp >= leo:
            return False
        bounds = sorted({rp, leo} | {h.base_offset for h in lg._iter_headers(rp)
                                    if h.base_offset > rp})
        cut = self.rng.choice(bounds)
        if cut >= leo:
            return False
        torn = b""
        if self.rng.random() < self.params.torn_share:
            data = lg.read(cut, 1 << 20, min_one_batch=True).records
            first = rb.parse_header(memoryview(bytes(data)))
            torn = bytes(data)[: self.rng.randint(1, first.size - 1)]
        ckpt = lg.dir / LEADER_EPOCH_CHECKPOINT_FILE
        saved = ckpt.read_bytes() if ckpt.exists() else None
        lg.truncate_to(cut)
        if saved is not None:  # fsynced when written: the power loss does not undo it
            ckpt.write_bytes(saved)
        if torn:
            with open(lg.active_segment.log_path, "ab") as fh:
                fh.write(torn)
        self.note(f"  {lg.name}: LEO {leo} -> {cut} (recovery point {rp}"
                  f"{', torn tail' if torn else ''})")
        return True

    def register(self, b: Broker) -> None:
        self.ctl_live[b.bid] = BrokerInfo(b.bid, "sim", 9000 + b.bid, None, b.incarnation,
                                          previous_broker_epoch=b.previous_epoch)
        self.reconcile()

    def restart(self, b: Broker) -> None:
        if b.up:
            return
        b.up = True
        b.incarnation = uuid.uuid4()
        b.image = MetadataImage()
        b.applied = 0
        t = self.cimg.topics.get(TOPIC)
        assert t is not None
        for part in range(self.params.partitions):
            if b.bid in self.partition_image(part).replicas:
                self.open_partition(b, part, t.topic_id)
        self.note(f"b{b.bid} restarts (previous epoch {b.previous_epoch}): LEOs "
                  f"{[p.log.log_end_offset for p in b.parts.values()]}")
        self.count("restarts")
        if self.ctl_link[b.bid]:
            self.register(b)
        self.start_loops(b)

    def start_loops(self, b: Broker) -> None:
        self.at(self.rng.randint(0, 10), self.for_process(b, lambda: self.metadata_loop_p(b)))
        self.at(self.rng.randint(0, 30), self.for_process(b, lambda: self.isr_loop_p(b)))
        self.at(self.rng.randint(0, 300), self.for_process(b, lambda: self.flush_loop_p(b)))

    # process-bound loops: stop when the process dies (restart starts new ones)
    def metadata_loop_p(self, b: Broker) -> None:
        self.deliver_metadata(b)
        lo, hi = self.params.meta_every_ms
        self.at(self.rng.randint(lo, hi), self.for_process(b, lambda: self.metadata_loop_p(b)))

    def isr_loop_p(self, b: Broker) -> None:
        for p in b.parts.values():
            change = p.maybe_shrink_isr(self.now, self.params.lag_max_ms)
            if change is not None:
                self.send_isr_change(b, p, change)
        self.at(self.rng.randint(30, 120), self.for_process(b, lambda: self.isr_loop_p(b)))

    def flush_loop_p(self, b: Broker) -> None:
        for p in b.parts.values():
            if self.rng.random() < 0.7:
                p.log.flush()
        lo, hi = self.params.flush_every_ms
        self.at(self.rng.randint(lo, hi), self.for_process(b, lambda: self.flush_loop_p(b)))

    # ------------------------------------------------------------------ invariants

    def touched(self, lg: Log) -> None:
        """``lg`` may have changed (appended, truncated): read it again at the next check."""
        self._versions[id(lg)] = self._versions.get(id(lg), 0) + 1

    def view(self, lg: Log) -> LogView:
        key = (id(lg), self._versions.get(id(lg), 0))
        v = self._views.get(id(lg))
        if v is None or v.key != key:
            batches = log_batches(lg)
            v = LogView(key, batches, [bt[1] for bt in batches], {bt[0]: bt for bt in batches},
                        fresh=True)
            self._views[id(lg)] = v
        return v

    def check(self) -> None:
        if self.cimg.topics.get(TOPIC) is None:
            return
        for part in range(self.params.partitions):
            self.check_partition(part)

    def check_partition(self, part: int) -> None:
        img = self.partition_image(part)
        views: dict[int, tuple[Partition, LogView]] = {}
        for b in self.brokers.values():
            p = b.parts.get(part)
            if b.up and p is not None:
                views[b.bid] = (p, self.view(p.log))
        committed = self.committed.setdefault(part, [])
        acked = self.acked.get(part, {})
        state = (img, len(committed), len(acked), tuple(
            (bid, v.key, p.high_watermark, p.role, p.leader_epoch)
            for bid, (p, v) in views.items()))
        if self._last_state.get(part) == state:
            return  # nothing any invariant looks at moved since the last check
        # epochs: one leader per epoch; (epoch, offset) names one batch
        if "epochs" in self.checks:
            for bid, (p, v) in views.items():
                if p.role is Role.LEADER:
                    key = (part, p.leader_epoch)
                    other = self.epoch_leader.setdefault(key, bid)
                    if other != bid:
                        self.fail("epochs", f"p{part}: brokers {other} and {bid} both lead "
                                            f"epoch {p.leader_epoch}")
                    ctl = self.ctl_epoch_leader.get(key)
                    if ctl is not None and ctl != bid:
                        self.fail("epochs", f"p{part}: broker {bid} leads epoch "
                                            f"{p.leader_epoch}, which the controller gave "
                                            f"to {ctl}")
                if v.fresh:
                    for bt in v.batches:
                        seen = self.batch_at.setdefault((part, bt[2], bt[0]), bt)
                        if seen != bt:
                            self.fail("epochs", f"p{part}: broker {bid} holds {bt} where "
                                                f"epoch {bt[2]} wrote {seen} at offset {bt[0]}")
        for _, v in views.values():
            v.fresh = False
        # committed: below every replica's HW, the one committed history
        for bid, (p, v) in views.items():
            hw = p.high_watermark
            if hw > p.log.log_end_offset:
                if "committed" in self.checks:
                    self.fail("committed", f"p{part}: broker {bid} HW {hw} beyond its LEO "
                                           f"{p.log.log_end_offset}")
                continue
            k = bisect.bisect_left(v.lasts, hw)
            n = min(k, len(committed))
            if v.batches[:n] != committed[:n]:
                if "committed" in self.checks:
                    i = next(x for x in range(n) if v.batches[x] != committed[x])
                    self.fail("committed", f"p{part}: broker {bid} below its HW {hw} has "
                                           f"{v.batches[i]} where {committed[i]} was committed")
                continue
            if k > len(committed):
                committed.extend(v.batches[len(committed):k])
        end = committed[-1][1] + 1 if committed else 0
        leader = views.get(img.leader)
        sitting = (leader is not None and leader[0].role is Role.LEADER
                   and leader[0].leader_epoch == img.leader_epoch)
        if sitting and "committed" in self.checks:
            assert leader is not None
            lp, lv = leader
            have = lv.batches[:bisect.bisect_left(lv.lasts, end)]
            if have != committed:
                self.fail("committed", f"p{part}: the leader {img.leader} (epoch "
                                       f"{img.leader_epoch}) lost committed records: has "
                                       f"{have[-3:]} (LEO {lp.log.log_end_offset}), "
                                       f"committed up to {end}: {committed[-3:]}")
        if sitting and "isr" in self.checks:
            assert leader is not None
            lp, lv = leader
            hw = lp.high_watermark
            want = lv.batches[:bisect.bisect_left(lv.lasts, hw)]
            for r in img.isr + img.elr:
                fv = views.get(r)
                if r == img.leader or fv is None or (r in img.elr and (r, part) in self.damaged):
                    continue
                fp, fl = fv
                if fp.role is not Role.FOLLOWER or fp.leader_epoch != img.leader_epoch:
                    continue
                got = fl.batches[:bisect.bisect_left(fl.lasts, hw)]
                if fp.log.log_end_offset < hw or got != want:
                    self.fail("isr", f"p{part}: {'ISR' if r in img.isr else 'ELR'} member {r} "
                                     f"(LEO {fp.log.log_end_offset})"
                                     f" differs from leader {img.leader} below HW {hw}: "
                                     f"{got[-3:]} vs {want[-3:]}")
        if "acked" in self.checks:
            by_base = {bt[0]: bt for bt in committed}
            for base, bt in acked.items():
                got_c = by_base.get(base)
                if got_c is None or got_c[3] != bt[3] or got_c[1] != bt[1]:
                    self.fail("acked", f"p{part}: acknowledged {bt} is not committed "
                                       f"(committed has {got_c}, committed end {end})")
                if sitting:
                    assert leader is not None
                    lhave = leader[1].by_base.get(base)
                    if lhave is None or lhave[3] != bt[3]:
                        self.fail("acked", f"p{part}: acknowledged {bt} lost by the leader "
                                           f"{img.leader}: it has {lhave}")
        self._last_state[part] = state

    # ------------------------------------------------------------------ run

    def setup(self) -> None:
        for b in self.brokers.values():
            b.root.mkdir(parents=True, exist_ok=True)
            self.ctl_live[b.bid] = BrokerInfo(b.bid, "sim", 9000 + b.bid, None, b.incarnation)
        self.commit(self.ctl.reconcile(self.cimg, self.ctl_live))
        rf = 3
        code, recs = self.ctl.create_topic(self.cimg, TOPIC, self.params.partitions, rf)
        assert code == 0, code
        self.commit(recs)
        for b in self.brokers.values():
            self.start_loops(b)
        self.at(0, self.controller_tick)
        self.at(10, self.produce_tick)
        self.at(100, self.fault_tick)
        if self.params.overlaps:
            self.at(self.rng.randint(*self.params.overlap_every_ms), self.overlap_tick)
        self.at(self.params.chaos_ms, self.heal)

    def heal(self) -> None:
        self.healing = True
        self.note("heal")
        self.cut.clear()
        for b in self.brokers.values():
            self.resume(b)
            self.ctl_link[b.bid] = True
            if b.up:
                self.register(b)
            else:
                self.restart(b)

    def run(self) -> None:
        self.setup()
        end = self.params.chaos_ms + self.params.heal_ms
        while self._q:
            t, _, fn = heapq.heappop(self._q)
            if t > end:
                break
            self.now = t
            fn()
            self.after_event()
        self.check_converged()

    def after_event(self) -> None:
        """What follows every event: acknowledgements resolved, invariants checked."""
        self.resolve_acks()
        self.check()

    def check_converged(self) -> None:
        if self.errors:
            self.fail("fetcher", f"follower fetches raised: {self.errors[:3]}")
        for part in range(self.params.partitions):
            img = self.partition_image(part)
            where = f"p{part} after healing (image {img})"
            if img.leader < 0 or set(img.isr) != set(img.replicas):
                self.fail("converge", f"{where}: not every replica is back in the ISR")
            logs = {}
            for r in img.replicas:
                p = self.brokers[r].parts.get(part)
                if p is None:
                    self.fail("converge", f"{where}: broker {r} has no replica")
                assert p is not None
                logs[r] = log_batches(p.log)
            lp = self.brokers[img.leader].parts[part]
            if len({tuple(v) for v in logs.values()}) != 1:
                self.fail("converge", f"{where}: logs differ: "
                                      f"{ {r: v[-3:] for r, v in logs.items()} }")
            if lp.high_watermark != lp.log.log_end_offset:
                self.fail("converge", f"{where}: HW {lp.high_watermark} below LEO "
                                      f"{lp.log.log_end_offset}")
            final = {bt[0]: bt for bt in logs[img.leader]}
            for base, bt in self.acked.get(part, {}).items():
                if base not in final or final[base][3] != bt[3]:
                    self.fail("acked", f"{where}: acknowledged {bt} missing at the end")

    def close(self) -> None:
        for b in self.brokers.values():
            for p in b.parts.values():
                for seg in p.log.segments:
                    seg.close()


def run_replication_schedule(seed: int, params: SimParams | None = None,
                             checks: Iterable[str] = ALL_CHECKS) -> ReplicationSim:
    """Replay one schedule; raises InvariantViolation naming the seed on failure."""
    root = Path(tempfile.mkdtemp(prefix=f"jocko-repl-{seed}-", dir=_TMP_ROOT))
    sim = ReplicationSim(seed, params if params is not None else schedule_params(seed), root,
                         checks)
    try:
        sim.run()
    finally:
        sim.close()
        shutil.rmtree(root, ignore_errors=True)
    return sim
