"""Group configs (KIP-848 / KIP-932 / KIP-1071): per-group overrides of the broker's
group settings, set and read on GROUP config resources (type 32) as Kafka 4.4 does.

This module owns the names, types, defaults and validation of group configs and the
effective settings of one group; it is pure (the broker's settings come in as a lookup
function, a group's overrides as a dict). The overrides are ConfigRecords of resource
type 32 in the metadata log, written through the controller (``handlers/configs.py``).

Names and limits (Kafka's GroupConfig): ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` within ``group.consumer.min/max.*``;
``share.session.timeout.ms`` and ``share.heartbeat.interval.ms`` within
``group.share.min/max.*``; ``share.record.lock.duration.ms`` within
``group.share.min/max.record.lock.duration.ms``; ``share.delivery.count.limit`` within
``group.share.min/max.delivery.count.limit``; ``share.partition.max.record.locks``
within ``group.share.min/max.partition.max.record.locks``; ``share.auto.offset.reset``
(latest, earliest, by_duration:<ISO-8601 duration>); ``share.isolation.level``
(read_uncommitted, read_committed); ``streams.session.timeout.ms``,
``streams.heartbeat.interval.ms`` and ``streams.num.standby.replicas`` within
``group.streams.*``. A heartbeat interval must stay below the session timeout.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

GROUP_RESOURCE = 32  # the config resource type of a group
# DescribeConfigs config types and sources (Kafka's ConfigType / ConfigSource)
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LIST = 1, 2, 3, 7
SOURCE_DEFAULT, SOURCE_GROUP = 5, 8


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    broker_default: str  # the broker setting the default comes from
    default: str  # Kafka's default of that broker setting
    config_type: int
    lo: tuple[str, int] | None = None  # (broker setting, its default) bounding below
    hi: tuple[str, int] | None = None


def _int(name: str, broker: str, default: int, lo: tuple[str, int] | None,
         hi: tuple[str, int] | None) -> GroupConfigDef:
    return GroupConfigDef(name, broker, str(default), TYPE_INT, lo, hi)


GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in (
    _int("consumer.session.timeout.ms", "group.consumer.session.timeout.ms", 45000,
         ("group.consumer.min.session.timeout.ms", 45000),
         ("group.consumer.max.session.timeout.ms", 60000)),
    _int("consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms", 5000,
         ("group.consumer.min.heartbeat.interval.ms", 5000),
         ("group.consumer.max.heartbeat.interval.ms", 15000)),
    _int("share.session.timeout.ms", "group.share.session.timeout.ms", 45000,
         ("group.share.min.session.timeout.ms", 45000),
         ("group.share.max.session.timeout.ms", 60000)),
    _int("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", 5000,
         ("group.share.min.heartbeat.interval.ms", 5000),
         ("group.share.max.heartbeat.interval.ms", 15000)),
    _int("share.record.lock.duration.ms", "group.share.record.lock.duration.ms", 30000,
         ("group.share.min.record.lock.duration.ms", 15000),
         ("group.share.max.record.lock.duration.ms", 60000)),
    _int("share.delivery.count.limit", "group.share.delivery.count.limit", 5,
         ("group.share.min.delivery.count.limit", 2),
         ("group.share.max.delivery.count.limit", 10)),
    _int("share.partition.max.record.locks", "group.share.partition.max.record.locks", 2000,
         ("group.share.min.partition.max.record.locks", 100),
         ("group.share.max.partition.max.record.locks", 4000)),
    _int("consumer.assignment.interval.ms", "group.consumer.assignment.interval.ms", 1000,
         ("group.consumer.min.assignment.interval.ms", 0),
         ("group.consumer.max.assignment.interval.ms", 15000)),
    _int("share.assignment.interval.ms", "group.share.assignment.interval.ms", 1000,
         ("group.share.min.assignment.interval.ms", 0),
         ("group.share.max.assignment.interval.ms", 15000)),
    _int("streams.assignment.interval.ms", "group.streams.assignment.interval.ms", 1000,
         ("group.streams.min.assignment.interval.ms", 0),
         ("group.streams.max.assignment.interval.ms", 15000)),
    _int("streams.initial.rebalance.delay.ms", "group.streams.initial.rebalance.delay.ms",
         3000, ("", 0), None),
    GroupConfigDef("streams.assignor.name", "group.streams.assignors", "sticky", TYPE_STRING),
    GroupConfigDef("streams.rack.aware.assignment.tags",
                   "group.streams.rack.aware.assignment.tags", "", TYPE_LIST),
    GroupConfigDef("share.renew.acknowledge.enable", "", "true", TYPE_BOOLEAN),
    GroupConfigDef("errors.deadletterqueue.topic.name", "", "", TYPE_STRING),
    GroupConfigDef("errors.deadletterqueue.copy.record.enable", "", "false", TYPE_BOOLEAN),
    GroupConfigDef("share.auto.offset.reset", "", "latest", TYPE_STRING),
    GroupConfigDef("share.isolation.level", "", "read_uncommitted", TYPE_STRING),
    _int("streams.session.timeout.ms", "group.streams.session.timeout.ms", 45000,
         ("group.streams.min.session.timeout.ms", 45000),
         ("group.streams.max.session.timeout.ms", 60000)),
    _int("streams.heartbeat.interval.ms", "group.streams.heartbeat.interval.ms", 5000,
         ("group.streams.min.heartbeat.interval.ms", 5000),
         ("group.streams.max.heartbeat.interval.ms", 15000)),
    _int("streams.num.standby.replicas", "group.streams.num.standby.replicas", 0,
         ("", 0), ("group.streams.max.standby.replicas", 2)),
)}
_PAIRS = (("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"),
          ("share.heartbeat.interval.ms", "share.session.timeout.ms"),
          ("streams.heartbeat.interval.ms", "streams.session.timeout.ms"))
_DURATION = re.compile(r"^by_duration:P(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?|\d+D(T(?=\d)(\d+H)?"
                       r"(\d+M)?(\d+(\.\d+)?S)?)?)$")

BrokerLookup = Callable[[str], str | None]


class GroupConfigError(ValueError):
    pass


def _broker_int(get: BrokerLookup, key: str, default: int) -> int:
    raw = get(key) if key else None
    try:
        return int(raw) if raw else default
    except ValueError:
        return default


def default_value(get: BrokerLookup, d: GroupConfigDef) -> str:
    if d.broker_default:
        raw = get(d.broker_default)
        if raw:
            return raw
    return d.default


def effective(get: BrokerLookup, overrides: Mapping[str, str]) -> dict[str, str]:
    """Every group config's value for a group with ``overrides``."""
    return {n: overrides.get(n, default_value(get, d)) for n, d in GROUP_CONFIGS.items()}


def validate(get: BrokerLookup, configs: Mapping[str, str | None]) -> None:
    """Raise GroupConfigError (INVALID_CONFIG) for a group's new overrides."""
    for name, value in configs.items():
        d = GROUP_CONFIGS.get(name)
        if d is None:
            raise GroupConfigError(f"Unknown group config name: {name}")
        if value is None:
            continue
        if d.config_type == TYPE_INT:
            try:
                v = int(value)
            except ValueError:
                raise GroupConfigError(f"Invalid value {value} for configuration {name}: "
                                       "Not a number of type INT") from None
            if d.lo is not None:
                lo = _broker_int(get, *d.lo)
                if v < lo:
                    raise GroupConfigError(
                        f"{name} must be greater than or equal to "
                        f"{d.lo[0] or 'the minimum'} ({lo})")
            if d.hi is not None:
                hi = _broker_int(get, *d.hi)
                if v > hi:
                    raise GroupConfigError(
                        f"{name} must be less than or equal to {d.hi[0]} ({hi})")
        elif d.config_type == TYPE_BOOLEAN:
            if value.lower() not in ("true", "false"):
                raise GroupConfigError(f"Invalid value {value} for configuration {name}: "
                                       "Expected value to be either true or false")
        elif name == "share.auto.offset.reset":
            if value.lower() not in ("latest", "earliest") and not _DURATION.match(value):
                raise GroupConfigError(
                    f"Invalid value {value} for configuration {name}: Invalid value `{value}` "
                    "for configuration share.auto.offset.reset. The value must be either "
                    "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.")
        elif name == "share.isolation.level":
            if value.lower() not in ("read_uncommitted", "read_committed"):
                raise GroupConfigError(
                    f"Invalid value {value} for configuration {name}: String must be one "
                    "of: read_committed, read_uncommitted")
    values = effective(get, {k: v for k, v in configs.items() if v is not None})
    for hb, session in _PAIRS:
        if int(values[hb]) >= int(values[session]):
            raise GroupConfigError(f"{hb} must be less than {session}")


@dataclass(frozen=True)
class ShareGroupConfig:
    """A share group's settings as its share partitions use them."""
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"


def share_group_config(get: BrokerLookup, overrides: Mapping[str, str]) -> ShareGroupConfig:
    v = effective(get, overrides)

    def num(name: str) -> int:
        try:
            return int(v[name])
        except ValueError:
            return int(GROUP_CONFIGS[name].default)

    return ShareGroupConfig(
        session_timeout_ms=num("share.session.timeout.ms"),
        heartbeat_interval_ms=num("share.heartbeat.interval.ms"),
        record_lock_duration_ms=num("share.record.lock.duration.ms"),
        delivery_count_limit=num("share.delivery.count.limit"),
        partition_max_record_locks=num("share.partition.max.record.locks"),
        auto_offset_reset=v["share.auto.offset.reset"].lower(),
        isolation_level=v["share.isolation.level"].lower(),
    )


def describe(get: BrokerLookup, overrides: Mapping[str, str], keys: list[str] | None
             ) -> list[dict[str, object]]:
    """DescribeConfigs entries of a group (every group config, or ``keys``)."""
    out: list[dict[str, object]] = []
    for name, d in sorted(GROUP_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        dynamic = name in overrides
        default = default_value(get, d)
        synonyms: list[dict[str, object]] = []
        if dynamic:
            synonyms.append({"name": name, "value": overrides[name], "source": SOURCE_GROUP})
        synonyms.append({"name": d.broker_default or name, "value": default,
                         "source": SOURCE_DEFAULT})
        out.append({
            "name": name, "value": overrides[name] if dynamic else default,
            "read_only": False, "is_default": not dynamic,
            "config_source": SOURCE_GROUP if dynamic else SOURCE_DEFAULT,
            "is_sensitive": False, "synonyms": synonyms, "config_type": d.config_type,
            "documentation": None,
        })
    return out
