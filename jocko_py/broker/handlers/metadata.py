"""Metadata (key 3), versions 0-13.

Brokers, cluster id and controller, and per topic its id, internal flag and
partitions (leader, leader epoch, replicas, ISR). A null topic list (or an empty
one in v0) means all topics; v10+ may name topics by id. Unknown topics are
created with `num.partitions` when `auto.create.topics.enable` is true and the
request allows it (v4+), and returned at once with their partitions. Illegal
names get INVALID_TOPIC_EXCEPTION. With an authorizer, topics the principal may not
DESCRIBE are left out of an all-topics answer and get TOPIC_AUTHORIZATION_FAILED
when named; auto-creation needs CREATE (cluster or topic), else
UNKNOWN_TOPIC_OR_PARTITION. Authorized operations (v8+) are filled in when asked.
v13's top-level error code (KIP-1102: REBOOTSTRAP_REQUIRED) is always 0: like Kafka
4.4's broker, this one never asks a client to rebootstrap through Metadata.
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import (
    CLUSTER,
    CLUSTER_NAME,
    TOPIC,
    authorized_operations,
    denied_topics,
    may_create_topic,
)
from jocko_py.broker.topics import INTERNAL_TOPICS, TopicError, validate_topic_name
from jocko_py.cluster.metadata import TopicImage
from jocko_py.protocol.errors import ErrorCode

AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
ZERO = uuid.UUID(int=0)


def topic_entry(t: TopicImage, live: set[int]) -> dict[str, Any]:
    parts = []
    for pid in sorted(t.partitions):
        p = t.partitions[pid]
        parts.append({
            "error_code": ErrorCode.NONE if p.leader in live else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": pid,
            "leader_id": p.leader if p.leader in live else -1,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr),
            "offline_replicas": [r for r in p.replicas if r not in live],
        })
    return {
        "error_code": 0,
        "name": t.name,
        "topic_id": t.topic_id,
        "is_internal": t.name in INTERNAL_TOPICS,
        "partitions": parts,
        "topic_authorized_operations": AUTHORIZED_OPS_NOT_REQUESTED,
    }


def error_entry(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "topic_authorized_operations": AUTHORIZED_OPS_NOT_REQUESTED}


@api(3, 0, 13)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    image = broker.topics.image
    live = {b.broker_id for b in image.brokers.values() if not b.fenced}
    topics_out = []
    requested = req.topics
    if requested is None or (ctx.version == 0 and not requested):
        hidden = denied_topics(ctx, "DESCRIBE", image.topics)
        topics_out = [topic_entry(t, live) for _, t in sorted(image.topics.items())
                      if t.name not in hidden]
    else:
        denied = denied_topics(ctx, "DESCRIBE", (rt.name or "" for rt in requested))
        auto = broker.config.auto_create_topics and (ctx.version < 4 or req.allow_auto_topic_creation)
        for rt in requested:
            name = rt.name
            if name is None:
                t = image.topic_by_id(rt.topic_id)
                topics_out.append(
                    topic_entry(t, live) if t else
                    error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, rt.topic_id))
                continue
            if name in denied:
                topics_out.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            t = image.topics.get(name)
            if t is None:
                try:
                    validate_topic_name(name)
                except TopicError as e:
                    topics_out.append(error_entry(name, e.code))
                    continue
                if auto and name not in INTERNAL_TOPICS and may_create_topic(ctx, name):
                    try:
                        await broker.topics.create_topic(
                            name, broker.config.num_partitions,
                            min(broker.config.int("default.replication.factor"), len(live) or 1),
                        )
                    except TopicError as e:
                        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                            topics_out.append(error_entry(name, e.code))
                            continue
                    t = image.topics.get(name)
            if t is None:
                topics_out.append(error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                topics_out.append(topic_entry(t, live))
    brokers = []
    for _, b in sorted(image.brokers.items()):
        addr = None if b.fenced else ctx.address_of(b)
        if addr is not None:
            brokers.append({"node_id": b.broker_id, "host": addr[0], "port": addr[1],
                            "rack": b.rack})
    if ctx.version >= 8 and req.include_topic_authorized_operations:
        for entry in topics_out:
            if not entry["error_code"]:
                entry["topic_authorized_operations"] = authorized_operations(
                    ctx, TOPIC, entry["name"])
    cluster_ops = AUTHORIZED_OPS_NOT_REQUESTED
    if 8 <= ctx.version <= 10 and req.include_cluster_authorized_operations:
        cluster_ops = authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.controller_id,
        "topics": topics_out,
        "cluster_authorized_operations": cluster_ops,
        "error_code": ErrorCode.NONE,
    }
