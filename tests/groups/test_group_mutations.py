"""The group simulation's checks have teeth: each invariant's checker, alone, catches a
deliberately broken core within a few seeds (``sim_groups``).

- ``offsets`` (committed offsets never go backwards) catches a shard that accepts
  commits without checking the member and its generation (a zombie's stale commit
  lands over a newer owner's), and a runtime that answers before the records are
  committed (an acknowledged commit is lost when the coordinator fails over).
- ``owners`` (no partition owned by two members of one generation) catches a group
  that forms a new generation without bumping its number.
- ``live_owners`` (no partition of a consumer group owned by two live members) catches
  a consumer group that hands a partition over before its owner revoked it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from jocko_py.broker.coordinator.runtime import CoordinatorRuntime
from jocko_py.broker.group.consumer import ConsumerGroupModel
from jocko_py.broker.group.shard import GroupShard
from jocko_py.broker.group.state import Group, GroupState
from tests.groups.sim_groups import InvariantViolation, run_schedule, schedule_params

SEEDS = 60


def _first_failure(check: str) -> str:
    """The first violation among the seeds with only ``check`` switched on."""
    for seed in range(SEEDS):
        params = dataclasses.replace(schedule_params(seed), checks=(check,))
        try:
            run_schedule(seed, params)
        except InvariantViolation as e:
            return str(e)
    return ""


@pytest.fixture
def restore() -> Iterator[None]:
    saved: list[tuple[Any, str, Any]] = [
        (GroupShard, "_validate_commit", GroupShard._validate_commit),
        (CoordinatorRuntime, "_execute", CoordinatorRuntime._execute),
        (Group, "init_next_generation", Group.init_next_generation),
        (ConsumerGroupModel, "_held_elsewhere", ConsumerGroupModel._held_elsewhere),
    ]
    yield
    for cls, name, fn in saved:
        setattr(cls, name, fn)


def test_unfenced_commits_are_caught(restore: None) -> None:
    GroupShard._validate_commit = lambda self, *a, **k: None  # type: ignore[method-assign]
    found = _first_failure("offsets")
    assert "check=offsets" in found and "below the acknowledged commit" in found, found


def test_answers_before_commit_are_caught(restore: None) -> None:
    execute = CoordinatorRuntime._execute

    def early(self: Any, ctx: Any, op: Any, deliver: Any, now: int) -> None:
        ctx.committed = 1 << 62  # every answer counts as committed at once
        execute(self, ctx, op, deliver, now)

    CoordinatorRuntime._execute = early  # type: ignore[method-assign]
    found = _first_failure("offsets")
    assert "check=offsets" in found and "below the acknowledged commit" in found, found


def test_generation_not_bumped_is_caught(restore: None) -> None:
    def init_next_generation(self: Group, now_ms: int) -> None:
        if self.members:  # as the real one, but the generation stays
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    Group.init_next_generation = init_next_generation  # type: ignore[method-assign]
    found = _first_failure("owners")
    assert "check=owners" in found and "handed to" in found, found


def test_partition_handed_over_before_revocation_is_caught(restore: None) -> None:
    ConsumerGroupModel._held_elsewhere = lambda self, member_id: set()  # type: ignore[method-assign]
    found = _first_failure("live_owners")
    assert "check=live_owners" in found and "at once" in found, found
