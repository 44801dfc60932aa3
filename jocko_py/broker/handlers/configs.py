"""DescribeConfigs (32) v1-4, AlterConfigs (33) v0-2, IncrementalAlterConfigs (44) v0-1.

Topic resources (type 2): every topic config with its value and source
(DYNAMIC_TOPIC_CONFIG when set on the topic, else the broker property it defaults
from: DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG / STATIC_BROKER_CONFIG,
or DEFAULT_CONFIG), synonyms (v1+), types and docs (v3+). AlterConfigs replaces a
topic's overrides; IncrementalAlterConfigs applies SET/DELETE/APPEND/SUBTRACT.
Unknown names or bad values get INVALID_CONFIG.

Broker resources (type 4, see `broker_configs.py`): a broker id gets every setting
this broker runs with (defaults included, sources and synonyms as Kafka), "" the
cluster-wide dynamic defaults set. Alter/IncrementalAlter of a broker id or "" write
dynamic configs (ConfigRecords through the controller), applied live by every broker;
read-only configs get INVALID_REQUEST "Cannot update these configs dynamically", as
in Kafka. Broker loggers (type 8, `broker_loggers.py`): every logger and its level,
changed with IncrementalAlterConfigs (AlterConfigs refuses them, as Kafka).
Group resources (type 32, KIP-848/932, see `group/group_configs.py`): every group config
of a group (set: GROUP_CONFIG, else DEFAULT_CONFIG from the broker's `group.*` setting),
set with Alter/IncrementalAlterConfigs as ConfigRecords through the controller,
validated against the broker's `group.consumer.*` / `group.share.*` / `group.streams.*`
limits (INVALID_CONFIG); ACLs DESCRIBE_CONFIGS / ALTER_CONFIGS on the group.
While `eligible.leader.replicas.version` is finalized at 1, a broker-level
`min.insync.replicas` and the removal of the cluster-level one are refused
(INVALID_CONFIG, Kafka 4.x's words), and setting the cluster-level one, even to its
value, is written (the controller clears every ELR with it, cluster/controller.py).
Client-metrics resources: INVALID_REQUEST.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jocko_py.broker import broker_loggers
from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.broker_configs import (
    BROKER_CONFIGS,
    DYNAMIC_CONFIGS,
    validate_dynamic_change,
)
from jocko_py.broker.controller_channel import is_forwarded
from jocko_py.broker.features import ELR_VERSION, level
from jocko_py.broker.group import group_configs
from jocko_py.broker.security.authz import authorize_cluster, authorize_group, authorize_topic
from jocko_py.commitlog.config import TOPIC_CONFIGS, TOPIC_TO_BROKER, LogConfig
from jocko_py.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from jocko_py.broker.interfaces import ConfigHost

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
MIN_ISR = "min.insync.replicas"
# Replication throttles are not implemented; removing them (what
# kafka-reassign-partitions --verify does after every reassignment) is accepted as
# the no-op it is, setting them is refused.
TOPIC_THROTTLES = frozenset({"leader.replication.throttled.replicas",
                             "follower.replication.throttled.replicas"})
BROKER_THROTTLES = frozenset({"leader.replication.throttled.rate",
                              "follower.replication.throttled.rate",
                              "replica.alter.log.dirs.io.max.bytes.per.second"})


def validate_topic_configs(broker: ConfigHost, configs: Mapping[str, str | None]) -> None:
    try:
        LogConfig.from_properties(
            {k: v for k, v in configs.items() if v is not None}, broker.log_config
        )
    except ValueError as e:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None


def describe_topic_configs(
    broker: ConfigHost, topic: str, keys: list[str] | None, *, extra: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    overrides = dict(broker.image.topic_configs(topic))
    overrides.update(extra or {})
    effective = LogConfig.from_properties(overrides, broker.log_config).to_properties()
    view = broker.config_view()
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
        for syn in view.synonyms(bname) if bname else []:
            if syn["source"] == DEFAULT_CONFIG:
                continue
            if source == DEFAULT_CONFIG:
                source = syn["source"]
            synonyms.append(syn)
        # Kafka lists no default for a broker setting whose default is null
        # (log.retention.ms, log.roll.ms, log.roll.jitter.ms: their values come from
        # the hours/minutes synonyms), as Kafka 4.4.0's kafka-configs shows
        if not (bname and bname in BROKER_CONFIGS and BROKER_CONFIGS[bname].default is None):
            synonyms.append({"name": bname or name, "value": LogConfig().to_properties()[name],
                             "source": DEFAULT_CONFIG})
        out.append({
            "name": name, "value": effective[name], "read_only": False,
            "is_default": source == DEFAULT_CONFIG, "config_source": source,
            "is_sensitive": False, "synonyms": synonyms,
            "config_type": d.config_type_id, "documentation": None,
        })
    return out


def describe_broker_configs(broker: ConfigHost, name: str,
                            keys: list[str] | None) -> list[dict[str, Any]]:
    return broker.config_view().describe(keys, per_broker=name != "")


_DENIED = defaultdict(lambda: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                      {TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED})


def _authorized(ctx: RequestContext, op: str, resource_type: int, name: str) -> bool:
    """Topic configs need the operation on the topic, broker configs on the cluster."""
    if resource_type == TOPIC:
        return authorize_topic(ctx, op, name)
    if resource_type == GROUP:
        return authorize_group(ctx, op, name)
    return authorize_cluster(ctx, op)


@api(32, 1, 4)
async def describe_configs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    results = []
    for r in req.resources:
        res: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None,
                               "resource_type": r.resource_type,
                               "resource_name": r.resource_name, "configs": []}
        keys = list(r.configuration_keys) if r.configuration_keys is not None else None
        if not _authorized(ctx, "DESCRIBE_CONFIGS", r.resource_type, r.resource_name):
            res.update(error_code=_DENIED[r.resource_type], error_message=None)
        elif r.resource_type == TOPIC:
            if r.resource_name not in broker.image.topics:
                res.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           error_message=f"Topic {r.resource_name} does not exist")
            else:
                res["configs"] = describe_topic_configs(broker, r.resource_name, keys)
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(broker.broker_id)):
                res.update(error_code=ErrorCode.INVALID_REQUEST,
                           error_message=f"Unexpected broker id {r.resource_name}")
            else:
                res["configs"] = describe_broker_configs(broker, r.resource_name, keys)
        elif r.resource_type == BROKER_LOGGER:
            if r.resource_name != str(broker.broker_id):
                res.update(error_code=ErrorCode.INVALID_REQUEST,
                           error_message=f"Unexpected broker id {r.resource_name}")
            else:
                res["configs"] = broker_loggers.describe(keys)
        elif r.resource_type == GROUP:
            if not r.resource_name:
                res.update(error_code=ErrorCode.INVALID_REQUEST,
                           error_message="Group name must not be empty")
            else:
                res["configs"] = group_configs.describe(
                    broker.config.get, broker.image.configs(GROUP, r.resource_name),
                    keys)
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


def _list_op(op: int, current: str | None, value: str | None) -> str:
    items = [x for x in (current or "").split(",") if x]
    vals = [x for x in (value or "").split(",") if x]
    if op == APPEND:
        items += [v for v in vals if v not in items]
    else:
        items = [x for x in items if x not in vals]
    return ",".join(items)


async def _apply_broker(ctx: RequestContext, r: Any, incremental: bool,
                        validate_only: bool) -> None:
    """Dynamic broker configs: a broker id, or "" for the cluster-wide default."""
    broker = ctx.broker
    name = r.resource_name
    if name != "" and not name.isdigit():
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid broker id {name}")
    current = broker.image.configs(BROKER, name)
    view = broker.config_view()
    changes: dict[str, str | None] = {}
    if incremental:
        for c in r.configs:
            op = c.config_operation
            if op == SET:
                changes[c.name] = c.value
            elif op == DELETE:
                changes[c.name] = None
            elif op in (APPEND, SUBTRACT):
                if c.name in DYNAMIC_CONFIGS and c.name != "log.cleanup.policy":
                    raise KafkaError(ErrorCode.INVALID_CONFIG,
                                     f"Config value append is not allowed for config key: {c.name}")
                base = current.get(c.name)
                if base is None:
                    base = view.effective().get(c.name) or broker.config.get(c.name) or None
                    if base is None and c.name == "log.cleanup.policy":
                        base = "delete"
                changes[c.name] = _list_op(op, base, c.value)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operation {op}")
    else:
        changes = {c.name: c.value for c in r.configs}
        for k in current:
            changes.setdefault(k, None)
    throttles = sorted(k for k, v in changes.items() if k in BROKER_THROTTLES and v is not None)
    if throttles:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Replication throttles are not supported: {', '.join(throttles)}")
    elr = level(broker.image.features, ELR_VERSION) >= 1
    if MIN_ISR in changes and elr:
        # Kafka 4.x's ConfigurationControlManager: with ELR the cluster-level value rules
        if name != "":
            raise KafkaError(ErrorCode.INVALID_CONFIG, "Broker-level min.insync.replicas "
                             "cannot be altered while ELR is enabled.")
        if changes[MIN_ISR] is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "Cluster-level min.insync.replicas "
                             "cannot be removed while ELR is enabled.")
    validate_dynamic_change(current, changes, view)  # raises BrokerConfigError
    if validate_only:
        return
    # a cluster-level min.insync.replicas set to its value still clears every ELR (Kafka)
    changes = {k: v for k, v in changes.items()
               if current.get(k) != v or (elr and k == MIN_ISR and name == "")}
    if changes:
        await broker.controller_channel.set_configs(
            BROKER, name, changes, forwarded=is_forwarded(ctx))


async def _apply_group(ctx: RequestContext, r: Any, incremental: bool,
                       validate_only: bool) -> None:
    """A group's configs: ConfigRecords of resource type 32 through the controller."""
    broker = ctx.broker
    name = r.resource_name
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    current = broker.image.configs(GROUP, name)
    new: dict[str, str | None] = dict(current)
    if incremental:
        for c in r.configs:
            if c.config_operation == SET:
                new[c.name] = c.value
            elif c.config_operation == DELETE:
                new[c.name] = None
            elif c.config_operation in (APPEND, SUBTRACT):
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Config value append is not allowed for config key: {c.name}")
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Unknown operation {c.config_operation}")
    else:
        new = {c.name: c.value for c in r.configs}
        for k in current:
            new.setdefault(k, None)
    try:
        group_configs.validate(broker.config.get, new)
    except group_configs.GroupConfigError as e:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
    if validate_only:
        return
    changes = {k: v for k, v in new.items() if current.get(k) != v}
    if changes:
        await broker.controller_channel.set_configs(GROUP, name, changes, forwarded=is_forwarded(ctx))


async def _apply(ctx: RequestContext, r: Any, incremental: bool, validate_only: bool) -> dict[str, Any]:
    broker = ctx.broker
    res: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None,
                           "resource_type": r.resource_type, "resource_name": r.resource_name}
    try:
        if not _authorized(ctx, "ALTER_CONFIGS", r.resource_type, r.resource_name):
            raise KafkaError(_DENIED[r.resource_type], None)
        throttles = TOPIC_THROTTLES if r.resource_type == TOPIC else BROKER_THROTTLES
        if incremental and r.configs and all(
                c.name in throttles and c.config_operation == DELETE for c in r.configs):
            return res
        if r.resource_type == BROKER:
            await _apply_broker(ctx, r, incremental, validate_only)
            return res
        if r.resource_type == BROKER_LOGGER:
            if not incremental:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "AlterConfigs does not support "
                                 "the resource type BROKER_LOGGER; use IncrementalAlterConfigs")
            if r.resource_name != str(broker.broker_id):
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Unexpected broker id {r.resource_name}")
            logger_changes = [(c.name, c.config_operation, c.value) for c in r.configs]
            broker_loggers.check(logger_changes)
            if not validate_only:
                broker_loggers.apply(logger_changes)
            return res
        if r.resource_type == GROUP:
            await _apply_group(ctx, r, incremental, validate_only)
            return res
        if r.resource_type != TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unsupported resource type {r.resource_type}")
        name = r.resource_name
        if name not in broker.image.topics:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {name} does not exist")
        current = broker.image.topic_configs(name)
        if incremental:
            new: dict[str, str | None] = dict(current)
            for c in r.configs:
                if c.name not in TOPIC_CONFIGS:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
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
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operation {op}")
        else:
            new = {c.name: c.value for c in r.configs}
            for k in current:
                new.setdefault(k, None)
        for k in new:
            if k not in TOPIC_CONFIGS:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {k}")
        validate_topic_configs(broker, new)
        if not validate_only:
            changes = {k: v for k, v in new.items() if current.get(k) != v}
            if changes:
                await broker.controller_channel.set_topic_configs(
                    name, changes, forwarded=is_forwarded(ctx))
    except KafkaError as e:
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
