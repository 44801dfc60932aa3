"""Scale by simulation, the short version `make test` runs (`make scale-sim` is the full
100-broker / 100,000-partition / 500-member run; figures in the README).

The gossip and controller-failover tests draw a fresh seed per run (printed);
JOCKO_SIM_SEED=<seed> replays."""

from __future__ import annotations

import os
import random

import pytest

from jocko_py.cluster.controller import Controller
from tests.cluster.sim_raft import InvariantViolation
from tests.cluster.sim_scale import (
    ControllerFailoverSim,
    controller_failover_figures,
    gossip_figures,
    metadata_figures,
)

MTU_PAYLOAD = 1400  # a gossip datagram must not need IP fragmentation on a 1500-byte MTU


def test_metadata_at_100_brokers_and_10000_partitions() -> None:
    f = metadata_figures(100, 10_000)
    assert f["partitions"] == 10_000 and f["create_records"] >= 10_000
    # every leadership of the dead broker moved, in one batch every broker applies
    assert f["failover_leaders_moved"] == f["failover_partitions_led"] > 0
    assert f["snapshot_bytes"] > 0


def test_gossip_150_members_converge_and_detect_with_small_datagrams() -> None:
    """Regression: a Sync (push-pull anti-entropy) carried a member's whole view in one
    datagram, about 130 bytes per member: 20 KB at 150 members, past UDP's 64 KiB at
    ~450, where anti-entropy stopped. Syncs now travel in datagrams of 8 members."""
    seed = int(os.environ.get("JOCKO_SIM_SEED") or random.randrange(1 << 31))
    print(f"gossip scale seed {seed} (replay: JOCKO_SIM_SEED={seed})")
    f = gossip_figures(150, seed)
    assert f["max_datagram_bytes"] <= MTU_PAYLOAD, f
    assert f["detect_all_ms"] <= f["detection_bound_ms"], f


def _seed(what: str) -> int:
    seed = int(os.environ.get("JOCKO_SIM_SEED") or random.randrange(1 << 31))
    print(f"{what} seed {seed} (replay: JOCKO_SIM_SEED={seed})")
    return seed


@pytest.mark.parametrize("how", ["crash", "partition"])
def test_controller_failover_at_100_brokers(how: str) -> None:
    """The active controller crashes (or is cut off in a minority) with a request in
    flight, mid-way through creating 2,000 partitions on 100 brokers; another voter
    takes over. Every voter's image converges, every topic exists once with all its
    partitions, every leader is a live ISR member, producer-id blocks never overlap
    (ControllerFailoverSim.check_outcome)."""
    f = controller_failover_figures(100, 2_000, _seed(f"controller failover ({how})"), how)
    print(f)
    assert f["new_controller"] != f["old_controller"], f
    assert f["retried_requests"] >= 1, f  # the request in flight at the failover
    assert f["first_ack_after_failover_ms"] < 5_000, f


def test_controller_failover_catches_a_controller_that_forgets_the_log() -> None:
    """Mutation: a controller that allocates producer ids from what it reserved itself,
    not from the committed image, hands out a block the old controller already had
    after a failover; the simulation says so."""
    def forgetful(self: Controller, image: object, broker_id: int,
                  broker_epoch: int) -> tuple[int, list[object], tuple[int, int]]:
        from jocko_py.cluster.metadata import ProducerIdsRecord
        start = self._pid_reserved
        self._pid_reserved = start + 1000
        return 0, [ProducerIdsRecord(broker_id, broker_epoch, start + 1000)], (start, 1000)
    old = Controller.allocate_producer_ids
    Controller.allocate_producer_ids = forgetful  # type: ignore[assignment]
    try:
        with pytest.raises(InvariantViolation, match="producer-id blocks"):
            ControllerFailoverSim(_seed("mutation"), 100, 600, "crash").run()
    finally:
        Controller.allocate_producer_ids = old  # type: ignore[method-assign]
