"""Issue 12 on two real brokers: KIP-951 leader discovery (a NOT_LEADER_OR_FOLLOWER
answer in Produce v10+ / Fetch v16+ names the leader and its endpoint) and dynamic
broker configs set through any broker, written by the controller and applied by each.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jocko_py.client import Client
from tests.badinput import wire as w
from tests.support.cluster import Cluster, running_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]
TOPIC = "kip951"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("pair"), size=2) as c:
        with Client(c.brokers[1].bootstrap) as cl:
            cl.create_topic(TOPIC, partitions=2, replication=1)
        c.wait_for("topic led", lambda: all(
            c.partition_state(TOPIC, p)[0] > 0 for p in range(2)))
        yield c


def _elsewhere(cluster: Cluster) -> tuple[int, int, int]:
    """(partition, its leader, another broker)."""
    leader, _, epoch = cluster.partition_state(TOPIC, 0)
    other = 2 if leader == 1 else 1
    return 0, leader, other


def test_produce_not_leader_names_the_leader(cluster: Cluster) -> None:
    part, leader, other = _elsewhere(cluster)
    _, _, epoch = cluster.partition_state(TOPIC, part)
    batch = w.record_batch_v2([(b"k", b"v")], int(time.time() * 1000))
    with Client(cluster.brokers[other].bootstrap) as c:
        for version in (11, 10):
            r = c.request(0, version, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                       "topic_data": [{"name": TOPIC, "partition_data": [
                                           {"index": part, "records": batch}]}]})
            [p] = r.responses[0].partition_responses
            assert p.error_code == 6  # NOT_LEADER_OR_FOLLOWER
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, epoch)
            b = cluster.brokers[leader]
            assert [(n.node_id, n.host, n.port) for n in r.node_endpoints] == [
                (leader, "127.0.0.1", b.port)]
        # v9 has no such fields: plain NOT_LEADER_OR_FOLLOWER
        r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                             "topic_data": [{"name": TOPIC, "partition_data": [
                                 {"index": part, "records": batch}]}]})
        assert r.responses[0].partition_responses[0].error_code == 6


def test_fetch_not_leader_names_the_leader(cluster: Cluster) -> None:
    part, leader, other = _elsewhere(cluster)
    _, _, epoch = cluster.partition_state(TOPIC, part)
    with Client(cluster.brokers[other].bootstrap) as c:
        md = c.metadata([TOPIC])
        tid = md.topics[0].topic_id
        body = {"replica_state": {"replica_id": -1, "replica_epoch": -1}, "max_wait_ms": 0,
                "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                "session_epoch": -1, "topics": [{"topic_id": tid, "partitions": [
                    {"partition": part, "fetch_offset": 0, "current_leader_epoch": -1,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1000}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        r = c.request(1, 17, body)
        [t] = r.responses
        assert t.topic_id == tid
        [p] = t.partitions
        assert p.error_code == 6
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, epoch)
        assert [n.node_id for n in r.node_endpoints] == [leader]
        # and the leader itself answers the same fetch by topic id
        with Client(cluster.brokers[leader].bootstrap) as lc:
            r = lc.request(1, 17, body)
            assert r.responses[0].partitions[0].error_code == 0


def test_dynamic_broker_config_through_any_broker(cluster: Cluster, tmp_path: Path) -> None:
    """Set on one broker (forwarded to the controller when it is not it); every broker
    reports it and applies it."""
    for via, value in ((1, "3600000"), (2, "7200000")):
        with Client(cluster.brokers[via].bootstrap) as c:
            r = c.request(44, 1, {"validate_only": False, "resources": [{
                "resource_type": 4, "resource_name": "", "configs": [
                    {"name": "log.retention.ms", "config_operation": 0, "value": value}]}]})
            assert r.responses[0].error_code == 0, r

        def seen(v: str = value) -> bool:
            for b in cluster.brokers.values():
                with Client(b.bootstrap) as c:
                    r = c.request(32, 4, {"resources": [
                        {"resource_type": 4, "resource_name": str(b.broker_id),
                         "configuration_keys": ["log.retention.ms"]}],
                        "include_synonyms": True, "include_documentation": False})
                    [e] = r.results[0].configs
                    if (e.value, e.config_source) != (v, 3):  # DYNAMIC_DEFAULT_BROKER_CONFIG
                        return False
            return True

        cluster.wait_for(f"log.retention.ms={value} everywhere", seen, timeout=30)
    for b in cluster.brokers.values():
        assert "dynamic broker config: log defaults now {'retention.ms': '7200000'}" in \
            b.log_path.read_text()


def test_settings_from_flags_are_static_broker_configs(cluster: Cluster) -> None:
    """Voters and gossip addresses given as flags are what the broker runs with:
    STATIC_BROKER_CONFIG, not defaults."""
    b = cluster.brokers[2]
    with Client(b.bootstrap) as c:
        r = c.request(32, 4, {"resources": [{
            "resource_type": 4, "resource_name": "2",
            "configuration_keys": ["controller.quorum.voters", "jocko.gossip.addr", "node.id"]}],
            "include_synonyms": False, "include_documentation": False})
    got = {e.name: (e.value, e.config_source) for e in r.results[0].configs}
    assert got["controller.quorum.voters"] == (b.voters, 4)
    assert got["jocko.gossip.addr"] == (f"127.0.0.1:{b.gossip_port}", 4)
    assert got["node.id"] == ("2", 4)
