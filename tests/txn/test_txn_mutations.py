"""The transaction simulation's check has teeth: the ``atomic`` checker (a transaction is
all or nothing) catches each deliberately broken core within a few seeds (``sim_txn``):

- a runtime that answers, and starts the markers, before the prepare is committed (a
  failover loses the PrepareCommit the client was told about: the transaction is then
  aborted, after some of its commit markers were written);
- a shard whose marker job leaves out a partition of the transaction (that partition
  never gets its marker);
- a shard that lets an EndTxn(abort) replace a PrepareCommit whose markers are being
  written (the bug class of franz-go's TestTxnEtl: some partitions commit, some abort).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from jocko_py.broker.coordinator.runtime import CoordinatorResult, CoordinatorRuntime
from jocko_py.broker.txn import shard as shard_mod
from jocko_py.broker.txn.shard import TxnAnswer, TxnShard
from jocko_py.broker.txn.state import TxnState, txn_key, txn_value
from tests.txn.sim_txn import InvariantViolation, run_schedule, schedule_params

SEEDS = 40


def _first_failure(check: str, **params: Any) -> str:
    """The first violation among the seeds with only ``check`` switched on."""
    for seed in range(SEEDS):
        p = dataclasses.replace(schedule_params(seed), checks=(check,), **params)
        try:
            run_schedule(seed, p)
        except InvariantViolation as e:
            return str(e)
    return ""


@pytest.fixture
def restore() -> Iterator[None]:
    saved: list[tuple[Any, str, Any]] = [
        (CoordinatorRuntime, "_execute", CoordinatorRuntime._execute),
        (shard_mod, "_job", shard_mod._job),
        (TxnShard, "end_txn", TxnShard.end_txn),
    ]
    yield
    for owner, name, fn in saved:
        setattr(owner, name, fn)


def test_answers_and_markers_before_commit_are_caught(restore: None) -> None:
    execute = CoordinatorRuntime._execute

    def early(self: Any, ctx: Any, op: Any, deliver: Any, now: int) -> None:
        ctx.committed = 1 << 62  # every answer and effect counts as committed at once
        execute(self, ctx, op, deliver, now)

    CoordinatorRuntime._execute = early  # type: ignore[method-assign]
    found = _first_failure("atomic", p_failover=0.01, replication_delay_ms=(0, 200))
    assert "check=atomic" in found and "transaction" in found, found


def test_a_partition_left_out_of_the_markers_is_caught(restore: None) -> None:
    job = shard_mod._job

    def partial(m: Any) -> Any:
        j = job(m)
        return dataclasses.replace(j, partitions=frozenset(sorted(j.partitions)[1:]))

    shard_mod._job = partial
    found = _first_failure("atomic")
    # (that partition's transaction stays open: no marker, or the next one runs into it)
    assert "check=atomic" in found and ("no commit marker" in found
                                        or "before the previous one's marker" in found), found


def test_an_abort_replacing_a_prepared_commit_is_caught(restore: None) -> None:
    end_txn = TxnShard.end_txn

    def lax(self: TxnShard, now: int, tid: str, pid: int, epoch: int, commit: bool,
            bump_epoch: bool = False, fresh: int = -1) -> Any:
        m = self.txns.get(tid)
        if m is None or m.state is not TxnState.PREPARE_COMMIT or commit \
                or m.producer_id != pid:
            return end_txn(self, now, tid, pid, epoch, commit, bump_epoch, fresh)
        new = m.copy()
        new.state = TxnState.PREPARE_ABORT
        self.txns[tid] = new
        return CoordinatorResult(TxnAnswer(shard_mod.E.NONE, m.producer_id, m.producer_epoch),
                                 [(txn_key(tid), txn_value(new, True))],
                                 effects=[shard_mod._job(new)])

    TxnShard.end_txn = lax  # type: ignore[method-assign]
    found = _first_failure("atomic", p_give_up=0.3)
    assert "check=atomic" in found and "committed on some partitions" in found, found
