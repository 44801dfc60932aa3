"""Scale by simulation, the short version `make test` runs (`make scale-sim` is the full
100-broker / 100,000-partition / 500-member run; figures in the README).

The gossip test draws a fresh seed per run (printed); JOCKO_SIM_SEED=<seed> replays."""

from __future__ import annotations

import os
import random

from tests.cluster.sim_scale import gossip_figures, metadata_figures

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
