"""Fetch (key 1), versions 4-12.

Reads whole batches as stored (never re-encoded) from each partition's fetch
offset, up to the high watermark (read_uncommitted) or last stable offset
(read_committed; equal to the high watermark since transactions are not
supported), honouring `partition_max_bytes` and the response `max_bytes`; the
first partition with data returns at least one whole batch even past the limits,
as Kafka does. If fewer than `min_bytes` are available the request waits in the
fetch purgatory for new data up to `max_wait_ms`.

Fetch sessions (KIP-227) are not kept: every response is a full response with
session id 0, which clients treat as "sessions unavailable"; a request naming a
session gets FETCH_SESSION_ID_NOT_FOUND. Follower fetches (replica_id >= 0) are
served the same way until replication lands.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.protocol.errors import ErrorCode


def _read_all(ctx: RequestContext, req: Any) -> tuple[list[dict[str, Any]], int]:
    replicas = ctx.broker.replicas
    budget = req.max_bytes if ctx.version >= 3 else 2**31 - 1
    committed = req.isolation_level == 1
    total = 0
    topics = []
    for ft in req.topics:
        parts = []
        for fp in ft.partitions:
            out: dict[str, Any] = {
                "partition_index": fp.partition, "high_watermark": -1,
                "last_stable_offset": -1, "log_start_offset": -1,
                "aborted_transactions": None if ctx.version < 4 else [],
                "preferred_read_replica": -1, "records": None,
            }
            p = replicas.get(ft.topic, fp.partition)
            if p is None:
                out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif epoch_error := p.check_leader_epoch(fp.current_leader_epoch):
                out["error_code"] = epoch_error
            else:
                limit = max(0, min(fp.partition_max_bytes, budget - total))
                r = p.read(fp.fetch_offset, limit, committed_only=committed, min_one=total == 0)
                out["error_code"] = r.error
                out["high_watermark"] = r.high_watermark
                out["last_stable_offset"] = r.last_stable_offset
                out["log_start_offset"] = r.log_start_offset
                out["records"] = r.records if r.records is not None else b""
                total += len(r.records) if r.records is not None else 0
            parts.append(out)
        topics.append({"topic": ft.topic, "partitions": parts})
    return topics, total


@api(1, 4, 12)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if req.session_id != 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                "session_id": 0, "responses": []}
    topics, total = _read_all(ctx, req)
    wait = req.max_wait_ms / 1000
    if total < req.min_bytes and wait > 0 and not _has_errors(topics):
        keys = [(ft.topic, fp.partition) for ft in req.topics for fp in ft.partitions]
        deadline = time.monotonic() + wait
        waiters = ctx.broker.replicas.fetch_waiters
        while total < req.min_bytes:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not await waiters.wait_any(keys, left):
                break
            await asyncio.sleep(0)  # let a burst of produces land before re-reading
            topics, total = _read_all(ctx, req)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}


def _has_errors(topics: list[dict[str, Any]]) -> bool:
    return any(p["error_code"] for t in topics for p in t["partitions"])
