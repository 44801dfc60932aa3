"""LogConfig: Kafka property names, defaults, broker-level mapping, validation."""

from __future__ import annotations

import pytest

from jocko_py.commitlog.config import (
    LONG_MAX,
    TOPIC_CONFIGS,
    LogConfig,
    effective_min_isr,
    topic_config_defaults,
)


def test_defaults_match_kafka() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000 and c.retention_bytes == -1
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.cleanup_policy == ("delete",) and c.delete and not c.compact
    assert c.message_timestamp_type == "CreateTime"
    assert c.max_message_bytes == 1048588
    assert c.min_insync_replicas == 1
    assert c.preallocate is False and c.unclean_leader_election_enable is False


def test_from_properties_overlays_base() -> None:
    base = LogConfig(retention_ms=5)
    c = LogConfig.from_properties(
        {"segment.bytes": "1000", "cleanup.policy": "compact,delete", "preallocate": "TRUE"},
        base,
    )
    assert c.segment_bytes == 1000 and c.retention_ms == 5
    assert c.cleanup_policy == ("compact", "delete") and c.compact and c.delete
    assert c.preallocate is True
    assert c.changed_properties() == {
        "segment.bytes": "1000",
        "retention.ms": "5",
        "cleanup.policy": "compact,delete",
        "preallocate": "true",
    }


@pytest.mark.parametrize(
    ("props", "msg"),
    [
        ({"segment.bytes": "10"}, "at least 14"),
        ({"segment.bytes": "abc"}, "not an integer"),
        ({"segment.bytes": "3000000000"}, "out of range"),
        ({"retention.ms": "-2"}, "at least -1"),
        ({"cleanup.policy": "shred"}, "one of"),
        ({"message.timestamp.type": "Now"}, "one of"),
        ({"min.insync.replicas": "0"}, "at least 1"),
        ({"preallocate": "yes"}, "true or false"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "at most 1"),
        ({"no.such.config": "1"}, "unknown topic config"),
    ],
)
def test_invalid_values_raise_value_error(props: dict[str, str], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        LogConfig.from_properties(props)


def test_broker_properties_and_time_units() -> None:
    c = LogConfig.from_broker_properties(
        {
            "log.segment.bytes": "2048",
            "log.retention.hours": "2",
            "log.roll.hours": "1",
            "log.flush.interval.messages": "10",
            "log.index.interval.bytes": "100",
            "log.cleanup.policy": "compact",
            "log.retention.bytes": "999",
            "broker.id": "1",
        }
    )
    assert c.segment_bytes == 2048 and c.retention_ms == 7_200_000
    assert c.segment_ms == 3_600_000 and c.flush_messages == 10
    assert c.index_interval_bytes == 100 and c.cleanup_policy == ("compact",)
    assert c.retention_bytes == 999
    # The finest unit wins, and -1 stays "unlimited".
    c2 = LogConfig.from_broker_properties(
        {"log.retention.ms": "1234", "log.retention.minutes": "5", "log.retention.hours": "1"}
    )
    assert c2.retention_ms == 1234
    assert LogConfig.from_broker_properties({"log.retention.hours": "-1"}).retention_ms == -1
    assert LogConfig.from_broker_properties({"log.retention.minutes": "3"}).retention_ms == 180000


def test_describe_configs_defaults_table() -> None:
    table = topic_config_defaults()
    assert table["segment.bytes"] == ("1073741824", "INT")
    assert table["retention.ms"] == ("604800000", "LONG")
    assert table["cleanup.policy"] == ("delete", "LIST")
    assert table["unclean.leader.election.enable"] == ("false", "BOOLEAN")
    assert TOPIC_CONFIGS["retention.ms"].config_type_id == 5
    assert set(LogConfig().to_properties()) == set(table)


def test_effective_min_isr_is_min_insync_replicas_capped_by_the_replica_count() -> None:
    assert effective_min_isr(2, 3) == 2
    assert effective_min_isr(3, 2) == 2  # Kafka's Partition.effectiveMinIsr
    assert effective_min_isr(2, 1) == 1
    assert effective_min_isr(1, 0) == 1  # never below one
