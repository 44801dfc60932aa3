"""Figures from the simulation, with the loopback test's timings, for comparison.

Run: ``.venv/bin/python -m tests.cluster.figures [runs]``. Prints JSON lines:
election time after the leader is lost (until a new leader is elected, and until it
commits), commit latency, and gossip detection time, all in virtual milliseconds on a
network with 1-2 ms one-way delay and no loss.
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

from jocko_py.cluster.gossip.core import GossipConfig
from jocko_py.cluster.raft.core import RaftConfig
from tests.cluster.sim_gossip import GossipParams, GossipSim
from tests.cluster.sim_raft import RaftSim, SimParams

LOOPBACK_RAFT = RaftConfig(
    election_timeout_ms=300, fetch_timeout_ms=600, fetch_max_wait_ms=200, request_timeout_ms=150
)
LOOPBACK_GOSSIP = GossipConfig(
    probe_interval_ms=200,
    probe_timeout_ms=80,
    suspicion_mult=4,
    sync_interval_ms=2000,
    reconnect_interval_ms=600,
)


def _summary(xs: list[int] | list[float]) -> dict[str, Any]:
    s = sorted(xs)
    return {
        "n": len(s),
        "min": round(s[0], 2),
        "p50": round(statistics.median(s), 2),
        "p99": round(s[max(0, int(len(s) * 0.99) - 1)], 2),
        "max": round(s[-1], 2),
    }


def raft_figures(runs: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    elected: list[int] = []
    committed: list[int] = []
    latency: list[int] = []
    quiet = SimParams(
        voters=3, drop=0.0, dup=0.0, delay_ms=(1, 2), crash_rate=0.0, partition_rate=0.0, tick_ms=5
    )
    for seed in range(runs):
        sim = RaftSim(seed, quiet, LOOPBACK_RAFT)
        sim.step_until(3000, chaos=False, propose=False)
        for _ in range(20):
            n_before = len(sim.stats.commit_latency)
            sim.propose(sim._random_record())
            while len(sim.stats.commit_latency) == n_before:
                sim.step_until(sim.now + 1, chaos=False, propose=False)
        latency += sim.stats.commit_latency
        ldr = sim.live_leader()
        assert ldr is not None and ldr.core is not None
        old_epoch = ldr.core.epoch
        t0 = sim.now
        sim.crash(ldr, 10**9)
        t_elected = None
        while True:
            sim.step_until(sim.now + 1, chaos=False, propose=False)
            new = sim.live_leader()
            if new is None or new.core is None or new.core.epoch <= old_epoch:
                continue
            if t_elected is None:
                t_elected = sim.now
            if new.core.high_watermark > new.core._epoch_start:
                break
        elected.append(t_elected - t0)
        committed.append(sim.now - t0)
    return _summary(elected), _summary(committed), _summary(latency)


def gossip_figures(runs: int) -> dict[str, Any]:
    det: list[int] = []
    for seed in range(runs):
        sim = GossipSim(
            seed,
            GossipParams(
                members=3,
                drop=0.0,
                dup=0.0,
                delay_ms=(1, 2),
                crash_rate=0.0,
                leave_rate=0.0,
                partition_rate=0.0,
                chaos_ms=2000,
            ),
            LOOPBACK_GOSSIP,
        )
        sim.run()
        det += sim.stats.detection_ms
    return _summary(det)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    elected, committed, latency = raft_figures(runs)
    print(
        json.dumps(
            {
                "figure": "sim_election_after_leader_loss_ms",
                "elected": elected,
                "first_commit": committed,
            }
        )
    )
    print(json.dumps({"figure": "sim_commit_latency_ms", **latency}))
    print(json.dumps({"figure": "sim_gossip_detection_ms", **gossip_figures(runs)}))


if __name__ == "__main__":
    main()
