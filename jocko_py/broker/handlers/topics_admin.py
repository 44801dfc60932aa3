"""CreateTopics (19) v0-7, DeleteTopics (20) v0-6, CreatePartitions (37) v0-3.

Topic names, partition counts, replication factors and configs are validated
as Kafka does (INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_CONFIG); -1 partitions / replication factor
take `num.partitions` / `default.replication.factor`. `validate_only` checks
without creating. Manual replica assignments are not supported
(INVALID_REPLICA_ASSIGNMENT). Deleting a topic removes its logs at once
(Kafka's `file.delete.delay.ms` is not applied); DeleteTopics by id (v6+) works.
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.handlers.configs import describe_topic_configs, validate_topic_configs
from jocko_py.broker.security.authz import authorize_topic, may_create_topic
from jocko_py.broker.topics import FORWARD_CLIENT_ID, INTERNAL_TOPICS, TopicError
from jocko_py.protocol.errors import ErrorCode

ZERO = uuid.UUID(int=0)


@api(19, 0, 7)
async def create_topics(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    out = []
    seen: set[str] = set()
    for t in req.topics:
        entry: dict[str, Any] = {"name": t.name, "topic_id": ZERO, "error_code": 0,
                                 "error_message": None, "num_partitions": -1,
                                 "replication_factor": -1, "configs": None}
        try:
            if t.name in seen:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"Duplicate topic name {t.name} in the request")
            seen.add(t.name)
            if not may_create_topic(ctx, t.name):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            if t.assignments:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "Manual replica assignment is not supported")
            n = t.num_partitions if t.num_partitions != -1 else broker.config.num_partitions
            rf = (t.replication_factor if t.replication_factor != -1
                  else broker.config.int("default.replication.factor"))
            configs: dict[str, str] = {c.name: c.value for c in t.configs}
            tid = await broker.topics.create_topic(
                t.name, n, rf, configs, validate_only=req.validate_only,
                validate_configs=lambda c: validate_topic_configs(broker, c),
                forwarded=ctx.header.client_id == FORWARD_CLIENT_ID,
            )
            entry.update(topic_id=tid if not req.validate_only else ZERO,
                         num_partitions=n, replication_factor=rf)
            if ctx.version >= 5:
                entry["configs"] = [
                    {"name": c["name"], "value": c["value"], "read_only": False,
                     "config_source": c["config_source"], "is_sensitive": False}
                    for c in describe_topic_configs(broker, t.name, None, extra=configs)
                ]
        except TopicError as e:
            entry.update(error_code=e.code, error_message=e.message)
        out.append(entry)
    return {"throttle_time_ms": 0, "topics": out}


@api(20, 0, 6)
async def delete_topics(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    image = broker.topics.image
    wanted: list[tuple[str | None, uuid.UUID]] = []
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, ZERO) for n in req.topic_names]
    out = []
    for name, tid in wanted:
        entry: dict[str, Any] = {"name": name, "topic_id": tid, "error_code": 0,
                                 "error_message": None}
        try:
            if name is None:
                ti = image.topic_by_id(tid)
                if ti is None:
                    raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, "Topic id not found")
                name = ti.name
                entry["name"] = name
            if not authorize_topic(ctx, "DELETE", name):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            if not broker.config.bool("delete.topic.enable"):
                raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED,
                                 "Topic deletion is disabled.")
            if name in INTERNAL_TOPICS:
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                 f"Internal topic {name} cannot be deleted")
            entry["topic_id"] = await broker.topics.delete_topic(
                name, forwarded=ctx.header.client_id == FORWARD_CLIENT_ID)
        except TopicError as e:
            entry.update(error_code=e.code, error_message=e.message)
        out.append(entry)
    return {"throttle_time_ms": 0, "responses": out}


@api(37, 0, 3)
async def create_partitions(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    out = []
    for t in req.topics:
        entry: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            if not authorize_topic(ctx, "ALTER", t.name):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            if t.assignments:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "Manual replica assignment is not supported")
            await broker.topics.create_partitions(
                t.name, t.count, req.validate_only,
                forwarded=ctx.header.client_id == FORWARD_CLIENT_ID)
        except TopicError as e:
            entry.update(error_code=e.code, error_message=e.message)
        out.append(entry)
    return {"throttle_time_ms": 0, "results": out}
