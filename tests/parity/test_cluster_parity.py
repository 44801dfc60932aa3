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


def _create(c: Client, name: str, assignments: dict[int, list[int]], n: int = -1,
            rf: int = -1) -> tuple[int, str | None]:
    r = c.request(19, 7, {"topics": [{
        "name": name, "num_partitions": n, "replication_factor": rf, "configs": [],
        "assignments": [{"partition_index": p, "broker_ids": b} for p, b in assignments.items()],
    }], "timeout_ms": 30000, "validate_only": False})
    return r.topics[0].error_code, r.topics[0].error_message


def _replicas(cluster: Cluster, topic: str) -> dict[int, tuple[int, list[int]]]:
    md = cluster.metadata(None, [topic])
    return {p.partition_index: (p.leader_id, list(p.replica_nodes))
            for t in md.topics for p in t.partitions}


def test_manual_replica_assignment(cluster: Cluster) -> None:
    """CreateTopics and CreatePartitions with manual replica assignments, sent to both
    brokers (one of them forwards to the controller): the replicas are those asked for,
    in that order, the first leads; Kafka's refusals for malformed assignments."""
    for via in (1, 2):
        topic = f"manual-{via}"
        with Client(cluster.brokers[via].bootstrap) as c:
            assert _create(c, topic, {0: [2, 1], 1: [1, 2], 2: [2]})[0] == 39  # lengths differ
            assert _create(c, topic, {0: [2, 1], 1: [1, 2]}) == (0, None)
            cluster.wait_for("the topic everywhere", lambda t=topic: all(
                len(_replicas(cluster, t)) == 2 for _ in (1, 2)))
            assert _replicas(cluster, topic) == {0: (2, [2, 1]), 1: (1, [1, 2])}
            r = c.request(37, 3, {"topics": [{"name": topic, "count": 3,
                                              "assignments": [{"broker_ids": [1, 2]}]}],
                                  "timeout_ms": 30000, "validate_only": False})
            assert r.results[0].error_code == 0, r.results[0].error_message
            cluster.wait_for("the new partition", lambda t=topic: len(_replicas(cluster, t)) == 3)
            assert _replicas(cluster, topic)[2] == (1, [1, 2])
            # refusals, as Kafka: unknown broker, repeats, a gap in the partition numbers,
            # a partition count beside the assignment, the wrong count or length of new ones
            assert _create(c, "bad", {0: [1, 7]})[0] == 39
            assert _create(c, "bad", {0: [1, 1]})[0] == 39
            assert _create(c, "bad", {0: [1], 2: [2]})[0] == 39
            assert _create(c, "bad", {0: [1]}, n=1)[0] == 42  # INVALID_REQUEST
            for assignments in ([{"broker_ids": [1, 2]}], [{"broker_ids": [1]}] * 2):
                r = c.request(37, 3, {"topics": [{"name": topic, "count": 5,
                                                  "assignments": assignments}],
                                      "timeout_ms": 30000, "validate_only": False})
                assert r.results[0].error_code == 39, assignments
            assert "bad" not in {t.name for t in cluster.metadata(None, None).topics}


def test_kafka_topics_replica_assignment(cluster: Cluster) -> None:
    """Kafka 4.1's kafka-topics --create --replica-assignment and --alter --partitions
    with --replica-assignment."""
    from tests.parity import kafka_tools as kt
    boot = cluster.brokers[2].bootstrap
    kt.run("4.1", kt.TOPICS, "--bootstrap-server", boot, "--create", "--topic", "kt-manual",
           "--replica-assignment", "2:1,1:2")
    cluster.wait_for("the topic", lambda: len(_replicas(cluster, "kt-manual")) == 2)
    assert _replicas(cluster, "kt-manual") == {0: (2, [2, 1]), 1: (1, [1, 2])}
    kt.run("4.1", kt.TOPICS, "--bootstrap-server", boot, "--alter", "--topic", "kt-manual",
           "--partitions", "3", "--replica-assignment", "2:1,1:2,2:1")
    cluster.wait_for("the new partition", lambda: len(_replicas(cluster, "kt-manual")) == 3)
    assert _replicas(cluster, "kt-manual")[2] == (2, [2, 1])
    out = kt.run_failing("4.1", kt.TOPICS, "--bootstrap-server", boot, "--create", "--topic",
                         "kt-bad", "--replica-assignment", "1:9")
    assert "InvalidReplicaAssignmentException" in out or "Unknown broker" in out, out
