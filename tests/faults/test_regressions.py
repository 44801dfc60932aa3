"""Scripted fault sequences, one per bug the fault campaign found (each failed before
its fix). They run on the fault lab: real processes in network namespaces."""

from __future__ import annotations

import time

from tests.faults.lab import Lab


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
