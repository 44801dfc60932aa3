"""KIP-903's guard without Fetch v15: a follower's fetch counts as its position only
when it comes from the incarnation the metadata registered (named in its client id). A
fetch left over from before a restart is served but does not move the HW or the ISR."""

from __future__ import annotations

import uuid
from pathlib import Path

from jocko_py.broker.replica_fetcher import REPLICA_CLIENT_PREFIX, replica_incarnation
from jocko_py.broker.replica_manager import FetchParams, FetchPartition, ReplicaManager
from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.metadata import MetadataImage
from jocko_py.commitlog.config import LogConfig
from jocko_py.protocol import records as rb


def test_client_id_names_the_incarnation() -> None:
    inc = str(uuid.uuid4())
    assert replica_incarnation(f"{REPLICA_CLIENT_PREFIX}2-{inc}") == inc
    assert replica_incarnation("rdkafka") is None
    assert replica_incarnation(None) is None


async def test_only_the_registered_incarnation_moves_the_high_watermark(tmp_path: Path) -> None:
    incs = {b: uuid.uuid4() for b in (1, 2)}
    ctl = Controller(ControllerConfig())
    img = MetadataImage()
    img.apply_batch(ctl.reconcile(img, {b: BrokerInfo(b, "h", b, None, incs[b]) for b in incs}))
    _, recs = ctl.create_topic(img, "t", 1, 2)
    delta = img.apply_batch(recs)
    leader = img.topics["t"].partitions[0].leader
    follower = 3 - leader
    rm = ReplicaManager(tmp_path, LogConfig(), leader, lambda: img, lambda k: "")
    rm.start(img)
    rm.apply_delta(img, delta)
    res = await rm.append_records(
        [("t", 0, rb.build_batch([rb.NewRecord(None, b"x", (), 1)]))], 1, 1000)
    assert res[0].last_offset == 0
    p = rm.get("t", 0)
    assert p is not None and p.high_watermark == 0

    def fetch(inc: str) -> FetchParams:
        return FetchParams(follower, 0, 1, 1 << 20, 0,
                           [FetchPartition("t", 0, 1, p.leader_epoch, 0)],
                           replica_incarnation=inc)

    out = await rm.fetch_messages(fetch(str(uuid.uuid4())))  # an earlier life of it
    assert out[0].error == 0 and p.high_watermark == 0
    await rm.fetch_messages(fetch(str(incs[follower])))
    assert p.high_watermark == 1
    await rm.shutdown_fetchers()
    rm.close()
