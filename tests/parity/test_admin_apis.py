"""Admin APIs operators use (issue 12, item 5), with Kafka's own tools from 3.9 and 4.1
and the Python admin clients: DescribeLogDirs (kafka-log-dirs), DescribeTopicPartitions
(4.x kafka-topics --describe), ApiVersions features and UpdateFeatures (kafka-features),
DescribeQuorum on a single node (kafka-metadata-quorum).
"""

from __future__ import annotations

import json
import re
import time

import pytest
from kafka import KafkaAdminClient, KafkaProducer

from jocko_py.client import Client
from jocko_py.protocol.errors import ErrorCode
from tests.parity import kafka_tools as kt
from tests.support.e2e import TargetBroker, create_topics, unique_suffix

SUFFIX = unique_suffix()


@pytest.fixture(scope="module")
def topic(target: TargetBroker) -> str:
    """Three partitions holding 10, 20 and 30 records of 500 bytes."""
    name = f"admin-{SUFFIX}"
    create_topics(target.bootstrap, [name], partitions=3)
    p = KafkaProducer(bootstrap_servers=target.bootstrap, linger_ms=0)
    try:
        for part in range(3):
            for _ in range(10 * (part + 1)):
                p.send(name, b"v" * 500, partition=part)
        p.flush(timeout=30)
    finally:
        p.close(timeout=10)
    return name


def _sizes_on_disk(target: TargetBroker, topic: str) -> dict[int, int]:
    assert target.proc is not None
    out = {}
    for part in range(3):
        d = target.proc.data_dir / f"{topic}-{part}"
        out[part] = sum(f.stat().st_size for f in d.glob("*.log"))
    return out


@pytest.mark.parametrize("version", kt.VERSIONS)
def test_kafka_log_dirs_reports_sizes_per_partition(
        target: TargetBroker, topic: str, version: str) -> None:
    out = kt.run(version, kt.LOG_DIRS, "--bootstrap-server", target.bootstrap, "--describe",
                 "--topic-list", topic)
    doc = json.loads(out.strip().splitlines()[-1])
    [b] = doc["brokers"]
    assert b["broker"] == 0
    [d] = b["logDirs"]
    assert d["error"] is None
    assert target.proc is not None
    assert d["logDir"] == str(target.proc.data_dir.resolve())
    sizes = {int(p["partition"].rsplit("-", 1)[1]): p["size"] for p in d["partitions"]}
    assert sizes == _sizes_on_disk(target, topic)
    assert sizes[0] < sizes[1] < sizes[2]
    assert all(p["offsetLag"] == 0 and not p["isFuture"] for p in d["partitions"])


@pytest.mark.parametrize("version", [4, 5])
def test_describe_log_dirs_v4_has_disk_totals(
        target: TargetBroker, topic: str, version: int) -> None:
    with Client(target.bootstrap) as c:
        r = c.request(35, version, {"topics": None})
        [res] = r.results
        assert res.error_code == 0 and r.error_code == 0
        assert res.total_bytes > 0 and 0 <= res.usable_bytes <= res.total_bytes
        assert res.is_cordoned is False  # v5; no directory is ever cordoned
        assert topic in {t.name for t in res.topics}
        # named partitions only; one this broker does not host is left out (v0 is
        # gone since Kafka 4.0)
        r = c.request(35, 1, {"topics": [{"topic": topic, "partitions": [1, 7]}]})
        [res] = r.results
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in res.topics] == [
            (topic, [1])]


def test_kafka_python_describe_log_dirs(target: TargetBroker, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap, request_timeout_ms=20000)
    try:
        resp = admin.describe_log_dirs()
    finally:
        admin.close()
    assert topic in repr(resp)


@pytest.mark.parametrize("version", kt.VERSIONS)
def test_kafka_topics_describe(target: TargetBroker, topic: str, version: str) -> None:
    """3.9's tool reads Metadata, 4.1's DescribeTopicPartitions."""
    out = kt.run(version, kt.TOPICS, "--bootstrap-server", target.bootstrap, "--describe",
                 "--topic", topic)
    assert f"Topic: {topic}\tTopicId:" in out and "PartitionCount: 3" in out
    rows = re.findall(r"Partition: (\d+)\tLeader: (\d+)\tReplicas: (\d+)\tIsr: (\d+)", out)
    assert rows == [(str(p), "0", "0", "0") for p in range(3)]


def test_describe_topic_partitions_pages_with_a_cursor(target: TargetBroker, topic: str) -> None:
    other = f"admin-other-{SUFFIX}"
    create_topics(target.bootstrap, [other], partitions=2)
    names = sorted([topic, other])
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    with Client(target.bootstrap) as c:
        while True:
            r = c.request(75, 0, {"topics": [{"name": n} for n in [*names, "no-such-topic"]],
                                  "response_partition_limit": 2, "cursor": cursor})
            pages += 1
            for t in r.topics:
                if t.name == "no-such-topic":
                    assert t.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
                    continue
                assert t.error_code == 0
                assert t.topic_id is not None
                seen += [(t.name, p.partition_index) for p in t.partitions]
                assert all(p.leader_id == 0 and list(p.isr_nodes) == [0] for p in t.partitions)
            cursor = r.next_cursor
            if cursor is None:
                break
            cursor = {"topic_name": cursor.topic_name, "partition_index": cursor.partition_index}
            assert pages < 10
    expected = [(n, p) for n in names for p in range(3 if n == topic else 2)]
    assert seen == expected
    assert pages == 3


@pytest.mark.parametrize("version", [*kt.VERSIONS, "4.4"])
def test_kafka_features_describe_and_update(target: TargetBroker, version: str) -> None:
    """A new cluster is finalized as Kafka 4.4.0 formats one (metadata.version 4.4-IV2,
    transaction.version 2, group.version 1, eligible.leader.replicas.version 1,
    share.version 2); tools
    older than 4.4 name the newest metadata.version UNKNOWN, as against Kafka 4.4.0."""
    b = target.bootstrap
    out = kt.run(version, kt.FEATURES, "--bootstrap-server", b, "describe")
    mv = "4.4-IV2" if version == "4.4" else "UNKNOWN 33"
    assert re.search(rf"Feature: metadata\.version\s+SupportedMinVersion: 3\.3-IV3\s+"
                     rf"SupportedMaxVersion: {mv}\s+FinalizedVersionLevel: {mv}\s+Epoch: \d+",
                     out), out
    for name, top in (("transaction.version", 2), ("group.version", 1),
                      ("eligible.leader.replicas.version", 1), ("share.version", 2)):
        assert re.search(rf"Feature: {re.escape(name)}\s+SupportedMinVersion: 0\s+"
                         rf"SupportedMaxVersion: {top}\s+FinalizedVersionLevel: {top}\s+", out), out
    # already there: nothing to do; newer than supported, a downgrade, an unsupported
    # level: refused with Kafka's error, nothing changes
    kt.run(version, kt.FEATURES, "--bootstrap-server", b, "upgrade", "--feature",
           "transaction.version=2")
    for args in (["upgrade", "--feature", "metadata.version=34"],
                 ["downgrade", "--metadata", "3.8"],
                 ["upgrade", "--feature", "transaction.version=3"],
                 ["upgrade", "--feature", "kraft.version=1"]):
        err = kt.run_failing(version, kt.FEATURES, "--bootstrap-server", b, *args)
        assert "1 out of 1 operation(s) failed" in err, err
    out = kt.run(version, kt.FEATURES, "--bootstrap-server", b, "describe")
    assert f"FinalizedVersionLevel: {mv}" in out


def test_update_features_and_api_versions_features(target: TargetBroker) -> None:
    """ApiVersions v3+ carries the supported and finalized features (what
    Admin.describeFeatures reads); UpdateFeatures checks levels as Kafka does."""
    with Client(target.bootstrap) as c:
        r = c.request(57, 1, {"timeout_ms": 10000, "validate_only": True, "feature_updates": [
            {"feature": "metadata.version", "max_version_level": 20, "upgrade_type": 3}]})
        assert r.error_code == 95  # INVALID_UPDATE_VERSION: downgrades are refused
        assert [(x.feature, x.error_code) for x in r.results] == [("metadata.version", 95)]
        r = c.request(57, 2, {"timeout_ms": 10000, "validate_only": False, "feature_updates": [
            {"feature": "kraft.version", "max_version_level": 0, "upgrade_type": 1}]})
        assert r.error_code == 0
        r = c.request(57, 0, {"timeout_ms": 10000, "feature_updates": [
            {"feature": "metadata.version", "max_version_level": 33, "allow_downgrade": False},
            {"feature": "metadata.version", "max_version_level": 33, "allow_downgrade": False}]})
        assert r.error_code == 42  # INVALID_REQUEST: the same feature twice
        av = c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert {f.name: f.max_version_level for f in av.finalized_features} == {
            "metadata.version": 33, "transaction.version": 2, "group.version": 1,
            "eligible.leader.replicas.version": 1, "streams.version": 1, "share.version": 2}
        # before v4 the features whose range starts at 0 are left out (KIP-1022)
        assert {f.name: (f.min_version, f.max_version) for f in av.supported_features} == {
            "metadata.version": (7, 33)}
        av = c.request(18, 4, {"client_software_name": "t", "client_software_version": "1"})
        assert {f.name: (f.min_version, f.max_version) for f in av.supported_features} == {
            "metadata.version": (7, 33), "kraft.version": (0, 0),
            "transaction.version": (0, 2), "group.version": (0, 1),
            "eligible.leader.replicas.version": (0, 1), "streams.version": (0, 1),
            "share.version": (0, 2)}
        assert av.finalized_features_epoch >= 0


@pytest.mark.parametrize("version", kt.VERSIONS)
def test_kafka_metadata_quorum_single_node_is_a_one_voter_quorum(
        target: TargetBroker, version: str) -> None:
    out = kt.run(version, kt.QUORUM, "--bootstrap-server", target.bootstrap, "describe",
                 "--status")
    assert re.search(r"LeaderId:\s+0\n", out), out
    assert re.search(r"CurrentVoters:\s+\[\{\"id\": 0,", out), out
    assert re.search(r"CurrentObservers:\s+\[\]", out), out
    out = kt.run(version, kt.QUORUM, "--bootstrap-server", target.bootstrap, "describe",
                 "--replication")
    rows = [line.split() for line in out.strip().splitlines()[1:]]
    assert len(rows) == 1 and rows[0][0] == "0" and rows[0][-1] == "Leader", out


def test_kafka_get_offsets_4x_earliest_local_and_latest_tiered(
        target: TargetBroker, topic: str) -> None:
    """Kafka 4.1's kafka-get-offsets asks ListOffsets v8/v9 for -4 / -5: without tiered
    storage earliest-local is the log start and latest-tiered is -1, as in Kafka."""
    def offsets(time_spec: str) -> dict[int, int]:
        out = kt.run("4.1", kt.GET_OFFSETS, "--bootstrap-server", target.bootstrap,
                     "--topic", topic, "--time", time_spec)
        return {int(line.split(":")[1]): int(line.split(":")[2])
                for line in out.strip().splitlines()}

    assert offsets("latest") == {0: 10, 1: 20, 2: 30}
    assert offsets("earliest-local") == {0: 0, 1: 0, 2: 0}
    assert offsets("latest-tiered") == {}  # the tool leaves out offset -1
    with Client(target.bootstrap) as c:
        r = c.request(2, 10, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                              "topics": [{"name": topic, "partitions": [
                                  {"partition_index": 1, "timestamp": -5,
                                   "current_leader_epoch": -1}]}]})
        p = r.topics[0].partitions[0]
        assert (p.error_code, p.offset, p.timestamp, p.leader_epoch) == (0, -1, -1, -1)
        for ts in (-4, -5):  # before v8 / v9 these are not timestamps Kafka knows
            r = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": ts,
                                                "current_leader_epoch": -1}]}]})
            assert r.topics[0].partitions[0].error_code == 35  # UNSUPPORTED_VERSION


@pytest.mark.parametrize("version", kt.VERSIONS)
def test_everyday_tools(target: TargetBroker, version: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """kafka-topics, kafka-consumer-groups, kafka-delete-records and kafka-get-offsets of
    3.9 and 4.1 on a topic with a committed group: the answers Kafka gives."""
    from kafka import KafkaConsumer, TopicPartition

    b = target.bootstrap
    name = f"tools-{version}-{SUFFIX}"
    group = f"grp-{version}-{SUFFIX}"
    out = kt.run(version, kt.TOPICS, "--bootstrap-server", b, "--create", "--topic", name,
                 "--partitions", "2", "--config", "retention.ms=100000")
    assert f"Created topic {name}." in out
    p = KafkaProducer(bootstrap_servers=b)
    try:
        for i in range(20):
            p.send(name, b"x", partition=i % 2)
        p.flush(timeout=30)
    finally:
        p.close(timeout=10)
    # a group that only commits (assign, no join: no rebalance delay)
    c = KafkaConsumer(bootstrap_servers=b, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    c.assign([TopicPartition(name, 0), TopicPartition(name, 1)])
    try:
        got = 0
        deadline = time.monotonic() + 60
        while got < 20 and time.monotonic() < deadline:
            got += sum(len(v) for v in c.poll(timeout_ms=500).values())
        assert got == 20
        c.commit()
    finally:
        c.close()
    assert group in kt.run(version, kt.GROUPS, "--bootstrap-server", b, "--list").split()
    out = kt.run(version, kt.GROUPS, "--bootstrap-server", b, "--describe", "--group", group)
    rows = sorted(line.split()[:6] for line in out.splitlines() if line.startswith(group))
    assert rows == [[group, name, str(i), "10", "10", "0"] for i in range(2)], out
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"partitions": [{"topic": name, "partition": 0, "offset": 4}],
                                "version": 1}))
    out = kt.run(version, kt.DELETE_RECORDS, "--bootstrap-server", b, "--offset-json-file",
                 str(spec))
    assert f"partition: {name}-0\tlow_watermark: 4" in out
    out = kt.run(version, kt.GET_OFFSETS, "--bootstrap-server", b, "--topic", name,
                 "--time", "-2")
    assert out.split() == [f"{name}:0:4", f"{name}:1:0"]
    out = kt.run(version, kt.GROUPS, "--bootstrap-server", b, "--reset-offsets", "--group", group,
                 "--topic", name, "--to-earliest", "--execute")
    assert re.findall(rf"{group}\s+{name}\s+(\d)\s+(\d+)", out) == [("1", "0"), ("0", "4")] \
        or sorted(re.findall(rf"{group}\s+{name}\s+(\d)\s+(\d+)", out)) == [("0", "4"),
                                                                           ("1", "0")], out
    kt.run(version, kt.TOPICS, "--bootstrap-server", b, "--alter", "--topic", name,
           "--partitions", "3")
    out = kt.run(version, kt.TOPICS, "--bootstrap-server", b, "--describe", "--topic", name)
    # the Configs list also names the cluster-level min.insync.replicas that ELR writes
    # (a dynamic default, shown by kafka-topics as against Kafka 4.x)
    configs = re.search(r"Configs: (\S*)", out)
    assert "PartitionCount: 3" in out and configs is not None \
        and "retention.ms=100000" in configs.group(1).split(","), out
    out = kt.run(version, kt.GROUPS, "--bootstrap-server", b, "--delete", "--group", group)
    assert "was successful" in out
    kt.run(version, kt.TOPICS, "--bootstrap-server", b, "--delete", "--topic", name)
    assert name not in kt.run(version, kt.TOPICS, "--bootstrap-server", b, "--list").split()


@pytest.mark.parametrize("version", kt.VERSIONS)
def test_kafka_transactions_describe_producers(target: TargetBroker, version: str) -> None:
    """The idempotent producers a leader knows (DescribeProducers), as
    `kafka-transactions --describe-producers` shows them."""
    name = f"producers-{version}-{SUFFIX}"
    create_topics(target.bootstrap, [name], partitions=1)
    p = KafkaProducer(bootstrap_servers=target.bootstrap, enable_idempotence=True, acks="all")
    try:
        for _ in range(5):
            p.send(name, b"x", partition=0).get(timeout=30)
    finally:
        p.close(timeout=10)
    out = kt.run(version, kt.TRANSACTIONS, "--bootstrap-server", target.bootstrap,
                 "describe-producers", "--topic", name, "--partition", "0")
    lines = [line.split() for line in out.strip().splitlines()]
    assert lines[0][:4] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                            "LastSequence"], out
    [row] = lines[1:]
    assert int(row[0]) >= 0 and row[3] == "4", out  # five batches: sequences 0-4


def test_list_config_resources_as_kafka_44_answers(target: TargetBroker, topic: str) -> None:
    """ListConfigResources (KIP-1142), as Apache Kafka 4.4.0 answers it (probed): v0 the
    client-metrics resources, v1 the types asked (none: all), every topic and broker; an
    unknown type UNSUPPORTED_VERSION."""
    with Client(target.bootstrap) as c:
        assert c.request(74, 0, {}).config_resources == []

        def listed(types: list[int]) -> tuple[int, set[tuple[int, str]]]:
            r = c.request(74, 1, {"resource_types": types})
            return int(r.error_code), {(int(x.resource_type), str(x.resource_name))
                                       for x in r.config_resources}
        md = c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        topics = {(2, t.name) for t in md.topics}  # internal ones too
        brokers = {(4, str(b.node_id)) for b in md.brokers}
        loggers = {(8, str(b.node_id)) for b in md.brokers}
        assert (2, topic) in topics
        assert listed([]) == (0, topics | brokers | loggers)
        assert listed([2]) == (0, topics)
        assert listed([4]) == (0, brokers)
        assert listed([8]) == (0, loggers)
        assert listed([16]) == (0, set())
        assert listed([32]) == (0, set())
        assert listed([99]) == (ErrorCode.UNSUPPORTED_VERSION, set())
