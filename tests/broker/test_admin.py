"""Admin APIs through kafka-python's KafkaAdminClient and the project's own client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)
from kafka.structs import TopicPartition

from jocko_py.client import Client
from tests.support.broker import BrokerProcess


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        yield a
    finally:
        a.close()


def test_create_list_describe_delete_topics(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("orders", 3, 1, topic_configs={"retention.ms": "1000000"})])
    assert "orders" in admin.list_topics()
    (desc,) = admin.describe_topics(["orders"])
    assert len(desc["partitions"]) == 3
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("orders", 1, 1)])
    admin.delete_topics(["orders"])
    assert "orders" not in admin.list_topics()


def test_invalid_topic_requests_get_kafka_errors(admin: KafkaAdminClient) -> None:
    with pytest.raises(InvalidTopicError):
        admin.create_topics([NewTopic("bad/name", 1, 1)])
    with pytest.raises(InvalidPartitionsError):
        admin.create_topics([NewTopic("zero", 0, 1)])
    with pytest.raises(InvalidConfigurationError):
        admin.create_topics([NewTopic("cfg", 1, 1, topic_configs={"retention.ms": "abc"})])


def test_describe_and_alter_topic_configs(broker: BrokerProcess,
                                          admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("cfg", 1, 1, topic_configs={"segment.bytes": "1048576"})])
    res = ConfigResource(ConfigResourceType.TOPIC, "cfg")

    def configs() -> dict[str, str]:
        with Client(broker.bootstrap) as c:
            return {e.name: e.value for e in c.describe_configs("cfg")}

    got = configs()
    assert got["segment.bytes"] == "1048576"
    assert got["cleanup.policy"] == "delete"
    assert got["retention.ms"] == "604800000"
    # raw AlterConfigs v2 (kafka-python merges in current values before sending)
    with Client(broker.bootstrap) as c:
        r = c.request(33, 2, {"resources": [{
            "resource_type": 2, "resource_name": "cfg",
            "configs": [{"name": "retention.ms", "value": "5000"}]}], "validate_only": False})
        assert r.responses[0].error_code == 0
    got = configs()
    assert got["retention.ms"] == "5000"
    # AlterConfigs replaces the whole set: the earlier override is gone
    assert got["segment.bytes"] == "1073741824"
    with pytest.raises(Exception):  # noqa: B017 - kafka-python raises a generic error type
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg",
                                            configs={"no.such.config": "1"})],
                            incremental=False)
    assert res.name == "cfg"


def test_incremental_alter_configs(broker: BrokerProcess) -> None:
    with Client(broker.bootstrap) as c:
        c.create_topic("inc", 1, configs={"retention.ms": "1000"})
        r = c.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": "inc",
                                             "configs": [
                                                 {"name": "segment.ms", "config_operation": 0,
                                                  "value": "60000"},
                                                 {"name": "retention.ms",
                                                  "config_operation": 1, "value": None}]}],
                              "validate_only": False})
        assert r.responses[0].error_code == 0
        got = {e.name: (e.value, e.config_source) for e in c.describe_configs("inc")}
        assert got["segment.ms"] == ("60000", 1)
        assert got["retention.ms"] == ("604800000", 5)


def test_create_partitions(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("grow", 2, 1)])
    admin.create_partitions({"grow": NewPartitions(5)})
    (desc,) = admin.describe_topics(["grow"])
    assert len(desc["partitions"]) == 5
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"grow": NewPartitions(3)})


def test_delete_records_moves_log_start(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("del", 1, 1)])
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        p.send("del", value=b"%d" % i, partition=0)
    p.flush()
    p.close()
    tp = TopicPartition("del", 0)
    result = admin.delete_records({tp: 4})
    assert result[tp]["low_watermark"] == 4
    with Client(broker.bootstrap) as c:
        assert c.list_offset("del", 0, -2)[0] == 4
        assert c.list_offset("del", 0, -1)[0] == 10


def test_describe_cluster(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    info = admin.describe_cluster()
    assert info["controller_id"] == 0
    assert [(b["broker_id"], b["port"]) for b in info["brokers"]] == [(0, broker.port)]
    assert info["cluster_id"]


def test_topics_and_configs_survive_restart(broker: BrokerProcess) -> None:
    with Client(broker.bootstrap) as c:
        c.create_topic("keep", 4, configs={"retention.ms": "12345"})
    broker.restart()
    with Client(broker.bootstrap) as c:
        (t,) = c.metadata(["keep"]).topics
        assert len(t.partitions) == 4
        assert {e.name: e.value for e in c.describe_configs("keep")}["retention.ms"] == "12345"


def test_broker_level_defaults_are_reported_as_static_broker_config(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", overrides={"log.retention.hours": "5"})
    b.start()
    try:
        with Client(b.bootstrap) as c:
            c.create_topic("t", 1)
            r = c.request(32, 4, {"resources": [{
                "resource_type": 2, "resource_name": "t",
                "configuration_keys": ["retention.ms", "max.message.bytes"]}],
                "include_synonyms": True})
            got = {e.name: e for e in r.results[0].configs}
            ret = got["retention.ms"]
            assert (ret.value, ret.config_source) == ("18000000", 4)  # STATIC_BROKER_CONFIG
            assert ret.synonyms[0].name == "log.retention.hours"
            # not set by the operator: a plain default, even though the broker has a value
            assert got["max.message.bytes"].config_source == 5
    finally:
        b.stop()
