"""Deterministic, seeded simulation of the raft metadata quorum (and the controller on top).

A virtual clock, a simulated network that drops, delays, duplicates and reorders
messages and partitions node sets, and nodes that crash and restart from their durable
``MemoryStorage``. Invariants are checked after every event; a violation raises
``InvariantViolation`` naming the seed so ``run_schedule(seed)`` replays it exactly.
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    MetadataImage,
    MetadataRecord,
    TopicRecord,
    decode_records,
    encode_records,
)
from jocko_py.cluster.raft.core import NotLeaderError, RaftConfig, RaftCore, Role, decode_voters
from jocko_py.cluster.raft.messages import (
    DATA,
    VOTERS,
    Action,
    AppendLog,
    Commit,
    Entry,
    FetchRequest,
    LoadSnapshot,
    Message,
    PersistQuorumState,
    PersistSnapshot,
    RoleChanged,
    Send,
    TruncateLog,
    VoteRequest,
    VoteResponse,
)
from jocko_py.cluster.raft.storage import MemoryStorage


class InvariantViolation(AssertionError):
    pass


SIM_RAFT_CONFIG = RaftConfig(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    fetch_max_wait_ms=100,
    request_timeout_ms=50,
    max_fetch_entries=64,
    snapshot_chunk_bytes=512,
)


@dataclass
class SimParams:
    voters: int = 3
    observers: int = 0
    chaos_ms: int = 3000
    heal_ms: int = 6000
    tick_ms: int = 10
    delay_ms: tuple[int, int] = (1, 15)
    drop: float = 0.05
    dup: float = 0.03
    crash_rate: float = 0.002  # per tick
    partition_rate: float = 0.002  # per tick
    propose_every_ms: int = 20
    snapshot_every: int = 0  # entries; 0 = never
    reconfig_rate: float = 0.0  # per tick
    # Per action while chaos runs: the node crashes right before executing it, so the
    # rest of its batch (persists included) never happens, as on a real disk.
    crash_in_batch: float = 0.0
    # Share of crashes that restart within 0-20 ms: messages to the old process arrive
    # at the new one, and a replica that forgets what it persisted shows at once.
    fast_restart: float = 0.0
    pre_vote: bool = True  # RaftConfig.pre_vote for every node
    # RaftConfig.max_fetch_entries (0: the config's): a small one makes followers reach
    # an earlier epoch's entries before the leader's own, where commit rules differ.
    max_fetch_entries: int = 0
    # While chaos runs, the share of new leaders crashed (restarting fast or not) within
    # a few round trips of their election: the leader churn of Raft's figure 8.
    leader_kill: float = 0.0
    # While chaos runs, the share of granted votes after which the voter crashes at once
    # and restarts fast: the election goes on, and the restarted voter must remember.
    vote_kill: float = 0.0


@dataclass(frozen=True)
class Kill:
    """A scheduled crash of one process incarnation (delivered like a message)."""

    node_id: int
    incarnation: int
    fast: bool = False  # restart within 0-20 ms


@dataclass
class SimNode:
    node_id: int
    storage: MemoryStorage
    core: RaftCore | None = None
    image: MetadataImage = field(default_factory=MetadataImage)
    applied: int = 0
    restart_at: int = -1
    incarnation: int = 0  # bumped by every crash: a crashed process runs no more actions


@dataclass
class Stats:
    elections: list[int] = field(default_factory=list)  # ms from leader loss to new commit
    commit_latency: list[int] = field(default_factory=list)
    messages: int = 0
    committed: int = 0
    voter_changes: int = 0
    voter_set_sizes: list[int] = field(default_factory=list)  # after each committed change


class RaftSim:
    def __init__(
        self,
        seed: int,
        params: SimParams,
        raft_config: RaftConfig = SIM_RAFT_CONFIG,
        on_apply: Callable[[SimNode, MetadataRecord, MetadataImage], None] | None = None,
    ) -> None:
        self.seed = seed
        self.p = params
        self.rng = random.Random(seed)
        # Draws of later additions (fast restarts) come from their own stream, so that a
        # schedule without them replays exactly as before they existed.
        self.xrng = random.Random(seed ^ 0x7E57)
        self.cfg = replace(
            raft_config,
            pre_vote=params.pre_vote,
            max_fetch_entries=params.max_fetch_entries or raft_config.max_fetch_entries,
        )
        self.now = 0
        self._seq = 0
        self.queue: list[tuple[int, int, Any]] = []
        self.groups: dict[int, int] | None = None
        self.heal_at = -1
        self.drop = params.drop
        ids = list(range(1, params.voters + params.observers + 1))
        self.bootstrap = {i: f"node-{i}" for i in ids[: params.voters]}
        self.nodes = {i: SimNode(i, MemoryStorage()) for i in ids}
        self.committed: dict[int, Entry] = {}
        self.commit_epoch: dict[int, int] = {}
        self.committed_voters = set(self.bootstrap)
        self.committed_voters_at = -1
        self._pending_voters: dict[tuple[int, int], set[int]] = {}
        self.snapshot_fp: dict[int, str] = {}
        self.leaders: dict[int, int] = {}
        self.votes: dict[tuple[int, int], int] = {}  # (voter, epoch) -> candidate
        self._answering: Message | None = None
        self.on_apply = on_apply
        self.stats = Stats()
        self._pending: dict[int, int] = {}  # offset proposed -> time
        self._leader_lost_at: int | None = None
        self._topic_n = 0
        self.chaos_active = False
        for n in self.nodes.values():
            self._boot(n)

    # ------------------------------------------------------------ helpers

    def fail(self, why: str) -> None:
        raise InvariantViolation(f"seed={self.seed} t={self.now}ms: {why}")

    def _boot(self, n: SimNode) -> None:
        n.core = RaftCore(
            n.node_id, self.bootstrap, self.cfg, n.storage.load(), seed=self.rng.randrange(2**32)
        )
        n.image = MetadataImage()
        n.applied = 0
        self._run(n, n.core.start(self.now))

    def _down_ms(self) -> int:
        down = self.rng.randint(50, 1500)
        if self.p.fast_restart and self.xrng.random() < self.p.fast_restart:
            down = self.xrng.randint(0, 20)
        return down

    def crash(self, n: SimNode, down_ms: int) -> None:
        if n.core is not None and n.core.role is Role.LEADER and self._leader_lost_at is None:
            self._leader_lost_at = self.now
        n.core = None
        n.incarnation += 1
        n.restart_at = self.now + down_ms

    def can_talk(self, a: int, b: int) -> bool:
        return self.groups is None or self.groups.get(a) == self.groups.get(b)

    def live_leader(self) -> SimNode | None:
        best: SimNode | None = None
        for n in self.nodes.values():
            if n.core is not None and n.core.role is Role.LEADER:
                if best is None or best.core is None or n.core.epoch > best.core.epoch:
                    best = n
        return best

    # ------------------------------------------------------------ actions

    def _run(self, n: SimNode, actions: list[Action]) -> None:
        """Execute a batch in order, as a driver must. While chaos runs, the node may crash
        before any action; the rest of the batch is lost (unsent, unpersisted)."""
        inc = n.incarnation
        for a in actions:
            if n.incarnation != inc:
                return
            if (
                self.chaos_active
                and self.p.crash_in_batch
                and self.rng.random() < self.p.crash_in_batch
            ):
                self.crash(n, self._down_ms())
                return
            if isinstance(a, Send):
                self._check_sent_after_persist(n, a.message)
                if isinstance(a.message, VoteResponse):
                    self._check_vote(a.message)
                self._send(a.message)
                continue
            if isinstance(a, PersistQuorumState | AppendLog | TruncateLog | PersistSnapshot):
                self._check_persist(n, a)
                n.storage.execute(a)
                if isinstance(a, AppendLog):
                    for e in a.entries:
                        if e.kind == VOTERS and e.offset > self.committed_voters_at:
                            self._pending_voters[(e.offset, e.epoch)] = set(decode_voters(e.data))
                if isinstance(a, TruncateLog | PersistSnapshot):
                    self.check_committed_durable()
            elif isinstance(a, Commit):
                self._apply(n, a.entries)
            elif isinstance(a, LoadSnapshot):
                n.image = MetadataImage.from_records(decode_records(a.snapshot.data))
                n.applied = a.snapshot.end_offset
                fp = self.snapshot_fp.get(n.applied)
                if fp is not None and fp != n.image.fingerprint():
                    self.fail(f"node {n.node_id} loaded a snapshot differing at {n.applied}")
            elif isinstance(a, RoleChanged):
                if a.role == "leader":
                    self._on_new_leader(n, a.epoch)
                    if (
                        self.chaos_active
                        and self.p.leader_kill
                        and self.xrng.random() < self.p.leader_kill
                    ):
                        self._seq += 1
                        at = self.now + self.xrng.randint(0, 3 * self.p.delay_ms[1])
                        heapq.heappush(self.queue, (at, self._seq, Kill(n.node_id, n.incarnation)))

    def _check_vote(self, m: VoteResponse) -> None:
        """Election safety at its source: a replica grants at most one vote per epoch,
        across restarts (a forgotten vote lets two candidates win the same epoch)."""
        req = self._answering
        if not m.vote_granted or not isinstance(req, VoteRequest) or req.pre_vote:
            return
        if (req.src, req.correlation_id) != (m.dest, m.correlation_id):
            return
        key = (m.src, req.candidate_epoch)
        prev = self.votes.setdefault(key, m.dest)
        if prev != m.dest:
            self.fail(f"node {m.src} voted for {prev} and for {m.dest} in epoch {key[1]}")
        if self.chaos_active and self.p.vote_kill and self.xrng.random() < self.p.vote_kill:
            self._seq += 1
            n = self.nodes[m.src]
            heapq.heappush(self.queue, (self.now, self._seq, Kill(n.node_id, n.incarnation, True)))

    def _check_sent_after_persist(self, n: SimNode, m: Message) -> None:
        """Persist before send: whatever a message says about the sender's quorum state or
        log is already durable (a granted vote, a candidacy, an acknowledged fetch offset)."""
        core, d = n.core, n.storage.state
        assert core is not None
        if (d.epoch, d.voted_for) != (core.epoch, core.voted_for):
            self.fail(
                f"node {n.node_id} sent {type(m).__name__} with epoch/vote "
                f"{(core.epoch, core.voted_for)} but {(d.epoch, d.voted_for)} is durable"
            )
        if isinstance(m, FetchRequest):
            end = d.entries[-1].offset + 1 if d.entries else 0
            if d.snapshot is not None:
                end = max(end, d.snapshot.end_offset)
            if m.fetch_offset > end:
                self.fail(
                    f"node {n.node_id} acknowledged offset {m.fetch_offset} with only {end} durable"
                )

    def voter_sets(self) -> list[set[int]]:
        """The committed voter set, plus the set of every VOTERS entry made durable after
        it on some log, even if since truncated (raft uses a new set from its append, so
        a leader may have committed entries on a majority of a set that a later leader
        truncated; changes are one voter at a time, so any majority of one set overlaps
        any majority of the other, and such entries stay safe)."""
        sets = [self.committed_voters]
        for (off, _epoch), v in sorted(self._pending_voters.items()):
            if off > self.committed_voters_at and v not in sets:
                sets.append(v)
        return sets

    def check_committed_durable(self, entries: list[Entry] | None = None) -> None:
        """Every committed entry is durable (identical in the log, or covered by the
        snapshot) on a majority of the committed voter set or of a pending one (see
        ``voter_sets``). Checked on every commit and after every truncation or snapshot
        install, the only ways a disk loses entries."""
        if entries is None:
            entries = list(self.committed.values())
        holders: dict[int, set[int]] = {e.offset: set() for e in entries}
        for node in self.nodes.values():
            d = node.storage.state
            snap_end = d.snapshot.end_offset if d.snapshot is not None else 0
            first = d.entries[0].offset if d.entries else 0
            for e in entries:
                k = e.offset - first
                if e.offset < snap_end or (0 <= k < len(d.entries) and d.entries[k] == e):
                    holders[e.offset].add(node.node_id)
        sets = self.voter_sets()
        for e in entries:
            h = holders[e.offset]
            if not any(len(h & v) > len(v) // 2 for v in sets):
                self.fail(
                    f"committed entry {e.offset} is durable only on {sorted(h)}, "
                    f"not on a majority of any voter set {[sorted(v) for v in sets]}"
                )

    def _check_persist(self, n: SimNode, a: Action) -> None:
        if isinstance(a, AppendLog):
            for e in a.entries:
                c = self.committed.get(e.offset)
                # A node still in an older epoch may take (or, as a deposed leader, make)
                # an entry to be truncated later; one that knows the epoch in which the
                # entry committed (not the entry's own: a leader commits earlier epochs'
                # entries with one of its own) must not.
                core = n.core
                if (
                    c is not None
                    and c != e
                    and core is not None
                    and core.epoch >= self.commit_epoch[e.offset]
                ):
                    self.fail(f"node {n.node_id} appended {e} over committed {c}")
        elif isinstance(a, TruncateLog):
            for e in n.storage.state.entries:
                if e.offset >= a.offset and self.committed.get(e.offset) == e:
                    self.fail(f"node {n.node_id} truncated committed entry {e}")

    def _on_new_leader(self, n: SimNode, epoch: int) -> None:
        prev = self.leaders.get(epoch)
        if prev is not None and prev != n.node_id:
            self.fail(f"two leaders in epoch {epoch}: {prev} and {n.node_id}")
        self.leaders[epoch] = n.node_id
        core = n.core
        assert core is not None
        # Leader completeness: the new leader holds every committed entry.
        for off, e in self.committed.items():
            if off < core.log_start:
                continue
            if off >= core.log_end or core.entry(off) != e:
                self.fail(f"leader {n.node_id} epoch {epoch} lacks committed entry {e}")

    def _apply(self, n: SimNode, entries: tuple[Entry, ...]) -> None:
        for e in entries:
            if e.offset != n.applied:
                self.fail(f"node {n.node_id} applied {e.offset} but expected {n.applied}")
            c = self.committed.get(e.offset)
            if c is None:
                self.committed[e.offset] = e
                # The first to apply learned the commit in the committing leader's epoch
                # or a later one (an upper bound of the committing epoch).
                self.commit_epoch[e.offset] = n.core.epoch if n.core is not None else e.epoch
                self.stats.committed += 1
                if e.kind == VOTERS:
                    self.committed_voters = set(decode_voters(e.data))
                    self.committed_voters_at = e.offset
                    self._pending_voters = {
                        k: v for k, v in self._pending_voters.items() if k[0] > e.offset
                    }
                    self.stats.voter_changes += 1
                    self.stats.voter_set_sizes.append(len(self.committed_voters))
                    self.check_committed_durable()
                else:
                    self.check_committed_durable([e])
                t = self._pending.pop(e.offset, None)
                if t is not None:
                    self.stats.commit_latency.append(self.now - t)
            elif c != e:
                self.fail(f"node {n.node_id} committed {e} but {c} was committed")
            if e.kind == DATA:
                recs = decode_records(e.data)
                for r in recs:
                    if self.on_apply is not None:
                        self.on_apply(n, r, n.image)
                    n.image.apply(r)
                self.after_apply(n, recs)
            n.applied = e.offset + 1
        core = n.core
        if self._leader_lost_at is not None and core is not None and core.role is Role.LEADER:
            self.stats.elections.append(self.now - self._leader_lost_at)
            self._leader_lost_at = None
        p = self.p
        if p.snapshot_every and core is not None and n.applied - core.log_start >= p.snapshot_every:
            fp = n.image.fingerprint()
            old = self.snapshot_fp.setdefault(n.applied, fp)
            if old != fp:
                self.fail(f"node {n.node_id} image at {n.applied} differs from another node's")
            data = encode_records(n.image.snapshot())
            self._run(n, core.take_snapshot(n.applied, data, self.now))

    # ------------------------------------------------------------ network

    def _send(self, m: Message) -> None:
        self.stats.messages += 1
        if self.rng.random() < self.drop:
            return
        copies = 2 if self.rng.random() < self.p.dup else 1
        for _ in range(copies):
            lo, hi = self.p.delay_ms
            self._seq += 1
            heapq.heappush(self.queue, (self.now + self.rng.randint(lo, hi), self._seq, m))

    def _deliver(self, m: Any) -> None:
        if isinstance(m, Kill):
            k = self.nodes[m.node_id]
            if k.core is not None and k.incarnation == m.incarnation and self.chaos_active:
                self.crash(k, self.xrng.randint(0, 20) if m.fast else self._down_ms())
            return
        n = self.nodes.get(m.dest)
        if n is None or n.core is None or not self.can_talk(m.src, m.dest):
            return
        self._answering = m
        try:
            self._run(n, n.core.receive(m, self.now))
        finally:
            self._answering = None

    # ------------------------------------------------------------ schedule

    def propose(self, records: list[MetadataRecord]) -> bool:
        # Any node that believes it leads may take the write, including a deposed leader
        # cut off in a minority: its uncommitted tail must later be truncated, not kept.
        leaders = [
            x for x in self.nodes.values() if x.core is not None and x.core.role is Role.LEADER
        ]
        if not leaders:
            return False
        n = self.rng.choice(leaders)
        if n.core is None:
            return False
        try:
            off, actions = n.core.propose([encode_records(records)], self.now)
        except NotLeaderError:
            return False
        self._pending[off] = self.now
        self._run(n, actions)
        return True

    def _random_record(self) -> list[MetadataRecord]:
        self._topic_n += 1
        name = f"t{self._topic_n}"
        if self.rng.random() < 0.5:
            return [TopicRecord(name, uuid.UUID(int=self.rng.getrandbits(128)))]
        return [ConfigRecord(CONFIG_RESOURCE_TOPIC, "t1", "retention.ms", str(self._topic_n))]

    def _chaos(self) -> None:
        p, rng = self.p, self.rng
        live = [n for n in self.nodes.values() if n.core is not None]
        if live and rng.random() < p.crash_rate:
            self.crash(rng.choice(live), self._down_ms())
        if rng.random() < p.partition_rate and self.groups is None and len(self.nodes) > 1:
            ids = list(self.nodes)
            rng.shuffle(ids)
            cut = rng.randint(1, len(ids) - 1)
            self.groups = {i: (0 if k < cut else 1) for k, i in enumerate(ids)}
            self.heal_at = self.now + rng.randint(100, 1500)
            ldr = self.live_leader()
            if ldr is not None and self._leader_lost_at is None:
                self._leader_lost_at = self.now
        if rng.random() < p.reconfig_rate:
            ldr = self.live_leader()
            if ldr is not None and ldr.core is not None:
                voters = ldr.core.voters
                others = [i for i in self.nodes if i not in voters]
                # Add or remove one voter (raft allows removals down to a single voter;
                # the leader may remove itself and resigns once that commits).
                if others and (len(voters) == 1 or rng.random() < 0.5):
                    v = rng.choice(others)
                    _err, acts = ldr.core.add_voter(v, f"node-{v}", self.now)
                elif len(voters) > 1:
                    _err, acts = ldr.core.remove_voter(rng.choice(sorted(voters)), self.now)
                else:
                    acts = []
                self._run(ldr, acts)

    def step_until(self, t_end: int, chaos: bool, propose: bool) -> None:
        p = self.p
        next_propose = self.now
        while self.now < t_end:
            tick_at = self.now + p.tick_ms
            while self.queue and self.queue[0][0] <= tick_at:
                t, _, m = heapq.heappop(self.queue)
                self.now = max(self.now, t)
                self._deliver(m)
            self.now = tick_at
            if self.groups is not None and self.now >= self.heal_at:
                self.groups = None
            for n in self.nodes.values():
                if n.core is None:
                    if self.now >= n.restart_at:
                        self._boot(n)
                    continue
                self._run(n, n.core.tick(self.now))
            self.after_tick()
            if chaos:
                self._chaos()
            if propose and self.now >= next_propose:
                next_propose = self.now + p.propose_every_ms
                recs = self._random_record()
                if recs:
                    self.propose(recs)

    def after_tick(self) -> None:
        """Hook for subclasses (gossip and controller in the cluster simulation)."""

    def after_apply(self, n: SimNode, records: list[MetadataRecord]) -> None:
        """Hook for subclasses: ``n.image`` now reflects a committed entry's records."""

    def heal(self) -> None:
        self.groups = None
        self.drop = 0.0
        for n in self.nodes.values():
            if n.core is None:
                n.restart_at = self.now

    def converged(self) -> bool:
        ldr = self.live_leader()
        if ldr is None or ldr.core is None:
            return False
        hw = ldr.core.high_watermark
        if hw != ldr.core.log_end:
            return False
        fps = set()
        for n in self.nodes.values():
            if n.core is None or n.applied != hw:
                return False
            fps.add(n.image.fingerprint())
        return len(fps) == 1

    def run(self) -> None:
        """Chaos, then heal and demand convergence within ``heal_ms``."""
        p = self.p
        self.chaos_active = True
        self.step_until(p.chaos_ms, chaos=True, propose=True)
        self.chaos_active = False
        self.heal()
        deadline = self.now + p.heal_ms
        while self.now < deadline:
            self.step_until(self.now + 50, chaos=False, propose=False)
            if self.converged():
                # One more client write must commit everywhere too.
                if not self.propose(self._random_record()):
                    continue
                until = min(deadline, self.now + 3000)
                while self.now < until:
                    self.step_until(self.now + 50, chaos=False, propose=False)
                    if self.converged():
                        return
        states = {
            i: (n.core.role.value, n.core.epoch, n.core.leader_id, n.applied, n.core.log_end)
            if n.core
            else None
            for i, n in self.nodes.items()
        }
        self.fail(f"no convergence {p.heal_ms}ms after healing: {states}")


def schedule_params(seed: int, extras: bool = True) -> SimParams:
    """The randomized parameters of schedule ``seed``. ``extras=False``: as drawn before
    fast restarts, schedules without pre-vote, small fetches and leader or voter kills
    existed (the simulation then replays those schedules exactly as it did)."""
    rng = random.Random(seed ^ 0x5EED)
    params = SimParams(
        voters=rng.choice([1, 3, 3, 5]),
        observers=rng.choice([0, 0, 1]),
        chaos_ms=rng.choice([1000, 2000]),
        drop=rng.choice([0.0, 0.02, 0.1]),
        dup=rng.choice([0.0, 0.05]),
        delay_ms=rng.choice([(1, 5), (1, 30), (5, 80)]),
        crash_rate=rng.choice([0.0, 0.002, 0.01]),
        partition_rate=rng.choice([0.0, 0.003, 0.01, 0.03]),
        snapshot_every=rng.choice([0, 8, 32]),
        reconfig_rate=rng.choice([0.0, 0.0, 0.01]),
        crash_in_batch=rng.choice([0.0, 0.002, 0.01]),
    )
    # Drawn last, so the other parameters of every seed stay as they were: one
    # schedule in four reconfigures often, with an observer to promote.
    if rng.random() < 0.25:
        params.reconfig_rate = 0.02
        params.observers = max(params.observers, 1)
    if not extras:
        return params
    # Later additions draw from their own stream (see RaftSim.xrng).
    xr = random.Random(seed ^ 0xFA57)
    if params.crash_rate or params.crash_in_batch:
        params.fast_restart = xr.choice([0.0, 0.3, 0.8])
    # Without pre-vote a removed voter is Raft's disruptive server (its candidacies
    # depose every leader, and it never hears of them); only fixed voter sets then.
    params.pre_vote = xr.random() >= 0.25 or params.reconfig_rate > 0
    if xr.random() < 0.4 and params.delay_ms != (5, 80):
        # Followers then catch up slowly: fewer writes.
        params.max_fetch_entries = xr.choice([1, 2])
        params.propose_every_ms = 60
    if xr.random() < 0.3:
        params.leader_kill = xr.choice([0.3, 0.6, 1.0])
    if xr.random() < 0.3:
        params.vote_kill = xr.choice([0.2, 0.5])
    if xr.random() < 0.1:
        params = replace(params, **FIGURE_8)
    return params


# Raft's figure 8 as a schedule family: three voters, every new leader killed soon
# after its election, followers fetching one entry at a time, so that leaders of
# different epochs leave conflicting uncommitted tails and a new leader re-replicates
# an earlier epoch's entries one by one.
FIGURE_8: dict[str, Any] = dict(
    voters=3,
    observers=0,
    chaos_ms=3000,
    drop=0.02,
    delay_ms=(1, 30),
    partition_rate=0.0,
    reconfig_rate=0.0,
    max_fetch_entries=1,
    propose_every_ms=60,
    leader_kill=1.0,
)


def run_schedule(seed: int, params: SimParams | None = None) -> RaftSim:
    """Replay one schedule; raises InvariantViolation naming the seed on failure."""
    sim = RaftSim(seed, params if params is not None else schedule_params(seed))
    sim.run()
    return sim
