"""Produce (key 0), versions 3-11 served; 0-2 advertised and rejected as Kafka 4 does.

Each partition's records blob must be exactly one magic-2 batch with a valid
CRC-32C (else CORRUPT_MESSAGE / INVALID_RECORD); idempotent batches are checked
against the partition's producer state (duplicates get their original offset).
acks=0 sends no response; acks=1 answers after the local append; acks=all
also waits in the produce purgatory until the high watermark covers the batch
(immediately on one node), failing with NOT_ENOUGH_REPLICAS when the ISR is
below `min.insync.replicas`. Transactional produce is not supported
(INVALID_TXN_STATE). Internal topics cannot be written by clients.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from jocko_py.broker.api import NO_RESPONSE, NoResponse, RequestContext, api
from jocko_py.broker.replica_manager import AppendResult
from jocko_py.broker.topics import INTERNAL_TOPICS, TopicError, validate_topic_name
from jocko_py.protocol.errors import ErrorCode, ProtocolError


def _partition_response(index: int, r: AppendResult) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": r.error,
        "base_offset": r.base_offset,
        "log_append_time_ms": r.log_append_time,
        "log_start_offset": r.log_start_offset,
        "record_errors": [],
        "error_message": r.message if r.error else None,
    }


@api(0, 3, 11, advertise_min=0)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any] | NoResponse:
    broker = ctx.broker
    replicas = broker.replicas
    acks = req.acks
    results: list[dict[str, Any]] = []
    waits: list[tuple[Any, int, dict[str, Any]]] = []
    flushes: list[tuple[asyncio.Future[None], dict[str, Any]]] = []
    for td in req.topic_data:
        name = td.name
        presps = []
        for pd in td.partition_data:
            if ctx.version < 3:
                r = AppendResult(ErrorCode.UNSUPPORTED_VERSION,
                                 message="Produce v0-2 are not supported")
            elif acks not in (-1, 0, 1):
                r = AppendResult(ErrorCode.INVALID_REQUIRED_ACKS)
            else:
                r = _append(ctx, name, pd.index, pd.records, acks)
            resp = _partition_response(pd.index, r)
            presps.append(resp)
            if r.error == ErrorCode.NONE and acks != 0:
                p = replicas.get(name, pd.index)
                barrier = replicas.flush_barrier(p) if p is not None else None
                if barrier is not None:
                    flushes.append((barrier, resp))
            if acks == -1 and r.error == ErrorCode.NONE and r.last_offset >= 0:
                p = replicas.get(name, pd.index)
                if p is not None and p.high_watermark <= r.last_offset:
                    waits.append((p, r.last_offset, resp))
        results.append({"name": name, "partition_responses": presps})
    for barrier, resp in flushes:
        try:
            await barrier
        except Exception:
            resp["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
    if waits:
        deadline = time.monotonic() + req.timeout_ms / 1000
        for p, last, resp in waits:
            while p.high_watermark <= last:
                left = deadline - time.monotonic()
                if left <= 0 or not await replicas.produce_waiters.wait_any(
                        [(p.topic, p.partition)], left):
                    if p.high_watermark <= last:
                        resp["error_code"] = ErrorCode.REQUEST_TIMED_OUT
                    break
    if acks == 0:
        failed = [(t["name"], p["index"], p["error_code"]) for t in results
                  for p in t["partition_responses"] if p["error_code"]]
        if failed:
            # no response can carry the error, so the client must learn it from the
            # closed connection (as Kafka does)
            raise ProtocolError(f"acks=0 produce failed {failed}; closing the connection")
        return NO_RESPONSE
    return {"responses": results, "throttle_time_ms": 0}


def _append(ctx: RequestContext, topic: str, index: int, data: Any, acks: int) -> AppendResult:
    broker = ctx.broker
    p = broker.replicas.get(topic, index)
    if p is None:
        try:
            validate_topic_name(topic)
        except TopicError as e:
            return AppendResult(e.code, message=e.message)
    if topic in INTERNAL_TOPICS:
        return AppendResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                            message=f"Cannot append to internal topic {topic}")
    if p is None:
        return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            message="This server does not host this topic-partition.")
    if data is None:
        return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="null records")
    cfg = p.log.config
    if acks == -1 and len(p.isr) < cfg.min_insync_replicas:
        return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS)
    r = p.append(data, cfg.max_message_bytes)
    if r.error == ErrorCode.NONE:
        broker.replicas.notify_append(p)
    return r
