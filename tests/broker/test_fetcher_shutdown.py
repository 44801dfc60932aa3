"""Regression (fault campaign, clean bounce of the controller x5): metadata applied
while a broker stops made it a follower after its fetchers were shut down; a new
replica fetcher started, kept appending to logs already closed ("Bad file descriptor"
every 200 ms) and the process did not exit. Once fetchers are shut down, none starts."""

from __future__ import annotations

import uuid
from pathlib import Path

from jocko_py.broker.replica_manager import ReplicaManager
from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.metadata import MetadataImage
from jocko_py.commitlog.config import LogConfig


async def test_no_fetcher_starts_after_shutdown(tmp_path: Path) -> None:
    ctl = Controller(ControllerConfig())
    img = MetadataImage()
    live = {b: BrokerInfo(b, "127.0.0.1", 1, None, uuid.uuid4()) for b in (1, 2)}
    img.apply_batch(ctl.reconcile(img, live))
    _, recs = ctl.create_topic(img, "t", 1, 2)
    delta = img.apply_batch(recs)
    follower = 3 - img.topics["t"].partitions[0].leader
    rm = ReplicaManager(tmp_path, LogConfig(), follower, lambda: img, lambda k: "")
    rm.start(img)
    await rm.shutdown_fetchers()
    rm.apply_delta(img, delta)  # this broker becomes a follower while stopping
    assert rm.fetchers == {}
    rm.close()
