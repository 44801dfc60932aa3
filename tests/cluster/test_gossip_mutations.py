"""The gossip simulation's checks have teeth: each broken SWIM ingredient is caught.

Each test monkeypatches one rule out of ``GossipCore`` (or its configuration) and
asserts that some of the first ``N`` seeded schedules fail, naming the check that
caught it:

- no suspicion phase (a missed probe kills at once): a live member is declared dead on
  a quiet network (``_check_event``);
- no indirect probes: with a cut direct link, a live member is suspected on a quiet,
  fast network (``_check_event``);
- suspicion never ends: a member that crashed during chaos is not marked dead within
  the detection bound (``_check_crash_detected``, checked after every step);
- a member wrongly declared dead does not refute the verdict: it stays dead to a live,
  reachable observer beyond the bound (``_check_no_live_member_held_dead``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from jocko_py.cluster.gossip.core import GossipCore
from jocko_py.cluster.gossip.messages import Update
from tests.cluster import sim_gossip
from tests.cluster.sim_gossip import GossipViolation, run_gossip_schedule

N = 150


def _first_failure(n: int = N, chaos_only: bool = False) -> str:
    for seed in range(n):
        try:
            if chaos_only:
                params = sim_gossip.schedule_params(seed)
                sim = sim_gossip.GossipSim(seed, params, sim_gossip.SIM_GOSSIP_CONFIG)
                sim.step_until(params.chaos_ms, chaos=True)
            else:
                run_gossip_schedule(seed)
        except GossipViolation as e:
            return str(e)
    return ""


@pytest.fixture
def restore() -> Iterator[None]:
    saved = dict(vars(GossipCore))
    cfg = sim_gossip.SIM_GOSSIP_CONFIG
    yield
    for k, v in saved.items():
        if not k.startswith("__"):
            setattr(GossipCore, k, v)
    sim_gossip.SIM_GOSSIP_CONFIG = cfg


def test_unmodified_core_passes_the_same_seeds() -> None:
    assert _first_failure(40) == ""


def test_without_suspicion_a_live_member_is_declared_dead(restore: None) -> None:
    GossipCore._suspicion_timeout = lambda self: 0  # type: ignore[method-assign]
    GossipCore._rumour_timeout = lambda self: 0  # type: ignore[method-assign]
    assert "dead on a quiet network" in _first_failure()


def test_without_indirect_probes_a_cut_link_raises_suspicion(
    restore: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = replace(sim_gossip.SIM_GOSSIP_CONFIG, indirect_k=0)
    monkeypatch.setattr(sim_gossip, "SIM_GOSSIP_CONFIG", cfg)
    assert "on a quiet" in _first_failure()


def test_endless_suspicion_misses_crashes_during_chaos(restore: None) -> None:
    GossipCore._suspicion_timeout = lambda self: 10**9  # type: ignore[method-assign]
    assert "after it crashed" in _first_failure(chaos_only=True)


def test_a_member_that_cannot_refute_death_stays_dead(restore: None) -> None:
    orig = GossipCore._maybe_refute

    def no_refute_of_death(self: GossipCore, u: Update, now: int) -> None:
        if u.state != "dead":
            orig(self, u, now)

    GossipCore._maybe_refute = no_refute_of_death  # type: ignore[method-assign]
    assert "live, reachable" in _first_failure(chaos_only=True)
