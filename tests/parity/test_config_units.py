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
from jocko_py.broker.features import check_update, finalized
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
    assert finalized({}) == {"metadata.version": 21, "streams.version": 1}
    assert finalized({"metadata.version": 20, "kraft.version": 0, "streams.version": 0}
                     ) == {"metadata.version": 20}
    # streams groups (KIP-1071) may be disabled (0) and enabled again
    assert check_update({}, "streams.version", 0, 2) == (ErrorCode.NONE, None)
    assert check_update({"streams.version": 0}, "streams.version", 1, 1) == (ErrorCode.NONE, None)
    assert check_update({}, "streams.version", 2, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    ok = (ErrorCode.NONE, None)
    assert check_update({}, "metadata.version", 21, 1) == ok
    assert check_update({"metadata.version": 20}, "metadata.version", 21, 1) == ok
    assert check_update({}, "metadata.version", 22, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "metadata.version", 20, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "metadata.version", 20, 2)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "metadata.version", 0, 3)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "group.version", 1, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert check_update({}, "group.version", 0, 1) == ok
    assert check_update({}, "kraft.version", 1, 1)[0] == ErrorCode.INVALID_UPDATE_VERSION
