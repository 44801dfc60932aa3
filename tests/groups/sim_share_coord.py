"""Seeded simulation of the share coordinator on the coordinator runtime.

The real ``CoordinatorRuntime`` and ``ShareCoordinatorShard`` (``broker/share/shard.py``)
run on a simulated clock over one in-memory ``__share_group_state`` partition
(``sim_groups.SimLog``: the high watermark follows replication with a delay, a failover
loses the uncommitted tail or part of it, a new shard loads after a delay). Each share
partition (a key) has a simulated share-partition leader that reads the state at its
leader epoch, then writes state batches one write at a time, retrying a write that
failed until it is answered; the share partition's leadership moves (a new leader at
the next leader epoch; the old one goes on writing for a while, a zombie); the group
coordinator re-initializes a key now and then (a new state epoch and start offset) or
deletes its state and initializes it again. The prune and cold-snapshot timers run,
and the log's start offset moves up to what the pruning hands out.

Invariants, checked as the answers arrive:

- ``durable``: a read returns every write acknowledged before the read was sent, at its
  state epoch: for each offset of the write at or above the read's start offset, a
  delivery count and state at least the written ones (Kafka's merge keeps the higher),
  and a start offset at least the written one.
- ``fenced``: no write is acknowledged when it was sent after a read or write at a newer
  leader epoch, or an initialization at a newer state epoch, of its key was acknowledged.
- ``pruned``: the log from the pruned offset on rebuilds exactly the state the whole
  log does.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from jocko_py.broker.coordinator.runtime import CoordinatorRuntime, LogRecord
from jocko_py.broker.share.persister import DeliveryState, SharePartitionKey, StateBatch
from jocko_py.broker.share.shard import Answer, Prune, ShareCoordinatorConfig, ShareCoordinatorShard
from jocko_py.protocol.errors import ErrorCode as E
from tests.groups.sim_groups import InvariantViolation, SimLog

TOPIC = uuid.UUID(int=11)
PARTITIONS = 4
RETRY = (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE)


class PrunedLog(SimLog):
    """``SimLog`` with a log start offset, its records carrying their offsets."""

    start: int = 0

    def records(self) -> list[LogRecord]:
        return [LogRecord(k, v, -1, i) for i, ((k, v), _) in enumerate(self.entries)
                if i >= self.start]


@dataclass
class Acked:
    acked_at: int
    state_epoch: int
    start: int
    batches: tuple[StateBatch, ...]


@dataclass
class Leader:
    key: SharePartitionKey
    leader_epoch: int
    zombie_until: int = -1  # >= 0: replaced; acts until then
    loaded: bool = False
    state_epoch: int = 0
    start: int = 0
    waiting: bool = False
    pending: tuple[int, tuple[StateBatch, ...]] | None = None  # a write to retry
    done: bool = False


@dataclass
class KeyState:
    state_epoch: int = 0
    initialized: bool = False
    acked: list[Acked] = field(default_factory=list)
    max_leader_ack: tuple[int, int] = (-1, -1)  # (leader epoch, time acked)
    max_state_ack: tuple[int, int] = (-1, -1)  # (state epoch, time acked)


class ShareCoordSim:
    def __init__(self, seed: int, steps: int = 700) -> None:
        self.seed = seed
        self.steps = steps
        self.rnd = random.Random(seed)
        self.now = 1_000_000
        self.log = PrunedLog(random.Random(seed + 1), (0, 60))
        self.config = ShareCoordinatorConfig(
            snapshot_updates=self.rnd.choice([0, 2, 5, 20]), prune_interval_ms=500,
            cold_snapshot_interval_ms=self.rnd.choice([300, 2000]))
        self.keys = [SharePartitionKey(f"g{i // PARTITIONS}", TOPIC, i % PARTITIONS)
                     for i in range(5)]
        self.ks = {k: KeyState() for k in self.keys}
        self.leaders: list[Leader] = [Leader(k, 0) for k in self.keys]
        self.last_epoch = {k: 0 for k in self.keys}  # the newest leader epoch of each key
        self.epoch = 0
        self.down_until = -1
        self.runtime = self._new_runtime()
        self.events: list[str] = []
        self.stats = {k: 0 for k in ("writes", "reads", "fenced", "failovers", "leader_moves",
                                     "reinits", "prunes", "zombie_fenced")}

    def _new_runtime(self) -> CoordinatorRuntime[ShareCoordinatorShard]:
        rt: CoordinatorRuntime[ShareCoordinatorShard] = CoordinatorRuntime(
            "share", lambda p: ShareCoordinatorShard(p, self.config, self.partitions),
            self.log)
        rt.on_effect = self.on_effect
        return rt

    @staticmethod
    def partitions(tid: uuid.UUID) -> int | None:
        return PARTITIONS if tid == TOPIC else None

    def note(self, what: str) -> None:
        self.events.append(f"t={self.now} {what}")
        del self.events[:-60]

    def fail(self, check: str, what: str) -> None:
        raise InvariantViolation(f"seed={self.seed} check={check}: {what}\nlast events:\n  "
                                 + "\n  ".join(self.events))

    # -- the coordinator ------------------------------------------------------------------

    def call(self, op: Any, then: Any) -> None:
        self.runtime.write(0, op, lambda r, e: then(r if e == E.NONE else Answer(e)),
                           self.now)

    def on_effect(self, _p: int, effect: object) -> None:
        if not isinstance(effect, Prune) or effect.offset <= self.log.start:
            return
        off = min(effect.offset, self.log.hw)
        self.stats["prunes"] += 1
        if self.stats["prunes"] % 3 == 1:  # (a replay of the whole log: one prune in 3)
            full = self._replayed(0)
            pruned = self._replayed(off)
            if full != pruned:
                self.fail("pruned", f"pruning below {off} changes the state:\n  {full}\n"
                          f"  {pruned}")
        self.log.start = off
        self.note(f"log start -> {off}")

    def _replayed(self, start: int) -> dict[SharePartitionKey, Any]:
        s = ShareCoordinatorShard(0, self.config, self.partitions)
        for i, ((k, v), _) in enumerate(self.log.entries[:self.log.hw]):
            if i >= max(start, self.log.start):
                s.replay(LogRecord(k, v, -1, i))
        return {k: (st.state_epoch, st.start_offset, st.batches) for k, st in s.states.items()}

    def failover(self) -> None:
        self.stats["failovers"] += 1
        self.note("coordinator fails over")
        self.runtime.unload(0)
        self.log.up = False
        self.log.fail_over()
        self.down_until = self.now + self.rnd.randint(50, 600)

    def maybe_elect(self) -> None:
        if self.runtime.status(0) != E.NOT_COORDINATOR or self.now < self.down_until:
            return
        self.epoch += 1
        self.log.up = True
        self.runtime = self._new_runtime()
        self.runtime.schedule_load(0, self.epoch)
        self.runtime.load(0, self.epoch, self.log.records(), self.now, self.log.hw)
        self.note(f"coordinator elected (epoch {self.epoch}, {len(self.log.entries)} records)")

    # -- the group coordinator ------------------------------------------------------------

    def initialize(self, k: SharePartitionKey, delete: bool) -> None:
        ks = self.ks[k]
        se = ks.state_epoch + 1 if ks.initialized else 0
        start = self.rnd.randrange(0, 40)
        sent = self.now

        def inited(a: Answer) -> None:
            if a.error == E.NONE:
                ks.state_epoch, ks.initialized, ks.acked = se, True, []
                ks.max_state_ack = max(ks.max_state_ack, (se, self.now))
                self.stats["reinits"] += 1
                self.note(f"{k.group_id}-{k.partition} initialized at state epoch {se}, "
                          f"start {start} (sent {sent})")

        if delete:
            self.call(lambda s, now: s.delete(now, k), lambda a: None)
        self.call(lambda s, now: s.initialize(now, k, se, start), inited)

    # -- share-partition leaders ----------------------------------------------------------

    def act(self, ld: Leader) -> None:
        if ld.waiting or ld.done or self.rnd.random() < 0.7:
            return
        ks = self.ks[ld.key]
        if ld.zombie_until >= 0 and self.now > ld.zombie_until:
            ld.done = True
            return
        sent = self.now
        ld.waiting = True
        if not ld.loaded:
            def on_read(a: Answer) -> None:
                ld.waiting = False
                if a.error == E.NONE:
                    self.stats["reads"] += 1
                    self.check_durable(ld, a, sent)
                    ks.max_leader_ack = max(ks.max_leader_ack, (ld.leader_epoch, self.now))
                    ld.loaded, ld.state_epoch, ld.start = True, a.state_epoch, a.start_offset
                elif a.error == E.FENCED_LEADER_EPOCH:
                    ld.done = True
            self.call(lambda s, now: s.read(now, ld.key, ld.leader_epoch), on_read)
            return
        if ld.pending is None:
            start = ld.start + (self.rnd.randrange(0, 4) if self.rnd.random() < 0.3 else 0)
            batches = []
            for _ in range(self.rnd.randrange(1, 3)):
                f = start + self.rnd.randrange(0, 30)
                batches.append(StateBatch(f, f + self.rnd.randrange(0, 6),
                                          self.rnd.choice(list(DeliveryState)),
                                          self.rnd.randrange(0, 4)))
            ld.pending = (start, tuple(batches))
        start, batches = ld.pending
        se, le = ld.state_epoch, ld.leader_epoch

        def on_write(a: Answer) -> None:
            ld.waiting = False
            if a.error in RETRY:
                return  # sent again next turn
            ld.pending = None
            if a.error == E.NONE:
                self.stats["writes"] += 1
                self.check_fenced(ld, se, sent)
                ks.max_leader_ack = max(ks.max_leader_ack, (le, self.now))
                if se == ks.state_epoch:
                    ks.acked.append(Acked(self.now, se, start, batches))
                ld.start = max(ld.start, start)
            elif a.error in (E.FENCED_LEADER_EPOCH, E.FENCED_STATE_EPOCH, E.INVALID_REQUEST):
                self.stats["fenced"] += 1
                if ld.zombie_until >= 0:
                    self.stats["zombie_fenced"] += 1
                    ld.done = True
                else:
                    ld.loaded = False  # read again (a new state epoch, say)
        self.call(lambda s, now: s.write(now, ld.key, se, le, start, batches), on_write)

    # -- checkers -------------------------------------------------------------------------

    def check_durable(self, ld: Leader, a: Answer, sent: int) -> None:
        ks = self.ks[ld.key]
        at: dict[int, tuple[int, int]] = {}
        for b in a.batches:
            for o in range(b.first_offset, b.last_offset + 1):
                at[o] = (b.delivery_count, int(b.delivery_state))
        for w in ks.acked:
            if w.acked_at >= sent or w.state_epoch != a.state_epoch:
                continue
            if a.start_offset < w.start:
                self.fail("durable", f"{ld.key}: start offset {a.start_offset} read after "
                          f"an acknowledged write of {w.start}")
            for b in w.batches:
                want = (b.delivery_count, int(b.delivery_state))
                for o in range(max(b.first_offset, a.start_offset), b.last_offset + 1):
                    if at.get(o, (0, 0)) < want:
                        self.fail("durable", f"{ld.key}: offset {o} read as {at.get(o)} "
                                  f"after an acknowledged write of {want}")

    def check_fenced(self, ld: Leader, state_epoch: int, sent: int) -> None:
        ks = self.ks[ld.key]
        le, t = ks.max_leader_ack
        if le > ld.leader_epoch and t <= sent:
            self.fail("fenced", f"{ld.key}: a write at leader epoch {ld.leader_epoch} sent "
                      f"at {sent} was acknowledged after epoch {le} was (at {t})")
        se, t = ks.max_state_ack
        if se > state_epoch and t <= sent:
            self.fail("fenced", f"{ld.key}: a write at state epoch {state_epoch} sent at "
                      f"{sent} was acknowledged after state epoch {se} was (at {t})")

    # -- the schedule ---------------------------------------------------------------------

    def faults(self) -> None:
        if self.runtime.status(0) == E.NONE and self.rnd.random() < 0.006:
            self.failover()
        if self.rnd.random() < 0.015:
            cur = [ld for ld in self.leaders if ld.zombie_until < 0 and not ld.done]
            if cur:
                old = self.rnd.choice(cur)
                old.zombie_until = self.now + self.rnd.randint(0, 800)
                self.new_leader(old.key)
                self.stats["leader_moves"] += 1
        if self.runtime.status(0) == E.NONE and self.rnd.random() < 0.004:
            self.initialize(self.rnd.choice(self.keys), self.rnd.random() < 0.5)

    def run(self) -> ShareCoordSim:
        self.runtime.schedule_load(0, self.epoch)
        self.runtime.load(0, self.epoch, [], self.now, 0)
        for k in self.keys:
            self.initialize(k, False)
        for _ in range(self.steps):
            self.now += self.rnd.randint(1, 40)
            if self.log.up and self.log.advance(self.now):
                self.runtime.committed(0, self.log.hw)
            self.runtime.fire_due(self.now)
            self.maybe_elect()
            self.faults()
            for ld in self.rnd.sample(self.leaders, len(self.leaders)):
                self.act(ld)
            self.leaders = [ld for ld in self.leaders if not ld.done]
            for k in self.keys:  # a key whose leaders all went gets a new one
                if not any(ld.key == k and ld.zombie_until < 0 for ld in self.leaders):
                    self.new_leader(k)
        return self

    def new_leader(self, k: SharePartitionKey) -> None:
        self.last_epoch[k] += 1
        self.leaders.append(Leader(k, self.last_epoch[k]))
        self.note(f"{k.group_id}-{k.partition}: new leader at epoch {self.last_epoch[k]}")


def run_schedule(seed: int, steps: int = 700) -> ShareCoordSim:
    return ShareCoordSim(seed, steps).run()
