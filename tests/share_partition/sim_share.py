"""A seeded simulation of one share partition (broker/share/partition.py) with its
durable state (the persister contract, `InMemoryPersister` with Kafka's fencing), share
consumers and faults.

One schedule: a producer appends batches (some of aborted transactions, some leaving
offset holes as compaction does) to a log; 2-4 members fetch (acquire), acknowledge
(accept, release, reject, renew, gap) at random, hold records past their lock, crash
(their records released, as on leaving the group); state writes complete late, fail, or
are lost; the share partition leader fails over: a new one is loaded from the persisted
state with a newer leader epoch, and the old leader's in-flight write lands before the
new leader reads or is fenced after it.

Checked after every step (one checker each; `InvariantViolation` names the seed):
- owner: a record is acquired by at most one member at a time (within one leader's
  life: a member's acquisition holds until its lock deadline or its acknowledgement);
- limit: no acquisition carries a delivery count past the limit, and no record rests
  AVAILABLE with the limit reached (it is archived);
- accepted: a record whose accept was answered NONE to the client is never acquired
  again, across failovers;
- durable: once a write succeeded and nothing changed since, the durable start offset
  is the leader's (the share group's lag is computed from it).
A final phase without faults drains the partition: every record ends accepted or
archived (liveness).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from jocko_py.broker.share.partition import (
    AckBatch,
    AckType,
    FetchedBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateWrite,
)
from jocko_py.broker.share.persister import InMemoryPersister, SharePartitionKey
from jocko_py.protocol.errors import ErrorCode as E

KEY = SharePartitionKey("g", uuid.UUID(int=7), 0)


class InvariantViolation(AssertionError):
    pass


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Drive a coroutine that never suspends (the in-memory persister's)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("the persister suspended")


@dataclass
class _Write:
    leader_gen: int
    leader_epoch: int
    state_epoch: int
    write: StateWrite
    due: int
    fail: bool


@dataclass
class _Hold:
    member: str
    deadline: int
    gen: int


@dataclass
class ShareSim:
    seed: int
    core: Callable[[SharePartitionConfig, Any], SharePartition] = SharePartition.from_state
    steps: int = 400
    stats: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rnd = self.rnd = random.Random(self.seed)
        self.limit = rnd.choice([1, 2, 3, 5])
        self.lock_ms = rnd.choice([50, 200, 1000])
        self.read_committed = rnd.random() < 0.4
        self.config = SharePartitionConfig(
            max_in_flight=rnd.choice([8, 30, 200]), delivery_count_limit=self.limit,
            lock_duration_ms=self.lock_ms, read_committed=self.read_committed)
        self.members = [f"m{i}" for i in range(rnd.randint(2, 4))]
        self.now = 0
        self.log: list[FetchedBatch] = []
        self.aborted: list[tuple[int, int]] = []  # (producer id, first offset)
        self.next_offset = 0
        self.persister = InMemoryPersister()
        run_sync(self.persister.initialize(KEY, 0, 0))
        self.leader_epoch = 0
        self.gen = 0
        self.sp = self._load()
        self.writes: list[_Write] = []
        # what clients were told: offset -> holder; pending acks by id
        self.holds: dict[int, _Hold] = {}
        self.held_by: dict[str, dict[int, int]] = {m: {} for m in self.members}  # off->gen
        self.waiting: dict[tuple[int, int], tuple[str, dict[int, AckType]]] = {}
        self.accepted: set[int] = set()
        self.trace: list[str] = []

    # ------------------------------------------------------------------ plumbing

    def _count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    def _note(self, what: str) -> None:
        self.trace.append(f"t={self.now} {what}")
        del self.trace[:-30]

    def fail(self, check: str, what: str) -> None:
        raise InvariantViolation(
            f"seed={self.seed} check={check}: {what}\nlast events:\n  "
            + "\n  ".join(self.trace))

    def _load(self) -> SharePartition:
        self.leader_epoch += 1
        self.gen += 1
        state = run_sync(self.persister.read(KEY, self.leader_epoch))
        assert state.error == E.NONE, state
        return self.core(self.config, state)

    # ------------------------------------------------------------------ actions

    def produce(self) -> None:
        rnd = self.rnd
        base = self.next_offset + (rnd.randint(1, 3) if rnd.random() < 0.05 else 0)  # hole
        n = rnd.randint(1, 6)
        if rnd.random() < 0.15:  # an aborted transaction: data, then its marker
            pid = rnd.randint(100, 10**6)
            self.aborted.append((pid, base))
            self.log.append(FetchedBatch(base, base + n - 1, pid, True))
            self.log.append(FetchedBatch(base + n, base + n, pid, True, True))
            self.next_offset = base + n + 1
        else:
            self.log.append(FetchedBatch(base, base + n - 1))
            self.next_offset = base + n
        self._count("produce")

    def read_log(self, offset: int, max_batches: int) -> list[FetchedBatch]:
        out = [b for b in self.log if b.last_offset >= offset]
        return out[:max_batches]

    def fetch(self, member: str) -> None:
        sp = self.sp
        off = sp.next_fetch_offset()
        if off is None:
            self._count("fetch_full")
            return
        bs = self.read_log(off, self.rnd.randint(1, 5))
        aborted = [a for a in self.aborted]
        got = sp.acquire(member, off, bs, self.rnd.randint(1, 20), self.now, aborted,
                         strict_limit=self.rnd.random() < 0.5)
        for a in got:
            if a.delivery_count > self.limit:
                self.fail("limit", f"{member} acquired {a} past the limit {self.limit}")
            for o in range(a.first_offset, a.last_offset + 1):
                if o in self.accepted:
                    self.fail("accepted", f"offset {o} acquired by {member} after its "
                              "accept was answered")
                h = self.holds.get(o)
                if h is not None and h.gen == self.gen and h.member != member and \
                        self.now < h.deadline:
                    self.fail("owner", f"offset {o} acquired by {member} while {h.member} "
                              f"holds it until {h.deadline}")
                self.holds[o] = _Hold(member, self.now + self.lock_ms, self.gen)
                self.held_by[member][o] = self.gen
        if got:
            self._count("acquired")
            self._note(f"{member} acquired {[(a.first_offset, a.last_offset, a.delivery_count) for a in got]}")

    def acknowledge(self, member: str) -> None:
        held = [o for o, g in self.held_by[member].items() if g == self.gen]
        if not held:
            return
        rnd = self.rnd
        pick = sorted(rnd.sample(held, rnd.randint(1, min(len(held), 8))))
        types: dict[int, AckType] = {}
        for o in pick:
            data = any(b.base_offset <= o <= b.last_offset and not b.is_control
                       for b in self.log)
            types[o] = AckType.GAP if not data else rnd.choices(
                [AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW],
                [6, 2, 1, 1])[0]
        batches = [AckBatch(o, o, (int(t),)) for o, t in types.items()]
        if rnd.random() < 0.02:  # a stale or bogus acknowledgement
            batches.append(AckBatch(self.next_offset + 5, self.next_offset + 5, (1,)))
        res = self.sp.acknowledge(member, batches, self.now)
        self._note(f"{member} acks {[(o, t.name) for o, t in types.items()]} -> "
                   f"{res.error.name} pending={res.pending}")
        if res.error != E.NONE:
            self._count("ack_refused")
            # the client drops what it cannot acknowledge (its lock will expire)
            for o in pick:
                self.held_by[member].pop(o, None)
            return
        for o, t in types.items():
            if t is AckType.RENEW:
                self.holds[o] = _Hold(member, self.now + self.lock_ms, self.gen)
            else:
                self.held_by[member].pop(o, None)
                h = self.holds.get(o)
                if h is not None and h.member == member:
                    del self.holds[o]
        if res.pending:
            self.waiting[(self.gen, res.pending)] = (member, types)
            self._count("ack")

    def begin_write(self) -> None:
        sp = self.sp
        if self.writes:  # one write of a share partition at a time (the manager's lock)
            return
        if not sp.dirty and not sp.pending_ids():
            return
        w = sp.begin_write()
        self.writes.append(_Write(self.gen, self.leader_epoch, sp.state_epoch, w,
                                  self.now + self.rnd.randint(0, 30),
                                  self.rnd.random() < 0.08))

    def complete_writes(self, everything: bool = False) -> None:
        while self.writes and (everything or self.writes[0].due <= self.now):
            w = self.writes.pop(0)
            self._finish(w, E.COORDINATOR_NOT_AVAILABLE if w.fail else None)

    def _finish(self, w: _Write, forced: E | None) -> None:
        if forced is None:
            err = run_sync(self.persister.write(KEY, w.state_epoch, w.leader_epoch,
                                                w.write.start_offset, w.write.batches))
        else:
            err = forced
        self._note(f"write gen={w.leader_gen} start={w.write.start_offset} -> {err.name}")
        if w.leader_gen != self.gen:
            return  # the old leader is gone: nobody answers its clients
        for pid, res in self.sp.complete_write(w.write, err).items():
            member, types = self.waiting.pop((self.gen, pid))
            if res == E.NONE:
                self._count("ack_ok")
                self.accepted |= {o for o, t in types.items() if t is AckType.ACCEPT}
            else:
                self._count("ack_failed")
        if err == E.NONE and not self.sp.dirty and not self.sp.pending_ids():
            # what is durable is what the leader has: the start offset (the group's lag)
            # is not left behind
            durable = self.persister.states[KEY].start_offset
            if durable != self.sp.start_offset:
                self.fail("durable", f"durable start offset {durable}, the leader's "
                          f"{self.sp.start_offset}")

    def tick(self) -> None:
        self.now += self.rnd.randint(1, max(1, self.lock_ms // 4))
        if self.sp.expire_locks(self.now):
            self._count("expired")

    def crash(self, member: str) -> None:
        self.sp.release_member(member)
        self.held_by[member].clear()
        for o in [o for o, h in self.holds.items() if h.member == member]:
            del self.holds[o]
        self._count("member_left")
        self._note(f"{member} left")

    def failover(self) -> None:
        # the old leader's in-flight writes: some land before the new leader reads,
        # the rest arrive after it and are fenced (older leader epoch)
        landed = [w for w in self.writes if self.rnd.random() < 0.5]
        late = [w for w in self.writes if w not in landed]
        self.writes = []
        for w in landed:
            self._finish(w, None)
        self.waiting = {k: v for k, v in self.waiting.items() if k[0] == self.gen}
        self.sp = self._load()
        for w in late:
            err = run_sync(self.persister.write(KEY, w.state_epoch, w.leader_epoch,
                                                w.write.start_offset, w.write.batches))
            if err == E.NONE:
                self.fail("fencing", "a write of an older leader was accepted")
        self.waiting.clear()
        for m in self.members:
            self.held_by[m].clear()
        self._count("failover")
        self._note(f"failover to leader epoch {self.leader_epoch}")

    # ------------------------------------------------------------------ checks

    def check(self) -> None:
        sp = self.sp
        for off, r in sp.records.items():
            if r.state is RecordState.AVAILABLE and not r.pending and \
                    r.delivery_count >= self.limit:
                self.fail("limit", f"offset {off} available with count {r.delivery_count}")
            if r.state is RecordState.ACQUIRED and off in self.accepted:
                self.fail("accepted", f"offset {off} acquired after its accept was answered")

    # ------------------------------------------------------------------ schedule

    def step(self, faults: bool = True) -> None:
        rnd = self.rnd
        x = rnd.random()
        m = rnd.choice(self.members)
        if x < 0.15:
            self.produce()
        elif x < 0.45:
            self.fetch(m)
        elif x < 0.70:
            self.acknowledge(m)
        elif x < 0.80:
            self.begin_write()
        elif x < 0.90:
            self.tick()
        elif x < 0.95:
            self.complete_writes()
        elif faults and x < 0.975:
            self.crash(m)
        elif faults and x < 0.99:
            self.failover()
        else:
            self.tick()
        self.complete_writes()
        self.check()

    def drain(self) -> None:
        """No faults, no failed writes: members accept (or gap) what they get until the
        partition is empty; everything ends accepted or archived."""
        for w in self.writes:
            w.fail = False
        for _ in range(20000):
            if self.sp.start_offset >= self.next_offset:
                break
            m = self.rnd.choice(self.members)
            self.fetch(m)
            held = [o for o, g in self.held_by[m].items() if g == self.gen]
            if held:
                types = {o: AckType.ACCEPT if any(
                    b.base_offset <= o <= b.last_offset and not b.is_control
                    for b in self.log) else AckType.GAP for o in held}
                res = self.sp.acknowledge(m, [AckBatch(o, o, (int(t),))
                                              for o, t in types.items()], self.now)
                for o in held:
                    self.held_by[m].pop(o, None)
                    self.holds.pop(o, None)
                if res.pending:
                    self.waiting[(self.gen, res.pending)] = (m, types)
            self.now += self.lock_ms  # locks of records nobody acknowledges expire
            self.sp.expire_locks(self.now)
            self.begin_write()
            self.complete_writes(everything=True)
            self.check()
        if self.sp.start_offset < self.next_offset:
            self.fail("drain", f"start offset {self.sp.start_offset} never reached "
                      f"{self.next_offset}")

    def run(self) -> ShareSim:
        for _ in range(self.steps):
            self.step()
        self.drain()
        return self


def run_schedule(seed: int, core: Callable[[SharePartitionConfig, Any], SharePartition]
                 | None = None) -> ShareSim:
    return ShareSim(seed, core or SharePartition.from_state).run()
