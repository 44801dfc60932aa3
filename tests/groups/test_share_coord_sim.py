"""Seeded schedules of the share coordinator on the coordinator runtime (see
``sim_share_coord``): share-partition leaders reading and writing state, leadership
moves with zombies still writing, re-initializations and deletions by the group
coordinator, coordinator failovers that lose the uncommitted tail, pruning; checked:
acknowledged writes are durable, stale leaders and state epochs are fenced, pruning
keeps what a reload needs; and a broken core (no leader-epoch fencing, a merge where the
newest write wins, pruning past what is needed) is caught by the matching checker.

Seeds start at the run's base seed (``tests/cluster/sim_seed.py``, printed at the end;
``JOCKO_SIM_BASE_SEED`` fixes it); ``JOCKO_SIM_SHARE_COORD_SCHEDULES`` sets the count
(default 4); ``JOCKO_SIM_SEED=<seed>`` replays one schedule.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from jocko_py.broker.share import batches, shard
from jocko_py.broker.share.persister import StateBatch
from tests.cluster.sim_seed import BASE_SEED
from tests.groups.sim_groups import InvariantViolation
from tests.groups.sim_share_coord import run_schedule

N = int(os.environ.get("JOCKO_SIM_SHARE_COORD_SCHEDULES", "4"))
ONLY = os.environ.get("JOCKO_SIM_SEED")


def test_share_coordinator_schedules() -> None:
    """Every schedule keeps the invariants; together they exercise every fault (writes
    acknowledged and fenced, zombies fenced, failovers, leader moves, re-initializations,
    prunes)."""
    seeds = [int(ONLY)] if ONLY is not None else \
        [BASE_SEED + 11_000_000 + s for s in range(N)]
    total: dict[str, int] = {}
    for seed in seeds:
        try:
            sim = run_schedule(seed)
        except AssertionError:
            raise
        except Exception as e:  # a crash in the coordinator fails the seed too
            pytest.fail(f"seed={seed}: {type(e).__name__}: {e} (replay with "
                        f"JOCKO_SIM_SEED={seed} pytest tests/groups/test_share_coord_sim.py)")
        for k, v in sim.stats.items():
            total[k] = total.get(k, 0) + v
    if ONLY is None and N >= 4:
        assert all(v > 0 for v in total.values()), total


def _newest_wins(old: Any, new: Any, start: int) -> tuple[StateBatch, ...]:
    """A broken merge: the batches of a write replace what they overlap."""
    new = tuple(batches.prune(new, start))
    kept = [b for b in batches.prune(old, start) if not any(
        n.first_offset <= b.last_offset and b.first_offset <= n.last_offset for n in new)]
    return tuple(sorted([*kept, *new], key=lambda b: b.first_offset))


def _no_leader_fencing(orig: Any) -> Any:
    def write(self: Any, now: int, key: Any, *args: Any) -> Any:
        saved = dict(self.leader_epochs)
        self.leader_epochs.clear()
        try:
            return orig(self, now, key, *args)
        finally:
            self.leader_epochs.update(saved)
    return write


@pytest.mark.parametrize("mutation", ["no_leader_fencing", "newest_wins", "prune_too_far"])
def test_each_invariant_catches_a_broken_core(mutation: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    check = {"no_leader_fencing": "fenced", "newest_wins": "durable",
             "prune_too_far": "pruned"}[mutation]
    if mutation == "no_leader_fencing":
        monkeypatch.setattr(shard.ShareCoordinatorShard, "write",
                            _no_leader_fencing(shard.ShareCoordinatorShard.write))
    elif mutation == "newest_wins":
        monkeypatch.setattr(shard, "combine", _newest_wins)
    else:  # below the newest snapshot instead of the oldest one still needed
        monkeypatch.setattr(shard.ShareCoordinatorShard, "redundant_offset",
                            lambda self, dropped=frozenset(): max(
                                self.snapshot_offsets.values(), default=None))
    with pytest.raises(InvariantViolation, match=f"check={check}"):
        for seed in range(6):
            run_schedule(seed)
