"""Broker configs as DescribeConfigs / AlterConfigs see them: the catalogue of every
setting this broker uses, with Kafka's names, types and defaults, and the dynamic
layers on top of the static configuration.

Resolution, as Kafka's DynamicBrokerConfig: a per-broker dynamic config (ConfigRecord
for resource BROKER named after the broker id) wins over the cluster-wide dynamic
default (BROKER resource named ""), which wins over the static configuration
(server.properties, --override, flags), which wins over the default. Dynamic configs
live in the metadata log, written by the controller, so every broker sees them and
they survive restarts.

What can change at run time is what Kafka lets you change and this broker applies
live: the broker-level defaults of topic configs (`log.retention.ms`, `log.segment.bytes`,
`message.max.bytes`, `min.insync.replicas`, ... Kafka's DynamicLogConfig, primary names
only: `log.retention.hours` is not dynamic, as in Kafka). Everything else is read-only
(AlterConfigs answers INVALID_REQUEST "Cannot update these configs dynamically"), among
them Kafka's thread-pool, listener and quota configs, which have no counterpart here.
Names Kafka does not know are accepted and stored (Kafka keeps custom configs too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jocko_py.broker.config import DEFAULTS, BrokerConfig
from jocko_py.commitlog.config import LONG_MAX, TOPIC_CONFIGS, TOPIC_TO_BROKER, LogConfig
from jocko_py.protocol.errors import ErrorCode, KafkaError

# DescribeConfigs ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

_TYPE_IDS = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6,
             "LIST": 7, "CLASS": 8, "PASSWORD": 9}


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    name: str
    config_type: str
    default: str | None
    dynamic: bool = False
    doc: str | None = None

    @property
    def type_id(self) -> int:
        return _TYPE_IDS[self.config_type]


def _log_defaults() -> list[BrokerConfigDef]:
    """The broker-level defaults of topic configs (dynamic, cluster-wide or per broker)."""
    base = LogConfig().to_properties()
    out = []
    for topic_name, broker_name in sorted(TOPIC_TO_BROKER.items(), key=lambda kv: kv[1]):
        d = TOPIC_CONFIGS[topic_name]
        default: str | None = base[topic_name]
        if broker_name in ("log.retention.ms", "log.roll.ms", "log.roll.jitter.ms"):
            default = None  # the hours variant carries the default, as in Kafka
        elif broker_name == "log.flush.interval.ms":
            default = None
        default = DEFAULTS.get(broker_name, default)
        out.append(BrokerConfigDef(broker_name, d.config_type, default, dynamic=True,
                                   doc=d.doc or None))
    out += [
        BrokerConfigDef("log.retention.minutes", "INT", None),
        BrokerConfigDef("log.retention.hours", "INT", "168"),
        BrokerConfigDef("log.roll.hours", "INT", "168"),
        BrokerConfigDef("log.roll.jitter.hours", "INT", "0"),
    ]
    return out


_STATIC: list[tuple[str, str, str | None]] = [
    ("advertised.listeners", "STRING", None),
    ("auto.create.topics.enable", "BOOLEAN", "true"),
    ("auto.leader.rebalance.enable", "BOOLEAN", "true"),
    ("broker.heartbeat.interval.ms", "INT", "2000"),
    ("broker.id", "INT", "-1"),
    ("broker.rack", "STRING", None),
    ("broker.session.timeout.ms", "INT", "9000"),
    ("controlled.shutdown.enable", "BOOLEAN", "true"),
    ("controlled.shutdown.timeout.ms", "LONG", "30000"),
    ("controller.quorum.election.timeout.ms", "INT", "1000"),
    ("controller.quorum.fetch.timeout.ms", "INT", "2000"),
    ("controller.quorum.voters", "LIST", ""),
    ("default.replication.factor", "INT", "1"),
    ("delete.topic.enable", "BOOLEAN", "true"),
    ("group.initial.rebalance.delay.ms", "INT", "3000"),
    ("group.max.session.timeout.ms", "INT", "1800000"),
    ("group.max.size", "INT", "2147483647"),
    ("group.min.session.timeout.ms", "INT", "6000"),
    ("jocko.gossip.addr", "STRING", None),
    ("jocko.gossip.join", "LIST", ""),
    ("jocko.gossip.probe.interval.ms", "INT", "1000"),
    ("leader.imbalance.check.interval.seconds", "LONG", "300"),
    ("listener.security.protocol.map", "STRING",
     "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    ("listeners", "STRING", "PLAINTEXT://:9092"),
    ("log.cleaner.backoff.ms", "LONG", "15000"),
    ("log.cleaner.enable", "BOOLEAN", "true"),
    ("log.dir", "STRING", "./data"),
    ("log.dirs", "STRING", None),
    ("log.flush.offset.checkpoint.interval.ms", "INT", "60000"),
    ("log.flush.scheduler.interval.ms", "LONG", str(LONG_MAX)),
    ("log.retention.check.interval.ms", "LONG", "300000"),
    ("max.incremental.fetch.session.cache.slots", "INT", "1000"),
    ("node.id", "INT", "-1"),
    ("num.partitions", "INT", "1"),
    ("offsets.commit.timeout.ms", "INT", "5000"),
    ("offsets.retention.check.interval.ms", "LONG", "600000"),
    ("offsets.retention.minutes", "INT", "10080"),
    ("offsets.topic.num.partitions", "INT", "50"),
    ("offsets.topic.replication.factor", "SHORT", "3"),
    ("offsets.topic.segment.bytes", "INT", "104857600"),
    ("process.roles", "LIST", ""),
    ("producer.id.expiration.ms", "INT", "86400000"),
    ("replica.fetch.max.bytes", "INT", "1048576"),
    ("replica.fetch.wait.max.ms", "INT", "500"),
    ("replica.lag.time.max.ms", "LONG", "30000"),
    ("request.timeout.ms", "INT", "30000"),
    ("socket.request.max.bytes", "INT", "104857600"),
    ("transactional.id.expiration.ms", "INT", "604800000"),
]

def _guess_type(value: str) -> str:
    if value in ("true", "false"):
        return "BOOLEAN"
    if value.lstrip("-").isdigit():
        return "INT" if -2**31 <= int(value) < 2**31 else "LONG"
    return "STRING"


#: Every broker config this broker knows, by name.
BROKER_CONFIGS: dict[str, BrokerConfigDef] = {
    d.name: d for d in [
        # every other setting the broker reads with a default (config.DEFAULTS: groups,
        # security, metrics, ...), typed from its default value
        *(BrokerConfigDef(n, _guess_type(v), v) for n, v in DEFAULTS.items()),
        # the default is what this broker uses when nothing is set (config.DEFAULTS)
        *(BrokerConfigDef(n, t, DEFAULTS.get(n, v)) for n, t, v in _STATIC),
        *_log_defaults(),
    ]
}

DYNAMIC_CONFIGS = frozenset(n for n, d in BROKER_CONFIGS.items() if d.dynamic)

# Kafka broker configs with no counterpart here (thread pools, connection limits,
# listeners and security, the cleaner's tuning, metrics reporters, quotas): Kafka
# changes some of them at run time; here they are refused rather than stored and
# silently ignored.
_NOT_APPLIED_PREFIXES = ("num.", "max.connection", "listener.name.", "ssl.", "sasl.",
                         "log.cleaner.io.", "metric.reporters", "quota.", "principal.builder",
                         "follower.replication.", "leader.replication.",
                         "remote.log.", "replica.alter.log.dirs.")
_NOT_APPLIED = frozenset({"background.threads", "log.cleaner.threads",
                          "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
                          "log.cleaner.io.buffer.load.factor", "log.cleaner.backoff.ms",
                          "producer.id.expiration.ms", "transaction.partition.verification.enable",
                          "queued.max.requests"})


def not_applied(name: str) -> bool:
    """A Kafka broker config this broker neither uses nor can change at run time."""
    return name in _NOT_APPLIED or name.startswith(_NOT_APPLIED_PREFIXES)


# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: names that set the same thing,
# most specific first
_SYNONYM_GROUPS = [
    ["log.roll.ms", "log.roll.hours"],
    ["log.roll.jitter.ms", "log.roll.jitter.hours"],
    ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
]


def synonym_names(name: str) -> list[str]:
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group[group.index(name):]
    return [name]


def is_sensitive(name: str) -> bool:
    """Kafka's PASSWORD-type settings and JAAS entries (which hold passwords): their
    values are never described."""
    return "password" in name or name.endswith(("sasl.jaas.config", "ssl.keystore.key"))


class BrokerConfigError(KafkaError):
    """A change Kafka refuses (INVALID_REQUEST), with Kafka's message."""

    code = ErrorCode.INVALID_REQUEST

    def __init__(self, message: str) -> None:
        super().__init__(type(self).code, message)


class BrokerConfigView:
    """The layers of one broker's configuration: defaults, static, cluster-wide dynamic
    defaults and this broker's dynamic configs."""

    def __init__(self, config: BrokerConfig, cluster_dynamic: Mapping[str, str],
                 broker_dynamic: Mapping[str, str]) -> None:
        # what the operator set, and what the broker was started with by flags (voters,
        # gossip addresses, data dirs: anything not at its default) is static
        self.static = {k: v for k, v in config.properties.items()
                       if k in config.explicit or DEFAULTS.get(k) != v}
        # its id and listener too (Kafka's node.id and broker.id are one id)
        self.static["broker.id"] = self.static["node.id"] = str(config.broker_id)
        self.static.setdefault("listeners", f"PLAINTEXT://{config.host}:{config.port}")
        self.static.setdefault(
            "advertised.listeners",
            f"PLAINTEXT://{config.advertised_host}:{config.advertised_port}")
        self.broker_id = config.broker_id
        self.cluster_dynamic = dict(cluster_dynamic)
        self.broker_dynamic = dict(broker_dynamic)

    def layers(self) -> list[tuple[int, Mapping[str, str]]]:
        return [(DYNAMIC_BROKER_CONFIG, self.broker_dynamic),
                (DYNAMIC_DEFAULT_BROKER_CONFIG, self.cluster_dynamic),
                (STATIC_BROKER_CONFIG, self.static)]

    def effective(self) -> dict[str, str]:
        """Static properties overlaid with the dynamic ones (what the broker runs with)."""
        return {**self.static, **self.cluster_dynamic, **self.broker_dynamic}

    def synonyms(self, name: str) -> list[dict[str, Any]]:
        names = synonym_names(name)
        out: list[dict[str, Any]] = []
        for source, layer in self.layers():
            for n in names:
                if n in layer:
                    out.append({"name": n, "value": None if is_sensitive(n) else layer[n],
                                "source": source})
        for n in names:
            d = BROKER_CONFIGS.get(n)
            if d is not None and d.default is not None:
                out.append({"name": n, "value": d.default, "source": DEFAULT_CONFIG})
        return out

    def entry(self, name: str, *, per_broker: bool) -> dict[str, Any]:
        d = BROKER_CONFIGS.get(name)
        synonyms = self.synonyms(name)
        if not per_broker:
            synonyms = [s for s in synonyms if s["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG]
        value: str | None = d.default if d is not None else None
        for source, layer in self.layers():
            if name in layer and (per_broker or source == DYNAMIC_DEFAULT_BROKER_CONFIG):
                value = layer[name]
                break
        source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
        return {
            "name": name, "value": None if is_sensitive(name) else value,
            "read_only": name not in DYNAMIC_CONFIGS, "is_default": source == DEFAULT_CONFIG,
            "config_source": source, "is_sensitive": is_sensitive(name), "synonyms": synonyms,
            "config_type": d.type_id if d is not None else _TYPE_IDS["STRING"],
            "documentation": d.doc if d is not None else None,
        }

    def describe(self, keys: list[str] | None, *, per_broker: bool) -> list[dict[str, Any]]:
        """Kafka's DescribeConfigs for a broker: every config for a broker id (the
        catalogue plus custom names set on it); for the cluster default (name "") only
        the dynamic defaults set."""
        if per_broker:
            names = set(BROKER_CONFIGS) | set(self.static) | set(self.cluster_dynamic) \
                | set(self.broker_dynamic)
        else:
            names = set(self.cluster_dynamic)
        if keys is not None:
            names &= set(keys)
        return [self.entry(n, per_broker=per_broker) for n in sorted(names)]


def validate_dynamic_change(current: Mapping[str, str], changes: Mapping[str, str | None],
                            static_and_default: BrokerConfigView) -> None:
    """Raise BrokerConfigError unless Kafka would accept these dynamic changes.

    `current`: the dynamic configs of the resource before the change."""
    bad = sorted(k for k in changes if k in BROKER_CONFIGS and k not in DYNAMIC_CONFIGS)
    if bad:
        raise BrokerConfigError(f"Cannot update these configs dynamically: Set({', '.join(bad)})")
    unsupported = sorted(k for k, v in changes.items() if v is not None and not_applied(k))
    if unsupported:
        raise BrokerConfigError(
            f"Not supported by this broker (jocko-py): Set({', '.join(unsupported)})")
    after = {**current, **{k: v for k, v in changes.items() if v is not None}}
    for k, v in changes.items():
        if v is None:
            after.pop(k, None)
    to_topic = {b: t for t, b in TOPIC_TO_BROKER.items()}
    for k, v in changes.items():
        d = TOPIC_CONFIGS.get(to_topic.get(k, ""))
        if d is not None and v is not None:
            try:
                d.parse(v)
            except ValueError as e:
                reason = str(e).split(": ", 1)[-1]
                raise BrokerConfigError(
                    f"Invalid value {v} for configuration {k}: {reason}") from None
    props = {**static_and_default.static, **after}
    try:
        LogConfig.from_broker_properties(props)
    except ValueError as e:
        raise BrokerConfigError(f"Invalid config value: {e}") from None


def log_config_for(effective: Mapping[str, str]) -> LogConfig:
    return LogConfig.from_broker_properties(effective)
