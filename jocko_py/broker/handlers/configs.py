"""DescribeConfigs (32) v0-4, AlterConfigs (33) v0-2, IncrementalAlterConfigs (44) v0-1.

Topic resources (type 2) are fully supported: every topic config with its
value and source (DYNAMIC_TOPIC_CONFIG when set on the topic, else the broker
property it defaults from or DEFAULT_CONFIG), synonyms (v1+), types and docs
(v3+). AlterConfigs replaces a topic's overrides; IncrementalAlterConfigs
applies SET/DELETE/APPEND/SUBTRACT. Unknown names or bad values get
INVALID_CONFIG. Broker resources (type 4) can be described (static
properties); altering broker configs is not supported (INVALID_REQUEST).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_cluster, authorize_topic
from jocko_py.broker.topics import FORWARD_CLIENT_ID, TopicError
from jocko_py.commitlog.config import TOPIC_CONFIGS, TOPIC_TO_BROKER, LogConfig
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Replication throttles are not implemented; removing them (what
# kafka-reassign-partitions --verify does after every reassignment) is accepted as
# the no-op it is, setting them is refused.
TOPIC_THROTTLES = frozenset({"leader.replication.throttled.replicas",
                             "follower.replication.throttled.replicas"})
BROKER_THROTTLES = frozenset({"leader.replication.throttled.rate",
                              "follower.replication.throttled.rate",
                              "replica.alter.log.dirs.io.max.bytes.per.second"})
# broker properties that can set a topic config's default, most specific first
_BROKER_SYNONYMS = {
    "retention.ms": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
    "segment.ms": ["log.roll.ms", "log.roll.hours"],
    "segment.jitter.ms": ["log.roll.jitter.ms", "log.roll.jitter.hours"],
}


def validate_topic_configs(broker: Broker, configs: Mapping[str, str | None]) -> None:
    try:
        LogConfig.from_properties(
            {k: v for k, v in configs.items() if v is not None}, broker.log_config
        )
    except ValueError as e:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from None


def describe_topic_configs(
    broker: Broker, topic: str, keys: list[str] | None, *, extra: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    overrides = dict(broker.topics.image.topic_configs(topic))
    overrides.update(extra or {})
    effective = LogConfig.from_properties(overrides, broker.log_config).to_properties()
    props = broker.config.properties
    out = []
    for name, d in sorted(TOPIC_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        synonyms = []
        if name in overrides:
            source = DYNAMIC_TOPIC_CONFIG
            synonyms.append({"name": name, "value": overrides[name], "source": source})
        else:
            source = DEFAULT_CONFIG
        bname = TOPIC_TO_BROKER.get(name)
        for syn in _BROKER_SYNONYMS.get(name, [bname] if bname else []):
            if syn in broker.config.explicit:
                if source == DEFAULT_CONFIG:
                    source = STATIC_BROKER_CONFIG
                synonyms.append({"name": syn, "value": props[syn], "source": STATIC_BROKER_CONFIG})
        synonyms.append({"name": bname or name, "value": LogConfig().to_properties()[name],
                         "source": DEFAULT_CONFIG})
        out.append({
            "name": name, "value": effective[name], "read_only": False,
            "is_default": source == DEFAULT_CONFIG, "config_source": source,
            "is_sensitive": False, "synonyms": synonyms,
            "config_type": d.config_type_id, "documentation": None,
        })
    return out


def is_sensitive(name: str) -> bool:
    """Kafka's PASSWORD-type settings (and JAAS entries, which hold passwords): their
    values are never described."""
    return name.endswith(("sasl.jaas.config", ".password", "ssl.keystore.key")) or \
        "password" in name


def describe_broker_configs(broker: Broker, keys: list[str] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, value in sorted(broker.config.properties.items()):
        if keys is not None and name not in keys:
            continue
        secret = is_sensitive(name)
        out.append({"name": name, "value": None if secret else value, "read_only": True,
                    "is_default": False,
                    "config_source": STATIC_BROKER_CONFIG, "is_sensitive": secret,
                    "synonyms": [], "config_type": 2, "documentation": None})
    return out


_DENIED = defaultdict(lambda: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                      {TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED})


def _authorized(ctx: RequestContext, op: str, resource_type: int, name: str) -> bool:
    """Topic configs need the operation on the topic, broker configs on the cluster."""
    if resource_type == TOPIC:
        return authorize_topic(ctx, op, name)
    return authorize_cluster(ctx, op)


@api(32, 0, 4)
async def describe_configs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    results = []
    for r in req.resources:
        res: dict[str, Any] = {"error_code": 0, "error_message": None,
                               "resource_type": r.resource_type,
                               "resource_name": r.resource_name, "configs": []}
        keys = list(r.configuration_keys) if r.configuration_keys is not None else None
        if not _authorized(ctx, "DESCRIBE_CONFIGS", r.resource_type, r.resource_name):
            res.update(error_code=_DENIED[r.resource_type], error_message=None)
        elif r.resource_type == TOPIC:
            if r.resource_name not in broker.topics.image.topics:
                res.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           error_message=f"Topic {r.resource_name} does not exist")
            else:
                res["configs"] = describe_topic_configs(broker, r.resource_name, keys)
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(broker.broker_id)):
                res.update(error_code=ErrorCode.INVALID_REQUEST,
                           error_message=f"Unexpected broker id {r.resource_name}")
            else:
                res["configs"] = describe_broker_configs(broker, keys)
        else:
            res.update(error_code=ErrorCode.INVALID_REQUEST,
                       error_message=f"Unsupported resource type {r.resource_type}")
        for c in res["configs"]:
            if not (ctx.version >= 1 and req.include_synonyms):
                c["synonyms"] = []
            if ctx.version >= 1:
                # v1+ carry config_source instead; IsDefault is v0 only (not ignorable)
                del c["is_default"]
        results.append(res)
    return {"throttle_time_ms": 0, "results": results}


async def _apply(ctx: RequestContext, r: Any, incremental: bool, validate_only: bool) -> dict[str, Any]:
    broker = ctx.broker
    res: dict[str, Any] = {"error_code": 0, "error_message": None,
                           "resource_type": r.resource_type, "resource_name": r.resource_name}
    try:
        if not _authorized(ctx, "ALTER_CONFIGS", r.resource_type, r.resource_name):
            raise TopicError(_DENIED[r.resource_type], None)
        throttles = TOPIC_THROTTLES if r.resource_type == TOPIC else BROKER_THROTTLES
        if incremental and r.configs and all(
                c.name in throttles and c.config_operation == DELETE for c in r.configs):
            return res
        if r.resource_type != TOPIC:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "Only topic configs can be altered on this broker")
        name = r.resource_name
        if name not in broker.topics.image.topics:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {name} does not exist")
        current = broker.topics.image.topic_configs(name)
        if incremental:
            new: dict[str, str | None] = dict(current)
            for c in r.configs:
                if c.name not in TOPIC_CONFIGS:
                    raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config {c.name}")
                op = c.config_operation
                if op == SET:
                    new[c.name] = c.value
                elif op == DELETE:
                    new[c.name] = None
                elif op in (APPEND, SUBTRACT):
                    base = (new.get(c.name) or LogConfig().to_properties()[c.name]).split(",")
                    items = [x for x in base if x]
                    vals = [x for x in (c.value or "").split(",") if x]
                    if op == APPEND:
                        items += [v for v in vals if v not in items]
                    else:
                        items = [x for x in items if x not in vals]
                    new[c.name] = ",".join(items)
                else:
                    raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown operation {op}")
        else:
            new = {c.name: c.value for c in r.configs}
            for k in current:
                new.setdefault(k, None)
        for k in new:
            if k not in TOPIC_CONFIGS:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config {k}")
        validate_topic_configs(broker, new)
        if not validate_only:
            changes = {k: v for k, v in new.items() if current.get(k) != v}
            if changes:
                await broker.topics.set_topic_configs(
                    name, changes, forwarded=ctx.header.client_id == FORWARD_CLIENT_ID)
    except TopicError as e:
        res.update(error_code=e.code, error_message=e.message)
    return res


@api(33, 0, 2)
async def alter_configs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0,
            "responses": [await _apply(ctx, r, False, req.validate_only)
                          for r in req.resources]}


@api(44, 0, 1)
async def incremental_alter_configs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0,
            "responses": [await _apply(ctx, r, True, req.validate_only)
                          for r in req.resources]}
