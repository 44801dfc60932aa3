"""Seeded schedules of the group coordinator on the coordinator runtime (see
``sim_groups``): classic and KIP-848 members, crashes, pauses longer than the session,
coordinator failovers that lose the uncommitted tail of `__consumer_offsets`; one
checker per invariant (committed offsets never go backwards; no partition owned by two
members of one generation; no partition owned by two live members of a consumer group).

The campaign's seeds start at the run's base seed (``tests/cluster/sim_seed.py``: drawn
anew on every run and printed at the end; ``JOCKO_SIM_BASE_SEED`` fixes it).
``JOCKO_SIM_GROUP_SCHEDULES`` sets the count (default 40); ``JOCKO_SIM_SEED=<seed>``
replays one schedule.
"""

from __future__ import annotations

import os

import pytest

from tests.cluster.sim_seed import run_seeds, seed_chunks
from tests.groups.sim_groups import InvariantViolation, run_schedule

N = int(os.environ.get("JOCKO_SIM_GROUP_SCHEDULES", "40"))
CHUNK = 20


@pytest.mark.parametrize(("start", "count"), seed_chunks(9_000_000, N, CHUNK))
def test_group_schedules(start: int, count: int) -> None:
    run_seeds(start, count, run_schedule, InvariantViolation, what="groups",
              replay="tests/groups/test_group_sim.py")


def test_schedules_exercise_the_faults() -> None:
    """The schedules do what the checks rely on: commits acknowledged and fenced,
    generations, failovers, crashes and pauses."""
    total: dict[str, int] = {}
    for seed in range(8):
        for k, v in run_schedule(seed).stats.items():
            total[k] = total.get(k, 0) + v
    assert all(v > 0 for v in total.values()), total


# seeds that once failed, kept as regressions:
# 1123: a JoinGroup with a stale member id to an Empty group without offsets dropped the
#   group from memory, so the next generation was numbered 1 again while a zombie still
#   held generation 1's assignment (two owners of one generation number)
REGRESSIONS: list[int] = [1123]


def test_group_regression_seeds() -> None:
    for seed in REGRESSIONS:
        run_schedule(seed)
