"""Seeded schedules of a share partition with leader failovers, failed and lost state
writes, crashing members and lock expiry (see ``sim_share``), and the mutation tests: a
deliberately broken core is caught by each invariant's checker.

Seeds start at the run's base seed (``tests/cluster/sim_seed.py``: drawn anew on every
run and printed at the end; ``JOCKO_SIM_BASE_SEED`` fixes it). ``JOCKO_SIM_SHARE_SCHEDULES``
sets the count (default 60); ``JOCKO_SIM_SEED=<seed>`` replays one schedule.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import pytest

from jocko_py.broker.share.partition import (
    AcquiredRange,
    FetchedBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateWrite,
)
from jocko_py.broker.share.persister import DeliveryState, StateBatch
from tests.cluster.sim_seed import BASE_SEED
from tests.share_partition.sim_share import InvariantViolation, run_schedule

N = int(os.environ.get("JOCKO_SIM_SHARE_SCHEDULES", "60"))
ONLY = os.environ.get("JOCKO_SIM_SEED")


def _seeds() -> list[int]:
    if ONLY is not None:
        return [int(ONLY)]
    base = BASE_SEED + 11_000_000  # apart from the other campaigns' seeds
    return list(range(base, base + N))


def test_share_partition_schedules() -> None:
    failures: list[str] = []
    seeds = _seeds()
    print(f"share partition schedules: seeds {seeds[0]}..{seeds[-1]} (base {BASE_SEED})")
    for seed in seeds:
        try:
            run_schedule(seed)
        except InvariantViolation as e:
            failures.append(str(e))
        except Exception as e:  # a crash of the core fails the seed too
            failures.append(f"seed={seed}: {type(e).__name__}: {e}")
        if len(failures) >= 2:
            break
    if failures:
        pytest.fail(
            f"share: failing schedule(s) of the run with base seed {BASE_SEED}; replay one "
            "with JOCKO_SIM_SEED=<seed> pytest tests/share_partition/test_share_sim.py -k schedules\n"
            + "\n".join(f[:4000] for f in failures))


def test_schedules_exercise_the_faults() -> None:
    """The schedules do what the checks rely on: acquisitions, acknowledgements answered
    and failed, lock expiry, members leaving, failovers, the in-flight limit."""
    total: dict[str, int] = {}
    for seed in range(10):
        for k, v in run_schedule(seed).stats.items():
            total[k] = total.get(k, 0) + v
    for k in ("acquired", "ack_ok", "ack_failed", "ack_refused", "expired", "member_left",
              "failover", "fetch_full"):
        assert total.get(k, 0) > 0, (k, total)


# seeds that once failed, kept as regressions:
# 0: a state write carried the start offset from before the acknowledgements it commits,
#   so the durable start offset (and the group's lag) stayed behind the leader's (found by
#   Kafka's share tests; the "durable" checker and `_StaleStart` came with the fix)
REGRESSIONS: list[int] = [0]


def test_share_regression_seeds() -> None:
    for seed in REGRESSIONS:
        run_schedule(seed)


# ---------------------------------------------------------------------- mutations


class _DoubleAcquire(SharePartition):
    """Broken: acquisition ignores other members' locks."""

    def acquire(self, member_id: str, fetch_offset: int, batches: Any, max_records: int,
                now: int, aborted: Any = (), strict_limit: bool = False
                ) -> list[AcquiredRange]:
        for r in self.records.values():
            if r.state is RecordState.ACQUIRED and not r.pending:
                r.state = RecordState.AVAILABLE
        return super().acquire(member_id, min(fetch_offset, self.start_offset), batches,
                               max_records, now, aborted, strict_limit)


class _NoLimit(SharePartition):
    """Broken: the delivery count limit is never applied."""

    def __init__(self, config: SharePartitionConfig, start_offset: int,
                 state_epoch: int = 0) -> None:
        super().__init__(replace(config, delivery_count_limit=10**9), start_offset,
                         state_epoch)


class _VolatileAccept(SharePartition):
    """Broken: accepts are not durable (what is written keeps the first start offset
    and acknowledged records as available)."""

    def __init__(self, config: SharePartitionConfig, start_offset: int,
                 state_epoch: int = 0) -> None:
        super().__init__(config, start_offset, state_epoch)
        self._first = start_offset

    def begin_write(self) -> StateWrite:
        w = super().begin_write()
        kept = tuple(StateBatch(b.first_offset, b.last_offset, DeliveryState.AVAILABLE,
                                b.delivery_count)
                     if b.delivery_state is DeliveryState.ACKNOWLEDGED else b
                     for b in w.batches)
        done = tuple(StateBatch(o, o, DeliveryState.AVAILABLE, 1)
                     for o in range(self._first, w.start_offset))
        return replace(w, start_offset=self._first, batches=done + kept)


class _StaleStart(SharePartition):
    """Broken: a write carries the start offset from before its acknowledgements."""

    def begin_write(self) -> StateWrite:
        return replace(super().begin_write(), start_offset=self.start_offset)


def _caught(cls: type[SharePartition], check: str) -> int:
    for seed in range(60):
        try:
            run_schedule(seed, cls.from_state)
        except InvariantViolation as e:
            assert f"check={check}" in str(e), str(e)[:2000]
            return seed
    raise AssertionError(f"{cls.__name__}: no schedule caught it ({check})")


@pytest.mark.parametrize(("core", "check"), [
    (_DoubleAcquire, "owner"),
    (_NoLimit, "limit"),
    (_VolatileAccept, "accepted"),
    (_StaleStart, "durable"),
])
def test_each_invariant_catches_a_broken_core(core: type[SharePartition], check: str) -> None:
    seed = _caught(core, check)
    print(f"{core.__name__} caught by {check} at seed {seed}")


def test_mutants_differ_from_the_core() -> None:
    """Sanity: the mutants really change behaviour on a tiny example."""
    cfg = SharePartitionConfig(delivery_count_limit=1, lock_duration_ms=10)
    p = _DoubleAcquire(replace(cfg, delivery_count_limit=5), 0)
    p.acquire("a", 0, [FetchedBatch(0, 0)], 10, 0)
    assert p.acquire("b", 0, [FetchedBatch(0, 0)], 10, 1)
    q = _NoLimit(cfg, 0)
    q.acquire("a", 0, [FetchedBatch(0, 0)], 10, 0)
    q.expire_locks(100)
    assert q.acquire("b", 0, [FetchedBatch(0, 0)], 10, 100)
