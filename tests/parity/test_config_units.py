"""Unit tests of the broker-config layers (`broker/broker_configs.py`) and the feature
rules (`broker/features.py`)."""

from __future__ import annotations

import pytest

from jocko_py.broker.broker_configs import (
    BROKER_CONFIGS,
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_CONFIGS,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    BrokerConfigError,
    BrokerConfigView,
    validate_dynamic_change,
)
from jocko_py.broker.config import DEFAULTS, build_config
from jocko_py.broker.features import BOOTSTRAP, check_update, finalized
from jocko_py.cluster.controller import Controller, ControllerConfig
from jocko_py.cluster.metadata import ClusterSecretRecord, FeatureLevelRecord, MetadataImage
from jocko_py.commitlog.config import TOPIC_TO_BROKER
from jocko_py.protocol.errors import ErrorCode


def _view(cluster: dict[str, str] | None = None, broker: dict[str, str] | None = None,
          **overrides: str) -> BrokerConfigView:
    cfg = build_config(overrides={k.replace("_", "."): v for k, v in overrides.items()},
                       broker_id=3, broker_addr="127.0.0.1:9000")
    return BrokerConfigView(cfg, cluster or {}, broker or {})


def test_catalogue_covers_every_default_and_log_default() -> None:
    assert set(DEFAULTS) <= set(BROKER_CONFIGS)
    # the dynamic ones are exactly the broker-level defaults of topic configs (primary names)
    assert DYNAMIC_CONFIGS == set(TOPIC_TO_BROKER.values())
    for name in DEFAULTS:
        assert BROKER_CONFIGS[name].default == DEFAULTS[name], name


def test_layers_and_synonyms() -> None:
    v = _view({"log.retention.ms": "1000"}, {"log.retention.ms": "2000"}, log_retention_hours="5")
    e = v.entry("log.retention.ms", per_broker=True)
    assert (e["value"], e["config_source"], e["read_only"]) == ("2000", DYNAMIC_BROKER_CONFIG,
                                                               False)
    assert [(s["name"], s["value"], s["source"]) for s in e["synonyms"]] == [
        ("log.retention.ms", "2000", DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "1000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "5", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    # the cluster-default resource ("") sees only the dynamic defaults
    e = v.entry("log.retention.ms", per_broker=False)
    assert (e["value"], [s["source"] for s in e["synonyms"]]) == (
        "1000", [DYNAMIC_DEFAULT_BROKER_CONFIG])
    assert [c["name"] for c in v.describe(None, per_broker=False)] == ["log.retention.ms"]
    assert v.effective()["log.retention.ms"] == "2000"
    e = v.entry("num.partitions", per_broker=True)
    assert (e["value"], e["config_source"], e["read_only"]) == ("1", DEFAULT_CONFIG, True)
    e = v.entry("node.id", per_broker=True)
    assert (e["value"], e["config_source"]) == ("3", STATIC_BROKER_CONFIG)
    assert v.entry("listeners", per_broker=True)["value"] == "PLAINTEXT://127.0.0.1:9000"
    e = _view(**{"ssl_keystore_password": "secret"}).entry("ssl.keystore.password",
                                                          per_broker=True)
    assert e["value"] is None and e["is_sensitive"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"num.partitions": "3"}, "Cannot update these configs dynamically: Set(num.partitions)"),
    ({"num.io.threads": "8"}, "Not supported by this broker"),
    ({"log.segment.bytes": "10"}, "Invalid value 10 for configuration log.segment.bytes"),
    ({"log.cleanup.policy": "sometimes"}, "log.cleanup.policy"),
])
def test_refused_dynamic_changes(changes: dict[str, str | None], message: str) -> None:
    with pytest.raises(BrokerConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_dynamic_change({}, changes, _view())


def test_accepted_dynamic_changes() -> None:
    validate_dynamic_change({}, {"log.segment.bytes": "20000", "my.custom.config": "x"}, _view())
    validate_dynamic_change({"log.segment.bytes": "20000"}, {"log.segment.bytes": None}, _view())


def test_feature_rules() -> None:
    # a metadata log without a metadata.version record: 3.9-IV0, and group.version 1
    # (earlier jocko-py served KIP-848 groups), nothing else finalized
    assert finalized({}) == {"metadata.version": 21, "group.version": 1}
    assert finalized({"metadata.version": 20, "kraft.version": 0}) == {"metadata.version": 20}
    assert finalized({"transaction.version": 2}) == {"metadata.version": 21, "group.version": 1,
                                                     "transaction.version": 2}
    # streams groups (KIP-1071) may be disabled (0) and enabled again
    assert check_update({}, "streams.version", 0, 2) == (ErrorCode.NONE, None)
    assert check_update({"streams.version": 0}, "streams.version", 1, 1) == (ErrorCode.NONE, None)
    assert check_update({}, "streams.version", 2, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    ok = (ErrorCode.NONE, None)
    assert check_update({}, "metadata.version", 21, 1) == ok
    assert check_update({"metadata.version": 20}, "metadata.version", 21, 1) == ok
    assert check_update({}, "metadata.version", 33, 1) == ok
    assert check_update({}, "metadata.version", 34, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "metadata.version", 20, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "metadata.version", 20, 2)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "metadata.version", 0, 3)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "group.version", 1, 1) == ok
    assert check_update({}, "group.version", 2, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "group.version", 0, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "group.version", 0, 2) == ok  # the legacy 1 safely downgraded
    assert check_update({}, "transaction.version", 2, 1) == ok
    assert check_update({}, "transaction.version", 3, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({"transaction.version": 2}, "transaction.version", 1, 1)[0] == \
        ErrorCode.INVALID_UPDATE_VERSION  # a downgrade needs safe or unsafe
    assert check_update({"transaction.version": 2}, "transaction.version", 1, 2) == ok
    assert check_update({"transaction.version": 1}, "transaction.version", 2, 2)[0] == \
        ErrorCode.INVALID_UPDATE_VERSION  # "Can't downgrade to a newer version."
    assert check_update({}, "kraft.version", 1, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    # ELR 1 needs metadata.version 4.0-IV1 (23), checked against the whole request
    err, msg = check_update({}, "eligible.leader.replicas.version", 1, 1)
    assert err == ErrorCode.INVALID_UPDATE_VERSION and msg == (
        "Invalid update version 1 for feature eligible.leader.replicas.version. "
        "eligible.leader.replicas.version could not be set to 1 because it depends on "
        "metadata.version level 23")
    assert check_update({}, "eligible.leader.replicas.version", 1, 1,
                        {"metadata.version": 23, "eligible.leader.replicas.version": 1}) == ok
    assert check_update({"metadata.version": 33}, "eligible.leader.replicas.version", 1, 1) == ok


def test_a_new_cluster_bootstraps_its_features_and_an_old_log_keeps_its_level() -> None:
    """The controller's first records on an empty metadata log are the bootstrap
    feature levels (Kafka 4.4.0's `kafka-storage format`); a log that already holds
    records but no metadata.version gets none and stays at 3.9-IV0."""
    c = Controller(ControllerConfig(bootstrap_features=tuple(sorted(BOOTSTRAP.items()))))
    img = MetadataImage()
    recs = c.bootstrap_records(img)
    assert [(r.name, r.feature_level) for r in recs if isinstance(r, FeatureLevelRecord)] == \
        sorted(BOOTSTRAP.items())
    img.apply_batch(recs)
    assert finalized(img.features) == {
        "metadata.version": 33, "transaction.version": 2, "group.version": 1,
        "eligible.leader.replicas.version": 1, "streams.version": 1, "share.version": 2}
    assert c.bootstrap_records(img) == []
    old = MetadataImage()
    old.apply(ClusterSecretRecord(b"s" * 32))
    assert c.bootstrap_records(old) == []
    assert finalized(old.features) == {"metadata.version": 21, "group.version": 1}
