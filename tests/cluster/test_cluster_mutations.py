"""The cluster simulation's partition checks have teeth: each broken controller or
metadata rule is caught by a consequence (see ``sim_cluster``'s docstring).

- A controller that does not fence AlterPartition by epochs (it takes a request of an
  earlier leader or partition epoch as current): a request that was in flight while
  the ISR changed brings back a replica that has not caught up with the current
  leader.
- A leader change that does not bump the leader epoch: two leaders in one epoch.
- A fenced broker left in the ISR: it is still there long after it was fenced.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace

import pytest

import jocko_py.cluster.metadata as metadata
from jocko_py.cluster.controller import Controller
from jocko_py.cluster.metadata import (
    NO_LEADER_CHANGE,
    MetadataImage,
    MetadataRecord,
    PartitionChangeRecord,
)
from tests.cluster.sim_cluster import ISR_CHURN, run_cluster_schedule
from tests.cluster.sim_raft import InvariantViolation, SimParams

N = 150


def _first_failure(n: int = N, params: Callable[[int], SimParams | None] = lambda s: None) -> str:
    for seed in range(n):
        try:
            run_cluster_schedule(seed, params(seed))
        except InvariantViolation as e:
            return str(e)
    return ""


def test_unmodified_controller_passes_the_same_seeds() -> None:
    assert _first_failure(40) == ""
    assert _first_failure(40, lambda s: SimParams(**ISR_CHURN)) == ""


def test_alter_partition_accepted_from_a_stale_epoch_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    orig = Controller.alter_partition

    def unfenced(
        self: Controller,
        image: MetadataImage,
        topic_id: uuid.UUID,
        partition_id: int,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: Iterable[int],
    ) -> tuple[int, list[MetadataRecord]]:
        t = image.topic_by_id(topic_id)
        p = None if t is None else t.partitions.get(partition_id)
        if p is not None and p.leader == leader_id:
            leader_epoch, partition_epoch = p.leader_epoch, p.partition_epoch
        return orig(
            self, image, topic_id, partition_id, leader_id, leader_epoch, partition_epoch, new_isr
        )

    monkeypatch.setattr(Controller, "alter_partition", unfenced)
    why = _first_failure(N, lambda s: SimParams(**ISR_CHURN))
    assert "not caught up with that leader" in why, why


def test_a_leader_change_without_a_leader_epoch_bump_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    orig = metadata._APPLY[PartitionChangeRecord]

    def no_bump(self: MetadataImage, r: PartitionChangeRecord) -> None:
        t = self.topic_by_id(r.topic_id)
        old = None if t is None else t.partitions.get(r.partition_id)
        orig(self, r)
        t = self.topic_by_id(r.topic_id)
        if old is None or t is None:
            return
        new = t.partitions[r.partition_id]
        if new.leader != old.leader:
            parts = dict(t.partitions)
            parts[r.partition_id] = replace(new, leader_epoch=old.leader_epoch)
            self.topics[t.name] = replace(t, partitions=parts)

    monkeypatch.setitem(metadata._APPLY, PartitionChangeRecord, no_bump)
    assert re.search(r"has two leaders in leader epoch", _first_failure())


def test_a_fenced_broker_left_in_the_isr_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    orig = Controller._repair_partitions

    def keeps_isr(self: Controller, image: MetadataImage, usable: set[int],
                  restarted: set[int]) -> list[MetadataRecord]:
        out: list[MetadataRecord] = []
        for r in orig(self, image, usable, restarted):
            if isinstance(r, PartitionChangeRecord) and r.isr is not None:
                if r.leader == NO_LEADER_CHANGE:
                    continue  # an ISR-only change: dropped
                r = replace(r, isr=None)
            out.append(r)
        return out

    monkeypatch.setattr(Controller, "_repair_partitions", keeps_isr)
    why = _first_failure()
    assert re.search(r"fenced broker \d+ still in ISR|in ISR of \[\(", why), why
