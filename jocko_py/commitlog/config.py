"""Per-log configuration: Kafka's topic configs, their defaults and validation.

This module owns the mapping between Kafka property names (``segment.bytes``,
broker-level ``log.segment.bytes``, ...) and :class:`LogConfig` fields, the
default value and DescribeConfigs type of every topic config, and the checks
that turn a bad value into ``ValueError`` (the broker answers INVALID_CONFIG).

On-disk format: none.  Topic overrides live in the cluster metadata log; this
module only interprets them.  ``preallocate`` is accepted and reported but
segment files are never preallocated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "LONG_MAX",
    "TOPIC_CONFIGS",
    "TOPIC_TO_BROKER",
    "ConfigDef",
    "LogConfig",
    "topic_config_defaults",
]

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647
_LONG_MIN = -9223372036854775808
_INT_MIN = -2147483648

_DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log; names follow Kafka's topic configs."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * _DAY_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    min_insync_replicas: int = 1
    delete_retention_ms: int = _DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60000
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    # weight of the topic under retention by share of disk (disk_retention.py)
    disk_share: float = 1.0

    def __post_init__(self) -> None:
        for d in TOPIC_CONFIGS.values():
            d.check(getattr(self, d.field))

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Overlay topic properties (``segment.bytes`` = "...") on ``base``.

        Unknown names and bad values raise ValueError naming the property.
        """
        changes: dict[str, Any] = {}
        for name, raw in props.items():
            d = TOPIC_CONFIGS.get(name)
            if d is None:
                raise ValueError(f"unknown topic config {name!r}")
            changes[d.field] = d.parse(raw)
        return dataclasses.replace(base or cls(), **changes)

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """Defaults for every log from broker properties (``log.segment.bytes`` ...)."""
        topic: dict[str, str] = {}
        for broker_name, topic_name in _BROKER_TO_TOPIC.items():
            if broker_name in props:
                topic[topic_name] = props[broker_name]
        # Kafka's precedence: the finest unit given wins (ms > minutes > hours).
        for prefix, topic_name in (("log.retention", "retention.ms"), ("log.roll", "segment.ms")):
            ms = _time_property(props, prefix)
            if ms is not None:
                topic[topic_name] = str(ms)
        jitter = _time_property(props, "log.roll.jitter")
        if jitter is not None:
            topic["segment.jitter.ms"] = str(jitter)
        if "log.flush.interval.ms" in props and props["log.flush.interval.ms"].strip() in (
            "",
            "null",
        ):
            topic.pop("flush.ms", None)
        return cls.from_properties(topic)

    def to_properties(self) -> dict[str, str]:
        """Every topic config as Kafka property strings (for DescribeConfigs)."""
        return {name: d.format(getattr(self, d.field)) for name, d in TOPIC_CONFIGS.items()}

    def changed_properties(self, base: LogConfig | None = None) -> dict[str, str]:
        """Only the properties that differ from ``base`` (topic overrides)."""
        ref = base or LogConfig()
        return {
            name: d.format(getattr(self, d.field))
            for name, d in TOPIC_CONFIGS.items()
            if getattr(self, d.field) != getattr(ref, d.field)
        }


def effective_min_isr(min_insync_replicas: int, replicas: int) -> int:
    """The min ISR a partition is held to, Kafka's ``Partition.effectiveMinIsr``: its
    ``min.insync.replicas`` (the topic config over the broker default) capped by its
    replica count, and at least 1. Every min-ISR decision uses this: the acks=all
    checks before and after an append, the high watermark hold and the under-min-ISR
    metric on the leader, and the controller's ISR shrink and eligible leaders."""
    return max(1, min(min_insync_replicas, max(1, replicas)))


def broker_property_names() -> frozenset[str]:
    """The broker properties (``log.*``) that set topic defaults."""
    return frozenset(_BROKER_TO_TOPIC)


def _time_property(props: Mapping[str, str], prefix: str) -> int | None:
    for suffix, factor in ((".ms", 1), (".minutes", 60_000), (".hours", 3_600_000)):
        raw = props.get(prefix + suffix)
        if raw is None or raw.strip() in ("", "null"):
            continue
        value = _parse_int(prefix + suffix, raw, _LONG_MIN, LONG_MAX)
        # -1 means "unlimited" in every unit.
        return -1 if value < 0 else value * factor
    return None


def _parse_int(name: str, raw: str, lo: int, hi: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"invalid value {raw!r} for {name}: not an integer") from None
    if not lo <= value <= hi:
        raise ValueError(f"invalid value {raw!r} for {name}: out of range")
    return value


class ConfigDef(NamedTuple):
    """One topic config: property name, LogConfig field, DescribeConfigs type, checks."""

    name: str
    field: str
    config_type: str  # Kafka ConfigDef type name: LONG, INT, BOOLEAN, STRING, LIST, DOUBLE
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    doc: str = ""

    @property
    def config_type_id(self) -> int:
        """DescribeConfigs v3+ ``ConfigType`` code."""
        return _TYPE_IDS[self.config_type]

    def parse(self, raw: str) -> Any:
        t = self.config_type
        text = raw.strip()
        value: Any
        if t == "LONG":
            value = _parse_int(self.name, text, _LONG_MIN, LONG_MAX)
        elif t == "INT":
            value = _parse_int(self.name, text, _INT_MIN, INT_MAX)
        elif t == "DOUBLE":
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"invalid value {raw!r} for {self.name}: not a number") from None
        elif t == "BOOLEAN":
            low = text.lower()
            if low not in ("true", "false"):
                raise ValueError(f"invalid value {raw!r} for {self.name}: expected true or false")
            value = low == "true"
        elif t == "LIST":
            value = tuple(p.strip() for p in text.split(",") if p.strip())
        else:
            value = text
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        if self.minimum is not None and value < self.minimum:
            raise ValueError(
                f"invalid value {self.format(value)} for {self.name}: "
                f"must be at least {_num(self.minimum)}"
            )
        if self.maximum is not None and value > self.maximum:
            raise ValueError(
                f"invalid value {self.format(value)} for {self.name}: "
                f"must be at most {_num(self.maximum)}"
            )
        if self.choices is not None:
            items = value if isinstance(value, tuple) else (value,)
            if self.config_type == "LIST" and not items:
                raise ValueError(f"{self.name} must not be empty")
            for item in items:
                if item not in self.choices:
                    raise ValueError(
                        f"invalid value {item!r} for {self.name}: "
                        f"must be one of {', '.join(self.choices)}"
                    )

    def format(self, value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_TYPE_IDS = {
    "BOOLEAN": 1,
    "STRING": 2,
    "INT": 3,
    "SHORT": 4,
    "LONG": 5,
    "DOUBLE": 6,
    "LIST": 7,
    "CLASS": 8,
    "PASSWORD": 9,
}


def _defs(*items: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in items}


#: Every topic config this broker understands, keyed by Kafka property name.
TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("segment.bytes", "segment_bytes", "INT", 14, doc="segment file size before roll"),
    ConfigDef("segment.ms", "segment_ms", "LONG", 1, doc="time before a segment rolls"),
    ConfigDef("segment.jitter.ms", "segment_jitter_ms", "LONG", 0),
    ConfigDef("segment.index.bytes", "segment_index_bytes", "INT", 4),
    ConfigDef("index.interval.bytes", "index_interval_bytes", "INT", 0),
    ConfigDef("retention.ms", "retention_ms", "LONG", -1),
    ConfigDef("retention.bytes", "retention_bytes", "LONG"),
    ConfigDef("flush.messages", "flush_messages", "LONG", 1),
    ConfigDef("flush.ms", "flush_ms", "LONG", 0),
    ConfigDef("cleanup.policy", "cleanup_policy", "LIST", choices=("delete", "compact")),
    ConfigDef(
        "compression.type",
        "compression_type",
        "STRING",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigDef(
        "message.timestamp.type",
        "message_timestamp_type",
        "STRING",
        choices=("CreateTime", "LogAppendTime"),
    ),
    ConfigDef("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", "LONG", 0),
    ConfigDef("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", "LONG", 0),
    ConfigDef("max.message.bytes", "max_message_bytes", "INT", 0),
    ConfigDef("min.insync.replicas", "min_insync_replicas", "INT", 1),
    ConfigDef("delete.retention.ms", "delete_retention_ms", "LONG", 0),
    ConfigDef("min.compaction.lag.ms", "min_compaction_lag_ms", "LONG", 0),
    ConfigDef("max.compaction.lag.ms", "max_compaction_lag_ms", "LONG", 1),
    ConfigDef("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", "DOUBLE", 0, 1),
    ConfigDef("file.delete.delay.ms", "file_delete_delay_ms", "LONG", 0),
    ConfigDef("preallocate", "preallocate", "BOOLEAN"),
    ConfigDef("unclean.leader.election.enable", "unclean_leader_election_enable", "BOOLEAN"),
    ConfigDef("jocko.retention.disk.share", "disk_share", "DOUBLE", 0,
              doc="weight of this topic when retention by share of disk deletes segments"),
)

# Broker-level names whose value is the default of a topic config (Kafka's
# LogConfig "server default" synonyms).  Time units are handled separately.
_BROKER_TO_TOPIC: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleanup.policy": "cleanup.policy",
    "compression.type": "compression.type",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "message.max.bytes": "max.message.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.preallocate": "preallocate",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

#: Broker property that supplies each topic config's default (DescribeConfigs synonyms).
TOPIC_TO_BROKER: dict[str, str] = {v: k for k, v in _BROKER_TO_TOPIC.items()} | {
    "retention.ms": "log.retention.ms",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
}


def topic_config_defaults(base: LogConfig | None = None) -> dict[str, tuple[str, str]]:
    """``name -> (default value string, Kafka type name)`` for DescribeConfigs.

    The DescribeConfigs type code is ``TOPIC_CONFIGS[name].config_type_id``.
    """
    cfg = base or LogConfig()
    return {
        name: (d.format(getattr(cfg, d.field)), d.config_type) for name, d in TOPIC_CONFIGS.items()
    }
