"""The raft simulation's checks have teeth: a core that breaks a rule is caught by seed.

- Persist before send: a core whose batches put every ``Send`` before its
  ``PersistQuorumState``/``AppendLog`` is caught directly (a message states a vote or a
  fetch offset that is not durable yet), and, with that direct check switched off, by
  its consequence: nodes crash in the middle of a batch (``SimParams.crash_in_batch``),
  lose what was not persisted, and a committed entry ends up durable on too few voters
  (``check_committed_durable``) or missing from a new leader.
- A disk that drops committed entries when it installs a snapshot is caught by
  ``check_committed_durable``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jocko_py.cluster.raft.core import RaftCore
from jocko_py.cluster.raft.messages import Action, PersistSnapshot, Send, Snapshot
from jocko_py.cluster.raft.storage import MemoryStorage
from tests.cluster.sim_raft import InvariantViolation, RaftSim, run_schedule

N = 300


def _first_failure(n: int = N) -> str:
    for seed in range(n):
        try:
            run_schedule(seed)
        except InvariantViolation as e:
            return str(e)
    return ""


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
