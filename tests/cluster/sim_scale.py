"""Scale beyond this machine, by simulation: the real controller, metadata image and
gossip core at 100+ brokers and 100,000 partitions.

    python -m tests.cluster.sim_scale                    # the full figures (make scale-sim)
    python -m tests.cluster.sim_scale --brokers 100 --partitions 10000 --members 150

Metadata (wall-clock CPU of the real code, one process standing in for every broker):
creating the topics through `Controller.create_topic` and applying each batch to the
image; a broker's death handled by `Controller.reconcile` (leaders move) and that batch
applied by every broker's image (the time for a leadership change to reach every broker
is this apply time plus one metadata fetch round trip per broker); the metadata
snapshot's size and the time to encode it and to load it into a fresh image (what a new
controller or a restarted broker does first).

Gossip (virtual time, `tests/cluster/sim_gossip.GossipSim`: the real SWIM core over a
simulated lossy network): members joining through three seeds until every view holds
every member alive, then one member crashed until every view holds it dead; the largest
datagram any member sent (the full view used to travel in one Sync datagram: past ~450
members it no longer fit in UDP's 64 KiB and anti-entropy stopped).

Controller failover (virtual time, `ControllerFailoverSim`: the real raft core of three
controller voters over `tests/cluster/sim_raft.RaftSim`'s network, a real `Controller`
on whichever voter leads, each voter applying the committed log to its own image):
clients create the topics one request at a time, a broker dies, producer-id blocks are
allocated; mid-run, with a request in flight, the active controller crashes (or is cut
off in a minority) and another voter takes over; the clients retry what was not
acknowledged, a second broker dies under the new controller, and the old one comes
back. Asserted: every voter's image converges to the same one; every topic exists once,
with every partition, under the id of the creation that committed (a retry of a creation
that had committed meanwhile finds it: TOPIC_ALREADY_EXISTS); every leader is a live
ISR member; producer-id blocks handed out never overlap; the raft invariants of
`sim_raft` (one leader per epoch, committed entries durable and unchanged) hold
throughout.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jocko_py.cluster.controller import (
    BrokerInfo,
    Controller,
    ControllerConfig,
    committed_producer_block,
)
from jocko_py.cluster.gossip.messages import Send, encode_datagram
from jocko_py.cluster.metadata import (
    MetadataImage,
    MetadataRecord,
    ProducerIdsRecord,
    TopicRecord,
    decode_records,
    encode_records,
)
from jocko_py.cluster.raft.core import NotLeaderError, Role
from jocko_py.protocol.errors import ErrorCode
from tests.cluster.sim_gossip import GossipParams, GossipSim
from tests.cluster.sim_raft import RaftSim, SimNode, SimParams


def metadata_figures(brokers: int, partitions: int, per_topic: int = 100,
                     rf: int = 3, seed: int = 1) -> dict[str, Any]:
    ctl = Controller(ControllerConfig())
    img = MetadataImage()
    rng = random.Random(seed)
    live = {b: BrokerInfo(b, f"10.0.{b // 250}.{b % 250}", 9092, f"r{b % 3}", uuid.UUID(
        int=rng.getrandbits(128))) for b in range(1, brokers + 1)}
    t0 = time.process_time()
    img.apply_batch(ctl.reconcile(img, live))
    topics = max(1, partitions // per_topic)
    records = 0
    t0 = time.process_time()
    for i in range(topics):
        _, recs = ctl.create_topic(img, f"topic-{i:05d}", per_topic, rf)
        records += len(recs)
        img.apply_batch(recs)
    create_s = time.process_time() - t0
    t0 = time.process_time()
    data = encode_records(img.snapshot())
    encode_s = time.process_time() - t0
    t0 = time.process_time()
    fresh = MetadataImage()
    fresh.restore(decode_records(data))
    load_s = time.process_time() - t0
    # a broker dies: the controller moves its leaderships; every broker applies the batch
    victim = 1
    led = sum(1 for t in img.topics.values() for p in t.partitions.values()
              if p.leader == victim)
    t0 = time.process_time()
    recs = ctl.reconcile(img, {b: i for b, i in live.items() if b != victim})
    decide_s = time.process_time() - t0
    batch = encode_records(recs)
    t0 = time.process_time()
    delta = img.apply_batch(recs)
    apply_s = time.process_time() - t0
    moved = sum(1 for r in delta.partitions.values()
                if r.before is not None and r.after is not None
                and r.before.leader == victim and r.after.leader != victim)
    return {
        "brokers": brokers, "partitions": topics * per_topic, "topics": topics,
        "create_records": records, "create_cpu_s": round(create_s, 2),
        "create_us_per_partition": round(create_s / (topics * per_topic) * 1e6, 1),
        "snapshot_bytes": len(data), "snapshot_encode_s": round(encode_s, 3),
        "snapshot_load_s": round(load_s, 3),
        "failover_partitions_led": led, "failover_leaders_moved": moved,
        "failover_records": len(recs), "failover_batch_bytes": len(batch),
        "failover_decide_s": round(decide_s, 3), "failover_apply_s_per_broker": round(apply_s, 3),
        "failover_apply_s_all_brokers_serial": round(apply_s * brokers, 2),
    }


class ScaleGossipSim(GossipSim):
    """Members join through three seeds (a real deployment's `--join`), not through all."""

    max_datagram = 0
    datagrams = 0

    def _boot(self, name: str) -> None:
        self.last_disturbance = self.now
        self.up_since[name] = self.now
        self.crashed_at.pop(name, None)
        from jocko_py.cluster.gossip.core import GossipCore
        from tests.cluster.sim_gossip import meta_for

        core = GossipCore(name, name, meta_for(int(name[1:])), self.cfg,
                          seed=self.rng.randrange(2**32))
        self.cores[name] = core
        seeds = [s for s in self.names[:3] if s != name] or [self.names[0]]
        self._run(name, core.join(seeds, self.now))

    def _run(self, src: str, actions: Sequence[object]) -> None:
        for a in actions:
            if isinstance(a, Send):
                self.datagrams += 1
                self.max_datagram = max(self.max_datagram, len(encode_datagram(a.message)))
        super()._run(src, actions)


def gossip_figures(members: int, seed: int, drop: float = 0.01) -> dict[str, Any]:
    p = GossipParams(members=members, chaos_ms=0, drop=drop, dup=0.0, crash_rate=0.0,
                     leave_rate=0.0, partition_rate=0.0)
    t_wall = time.monotonic()
    sim = ScaleGossipSim(seed, p)
    deadline = sim.now + 120_000
    while not sim.views_converged(set()):
        if sim.now >= deadline:
            raise AssertionError(f"seed={seed}: {members} members did not converge in 120 s")
        sim.step_until(sim.now + 100, chaos=False)
    converged = sim.now
    victim = sim.names[-1]
    sim.crash(victim, -1)
    t0 = sim.now
    deadline = t0 + sim.detection_bound_ms()
    while not sim.views_converged({victim}):
        if sim.now >= deadline:
            raise AssertionError(f"seed={seed}: crash of {victim} not detected by everyone "
                                 f"within {sim.detection_bound_ms()} ms")
        sim.step_until(sim.now + 50, chaos=False)
    return {"members": members, "seed": seed, "drop": drop,
            "converge_ms": converged, "detect_all_ms": sim.now - t0,
            "detection_bound_ms": sim.detection_bound_ms(),
            "max_datagram_bytes": sim.max_datagram, "datagrams": sim.datagrams,
            "wall_s": round(time.monotonic() - t_wall, 1),
            "probe_interval_ms": sim.cfg.probe_interval_ms}


@dataclass
class Request:
    """A client's (or a broker's) request to the active controller, retried until
    acknowledged: ("create", topic), ("brokers", k): every broker is live but the first
    k of the dying ones (registrations, fencing, leaders moved), ("pids", broker id)."""

    kind: str
    arg: Any
    attempts: int = 0
    topic_ids: list[uuid.UUID] = field(default_factory=list)  # proposed by each attempt


@dataclass
class InFlight:
    req: Request
    node: int
    incarnation: int
    epoch: int
    offset: int
    data: bytes
    sent_at: int


class ControllerFailoverSim(RaftSim):
    """The controller of a `brokers`-broker cluster creating `partitions` partitions
    on three raft voters, the active one failing over mid-run (`how`: "crash" or
    "partition"). See the module docstring."""

    CLIENT_TIMEOUT_MS = 2000

    def __init__(self, seed: int, brokers: int, partitions: int, how: str = "crash",
                 per_topic: int = 100, rf: int = 3) -> None:
        params = SimParams(voters=3, drop=0.02, dup=0.02, delay_ms=(1, 15), crash_rate=0.0,
                           partition_rate=0.0)
        # (voter, process incarnation) -> the blocks its image handed out, in order
        self.blocks: dict[tuple[int, int], list[tuple[int, int] | None]] = {}
        super().__init__(seed, params, on_apply=self._seen)
        self.how = how
        self.per_topic, self.rf = per_topic, rf
        rng = random.Random(seed ^ 0xC7A1)
        self.live = {b: BrokerInfo(b, f"10.0.{b // 250}.{b % 250}", 9092, f"r{b % 3}",
                                   uuid.UUID(int=rng.getrandbits(128)))
                     for b in range(1, brokers + 1)}
        topics = max(1, partitions // per_topic)
        names = [f"topic-{i:05d}" for i in range(topics)]
        half = topics // 2
        self.dead = [brokers, brokers - 1]
        # before the failover: half the topics, a broker's death, a producer-id block;
        # the failover strikes with the next request in flight; then the rest
        self.queue_reqs: list[Request] = (
            [Request("brokers", 0)]  # every broker registers
            + [Request("create", n) for n in names[:half]]
            + [Request("brokers", 1), Request("pids", 1)]  # a broker dies
            + [Request("create", n) for n in names[half:]]
            + [Request("brokers", 2), Request("pids", 2)])  # another one dies
        self.fail_before = half + 3  # requests acknowledged when the failover strikes
        self.acked: list[tuple[Request, Any]] = []
        self.inflight: InFlight | None = None
        self.ctls: dict[tuple[int, int], Controller] = {}
        self.old_controller: int | None = None
        self.failover_at: int | None = None
        self.new_controller: int | None = None
        self.first_ack_after_ms: int | None = None
        self.retries = 0

    def _seen(self, n: SimNode, r: MetadataRecord, image: MetadataImage) -> None:
        if isinstance(r, ProducerIdsRecord):  # the block this record hands out, per voter
            self.blocks.setdefault((n.node_id, n.incarnation), []).append(
                committed_producer_block(image, r))

    def controller(self, n: SimNode) -> Controller:
        # a process's controller: a restarted voter starts a fresh one
        return self.ctls.setdefault((n.node_id, n.incarnation), Controller(ControllerConfig()))

    def after_tick(self) -> None:
        self._settle_inflight()
        if self.inflight is not None or not self.queue_reqs:
            return
        for n in self.nodes.values():
            c = n.core
            if c is None or c.role is not Role.LEADER:
                continue
            if not (c.high_watermark == c.log_end and n.applied == c.high_watermark):
                continue  # the node's control loop acts only once settled (node._settled)
            self._serve(n, self.queue_reqs[0])
            return

    def _serve(self, n: SimNode, req: Request) -> None:
        ctl, img = self.controller(n), n.image
        req.attempts += 1
        if req.attempts > 1:
            self.retries += 1
        recs: list[MetadataRecord]
        if req.kind == "create":
            err, recs = ctl.create_topic(img, req.arg, self.per_topic, self.rf)
            if err == ErrorCode.TOPIC_ALREADY_EXISTS:
                self._ack(req, "exists")  # an earlier attempt committed (checked at the end)
                return
            if err != ErrorCode.NONE:
                self.fail(f"create {req.arg}: error {err}")
            req.topic_ids.append(next(r.topic_id for r in recs if isinstance(r, TopicRecord)))
        elif req.kind == "brokers":
            live = {b: i for b, i in self.live.items() if b not in self.dead[:req.arg]}
            recs = ctl.reconcile(img, live)
            if not recs:
                self._ack(req, "done")  # already decided (an earlier attempt committed)
                return
        else:
            b = img.brokers[req.arg]
            err, recs, _ = ctl.allocate_producer_ids(img, req.arg, b.broker_epoch)
            if err != ErrorCode.NONE:
                self.fail(f"producer ids for {req.arg}: error {err}")
        data = encode_records(recs)
        assert n.core is not None
        try:
            off, actions = n.core.propose([data], self.now)
        except NotLeaderError:
            return
        self.inflight = InFlight(req, n.node_id, n.incarnation, n.core.epoch, off, data,
                                 self.now)
        self._run(n, actions)
        if len(self.acked) == self.fail_before and self.failover_at is None:
            self._fail_over(n)

    def _fail_over(self, n: SimNode) -> None:
        self.old_controller, self.failover_at = n.node_id, self.now
        if self.how == "crash":
            self.crash(n, 1000)
        else:  # the active controller alone on one side, for 1.5 s
            self.groups = {i: (0 if i == n.node_id else 1) for i in self.nodes}
            self.heal_at = self.now + 1500
            self._leader_lost_at = self.now

    def _settle_inflight(self) -> None:
        f = self.inflight
        if f is None:
            return
        e = self.committed.get(f.offset)
        if e is not None:
            self.inflight = None
            if e.data == f.data:
                self._ack(f.req, "committed")
            return  # another entry committed there: a retry (the client saw no answer)
        n = self.nodes[f.node]
        gone = (n.core is None or n.incarnation != f.incarnation
                or n.core.role is not Role.LEADER or n.core.epoch != f.epoch)
        if gone or self.now - f.sent_at > self.CLIENT_TIMEOUT_MS:
            self.inflight = None  # NOT_CONTROLLER or a timeout: the client asks again

    def _ack(self, req: Request, how: str) -> None:
        self.queue_reqs.remove(req)
        self.acked.append((req, how))
        if self.failover_at is not None and self.first_ack_after_ms is None:
            self.first_ack_after_ms = self.now - self.failover_at
            ldr = self.live_leader()
            self.new_controller = ldr.node_id if ldr is not None else None

    def run(self) -> None:
        deadline = 120_000
        while self.queue_reqs and self.now < deadline:
            self.step_until(self.now + 50, chaos=False, propose=False)
        if self.queue_reqs:
            self.fail(f"requests never acknowledged: {[(r.kind, r.arg) for r in self.queue_reqs]}")
        self.heal()
        until = self.now + 10_000
        while not self.converged() and self.now < until:
            self.step_until(self.now + 50, chaos=False, propose=False)
        if not self.converged():
            self.fail("the voters' images did not converge after the failover")
        self.check_outcome()

    def check_outcome(self) -> None:
        img = next(iter(self.nodes.values())).image
        if self.failover_at is None or self.new_controller in (None, self.old_controller):
            self.fail(f"no failover: old {self.old_controller}, new {self.new_controller}")
        for req, how in self.acked:
            if req.kind != "create":
                continue
            t = img.topics.get(req.arg)
            if t is None:
                self.fail(f"topic {req.arg} acknowledged ({how}) but lost")
            assert t is not None
            if t.topic_id not in req.topic_ids:
                self.fail(f"topic {req.arg} has id {t.topic_id}, none of its creations' "
                          f"{req.topic_ids}")
            if how == "committed" and t.topic_id != req.topic_ids[-1]:
                self.fail(f"topic {req.arg}: the acknowledged creation did not stick")
            if sorted(t.partitions) != list(range(self.per_topic)):
                self.fail(f"topic {req.arg} has partitions {sorted(t.partitions)}")
        creates = sum(1 for r, _ in self.acked if r.kind == "create")
        if len(img.topics) != creates:
            self.fail(f"{len(img.topics)} topics in the image, {creates} created")
        dead = set(self.dead)
        for name, t in img.topics.items():
            for pid, p in t.partitions.items():
                if p.leader < 0 or p.leader in dead or p.leader not in p.isr or \
                        dead & set(p.isr):
                    self.fail(f"{name}-{pid}: leader {p.leader} ISR {p.isr} (dead {dead})")
        for bid in dead:
            if not img.brokers[bid].fenced:
                self.fail(f"dead broker {bid} not fenced")
        lists = {tuple(self.blocks.get((n.node_id, n.incarnation), ()))
                 for n in self.nodes.values()}
        if len(lists) != 1:
            self.fail(f"voters disagree on the producer-id blocks: {self.blocks}")
        handed = [b for b in next(iter(lists)) if b is not None]
        for (s1, n1), (s2, _) in zip(handed, handed[1:], strict=False):
            if s2 < s1 + n1:
                self.fail(f"producer-id blocks overlap: {handed}")
        if len(handed) < 2:
            self.fail(f"producer-id blocks handed out: {handed}")


def controller_failover_figures(brokers: int, partitions: int, seed: int,
                                how: str = "crash") -> dict[str, Any]:
    t0 = time.process_time()
    sim = ControllerFailoverSim(seed, brokers, partitions, how)
    sim.run()
    return {
        "brokers": brokers, "partitions": partitions, "how": how,
        "old_controller": sim.old_controller, "new_controller": sim.new_controller,
        "first_ack_after_failover_ms": sim.first_ack_after_ms,
        "retried_requests": sim.retries,
        "acknowledged": {k: sum(1 for _, h in sim.acked if h == k)
                         for k in ("committed", "exists", "done")},
        "committed_entries": len(sim.committed), "virtual_ms": sim.now,
        "cpu_s": round(time.process_time() - t0, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--members", type=int, nargs="*", default=[100, 200, 500])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.randrange(1 << 31)
    print(f"scale simulation seed {seed} (replay: --seed {seed})", flush=True)
    md = metadata_figures(a.brokers, a.partitions, seed=seed)
    print(json.dumps(md, indent=1), flush=True)
    fo = [controller_failover_figures(a.brokers, a.partitions // 10, seed, how)
          for how in ("crash", "partition")]
    for f in fo:
        print(json.dumps(f), flush=True)
    gs = []
    for n in a.members:
        g = gossip_figures(n, seed)
        print(json.dumps(g), flush=True)
        gs.append(g)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"seed": seed, "metadata": md, "failover": fo, "gossip": gs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
