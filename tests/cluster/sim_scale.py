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
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.gossip.messages import Send, encode_datagram
from jocko_py.cluster.metadata import MetadataImage, decode_records, encode_records
from tests.cluster.sim_gossip import GossipParams, GossipSim


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
    gs = []
    for n in a.members:
        g = gossip_figures(n, seed)
        print(json.dumps(g), flush=True)
        gs.append(g)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"seed": seed, "metadata": md, "gossip": gs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
