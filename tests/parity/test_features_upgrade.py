"""Feature levels changed with Apache Kafka 4.4.0's `kafka-features` (issue 21).

A new cluster's ELR, streams.version and transaction.version go down to 0 and up
again, with what each level gates (test_kafka_features_turns_...). And a metadata log
written before features were recorded is upgraded:

The broker starts on a metadata log that already holds records but no
FeatureLevelRecord (as every log of a jocko-py older than this one): it keeps the
level it ran at, metadata.version 3.9-IV0 and group.version 1 (earlier jocko-py served
KIP-848 groups, so a KIP-848 consumer keeps working) with no other feature finalized,
so Kafka 4.x clients see a cluster without transaction.version 2 and EndTxn v5 ends
without an epoch bump. `kafka-features upgrade` refuses ELR 1 alone (it depends on
metadata.version 4.0-IV1) with Kafka's message, then takes the cluster to 4.4-IV2
with transaction.version 2, group.version 1 and ELR 1 in one request; KIP-890 part 2
and the consumer protocol are on from then,
and a restart keeps the levels.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jocko_py.client import Client
from jocko_py.cluster.local_log import LocalMetadataLog
from jocko_py.cluster.metadata import ClusterSecretRecord
from jocko_py.protocol.errors import ErrorCode as E
from tests.parity import kafka_tools as kt
from tests.support.broker import BrokerProcess


@pytest.fixture
def old_log_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    data.mkdir()
    log = LocalMetadataLog(data / "__cluster_metadata.log")
    log.append([ClusterSecretRecord(uuid.uuid4().bytes * 2)])
    log.close()
    b = BrokerProcess(data)
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _finalized(c: Client) -> dict[str, int]:
    av = c.request(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    return {f.name: int(f.max_version_level) for f in av.finalized_features}


def _end_txn_v5_epochs(c: Client, topic: str) -> tuple[int, int]:
    """(epoch before, epoch answered) of a one-record transaction ended by EndTxn v5."""
    tid = f"u-{uuid.uuid4().hex[:6]}"
    assert c.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]}) \
        .coordinators[0].error_code == 0
    r = c.request(22, 5, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                          "producer_id": -1, "producer_epoch": -1})
    pid, epoch = r.producer_id, r.producer_epoch
    r = c.request(24, 3, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                          "v3_and_below_producer_epoch": epoch,
                          "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == E.NONE
    end: Any = c.request(26, 5, {"transactional_id": tid, "producer_id": pid,
                                 "producer_epoch": epoch, "committed": False})
    assert end.error_code == E.NONE
    return epoch, int(end.producer_epoch)


def _heartbeat(c: Client, topic: str) -> int:
    """A consumer-protocol (KIP-848) member joining a group: its error code."""
    group = f"hb-{uuid.uuid4().hex[:6]}"
    assert c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}) \
        .coordinators[0].error_code == 0
    r = c.request(68, 1, {"group_id": group, "member_id": uuid.uuid4().hex[:22],
                          "member_epoch": 0, "instance_id": None, "rack_id": None,
                          "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
                          "subscribed_topic_regex": None, "server_assignor": None,
                          "topic_partitions": []})
    return int(r.error_code)


def test_an_old_log_keeps_its_level_until_kafka_features_upgrades_it(
        old_log_broker: BrokerProcess) -> None:
    b = old_log_broker
    with Client(b.bootstrap) as c:
        assert _finalized(c) == {"metadata.version": 21, "group.version": 1}
        topic = f"up-{uuid.uuid4().hex[:6]}"
        c.create_topic(topic, 1, 1)
        before, after = _end_txn_v5_epochs(c, topic)
        assert after == before                       # transaction.version 0: no bump
        assert _heartbeat(c, topic) == E.NONE        # group.version 1 kept
    out = kt.run("4.4", kt.FEATURES, "--bootstrap-server", b.bootstrap, "describe")
    assert re.search(r"Feature: metadata\.version\s+SupportedMinVersion: 3\.3-IV3\s+"
                     r"SupportedMaxVersion: 4\.4-IV2\s+FinalizedVersionLevel: 3\.9-IV0", out), out
    assert re.search(r"Feature: transaction\.version\s+SupportedMinVersion: 0\s+"
                     r"SupportedMaxVersion: 2\s+FinalizedVersionLevel: 0", out), out
    err = kt.run_failing("4.4", kt.FEATURES, "--bootstrap-server", b.bootstrap, "upgrade",
                         "--feature", "eligible.leader.replicas.version=1")
    assert "eligible.leader.replicas.version could not be set to 1 because it depends on " \
           "metadata.version level 23" in err, err
    kt.run("4.4", kt.FEATURES, "--bootstrap-server", b.bootstrap, "upgrade",
           "--metadata", "4.4-IV2", "--feature", "transaction.version=2",
           "--feature", "eligible.leader.replicas.version=1", "--feature", "group.version=1")
    want = {"metadata.version": 33, "transaction.version": 2,
            "eligible.leader.replicas.version": 1, "group.version": 1}
    with Client(b.bootstrap) as c:
        assert _finalized(c) == want
        before, after = _end_txn_v5_epochs(c, topic)
        assert after == before + 1                   # KIP-890 part 2 is on
        assert _heartbeat(c, topic) == E.NONE        # and the consumer protocol still
    b.stop()
    b.start()
    with Client(b.bootstrap) as c:
        assert _finalized(c) == want


@pytest.fixture
def new_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data")
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _alter_min_isr(c: Client, broker: str, value: str | None) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of min.insync.replicas on a broker resource ("" is the
    cluster level): (error code, message)."""
    r = c.request(44, 1, {"validate_only": False, "resources": [{
        "resource_type": 4, "resource_name": broker, "configs": [{
            "name": "min.insync.replicas", "config_operation": 0 if value else 1,
            "value": value}]}]})
    res = r.responses[0]
    return int(res.error_code), res.error_message


def _cluster_configs(c: Client) -> dict[str, str]:
    r = c.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "",
                                         "configuration_keys": None}],
                          "include_synonyms": False, "include_documentation": False})
    return {x.name: x.value for x in r.results[0].configs}


def test_kafka_features_turns_elr_streams_and_transactions_down_and_up(
        new_broker: BrokerProcess) -> None:
    """A new cluster at Kafka 4.4's levels; `kafka-features downgrade` of ELR,
    streams.version and transaction.version and `upgrade` back, with the behaviour
    each level gates: the cluster-level min.insync.replicas that ELR requires (and
    Kafka's refusals beside it), EndTxn v5's epoch bump."""
    b = new_broker
    with Client(b.bootstrap) as c:
        assert _finalized(c).items() >= {"metadata.version": 33, "transaction.version": 2,
                                         "group.version": 1,
                                         "eligible.leader.replicas.version": 1,
                                         "streams.version": 1}.items()
        # ELR at bootstrap: the cluster-level min.insync.replicas, as Kafka 4.4 writes it
        assert _cluster_configs(c) == {"min.insync.replicas": "1"}
        assert _alter_min_isr(c, "0", "1") == (
            E.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while "
            "ELR is enabled.")
        assert _alter_min_isr(c, "", None) == (
            E.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while "
            "ELR is enabled.")
        topic = f"dn-{uuid.uuid4().hex[:6]}"
        c.create_topic(topic, 1, 1)
        before, after = _end_txn_v5_epochs(c, topic)
        assert after == before + 1
    out = kt.run("4.4", kt.FEATURES, "--bootstrap-server", b.bootstrap, "downgrade",
                 "--feature", "eligible.leader.replicas.version=0",
                 "--feature", "streams.version=0", "--feature", "transaction.version=0")
    for name in ("eligible.leader.replicas.version", "streams.version", "transaction.version"):
        assert f"{name} was downgraded to 0." in out, out
    with Client(b.bootstrap) as c:
        levels = _finalized(c)
        assert not {"eligible.leader.replicas.version", "streams.version",
                    "transaction.version"} & set(levels), levels
        assert levels["metadata.version"] == 33 and levels["group.version"] == 1
        before, after = _end_txn_v5_epochs(c, topic)
        assert after == before                   # transaction.version 0: no bump
        # without ELR a broker-level min.insync.replicas and the removal are allowed
        assert _alter_min_isr(c, "0", "1") == (E.NONE, None)
        assert _alter_min_isr(c, "", None) == (E.NONE, None)
        assert _cluster_configs(c) == {}
    kt.run("4.4", kt.FEATURES, "--bootstrap-server", b.bootstrap, "upgrade",
           "--feature", "eligible.leader.replicas.version=1",
           "--feature", "streams.version=1", "--feature", "transaction.version=2")
    with Client(b.bootstrap) as c:
        assert _finalized(c)["eligible.leader.replicas.version"] == 1
        # the upgrade wrote the cluster level again and removed broker 0's
        assert _cluster_configs(c) == {"min.insync.replicas": "1"}
        r = c.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "0",
                                             "configuration_keys": ["min.insync.replicas"]}],
                              "include_synonyms": True, "include_documentation": False})
        [cfg] = r.results[0].configs
        assert cfg.config_source != 1, cfg          # no DYNAMIC_BROKER_CONFIG left
        before, after = _end_txn_v5_epochs(c, topic)
        assert after == before + 1
