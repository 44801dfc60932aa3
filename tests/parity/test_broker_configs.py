"""Broker configs as operators see them (issue 12, item 5): DescribeConfigs for a broker
lists every setting it runs with, with Kafka's sources and synonyms; AlterConfigs /
IncrementalAlterConfigs change the dynamic ones (the broker-level log defaults) through
the metadata log, applied live and kept across a restart. With Kafka's kafka-configs
(3.9 and 4.1), confluent-kafka and kafka-python.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType

from jocko_py.broker.config import DEFAULTS
from tests.parity import kafka_tools as kt
from tests.support.broker import BrokerProcess
from tests.support.e2e import create_topics

LINE = re.compile(r"^\s+(\S+?)=(.*) sensitive=(true|false) synonyms=\{(.*)\}$")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("configs") / "data",
                      overrides={"log.retention.hours": "24", "num.partitions": "2"})
    b.start()
    try:
        yield b
    finally:
        b.stop()


def describe(version: str, bootstrap: str, *entity: str, all_: bool = True
             ) -> dict[str, tuple[str, list[str]]]:
    """kafka-configs --describe: name -> (value, ["SOURCE:name=value", ...])."""
    args = ["--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers", *entity]
    if all_:
        args.append("--all")
    out: dict[str, tuple[str, list[str]]] = {}
    for line in kt.run(version, kt.CONFIGS, *args).splitlines():
        m = LINE.match(line)
        if m:
            syns = [s for s in m.group(4).split(", ") if s]
            out[m.group(1)] = (m.group(2), syns)
    return out


@pytest.mark.parametrize("version", kt.VERSIONS)
def test_kafka_configs_describe_all_lists_every_effective_setting(
        broker: BrokerProcess, version: str) -> None:
    cfg = describe(version, broker.bootstrap, "--entity-name", "0")
    # every property the broker has a default for, and the log defaults it really uses
    assert set(DEFAULTS) <= set(cfg), set(DEFAULTS) - set(cfg)
    for name in ("log.segment.bytes", "log.roll.hours", "log.index.size.max.bytes",
                 "log.cleanup.policy", "log.cleaner.delete.retention.ms", "compression.type",
                 "log.message.timestamp.type", "log.retention.bytes", "listeners", "log.dirs"):
        assert name in cfg, name
    assert len(cfg) >= 70
    # sources: a default is DEFAULT_CONFIG (not a static broker config) ...
    assert cfg["log.segment.bytes"] == ("1073741824", ["DEFAULT_CONFIG:log.segment.bytes=1073741824"])
    # ... what the operator set is STATIC_BROKER_CONFIG, with the default as a synonym
    assert cfg["num.partitions"] == ("2", ["STATIC_BROKER_CONFIG:num.partitions=2",
                                           "DEFAULT_CONFIG:num.partitions=1"])
    # log.retention.ms is null, resolved through its synonyms as Kafka reports it
    value, syns = cfg["log.retention.ms"]
    assert value == "null"
    assert syns[:2] == ["STATIC_BROKER_CONFIG:log.retention.hours=24",
                        "DEFAULT_CONFIG:log.retention.hours=168"]
    assert cfg["listeners"][0] == f"PLAINTEXT://127.0.0.1:{broker.port}"


def test_alter_broker_configs_with_kafka_configs_applies_them_live(
        broker: BrokerProcess, tmp_path: Path) -> None:
    b = broker.bootstrap
    topic = "dyn-segments"
    create_topics(b, [topic], partitions=1)
    # cluster-wide default with 3.9's tool, per-broker with 4.1's
    kt.run("3.9", kt.CONFIGS, "--bootstrap-server", b, "--alter", "--entity-type", "brokers",
           "--entity-default", "--add-config", "log.retention.ms=7200000")
    kt.run("4.1", kt.CONFIGS, "--bootstrap-server", b, "--alter", "--entity-type", "brokers",
           "--entity-name", "0", "--add-config", "log.segment.bytes=20000")
    default = describe("4.1", b, "--entity-default", all_=False)
    assert default == {"log.retention.ms": ("7200000", [
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000"]),
        # written when the new cluster finalized ELR 1, as Kafka 4.4 writes it
        "min.insync.replicas": ("1", ["DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1"])}
    dyn = describe("3.9", b, "--entity-name", "0", all_=False)
    assert dyn["log.segment.bytes"][1][0] == "DYNAMIC_BROKER_CONFIG:log.segment.bytes=20000"
    cfg = describe("3.9", b, "--entity-name", "0")
    assert cfg["log.retention.ms"] == ("7200000", [
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000",
        "STATIC_BROKER_CONFIG:log.retention.hours=24", "DEFAULT_CONFIG:log.retention.hours=168"])
    # the topic's effective configs follow, with the broker synonyms as sources
    out = kt.run("3.9", kt.CONFIGS, "--bootstrap-server", b, "--describe", "--all",
                 "--entity-type", "topics", "--entity-name", topic)
    assert re.search(r"retention\.ms=7200000 sensitive=false synonyms=\{"
                     r"DYNAMIC_DEFAULT_BROKER_CONFIG:log\.retention\.ms=7200000", out), out
    assert "segment.bytes=20000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:" in out
    # applied live: the existing partition's log now rolls at 20 kB
    p = KafkaProducer(bootstrap_servers=b, linger_ms=0, batch_size=4096)
    try:
        for _ in range(30):
            p.send(topic, b"x" * 3000, partition=0)
        p.flush(timeout=30)
    finally:
        p.close(timeout=10)
    segments = list((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 3, segments
    # read-only configs are refused as Kafka refuses them
    err = kt.run_failing("4.1", kt.CONFIGS, "--bootstrap-server", b, "--alter",
                         "--entity-type", "brokers", "--entity-name", "0",
                         "--add-config", "num.partitions=3")
    assert "Cannot update these configs dynamically: Set(num.partitions)" in err
    # deleting the override restores the static value
    kt.run("4.1", kt.CONFIGS, "--bootstrap-server", b, "--alter", "--entity-type", "brokers",
           "--entity-default", "--delete-config", "log.retention.ms")
    cfg = describe("4.1", b, "--entity-name", "0")
    assert cfg["log.retention.ms"][0] == "null"
    # kept in the metadata log: still there after a restart
    broker.restart()
    cfg = describe("4.1", b, "--entity-name", "0")
    assert cfg["log.segment.bytes"][1][0] == "DYNAMIC_BROKER_CONFIG:log.segment.bytes=20000"
    kt.run("4.1", kt.CONFIGS, "--bootstrap-server", b, "--alter", "--entity-type", "brokers",
           "--entity-name", "0", "--delete-config", "log.segment.bytes")


def test_confluent_kafka_admin_broker_configs(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.BROKER, "0")
    configs = admin.describe_configs([res])[res].result(timeout=30)
    assert configs["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].is_read_only
    assert not configs["min.insync.replicas"].is_read_only
    change = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([change])[change].result(timeout=30)
    deadline = time.monotonic() + 10
    while True:
        configs = admin.describe_configs([res])[res].result(timeout=30)
        entry = configs["log.cleanup.policy"]
        if entry.value == "delete,compact" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert entry.value == "delete,compact"
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    bad = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.segment.bytes", "10", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="log.segment.bytes"):
        admin.incremental_alter_configs([bad])[bad].result(timeout=30)
    undo = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([undo])[undo].result(timeout=30)


def test_kafka_python_describe_broker_configs(broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        res = [KPConfigResource(ConfigResourceType.BROKER, "0")]
        static = admin.describe_configs(res, config_filter="static")["broker"]["0"]
        everything = admin.describe_configs(res, config_filter="all")["broker"]["0"]
    finally:
        admin.close()
    # STATIC_BROKER_CONFIG: what the operator set (and the id, dir, listeners it runs with)
    assert {"log.retention.hours", "num.partitions", "broker.id", "log.dirs"} <= set(static)
    assert "log.segment.bytes" not in static
    assert static["log.retention.hours"]["value"] == "24"
    assert everything["log.segment.bytes"]["value"] == "1073741824"
    assert len(everything) >= 70


def test_kafka_python_alter_configs_on_a_broker(broker: BrokerProcess) -> None:
    """AlterConfigs (33) replaces the broker's dynamic configs as a whole."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    res = [KPConfigResource(ConfigResourceType.BROKER, "0")]
    try:
        admin.alter_configs([KPConfigResource(ConfigResourceType.BROKER, "0", configs={
            "log.flush.interval.messages": "10000"})])
        deadline = time.monotonic() + 10
        while True:
            modified = admin.describe_configs(res)["broker"]["0"]
            if "log.flush.interval.messages" in modified or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert modified["log.flush.interval.messages"]["value"] == "10000"
        with pytest.raises(Exception, match="Unrecognized configs|dynamically"):
            admin.alter_configs([KPConfigResource(ConfigResourceType.BROKER, "0", configs={
                "auto.create.topics.enable": "false"})])
        admin.alter_configs([KPConfigResource(ConfigResourceType.BROKER, "0", configs={})])
    finally:
        admin.close()


def test_kafka_configs_broker_loggers(broker: BrokerProcess) -> None:
    version = "4.1"
    b = broker.bootstrap
    base = ["--bootstrap-server", b, "--entity-type", "broker-loggers", "--entity-name", "0"]
    out = kt.run(version, kt.CONFIGS, *base, "--describe")
    levels = {m.group(1): m.group(2) for line in out.splitlines()
              if (m := LINE.match(line))}
    assert levels["root"] == "INFO" and levels["jocko_py.broker.connection"] == "INFO", out
    kt.run(version, kt.CONFIGS, *base, "--alter", "--add-config",
           "jocko_py.broker.connection=DEBUG")
    out = kt.run(version, kt.CONFIGS, *base, "--describe")
    assert "jocko_py.broker.connection=DEBUG" in out
    err = kt.run_failing(version, kt.CONFIGS, *base, "--alter", "--add-config",
                         "jocko_py.broker.connection=LOUD")
    assert "not a supported log level" in err
    kt.run(version, kt.CONFIGS, *base, "--alter", "--delete-config",
           "jocko_py.broker.connection")
    out = kt.run(version, kt.CONFIGS, *base, "--describe")
    assert "jocko_py.broker.connection=INFO" in out
