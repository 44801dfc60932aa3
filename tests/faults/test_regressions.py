"""Scripted fault sequences, one per bug the fault campaign found (each failed before
its fix). They run on the fault lab: real processes in network namespaces."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from tests.faults.lab import Lab, can_isolate
from tests.faults.runner import run_once, summary
from tests.support.prereq import requires


def test_isolating_the_active_controller_leaves_the_other_brokers_unfenced(lab: Lab) -> None:
    """Found by the partition nemesis: with the active controller cut off from the two
    other brokers, those two elected a new controller, but their BrokerHeartbeats were
    still waiting (up to 15 s) on a request to the old one, so the new controller fenced
    both of them, itself included: no broker was live and every partition went offline
    until the partition healed. A forwarded request is now abandoned as soon as the
    quorum names another controller."""
    old = lab.controller()
    others = [i for i in lab.brokers if i != old]
    lab.partition([{old}, set(others)])
    via = lab.brokers[others[0]]
    session_s = int(lab.props["broker.session.timeout.ms"]) / 1000

    def others_live_under_new_controller() -> bool:
        md = lab.metadata(via=via)
        return md.controller_id in others and set(others) <= {b.node_id for b in md.brokers}

    lab.wait_for("a new controller with the two connected brokers live",
                 others_live_under_new_controller, timeout=20)
    # and they stay live: heartbeats reach the new controller (the bug fenced them
    # one session timeout after the election)
    until = time.monotonic() + 2 * session_s + 2
    while time.monotonic() < until:
        md = lab.metadata(via=via)
        live = {b.node_id for b in md.brokers}
        assert set(others) <= live, f"brokers {sorted(set(others) - live)} fenced while " \
            f"connected to the new controller {md.controller_id}\n{lab.log_tails()}"
        time.sleep(0.5)
    lab.heal()
    lab.wait_registered(set(lab.brokers), timeout=30)


@requires(can_isolate()[0], f"fault lab {can_isolate()[1]}")
def test_power_loss_of_a_leader_restarted_at_once_loses_nothing(tmp_path: Path) -> None:
    """Found by the power-loss nemesis (campaign run seed 1749015318: 108 acknowledged
    writes lost, 2,193 unseen): a leader lost its unflushed tail and came back within a
    second, before the controller noticed it was gone. Its metadata still named it
    leader at its old epoch; it acted on that with its cut-back log and the followers
    truncated to it. A restarted broker now publishes nothing before the controller
    registered this incarnation (out of every ISR, leaderships moved) and unfenced it."""
    seed = int(os.environ.get("JOCKO_FAULT_SEED") or random.randrange(1 << 31))
    print(f"fault seed {seed} (replay: JOCKO_FAULT_SEED={seed})")
    r = run_once(tmp_path / "lab", seed, ["power-loss-quick-leader"] * 4, rate=30.0)
    assert r["valid"], f"{summary(r)}\n{r.get('check', {}).get('examples')}\n" \
        f"{r.get('traceback', '')}"
    assert all(f["bytes_dropped"] > 0 for f in r["faults"]), r["faults"]
