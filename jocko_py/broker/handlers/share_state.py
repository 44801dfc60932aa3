"""The share-group state RPCs (KIP-932), sent by share partition leaders and the group
coordinator to the share coordinator: InitializeShareGroupState (83) v0,
ReadShareGroupState (84) v0, WriteShareGroupState (85) v0-1, DeleteShareGroupState
(86) v0 and ReadShareGroupStateSummary (87) v0-1, Kafka 4.4.0's versions.

Each partition of a request is one key ``"<group>:<topic id>:<partition>"`` answered
by the share coordinator shard of its ``__share_group_state`` partition
(``broker/share/``): NOT_COORDINATOR when this broker does not lead that partition,
COORDINATOR_LOAD_IN_PROGRESS while it loads it, else the shard's answer (see
``share/shard.py`` for fencing). WriteShareGroupState v1 and
ReadShareGroupStateSummary v1 carry the delivery-complete count (KIP-1226). A request
without a group id gets no results, as from Kafka.

Inter-broker only, as Kafka serves them: advertised (Kafka 4.4 lists them in ApiVersions)
but each needs CLUSTER_ACTION on the cluster (``security/authz.py``: a broker of this
cluster, or a principal an authorizer allows it); anyone else gets
CLUSTER_AUTHORIZATION_FAILED for every partition and nothing is read or written.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.broker.share.persister import DeliveryState, SharePartitionKey, StateBatch
from jocko_py.broker.share.shard import Answer
from jocko_py.protocol.errors import ErrorCode

E = ErrorCode
_DENIED = Answer(E.CLUSTER_AUTHORIZATION_FAILED,
                 "Cluster authorization failed: the share-group state RPCs are for brokers")


def _topic_id(t: Any) -> uuid.UUID:
    return uuid.UUID(str(t.topic_id))


async def _each(ctx: RequestContext, req: Any,
                fn: Callable[[SharePartitionKey, Any], Awaitable[Answer]],
                encode: Callable[[Any, Answer], dict[str, Any]]) -> dict[str, Any]:
    """Run ``fn`` for every partition of the request (concurrently: keys on different
    shards do not wait for each other) and answer in the request's order."""
    allowed = authorize_cluster(ctx, "CLUSTER_ACTION")
    if allowed and not req.group_id:
        return {"results": []}  # as Kafka answers a request without a group id
    jobs: list[tuple[Any, Any, Awaitable[Answer] | None]] = []
    for t in req.topics:
        for p in t.partitions:
            key = SharePartitionKey(req.group_id, _topic_id(t), p.partition)
            jobs.append((t, p, fn(key, p) if allowed else None))
    answers = await asyncio.gather(*(j for _, _, j in jobs if j is not None))
    it = iter(answers)
    results: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for t, p, job in jobs:
        a = next(it) if job is not None else _DENIED
        results.setdefault(_topic_id(t), []).append(encode(p, a))
    return {"results": [{"topic_id": tid, "partitions": ps} for tid, ps in results.items()]}


def _error(p: Any, a: Answer) -> dict[str, Any]:
    return {"partition": p.partition, "error_code": a.error,
            "error_message": a.message if a.error != E.NONE else None}


def _batches(items: Any) -> tuple[StateBatch, ...]:
    out = []
    for b in items:
        try:
            state = DeliveryState(b.delivery_state)
        except ValueError:
            state = DeliveryState.AVAILABLE
        out.append(StateBatch(b.first_offset, b.last_offset, state, b.delivery_count))
    return tuple(out)


@api(83, 0, 0)
async def initialize(ctx: RequestContext, req: Any) -> dict[str, Any]:
    sc = ctx.broker.share_coordinator
    return await _each(ctx, req, lambda k, p: sc.initialize(k, p.state_epoch, p.start_offset),
                       _error)


@api(84, 0, 0)
async def read(ctx: RequestContext, req: Any) -> dict[str, Any]:
    sc = ctx.broker.share_coordinator

    def encode(p: Any, a: Answer) -> dict[str, Any]:
        return _error(p, a) | {
            "state_epoch": a.state_epoch, "start_offset": a.start_offset,
            "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                               "delivery_state": int(b.delivery_state),
                               "delivery_count": b.delivery_count} for b in a.batches]}

    return await _each(ctx, req, lambda k, p: sc.read(k, p.leader_epoch), encode)


@api(85, 0, 1)
async def write(ctx: RequestContext, req: Any) -> dict[str, Any]:
    sc = ctx.broker.share_coordinator
    v1 = ctx.version >= 1
    return await _each(ctx, req, lambda k, p: sc.write(
        k, p.state_epoch, p.leader_epoch, p.start_offset, _batches(p.state_batches),
        p.delivery_complete_count if v1 else -1), _error)


@api(86, 0, 0)
async def delete(ctx: RequestContext, req: Any) -> dict[str, Any]:
    sc = ctx.broker.share_coordinator
    return await _each(ctx, req, lambda k, p: sc.delete(k), _error)


@api(87, 0, 1)
async def summary(ctx: RequestContext, req: Any) -> dict[str, Any]:
    sc = ctx.broker.share_coordinator

    def encode(p: Any, a: Answer) -> dict[str, Any]:
        return _error(p, a) | {"state_epoch": a.state_epoch, "leader_epoch": a.leader_epoch,
                               "start_offset": a.start_offset,
                               "delivery_complete_count": a.delivery_complete_count}

    return await _each(ctx, req, lambda k, p: sc.summary(k, p.leader_epoch), encode)
