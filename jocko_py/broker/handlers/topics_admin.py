"""CreateTopics (19) v2-7, DeleteTopics (20) v1-6, CreatePartitions (37) v0-3.

Topic names, partition counts, replication factors and configs are validated
as Kafka does (INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_CONFIG); -1 partitions / replication factor
take `num.partitions` / `default.replication.factor`. `validate_only` checks
without creating. Manual replica assignments (`assignments`, Kafka's
`--replica-assignment`) are checked as Kafka does: not with a partition count or
replication factor (INVALID_REQUEST), partitions numbered 0..n-1, every list of the
same length, no repeats, registered brokers, one of them unfenced
(INVALID_REPLICA_ASSIGNMENT); the ISR is the unfenced replicas, the leader the first of
them. CreatePartitions takes one list per new partition, of the topic's replication
factor. Deleting a topic removes its logs at once
(Kafka's `file.delete.delay.ms` is not applied); DeleteTopics by id (v6+) works.
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.controller_channel import NewTopic, is_forwarded
from jocko_py.broker.handlers.configs import describe_topic_configs, validate_topic_configs
from jocko_py.broker.security.authz import authorize_topic, may_create_topic
from jocko_py.broker.topic_names import INTERNAL_TOPICS
from jocko_py.protocol.errors import ErrorCode, KafkaError

ZERO = uuid.UUID(int=0)


def manual_assignments(t: Any) -> list[tuple[int, ...]]:
    """A CreateTopics topic's manual assignment, one replica list per partition from 0
    (Kafka's checks: no partition count or replication factor beside it, partitions
    0..n-1 each once)."""
    if t.num_partitions != -1 or t.replication_factor != -1:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "Both numPartitions or replicationFactor and replicasAssignments "
                         "were set. Both cannot be used at the same time.")
    by_index = {a.partition_index: tuple(a.broker_ids) for a in t.assignments}
    if len(by_index) != len(t.assignments) or sorted(by_index) != list(range(len(by_index))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Partitions should be a consecutive 0-based integer sequence")
    return [by_index[i] for i in range(len(by_index))]


MUTATION = "controller_mutation_rate"
THROTTLED = "The throttling quota has been exceeded."


def mutation_quota_exceeded(ctx: RequestContext, strict: bool) -> bool:
    """KIP-599: a client already over its controller_mutation_rate gets
    THROTTLING_QUOTA_EXCEEDED from the versions that know it (`strict`); requests
    forwarded by another broker were counted there."""
    return strict and not is_forwarded(ctx) and \
        ctx.broker.security.over_quota(ctx.session, ctx.header.client_id, MUTATION) > 0


def count_mutations(ctx: RequestContext, partitions: int) -> int:
    """Record `partitions` created or deleted against the client's mutation quota; the
    throttle time (ms) of the response."""
    if is_forwarded(ctx) or partitions <= 0:
        return 0
    return ctx.broker.security.throttle(ctx.session, ctx.header.client_id, MUTATION,
                                        partitions)


@api(19, 2, 7)
async def create_topics(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    out = []
    throttle = 0
    seen: set[str] = set()
    todo: list[tuple[dict[str, Any], NewTopic]] = []  # passed the broker's checks
    for t in req.topics:
        entry: dict[str, Any] = {"name": t.name, "topic_id": ZERO, "error_code": ErrorCode.NONE,
                                 "error_message": None, "num_partitions": -1,
                                 "replication_factor": -1, "configs": None}
        out.append(entry)
        try:
            if t.name in seen:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Duplicate topic name {t.name} in the request")
            seen.add(t.name)
            if not may_create_topic(ctx, t.name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            if mutation_quota_exceeded(ctx, ctx.version >= 6):
                raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
            manual = manual_assignments(t) if t.assignments else None
            if manual is not None:
                n, rf = len(manual), len(manual[0])
            else:
                n = t.num_partitions if t.num_partitions != -1 else broker.config.num_partitions
                rf = (t.replication_factor if t.replication_factor != -1
                      else broker.config.int("default.replication.factor"))
            configs: dict[str, str] = {c.name: c.value for c in t.configs}
            spec = NewTopic(t.name, n, rf, configs, manual,
                            lambda c: validate_topic_configs(broker, c))
            if req.validate_only:
                await broker.controller_channel.create_topic(
                    t.name, n, rf, configs, validate_only=True,
                    validate_configs=spec.validate_configs, forwarded=is_forwarded(ctx),
                    assignments=manual)
                created(ctx, entry, spec, ZERO)
            else:
                # counted as accepted (KIP-599): a later topic of the request sees it
                throttle = max(throttle, count_mutations(ctx, n))
                todo.append((entry, spec))
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
    if todo:
        results = await broker.controller_channel.create_topics(
            [spec for _, spec in todo], forwarded=is_forwarded(ctx))
        for (entry, spec), r in zip(todo, results, strict=True):
            if isinstance(r, KafkaError):
                entry.update(error_code=r.code, error_message=r.message)
            else:
                created(ctx, entry, spec, r)
    return {"throttle_time_ms": throttle, "topics": out}


def created(ctx: RequestContext, entry: dict[str, Any], spec: NewTopic,
            tid: uuid.UUID) -> None:
    """A CreateTopics entry for a topic created (or, validate_only, that would be)."""
    entry.update(topic_id=tid, num_partitions=spec.num_partitions,
                 replication_factor=spec.replication_factor)
    if ctx.version >= 5:
        entry["configs"] = [
            {"name": c["name"], "value": c["value"], "read_only": False,
             "config_source": c["config_source"], "is_sensitive": False}
            for c in describe_topic_configs(ctx.broker, spec.name, None, extra=spec.configs)
        ]


@api(20, 1, 6)
async def delete_topics(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    image = broker.image
    wanted: list[tuple[str | None, uuid.UUID]] = []
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, ZERO) for n in req.topic_names]
    out = []
    throttle = 0
    for name, tid in wanted:
        entry: dict[str, Any] = {"name": name, "topic_id": tid, "error_code": ErrorCode.NONE,
                                 "error_message": None}
        try:
            if name is None:
                ti = image.topic_by_id(tid)
                if ti is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "Topic id not found")
                name = ti.name
                entry["name"] = name
            if not authorize_topic(ctx, "DELETE", name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            if not broker.config.bool("delete.topic.enable"):
                raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED,
                                 "Topic deletion is disabled.")
            if name in INTERNAL_TOPICS:
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                 f"Internal topic {name} cannot be deleted")
            if mutation_quota_exceeded(ctx, ctx.version >= 5):
                raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
            known = image.topics.get(name)
            parts = len(known.partitions) if known is not None else 0
            entry["topic_id"] = await broker.controller_channel.delete_topic(
                name, forwarded=is_forwarded(ctx))
            throttle = max(throttle, count_mutations(ctx, parts))
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        out.append(entry)
    return {"throttle_time_ms": throttle, "responses": out}


@api(37, 0, 3)
async def create_partitions(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    out = []
    throttle = 0
    for t in req.topics:
        entry: dict[str, Any] = {"name": t.name, "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if not authorize_topic(ctx, "ALTER", t.name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            if mutation_quota_exceeded(ctx, ctx.version >= 3):
                raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
            manual = [tuple(a.broker_ids) for a in t.assignments] if t.assignments else None
            known = broker.image.topics.get(t.name)
            before = len(known.partitions) if known is not None else 0
            await broker.controller_channel.create_partitions(
                t.name, t.count, req.validate_only,
                forwarded=is_forwarded(ctx), assignments=manual)
            if not req.validate_only:
                throttle = max(throttle, count_mutations(ctx, t.count - before))
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        out.append(entry)
    return {"throttle_time_ms": throttle, "results": out}
