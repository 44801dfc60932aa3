"""Fetch (key 1), versions 4-12, for consumers and for follower replicas.

Reads whole batches as stored (never re-encoded) from each partition's fetch
offset, honouring `partition_max_bytes` and the response `max_bytes`; the first
partition with data returns at least one whole batch even past the limits, as
Kafka does. If fewer than `min_bytes` are available the request waits in the fetch
purgatory for new data up to `max_wait_ms`.

Consumers (replica_id -1) read up to the high watermark (read_uncommitted) or the
last stable offset (read_committed; equal to the HW since transactions are not
supported). Followers (replica_id >= 0, a replica of the partition) read up to the
log end; their fetch offset is their log end offset, which moves the HW and the
ISR; a `last_fetched_epoch` that ends before the fetch offset in the leader's
epoch cache gets `diverging_epoch` and no records (KIP-279). Every partition must
be led here (NOT_LEADER_OR_FOLLOWER), and a `current_leader_epoch` other than ours
gets FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer).

Fetch sessions (KIP-227) are not kept: every response is a full response with
session id 0, which clients treat as "sessions unavailable"; a request naming a
session gets FETCH_SESSION_ID_NOT_FOUND. The handler only translates:
`ReplicaManager.fetch_messages` decides.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.replica_fetcher import replica_incarnation
from jocko_py.broker.replica_manager import FetchParams, FetchPartition
from jocko_py.broker.security.authz import authorize_cluster, denied_topics
from jocko_py.protocol.errors import ErrorCode


@api(1, 4, 12)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if req.session_id != 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                "session_id": 0, "responses": []}
    # followers need CLUSTER_ACTION, consumers READ on each topic
    names = {ft.topic for ft in req.topics}
    denied = (set() if authorize_cluster(ctx, "CLUSTER_ACTION") else names) \
        if req.replica_id >= 0 else denied_topics(ctx, "READ", names)
    params = FetchParams(
        replica_incarnation=replica_incarnation(ctx.header.client_id),
        replica_id=req.replica_id, max_wait_ms=req.max_wait_ms, min_bytes=req.min_bytes,
        max_bytes=req.max_bytes if ctx.version >= 3 else 2**31 - 1,
        isolation_level=req.isolation_level,
        partitions=[
            FetchPartition(ft.topic, fp.partition, fp.fetch_offset,
                           fp.current_leader_epoch,
                           fp.last_fetched_epoch if ctx.version >= 12 else -1,
                           fp.partition_max_bytes)
            for ft in req.topics if ft.topic not in denied for fp in ft.partitions
        ],
    )
    results = iter(await ctx.broker.replicas.fetch_messages(params))
    topics = []
    for ft in req.topics:
        parts = []
        for fp in ft.partitions:
            if ft.topic in denied:
                parts.append({"partition_index": fp.partition, "high_watermark": -1,
                              "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              "last_stable_offset": -1, "log_start_offset": -1,
                              "aborted_transactions": None, "preferred_read_replica": -1,
                              "records": b""})
                continue
            r = next(results)
            out: dict[str, Any] = {
                "partition_index": fp.partition, "error_code": r.error,
                "high_watermark": r.high_watermark,
                "last_stable_offset": r.last_stable_offset,
                "log_start_offset": r.log_start_offset,
                "aborted_transactions": None if ctx.version < 4 else [],
                "preferred_read_replica": -1,
                # never null, errors included: Kafka sends empty records, and librdkafka
                # rejects a null record set as a parse failure of the whole response
                "records": r.records if r.records is not None else b"",
            }
            if r.diverging_epoch is not None and ctx.version >= 12:
                out["diverging_epoch"] = {"epoch": r.diverging_epoch[0],
                                          "end_offset": r.diverging_epoch[1]}
            parts.append(out)
        topics.append({"topic": ft.topic, "partitions": parts})
    throttle = 0
    if req.replica_id < 0 and ctx.broker.security.quotas_set():
        throttle = ctx.broker.security.throttle(
            ctx.session, ctx.header.client_id, "consumer_byte_rate",
            sum(len(p["records"]) for t in topics for p in t["partitions"]))
    return {"throttle_time_ms": throttle, "error_code": 0, "session_id": 0,
            "responses": topics}
