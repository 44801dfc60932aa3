"""Deterministic, seeded simulation of SWIM gossip membership.

Virtual clock; a network that drops, delays, duplicates and reorders datagrams and
partitions member sets; members that crash (losing all state, as a process does),
restart and rejoin through a seed, or leave gracefully. A failure raises
``GossipViolation`` naming the seed; ``run_gossip_schedule(seed)`` replays it.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from jocko_py.cluster.gossip.core import GossipConfig, GossipCore, State
from jocko_py.cluster.gossip.messages import GossipMessage, MemberEvent, MemberMeta, Send


class GossipViolation(AssertionError):
    pass


SIM_GOSSIP_CONFIG = GossipConfig(
    probe_interval_ms=100,
    probe_timeout_ms=40,
    indirect_k=3,
    suspicion_mult=4,
    sync_interval_ms=1000,
    reconnect_interval_ms=300,
)


@dataclass
class GossipParams:
    members: int = 5
    chaos_ms: int = 3000
    tick_ms: int = 10
    delay_ms: tuple[int, int] = (1, 10)
    drop: float = 0.05
    dup: float = 0.02
    crash_rate: float = 0.003
    leave_rate: float = 0.001
    partition_rate: float = 0.002
    # Pairs of members whose direct link is cut for the whole schedule (both ways);
    # every cut pair still has helpers that reach both, so SWIM's indirect probes work.
    cut_links: int = 0


@dataclass
class GossipStats:
    detection_ms: list[int] = field(default_factory=list)


def meta_for(i: int) -> MemberMeta:
    return MemberMeta(i, f"127.0.0.1:{9091 + i}", f"127.0.0.1:{19091 + i}", f"r{i % 2}")


class GossipSim:
    def __init__(self, seed: int, p: GossipParams, cfg: GossipConfig = SIM_GOSSIP_CONFIG) -> None:
        self.seed = seed
        self.p = p
        self.cfg = cfg
        self.rng = random.Random(seed)
        self.now = 0
        self._seq = 0
        self.queue: list[tuple[int, int, GossipMessage, str]] = []
        self.groups: dict[str, int] | None = None
        self.heal_at = -1
        self.drop = p.drop
        self.names = [f"n{i}" for i in range(1, p.members + 1)]
        self.cores: dict[str, GossipCore | None] = {}
        self.restart_at: dict[str, int] = {}
        self.stats = GossipStats()
        # (observer, member) -> since when the observer holds a live, reachable member dead.
        self.dead_since: dict[tuple[str, str], int] = {}
        # member -> when it crashed (while still down); None when it is not crashed.
        self.crashed_at: dict[str, int] = {}
        self.cut: set[frozenset[str]] = set()
        self.up_since: dict[str, int] = {}
        # Last crash, restart, leave, partition or heal: accuracy is judged only on a
        # network that has been quiet (no loss, no partition, no churn) since then.
        self.last_disturbance = 0
        self._cut_links(p.cut_links)
        for n in self.names:
            self._boot(n)

    def fail(self, why: str) -> None:
        raise GossipViolation(f"seed={self.seed} t={self.now}ms: {why}")

    def _helpers(self, pair: frozenset[str], cut: set[frozenset[str]]) -> list[str]:
        a, b = sorted(pair)
        return [
            h
            for h in self.names
            if h not in pair and frozenset((a, h)) not in cut and frozenset((b, h)) not in cut
        ]

    def _cut_links(self, k: int) -> None:
        """Cut ``k`` direct links, keeping for every cut pair (earlier ones included: a
        later cut can take an earlier pair's helper) at least two helpers with clean links
        to both ends. SWIM's indirect probe has one relay, so one helper must survive the
        crash of any one member (the detection phase crashes one)."""
        pairs = [frozenset((a, b)) for x, a in enumerate(self.names) for b in self.names[x + 1 :]]
        self.rng.shuffle(pairs)
        for pair in pairs:
            if len(self.cut) >= k:
                break
            cut = self.cut | {pair}
            if all(len(self._helpers(q, cut)) >= 2 for q in cut):
                self.cut = cut

    def _boot(self, name: str) -> None:
        self.last_disturbance = self.now
        self.up_since[name] = self.now
        self.crashed_at.pop(name, None)
        i = int(name[1:])
        core = GossipCore(name, name, meta_for(i), self.cfg, seed=self.rng.randrange(2**32))
        self.cores[name] = core
        # Like a broker's configuration: every other member's address is a seed.
        seeds = [s for s in self.names if s != name]
        self._run(name, core.join(seeds, self.now))

    def _run(self, src: str, actions: Sequence[object]) -> None:
        for a in actions:
            if isinstance(a, MemberEvent):
                self._check_event(src, a)
            elif isinstance(a, Send):
                if self.rng.random() < self.drop:
                    continue
                copies = 2 if self.rng.random() < self.p.dup else 1
                for _ in range(copies):
                    self._seq += 1
                    at = self.now + self.rng.randint(*self.p.delay_ms)
                    heapq.heappush(self.queue, (at, self._seq, a.message, a.addr))

    def can_talk(self, a: str, b: str) -> bool:
        if a != b and frozenset((a, b)) in self.cut:
            return False
        return self.reachable(a, b)

    def reachable(self, a: str, b: str) -> bool:
        """Same partition group (a cut direct link still leaves b reachable through others)."""
        return self.groups is None or self.groups.get(a) == self.groups.get(b)

    def quiet(self) -> bool:
        """No loss or partition, and no churn for ``settle_ms``: a clean network."""
        return (
            self.drop == 0.0
            and self.groups is None
            and self.now - self.last_disturbance >= self.settle_ms()
        )

    def fast(self) -> bool:
        """An indirect probe (4 hops) fits between the probe timeout and the period's end."""
        c = self.cfg
        return 4 * self.p.delay_ms[1] + self.p.tick_ms < c.probe_interval_ms - c.probe_timeout_ms

    def _check_event(self, observer: str, ev: MemberEvent) -> None:
        """Accuracy on a quiet network. Suspicion lets a live member refute: none is ever
        declared failed, however slow the links. Indirect probes route around a cut direct
        link: on fast links no live member is even suspected."""
        if ev.kind not in ("failed", "suspect") or not self.quiet():
            return
        target = self.cores.get(ev.name)
        if target is None or target.left:
            return
        if ev.kind == "failed":
            self.fail(f"{observer} declared live {ev.name} dead on a quiet network")
        if self.fast():
            self.fail(f"{observer} suspected live {ev.name} on a quiet, fast network")

    def live(self) -> list[str]:
        return [n for n, c in self.cores.items() if c is not None and not c.left]

    def check_always(self) -> None:
        live = self.live()
        for n in live:
            c = self.cores[n]
            assert c is not None
            if c.members[n].state is not State.ALIVE:
                self.fail(f"{n} believes itself {c.members[n].state.name}")
        self._check_no_live_member_held_dead(live)
        self._check_crash_detected(live)

    def _check_crash_detected(self, live: list[str]) -> None:
        """Every member that crashed (and is still down) is marked dead (or forgotten) by
        every live member, within ``detection_bound_ms`` of the crash
        (or of the later moment the observer came up)."""
        bound = self.detection_bound_ms()
        for victim, t0 in self.crashed_at.items():
            for a in live:
                ca = self.cores[a]
                assert ca is not None
                st = ca.state_of(victim)
                if st is None or st >= State.DEAD:
                    continue
                since = max(t0, self.up_since.get(a, 0))
                if self.now - since > bound:
                    self.fail(
                        f"{a} still holds {victim} {st.name} {self.now - t0}ms after it crashed "
                        f"(bound {bound}ms): {self.dump()}"
                    )

    def _check_no_live_member_held_dead(self, live: list[str]) -> None:
        """A live member reachable from an observer is not held dead (or left) by it for
        longer than ``false_dead_bound_ms`` (the clock starts when both are up and can talk)."""
        bound = self.false_dead_bound_ms()
        held: set[tuple[str, str]] = set()
        for a in live:
            ca = self.cores[a]
            assert ca is not None
            for b in live:
                if b == a or not self.reachable(a, b):
                    continue
                st = ca.state_of(b)
                if st is None or st < State.DEAD:
                    continue
                key = (a, b)
                held.add(key)
                since = self.dead_since.setdefault(key, self.now)
                if self.now - since > bound:
                    self.fail(
                        f"{a} has held live, reachable {b} {st.name} for {self.now - since}ms "
                        f"(bound {bound}ms): {self.dump()}"
                    )
        for key in list(self.dead_since):
            if key not in held:
                del self.dead_since[key]

    def step_until(self, t_end: int, chaos: bool) -> None:
        p = self.p
        while self.now < t_end:
            tick_at = self.now + p.tick_ms
            while self.queue and self.queue[0][0] <= tick_at:
                t, _, msg, dest = heapq.heappop(self.queue)
                self.now = max(self.now, t)
                core = self.cores.get(dest)
                if core is None or not self.can_talk(msg.src, dest):
                    continue
                self._run(dest, core.receive(msg, self.now))
            self.now = tick_at
            if self.groups is not None and self.now >= self.heal_at:
                self.groups = None
                self.last_disturbance = self.now
            for n in self.names:
                core = self.cores[n]
                if core is None:
                    if 0 <= self.restart_at.get(n, -1) <= self.now:
                        self._boot(n)
                    continue
                self._run(n, core.tick(self.now))
            if chaos:
                self._chaos()
            self.check_always()

    def _chaos(self) -> None:
        p, rng = self.p, self.rng
        live = self.live()
        if live and rng.random() < p.crash_rate:
            n = rng.choice(live)
            self.crash(n, self.now + rng.randint(100, 2000))
        live = self.live()
        if live and rng.random() < p.leave_rate:
            n = rng.choice(live)
            core = self.cores[n]
            assert core is not None
            self._run(n, core.leave(self.now))
            self.last_disturbance = self.now
            self.restart_at[n] = self.now + rng.randint(500, 2000)
        if self.groups is None and rng.random() < p.partition_rate:
            names = list(self.names)
            rng.shuffle(names)
            cut = rng.randint(1, len(names) - 1)
            self.groups = {n: (0 if k < cut else 1) for k, n in enumerate(names)}
            self.heal_at = self.now + rng.randint(200, 2000)
            self.last_disturbance = self.now

    def crash(self, name: str, restart_at: int) -> None:
        self.cores[name] = None
        self.restart_at[name] = restart_at
        self.crashed_at[name] = self.now
        self.last_disturbance = self.now

    def _restart_left(self) -> None:
        for n in self.names:
            c = self.cores[n]
            if c is not None and c.left:
                self.cores[n] = None

    def views_converged(self, expect_dead: set[str]) -> bool:
        live = self.live()
        if len(live) != len(self.names) - len(expect_dead):
            return False
        for a in live:
            ca = self.cores[a]
            assert ca is not None
            for b in self.names:
                if b == a:
                    continue
                st = ca.state_of(b)
                if b in expect_dead:
                    if st is not None and st <= State.SUSPECT:
                        return False
                elif st is not State.ALIVE:
                    return False
        return True

    def _n_log(self) -> float:
        return max(1.0, math.log10(len(self.names)))

    def suspicion_ms(self) -> int:
        """The core's suspicion timeout for this cluster size (rule 2)."""
        return int(self.cfg.suspicion_mult * self._n_log() * self.cfg.probe_interval_ms)

    def dissemination_ms(self) -> int:
        """Probe periods for an update to be retransmitted its full count (rule 4)."""
        c = self.cfg
        rounds = c.retransmit_mult * max(1, math.ceil(math.log10(len(self.names) + 1)))
        return rounds * c.probe_interval_ms

    def false_dead_bound_ms(self) -> int:
        """How long a live member reachable from an observer may stay dead to it: one
        reconnect period until the two exchange state (rule 5; the dead side answers with
        the verdict so the member refutes), then a suspicion timeout for verdicts still in
        flight and twice the dissemination time for the refutation (loss may cost a round)."""
        c = self.cfg
        return c.reconnect_interval_ms + self.suspicion_ms() + 2 * self.dissemination_ms()

    def settle_ms(self) -> int:
        """After churn, suspicions and verdicts already in flight may still fire."""
        return self.false_dead_bound_ms()

    def convergence_bound_ms(self) -> int:
        c = self.cfg
        return 3 * c.reconnect_interval_ms + 2 * c.sync_interval_ms + 40 * c.probe_interval_ms

    def detection_bound_ms(self) -> int:
        c = self.cfg
        n = len(self.names)
        return (2 * n + c.suspicion_mult + 6) * c.probe_interval_ms

    def run(self) -> None:
        self.step_until(self.p.chaos_ms, chaos=True)
        # Heal: no partitions or loss, everyone (re)started.
        if self.groups is not None or self.drop:
            self.last_disturbance = self.now
        self.groups = None
        self.drop = 0.0
        self._restart_left()
        for n in self.names:
            if self.cores[n] is None:
                self._boot(n)
        deadline = self.now + self.convergence_bound_ms()
        while not self.views_converged(set()):
            if self.now >= deadline:
                self.fail(f"live members still not all alive to each other: {self.dump()}")
            self.step_until(self.now + 50, chaos=False)
        # Crash one member on a clean network: everyone must mark it dead in time.
        if len(self.names) < 2:
            return
        victim = self.rng.choice(self.names)
        self.crash(victim, -1)
        t0 = self.now
        deadline = t0 + self.detection_bound_ms()
        while not self.views_converged({victim}):
            if self.now >= deadline:
                self.fail(
                    f"{victim} not detected within {self.detection_bound_ms()}ms: {self.dump()}"
                )
            self.step_until(self.now + self.p.tick_ms, chaos=False)
        self.stats.detection_ms.append(self.now - t0)

    def dump(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for n, c in self.cores.items():
            if c is not None:
                out[n] = {m.name: f"{m.state.name}/{m.incarnation}" for m in c.members.values()}
        return out


def schedule_params(seed: int) -> GossipParams:
    """The randomized parameters of schedule ``seed``: a quarter are quiet networks."""
    rng = random.Random(seed ^ 0x6055)
    params: GossipParams | None = None
    if rng.random() < 0.25:
        # A quiet network (no loss, no churn): the accuracy checks judge every event.
        fast = rng.random() < 0.6
        params = GossipParams(
            members=rng.choice([3, 5, 8]),
            chaos_ms=rng.choice([2000, 3000]),
            delay_ms=rng.choice([(1, 5), (1, 10)]) if fast else (5, 60),
            drop=0.0,
            dup=rng.choice([0.0, 0.05]),
            crash_rate=0.0,
            leave_rate=0.0,
            partition_rate=0.0,
            cut_links=rng.choice([1, 2, 3]) if fast else 0,
        )
    else:
        params = GossipParams(
            members=rng.choice([2, 3, 5, 8]),
            chaos_ms=rng.choice([1000, 3000]),
            delay_ms=rng.choice([(1, 5), (1, 20), (5, 60)]),
            drop=rng.choice([0.0, 0.05, 0.2]),
            dup=rng.choice([0.0, 0.05]),
            crash_rate=rng.choice([0.0, 0.003, 0.01]),
            leave_rate=rng.choice([0.0, 0.002]),
            partition_rate=rng.choice([0.0, 0.003]),
        )
    return params


def run_gossip_schedule(seed: int, params: GossipParams | None = None) -> GossipSim:
    sim = GossipSim(seed, params or schedule_params(seed), SIM_GOSSIP_CONFIG)
    sim.run()
    return sim
