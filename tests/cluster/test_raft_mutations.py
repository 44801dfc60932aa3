"""The raft simulation's checks have teeth: a core that breaks a rule is caught by seed.

- Persist before send: a core whose batches put every ``Send`` before its
  ``PersistQuorumState``/``AppendLog`` is caught directly (a message states a vote or a
  fetch offset that is not durable yet), and, with that direct check switched off, by
  its consequence: nodes crash in the middle of a batch (``SimParams.crash_in_batch``),
  lose what was not persisted, and a committed entry ends up durable on too few voters
  (``check_committed_durable``) or missing from a new leader.
- A disk that drops committed entries when it installs a snapshot is caught by
  ``check_committed_durable``.

Each of the following broken rules is caught by a consequence, not by comparing the
core with a reference:

- Raft's figure 8: a leader that commits an earlier epoch's entries by counting
  replicas (without an entry of its own epoch) lets a later leader overwrite them: a
  new leader lacks a committed entry, or a committed entry is truncated.
- A vote granted without the log up-to-date check (in schedules run without pre-vote,
  which would otherwise mask it): a leader is elected without a committed entry.
- A replica that forgets its vote across a (fast) restart votes twice in one epoch;
  the simulation sees the two grants themselves (``_check_vote``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jocko_py.cluster.raft.core import DurableState, RaftCore
from jocko_py.cluster.raft.messages import Action, PersistSnapshot, Send, Snapshot, VoteRequest
from jocko_py.cluster.raft.storage import MemoryStorage
from tests.cluster.sim_raft import (
    FIGURE_8,
    InvariantViolation,
    RaftSim,
    SimParams,
    run_schedule,
    schedule_params,
)

N = 300


def _first_failure(n: int = N, params: Callable[[int], SimParams | None] = schedule_params) -> str:
    """The first violation among ``n`` seeds (a seed whose params are None is skipped)."""
    for seed in range(n):
        p = params(seed)
        if p is None:
            continue
        try:
            run_schedule(seed, p)
        except InvariantViolation as e:
            return str(e)
    return ""


# What a lost or overwritten committed entry looks like to the simulation's checks.
LOST_COMMIT = r"lacks committed entry|truncated committed entry|but .* was committed"


@pytest.fixture
def restore() -> Iterator[None]:
    saved = {k: getattr(RaftCore, k) for k in ("start", "tick", "receive", "propose")}
    yield
    for k, v in saved.items():
        setattr(RaftCore, k, v)


def _sends_first(fn: Callable[..., Any], returns_pair: bool) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        acts = out[1] if returns_pair else out
        acts = [a for a in acts if isinstance(a, Send)] + [
            a for a in acts if not isinstance(a, Send)
        ]
        return (out[0], acts) if returns_pair else acts

    return wrapped


def _reorder_sends_first() -> None:
    for k in ("start", "tick", "receive"):
        setattr(RaftCore, k, _sends_first(getattr(RaftCore, k), False))
    RaftCore.propose = _sends_first(RaftCore.propose, True)  # type: ignore[method-assign]


def test_sending_before_persisting_is_caught(restore: None) -> None:
    _reorder_sends_first()
    assert "is durable" in _first_failure(50)


def test_sending_before_persisting_loses_data_on_crash(
    restore: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _reorder_sends_first()
    monkeypatch.setattr(RaftSim, "_check_sent_after_persist", lambda self, n, m: None)
    assert "seed=" in _first_failure()


def test_a_disk_losing_committed_entries_at_snapshot_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    orig = MemoryStorage.execute

    def lossy(self: MemoryStorage, a: Action) -> None:
        if isinstance(a, PersistSnapshot):
            # Keep the snapshot but lose every log entry, including those above it.
            s: Snapshot = a.snapshot
            a = PersistSnapshot(s, replace_log=True)
        orig(self, a)

    monkeypatch.setattr(MemoryStorage, "execute", lossy)
    assert "durable" in _first_failure()


def test_committing_an_earlier_epoch_by_counting_replicas_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    orig = RaftCore._update_hw

    def counts_replicas(self: RaftCore, now: int) -> None:
        # Forget where this leader's epoch starts: any entry on a majority commits.
        start = self._epoch_start
        self._epoch_start = -1
        try:
            orig(self, now)
        finally:
            self._epoch_start = start

    assert _first_failure(400, lambda s: SimParams(**FIGURE_8)) == ""  # the family is sound
    monkeypatch.setattr(RaftCore, "_update_hw", counts_replicas)
    assert re.search(LOST_COMMIT, _first_failure(400, lambda s: SimParams(**FIGURE_8)))


def test_a_vote_without_the_log_up_to_date_check_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    orig = RaftCore._on_vote_request

    def careless(self: RaftCore, m: VoteRequest, now: int) -> None:
        # Pre-votes still check the log (they would mask the bug); real votes do not.
        if not m.pre_vote:
            self._log_up_to_date = lambda last_epoch, last_offset: True  # type: ignore[method-assign]
        try:
            orig(self, m, now)
        finally:
            self.__dict__.pop("_log_up_to_date", None)

    monkeypatch.setattr(RaftCore, "_on_vote_request", careless)

    def without_pre_vote(seed: int) -> SimParams | None:
        p = schedule_params(seed)
        return None if p.pre_vote else p

    assert re.search(LOST_COMMIT, _first_failure(N, without_pre_vote))


def test_a_vote_forgotten_across_a_fast_restart_is_caught_as_a_double_vote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    orig = MemoryStorage.load

    def amnesiac(self: MemoryStorage) -> DurableState:
        d = orig(self)
        d.voted_for = None
        return d

    monkeypatch.setattr(MemoryStorage, "load", amnesiac)
    # Not by the memory-equals-disk oracle: by the second vote itself.
    monkeypatch.setattr(RaftSim, "_check_sent_after_persist", lambda self, n, m: None)
    assert re.search(r"voted for \d+ and for \d+ in epoch", _first_failure(N))
