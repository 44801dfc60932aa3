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

Topic entries come encoded from the broker's `MetadataCache` (broker/metadata_cache.py):
a request costs what it names plus the bytes it sends, not the cluster's size.

v13's top-level error code (KIP-1102: REBOOTSTRAP_REQUIRED) is always 0: like Kafka
4.4's broker, this one never asks a client to rebootstrap through Metadata.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.metadata_cache import (
    AUTHORIZED_OPS_NOT_REQUESTED,
    ZERO,
    error_entry,
    topic_entry,
)
from jocko_py.broker.security.authz import (
    CLUSTER,
    CLUSTER_NAME,
    TOPIC,
    authorized_operations,
    denied_topics,
    may_create_topic,
)
from jocko_py.broker.topic_names import INTERNAL_TOPICS, validate_topic_name
from jocko_py.cluster.metadata import TopicImage
from jocko_py.protocol.errors import ErrorCode, KafkaError
from jocko_py.protocol.wire import Encoded

__all__ = ["AUTHORIZED_OPS_NOT_REQUESTED", "ZERO", "error_entry", "handle", "topic_entry"]


@api(3, 0, 13)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    image = broker.image
    cache = broker.metadata_cache
    live = frozenset(b.broker_id for b in image.brokers.values() if not b.fenced)
    # taken before any await: encoding many topics yields to the loop, and the brokers
    # must be those the topics' leaders were checked against
    brokers = []
    for _, b in sorted(image.brokers.items()):
        addr = None if b.fenced else ctx.address_of(b)
        if addr is not None:
            brokers.append({"node_id": b.broker_id, "host": addr[0], "port": addr[1],
                            "rack": b.rack})
    want_ops = ctx.version >= 8 and req.include_topic_authorized_operations
    items: list[TopicImage | dict[str, Any]] = []
    topics: Encoded | None = None
    requested = req.topics
    everything = requested is None or (ctx.version == 0 and not requested)
    if everything:
        hidden = denied_topics(ctx, "DESCRIBE", image.topics)
        if not hidden and not want_ops:
            topics = await cache.all_topics(ctx.version, image, live)
        else:
            items = [t for _, t in sorted(image.topics.items()) if t.name not in hidden]
    else:
        denied = denied_topics(ctx, "DESCRIBE", (rt.name or "" for rt in requested))
        auto = broker.config.auto_create_topics and (ctx.version < 4 or req.allow_auto_topic_creation)
        for rt in requested:
            name = rt.name
            if name is None:
                t = image.topic_by_id(rt.topic_id)
                items.append(t if t else error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, rt.topic_id))
                continue
            if name in denied:
                items.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            t = image.topics.get(name)
            if t is None:
                try:
                    validate_topic_name(name)
                except KafkaError as e:
                    items.append(error_entry(name, e.code))
                    continue
                if auto and name not in INTERNAL_TOPICS and may_create_topic(ctx, name):
                    try:
                        await broker.controller_channel.create_topic(
                            name, broker.config.num_partitions,
                            min(broker.config.int("default.replication.factor"), len(live) or 1),
                        )
                    except KafkaError as e:
                        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                            items.append(error_entry(name, e.code))
                            continue
                    t = image.topics.get(name)
            items.append(t if t is not None else
                         error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    if topics is None:
        topics = await cache.encode_topics(
            ctx.version, items, live,
            (lambda name: authorized_operations(ctx, TOPIC, name)) if want_ops else None)
    cluster_ops = AUTHORIZED_OPS_NOT_REQUESTED
    if 8 <= ctx.version <= 10 and req.include_cluster_authorized_operations:
        cluster_ops = authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.controller_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
        "error_code": ErrorCode.NONE,
    }
