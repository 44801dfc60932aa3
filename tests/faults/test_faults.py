"""The short fault subset `make test` runs: every nemesis at least once, on real broker
processes in network namespaces (tests/faults/lab.py), under the Jepsen-style workload,
with the history checked (tests/faults/checker.py). `make chaos` is the long campaign.

Each test draws a fresh seed (printed; JOCKO_FAULT_SEED=<seed> replays it): the seed
picks targets, hold times and pauses. A failure prints the checker's findings with
examples, and the brokers' log tails.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from tests.faults.lab import can_isolate
from tests.faults.runner import run_once, summary
from tests.support.prereq import requires

pytestmark = requires(can_isolate()[0], f"fault lab {can_isolate()[1]}")

# A new leader must take acks=all writes within this bound after a leader crash (the
# campaign reports medians and worst cases; this is only a loose ceiling for CI).
FAILOVER_BOUND_S = 15.0


def seed() -> int:
    s = int(os.environ.get("JOCKO_FAULT_SEED") or random.randrange(1 << 31))
    print(f"fault seed {s} (replay: JOCKO_FAULT_SEED={s})")
    return s


def run(tmp_path: Path, schedule: list[str]) -> dict:
    s = seed()
    r = run_once(tmp_path / "lab", s, schedule, rate=30.0)
    (tmp_path / "result.json").write_text(json.dumps(r, indent=1, default=str))
    print(summary(r))
    for f in r.get("availability", []):
        first = f"{f['first_ack_worst_s']}s" if f.get("first_ack_worst_s") is not None \
            else "n/a (it led no partition)" if not f.get("affected") else "NEVER"
        print(f"  {f['nemesis']}: target {f.get('target')}, first ack after {first}, "
              f"ISR full {f.get('isr_full_after_heal_s')}s after heal")
    detail = json.dumps({k: r.get(k) for k in ("crash", "thread_errors", "replicas_agree")}
                        | {"examples": r.get("check", {}).get("examples"),
                           "faults": r.get("faults")}, indent=1, default=str)
    assert r["valid"], (f"{summary(r)}\n{detail}\n{r.get('traceback', '')}\n"
                        f"{r.get('log_tails', '')}")
    assert r["check"]["acknowledged"] > 100, summary(r)
    return r


def test_kill_leader_then_controller(tmp_path: Path) -> None:
    r = run(tmp_path, ["kill-leader", "kill-controller"])
    for f in r["availability"]:
        if f["affected"]:
            assert f["first_ack_worst_s"] is not None and \
                f["first_ack_worst_s"] < FAILOVER_BOUND_S, f


def test_pause_leader_past_lag_and_session_timeouts(tmp_path: Path) -> None:
    run(tmp_path, ["pause-leader"])


def test_partitions_isolate_leader_and_halves(tmp_path: Path) -> None:
    run(tmp_path, ["partition-isolate-leader", "partition-halves"])


def test_power_loss_of_a_leader(tmp_path: Path) -> None:
    r = run(tmp_path, ["power-loss-leader"])
    assert r["faults"][0]["bytes_dropped"] > 0, "the power loss dropped nothing"


def test_disk_full_on_a_leader(tmp_path: Path) -> None:
    """Its log dir goes offline, it stops with status 1 as Kafka halts (after trying a
    controlled shutdown), leadership moves, it comes back once space is freed."""
    r = run(tmp_path, ["disk-full-leader"])
    f = r["availability"][0]
    assert f["broker_exited"] and f["exit_code"] == 1, f
    assert f["first_ack_worst_s"] is not None and \
        f["first_ack_worst_s"] < FAILOVER_BOUND_S, f"partitions stayed unavailable: {f}"


def test_replication_matrix_subset(tmp_path: Path) -> None:
    """Kafka's replication_test, a subset (all of it in `make chaos CHAOS_NEMESES=matrix`):
    hard bounce x5 of the partition leader, clean bounce x5 of the controller, clean
    shutdown of the leader. Every acknowledged record consumed, none twice."""
    r = run(tmp_path, ["hard-bounce-leader", "clean-bounce-controller",
                       "clean-shutdown-leader"])
    c = r["check"]
    assert c["errors"]["lost"] == c["errors"]["unseen"] == 0
    assert c["errors"]["duplicates_broker"] == 0
