"""A failed disk operation takes the broker's log dir offline (Kafka's
LogDirFailureChannel) in a cluster; a single node keeps its directory online.

The end-to-end case (a real full tmpfs under a three-broker cluster: the broker exits 1,
leadership moves, nothing acknowledged is lost) is tests/faults/test_faults.py
::test_disk_full_on_a_leader; here the replica manager's part, with the disk failure
injected into the log."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from jocko_py.broker.replica_manager import ReplicaManager
from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.metadata import MetadataImage
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.errors import KafkaStorageError
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode


def leader_rm(tmp_path: Path) -> tuple[ReplicaManager, MetadataImage]:
    ctl = Controller(ControllerConfig())
    img = MetadataImage()
    img.apply_batch(ctl.reconcile(img, {1: BrokerInfo(1, "h", 1, None, uuid.uuid4())}))
    _, recs = ctl.create_topic(img, "t", 2, 1)
    delta = img.apply_batch(recs)
    rm = ReplicaManager(tmp_path, LogConfig(), 1, lambda: img, lambda k: "")
    rm.start(img)
    rm.apply_delta(img, delta)
    return rm, img


def batch() -> bytes:
    return rb.build_batch([rb.NewRecord(None, b"x", (), 1)])


def fail_appends(rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    p = rm.get("t", 0)
    assert p is not None

    def full(*_a: object, **_k: object) -> None:
        raise KafkaStorageError("write failed: [Errno 28] No space left on device")
    monkeypatch.setattr(p.log, "append", full)


async def test_in_a_cluster_the_dir_goes_offline_for_every_partition(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rm, _ = leader_rm(tmp_path)
    failures: list[str] = []
    rm.logs.failure_listeners.append(failures.append)
    assert (await rm.append_records([("t", 0, batch())], 1, 1000))[0].error == 0
    fail_appends(rm, monkeypatch)
    r = await rm.append_records([("t", 0, batch())], 1, 1000)
    assert r[0].error == ErrorCode.KAFKA_STORAGE_ERROR
    assert rm.logs.offline_reason and len(failures) == 1
    # the other partition of the same dir is offline too, and stays so
    r = await rm.append_records([("t", 1, batch())], 1, 1000)
    assert r[0].error == ErrorCode.KAFKA_STORAGE_ERROR
    assert rm.get_partition_or_error("t", 0)[1] == ErrorCode.KAFKA_STORAGE_ERROR
    await rm.shutdown_fetchers()
    rm.close()


async def test_a_single_node_keeps_serving_after_a_failed_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rm, _ = leader_rm(tmp_path)
    rm.logs.offline_on_failure = False
    fail_appends(rm, monkeypatch)
    r = await rm.append_records([("t", 0, batch())], 1, 1000)
    assert r[0].error == ErrorCode.KAFKA_STORAGE_ERROR
    assert rm.logs.offline_reason is None
    assert (await rm.append_records([("t", 1, batch())], 1, 1000))[0].error == 0
    await rm.shutdown_fetchers()
    rm.close()
