"""Admin operations on a three-broker cluster: any broker takes them (forwarded to the
active controller), leadership moves back to preferred replicas (ElectLeaders), replicas
move between brokers (AlterPartitionReassignments), and the tools show the quorum."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from tests.support.broker import REPO
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def _visible_everywhere(cluster: Cluster, topic: str) -> None:
    """CreateTopics answers once the controller committed; each broker applies the
    metadata a moment later (clients retry UNKNOWN_TOPIC_OR_PARTITION meanwhile)."""
    cluster.wait_for(f"{topic} on every broker", lambda: all(
        cluster.partition_state(topic, via=b)[0] >= 0 for b in cluster.alive()))


def _batch(v: bytes) -> bytes:
    return rb.build_batch([rb.NewRecord(None, v, (), int(time.time() * 1000))])


def test_admin_requests_work_on_every_broker(cluster: Cluster) -> None:
    for i, b in cluster.brokers.items():
        with Client(b.bootstrap) as c:
            c.create_topic(f"t{i}", 2, 3, {"retention.ms": "3600000"})
    for i in cluster.brokers:
        # visible everywhere, with the config, and deletable from another broker
        _visible_everywhere(cluster, f"t{i}")
        for b in cluster.brokers.values():
            md = cluster.metadata(b, [f"t{i}"])
            assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 2
            with Client(b.bootstrap) as c:
                cfg = {x.name: x.value for x in c.describe_configs(f"t{i}")}
            assert cfg["retention.ms"] == "3600000"
    with Client(cluster.brokers[1].bootstrap) as c:
        r = c.request(37, 3, {"topics": [{"name": "t2", "count": 4, "assignments": None}],
                              "timeout_ms": 30000, "validate_only": False})
        assert r.results[0].error_code == 0
        c.delete_topic("t3")
    def applied_everywhere() -> bool:
        for b in cluster.brokers.values():
            names = {t.name for t in cluster.metadata(b).topics}
            if "t3" in names or not {"t1", "t2"} <= names:
                return False
            if len(cluster.metadata(b, ["t2"]).topics[0].partitions) != 4:
                return False
        return True
    # the answering broker has applied it at once; the others within moments
    md = cluster.metadata(cluster.brokers[1])
    assert "t3" not in {t.name for t in md.topics}
    cluster.wait_for("partitions and deletion applied on every broker", applied_everywhere)


def test_preferred_leader_election_after_restart(cluster: Cluster) -> None:
    with Client(cluster.brokers[1].bootstrap) as c:
        c.create_topic("pref", 1, 3)
    _visible_everywhere(cluster, "pref")
    leader, _, epoch = cluster.partition_state("pref")
    cluster.brokers[leader].kill()
    cluster.wait_for("a new leader", lambda: cluster.partition_state("pref")[0]
                     not in (leader, -1))
    # DescribeCluster lists live brokers; v2 (KIP-1073) the fenced one too when asked
    other = next(b for b in cluster.brokers if b != leader)

    def described(version: int) -> dict[int, bool]:
        with Client(cluster.brokers[other].bootstrap) as c:
            r = c.request(60, version, {"include_cluster_authorized_operations": False,
                                        "endpoint_type": 1,
                                        "include_fenced_brokers": version >= 2})
        return {b.broker_id: b.is_fenced for b in r.brokers}
    cluster.wait_for(f"broker {leader} fenced", lambda: described(2).get(leader) is True)
    assert described(2) == {b: b == leader for b in cluster.brokers}
    assert described(1) == {b: False for b in cluster.brokers if b != leader}
    cluster.brokers[leader].start()
    cluster.wait_for("back in the ISR", lambda: leader in cluster.partition_state("pref")[1])
    assert cluster.partition_state("pref")[0] != leader
    with Client(cluster.brokers[leader].bootstrap) as c:
        r = c.request(43, 2, {"election_type": 0, "timeout_ms": 30000,
                              "topic_partitions": [{"topic": "pref", "partitions": [0]}]})
    assert r.error_code == 0
    assert r.replica_election_results[0].partition_result[0].error_code == 0
    new_leader, _, new_epoch = cluster.wait_for(
        "preferred leader back", lambda: (s := cluster.partition_state("pref"))[0] == leader
        and s)
    assert new_epoch > epoch
    with Client(cluster.brokers[2].bootstrap) as c:
        r = c.request(43, 2, {"election_type": 0, "timeout_ms": 30000,
                              "topic_partitions": [{"topic": "pref", "partitions": [0]}]})
    assert r.replica_election_results[0].partition_result[0].error_code == 84  # not needed


def test_reassignment_moves_a_replica_and_keeps_the_data(cluster: Cluster) -> None:
    with Client(cluster.brokers[1].bootstrap) as c:
        c.create_topic("moved", 1, 1)
    _visible_everywhere(cluster, "moved")
    leader = cluster.partition_state("moved")[0]
    target = next(b for b in cluster.brokers if b != leader)
    with Client(cluster.brokers[leader].bootstrap) as c:
        for i in range(50):
            c.produce("moved", 0, _batch(b"v%d" % i), acks=-1)
    with Client(cluster.brokers[3].bootstrap) as c:
        # v1 (KIP-860): a change of replication factor refused when not allowed
        r = c.request(45, 1, {"timeout_ms": 30000, "allow_replication_factor_change": False,
                              "topics": [{"name": "moved", "partitions": [
                                  {"partition_index": 0, "replicas": [target, leader]}]}]})
        assert r.allow_replication_factor_change is False
        assert (r.responses[0].partitions[0].error_code,
                r.responses[0].partitions[0].error_message) == (
            38, "The replication factor is changed from 1 to 2")  # INVALID_REPLICATION_FACTOR
        r = c.request(45, 0, {"timeout_ms": 30000, "topics": [
            {"name": "moved", "partitions": [{"partition_index": 0, "replicas": [target]}]}]})
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0

    def done() -> bool:
        with Client(cluster.brokers[1].bootstrap) as c:
            lr = c.request(46, 0, {"timeout_ms": 30000, "topics": None})
        md = cluster.metadata(topics=["moved"]).topics[0].partitions[0]
        return not lr.topics and list(md.replica_nodes) == [target] and md.leader_id == target
    cluster.wait_for("reassignment complete", done, timeout=60)
    with Client(cluster.brokers[target].bootstrap) as c:
        p = c.fetch("moved", 0, 0)
        got = []
        data = p.records or b""
        for pos, h in rb.iter_batches(memoryview(data), validate_crc=True):
            got += [r.value for r in rb.decode_records(memoryview(data)[pos:pos + h.size])]
        assert got[:1] == [b"v0"] and p.high_watermark == 50
    # the old replica's log is gone
    cluster.wait_for("old log removed", lambda: not (
        cluster.brokers[leader].data_dir / "moved-0").exists(), timeout=20)


def test_cluster_status_and_describe_quorum(cluster: Cluster) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jocko_py.cli", "cluster", "status", "--bootstrap-server",
         cluster.brokers[2].bootstrap], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "Quorum:" in out.stdout and "Leader" in out.stdout
    for i in cluster.brokers:
        assert re.search(rf"^\s+{i}\s+alive\s", out.stdout, re.M), out.stdout
    with Client(cluster.brokers[3].bootstrap) as c:
        dq = c.request(55, 2, {"topics": [{"topic_name": "__cluster_metadata",
                                           "partitions": [{"partition_index": 0}]}]})
    q = dq.topics[0].partitions[0]
    assert dq.error_code == 0 and q.leader_id == cluster.metadata().controller_id
    assert sorted(r.replica_id for r in q.current_voters) == [1, 2, 3]
    assert sorted(n.node_id for n in dq.nodes) == [1, 2, 3]
