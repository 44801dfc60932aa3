"""Fetch (key 1), versions 4-12, for consumers and for follower replicas.

Reads whole batches as stored (never re-encoded) from each partition's fetch
offset, honouring `partition_max_bytes` and the response `max_bytes`; the first
partition with data returns at least one whole batch even past the limits, as
Kafka does. If fewer than `min_bytes` are available the request waits in the fetch
purgatory for new data up to `max_wait_ms`.

Consumers (replica_id -1) read up to the high watermark (read_uncommitted) or the
last stable offset (read_committed), which also gets the aborted transactions
(producer id, first offset) overlapping what is returned. Followers (replica_id >= 0, a replica of the partition) read up to the
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
from jocko_py.protocol.errors import ErrorCode


@api(1, 4, 12)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if req.session_id != 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                "session_id": 0, "responses": []}
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
            for ft in req.topics for fp in ft.partitions
        ],
    )
    results = iter(await ctx.broker.replicas.fetch_messages(params))
    topics = []
    for ft in req.topics:
        parts = []
        for fp in ft.partitions:
            r = next(results)
            out: dict[str, Any] = {
                "partition_index": fp.partition, "error_code": r.error,
                "high_watermark": r.high_watermark,
                "last_stable_offset": r.last_stable_offset,
                "log_start_offset": r.log_start_offset,
                "aborted_transactions": None if ctx.version < 4 else [
                    {"producer_id": pid, "first_offset": first}
                    for pid, first in r.aborted_transactions or ()],
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
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}
