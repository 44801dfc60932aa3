"""Seeded schedules of the transaction coordinator on the coordinator runtime (see
``sim_txn``): transactional producers that fence each other, pause past their timeout,
give up on a commit and abort; markers delayed, lost and re-sent; coordinator failovers
that lose the uncommitted tail of `__transaction_state`. Checker: a transaction is all
or nothing (one marker per partition it wrote, all with the same outcome; an
acknowledged commit committed everywhere).

The campaign's seeds start at the run's base seed (``tests/cluster/sim_seed.py``: drawn
anew on every run and printed at the end; ``JOCKO_SIM_BASE_SEED`` fixes it).
``JOCKO_SIM_TXN_SCHEDULES`` sets the count (default 24; `make sim-long` runs more); ``JOCKO_SIM_SEED=<seed>``
replays one schedule.
"""

from __future__ import annotations

import os

import pytest

from tests.cluster.sim_seed import run_seeds, seed_chunks
from tests.txn.sim_txn import InvariantViolation, run_schedule

N = int(os.environ.get("JOCKO_SIM_TXN_SCHEDULES", "24"))
CHUNK = 12


@pytest.mark.parametrize(("start", "count"), seed_chunks(11_000_000, N, CHUNK))
def test_txn_schedules(start: int, count: int) -> None:
    run_seeds(start, count, run_schedule, InvariantViolation, what="transactions",
              replay="tests/txn/test_txn_sim.py")


def test_schedules_exercise_the_faults() -> None:
    """The schedules do what the check relies on: commits and aborts acknowledged,
    producers fenced and told to retry, timeouts, commits given up, markers written,
    failovers and markers resumed by a new coordinator."""
    total: dict[str, int] = {}
    for seed in range(6):
        for k, v in run_schedule(seed).stats.items():
            total[k] = total.get(k, 0) + v
    assert all(v > 0 for v in total.values()), total


# seeds that once failed, kept as regressions
REGRESSIONS: list[int] = []


def test_txn_regression_seeds() -> None:
    for seed in REGRESSIONS:
        run_schedule(seed)
