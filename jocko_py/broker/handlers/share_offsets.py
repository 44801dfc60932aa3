"""The share groups' offsets admin APIs (KIP-932), Kafka 4.4.0's versions:
DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets (91) v0 and
DeleteShareGroupOffsets (92) v0, as `kafka-share-groups --describe / --reset-offsets /
--delete-offsets` and the Admin client send them to the group's coordinator.

What they do is ``group/share_offsets.py``: the start offsets of the group's share
partitions, read, initialized or deleted through the share-state persister (the state
RPCs to the share coordinator). Errors: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
when this broker is not (yet) the group's coordinator, INVALID_GROUP_ID for an empty
id, GROUP_ID_NOT_FOUND for no group or a group of another type (Describe of all
topics, Delete), NON_EMPTY_GROUP for a group with members (Alter, Delete),
UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the metadata does not have,
UNSUPPORTED_VERSION while the ``share.version`` feature is 0 (as Kafka).
Authorization as Kafka checks it: Describe needs DESCRIBE on the group and on each
topic, Alter READ on the group and each topic, Delete DELETE on the group and READ on
each topic (GROUP_AUTHORIZATION_FAILED / TOPIC_AUTHORIZATION_FAILED). v1 of Describe
has the lag (KIP-1226): the high watermark - the start offset - the records above it
already delivered, as Kafka computes it; -1 when that count is unknown or the partition
has no replica on this broker (Kafka asks the partition's leader).
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.group import share_offsets
from jocko_py.broker.handlers.share_groups import share_enabled
from jocko_py.broker.security.authz import authorize_group, denied_topics
from jocko_py.protocol.errors import ErrorCode

E = ErrorCode


@api(90, 0, 1)
async def describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    out = []
    enabled = share_enabled(ctx)
    for g in req.groups:
        gid = g.group_id
        if not enabled or not gid or not authorize_group(ctx, "DESCRIBE", gid):
            err = E.UNSUPPORTED_VERSION if not enabled else \
                E.INVALID_GROUP_ID if not gid else E.GROUP_AUTHORIZATION_FAILED
            out.append({"group_id": gid, "topics": [], "error_code": err,
                        "error_message": None})
            continue
        topics = None if g.topics is None else [(t.topic_name, list(t.partitions))
                                                for t in g.topics]
        names = [n for n, _ in topics] if topics is not None else \
            list(ctx.broker.image.topics)
        denied = denied_topics(ctx, "DESCRIBE", names)
        out.append(await share_offsets.describe(ctx.broker, ctx.broker.share_persister, gid,
                                                topics, denied))
    return {"throttle_time_ms": 0, "groups": out}


@api(91, 0, 0)
async def alter(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gid = req.group_id
    topics = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
              for t in req.topics]
    if not share_enabled(ctx) or not gid or not authorize_group(ctx, "READ", gid):
        err = E.UNSUPPORTED_VERSION if not share_enabled(ctx) else \
            E.INVALID_GROUP_ID if not gid else E.GROUP_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": err, "error_message": None,
                "responses": _alter_all(topics, err)}
    denied = denied_topics(ctx, "READ", (n for n, _ in topics))
    err, msg, resp = await share_offsets.alter(ctx.broker, ctx.broker.share_persister, gid,
                                               topics, denied)
    if err != E.NONE:
        resp = _alter_all(topics, err)
    return {"throttle_time_ms": 0, "error_code": err, "error_message": msg,
            "responses": resp}


def _alter_all(topics: list[tuple[str, list[tuple[int, int]]]], err: ErrorCode
               ) -> list[dict[str, Any]]:
    return [{"topic_name": n, "topic_id": uuid.UUID(int=0), "partitions": [
        {"partition_index": p, "error_code": err, "error_message": None} for p, _ in ps]}
        for n, ps in topics]


@api(92, 0, 0)
async def delete(ctx: RequestContext, req: Any) -> dict[str, Any]:
    gid = req.group_id
    names = [t.topic_name for t in req.topics]
    if not share_enabled(ctx) or not gid or not authorize_group(ctx, "DELETE", gid):
        err = E.UNSUPPORTED_VERSION if not share_enabled(ctx) else \
            E.INVALID_GROUP_ID if not gid else E.GROUP_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": err, "error_message": None,
                "responses": []}
    denied = denied_topics(ctx, "READ", names)
    err, msg, resp = await share_offsets.delete(ctx.broker, ctx.broker.share_persister, gid,
                                                names, denied)
    return {"throttle_time_ms": 0, "error_code": err, "error_message": msg,
            "responses": resp}
