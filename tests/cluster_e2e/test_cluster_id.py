"""Cluster identity with real processes: three brokers started without a format step
agree on one random cluster id, stored in every meta.properties and served by Metadata
and DescribeCluster; a broker whose data directory was formatted for another cluster is
refused (INCONSISTENT_CLUSTER_ID), says why and exits 1, while the cluster goes on."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer

from jocko_py.cli import main
from jocko_py.client import Client
from jocko_py.commitlog.dirs import read_meta
from tests.support.broker import REPO
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

OTHER = "MkU3OEVBNTcwNTJENDM2Qg"


def test_a_broker_of_another_cluster_is_refused_and_says_why(cluster: Cluster) -> None:
    # one id, generated once (no format step), in every broker's directory and answers
    metas = {i: read_meta(b.data_dir) for i, b in cluster.brokers.items()}
    assert all(m is not None for m in metas.values()), metas
    cid = metas[1].cluster_id  # type: ignore[union-attr]
    assert len(cid) == 22
    assert {(m.cluster_id, m.node_id) for m in metas.values() if m} == {
        (cid, i) for i in cluster.brokers}
    for b in cluster.brokers.values():
        with Client(b.bootstrap) as c:
            assert c.metadata([]).cluster_id == cid
            assert c.request(60, 0, {"include_cluster_authorized_operations": False}
                             ).cluster_id == cid

    # broker 3's directory is wiped and formatted for another cluster
    b3 = cluster.brokers[3]
    b3.stop()
    shutil.rmtree(b3.data_dir)
    assert main(["storage", "format", "-t", OTHER, "--data-dir", str(b3.data_dir),
                 "--broker-id", "3"]) == 0
    start_of_run = b3.log_path.stat().st_size
    t0 = time.monotonic()
    with open(b3.log_path, "ab") as out:
        proc = subprocess.Popen(b3.command(), stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    took = time.monotonic() - t0
    assert code == 1, b3.log_tail()
    why = (f"cannot join the metadata quorum: this node's cluster id is {OTHER}, but voter(s) "
           f"1, 2 belong to cluster {cid} (INCONSISTENT_CLUSTER_ID)")
    this_run = b3.log_path.read_bytes()[start_of_run:].decode(errors="replace")
    assert f"broker 3 stopped: {why}" in this_run, b3.log_tail()
    assert "Traceback" not in this_run
    refused = f"refused Fetch from node 3: it belongs to cluster {OTHER}"
    assert any(refused in b.log_path.read_text() for b in (cluster.brokers[1],
                                                           cluster.brokers[2]))
    # it took nothing from the cluster and kept its id
    meta3 = read_meta(b3.data_dir)
    assert meta3 is not None and meta3.cluster_id == OTHER
    raft_log = b3.data_dir / "raft" / "log"
    assert not raft_log.exists() or raft_log.stat().st_size == 0

    # the cluster goes on: same id, a controller, acks=all writes with two replicas
    live = [cluster.brokers[1], cluster.brokers[2]]
    boot = ",".join(b.bootstrap for b in live)
    for b in live:
        md = cluster.metadata(b)
        assert md.cluster_id == cid and md.controller_id in (1, 2)
    topic = f"after-{uuid.uuid4().hex[:6]}"
    with Client(live[0].bootstrap) as c:
        c.create_topic(topic, 1, 2, {"min.insync.replicas": "2"})
    cluster.wait_for(f"{topic} led", lambda: cluster.partition_state(topic, via=live[0])[0] > 0)
    p = KafkaProducer(bootstrap_servers=boot, acks="all")
    try:
        sent = [f"v{i}".encode() for i in range(20)]
        for f in [p.send(topic, v) for v in sent]:
            f.get(timeout=30)
    finally:
        p.close()
    c2 = KafkaConsumer(topic, bootstrap_servers=boot, auto_offset_reset="earliest")
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(sent) and time.monotonic() < deadline:
            for batch in c2.poll(timeout_ms=500).values():
                got += [r.value for r in batch]
    finally:
        c2.close()
    assert got == sent
    print(f"broker 3 refused and stopped {took:.1f}s after its start")
