"""DeleteRecords (key 21), versions 0-2.

Raises each partition's log start offset to the requested offset (-1 means the
high watermark); whole segments below it are deleted. An offset beyond the
high watermark gets OFFSET_OUT_OF_RANGE. Returns the new low watermark.
Internal topics (`__consumer_offsets`) are refused with INVALID_TOPIC_EXCEPTION,
as Kafka does ("Cannot delete records of internal topic"): the group
coordinator's state would otherwise silently lose its durable copy.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import denied_topics
from jocko_py.broker.topic_names import INTERNAL_TOPICS
from jocko_py.commitlog.errors import KafkaStorageError, OffsetOutOfRangeError
from jocko_py.protocol.errors import ErrorCode


@api(21, 0, 2)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    replicas = ctx.broker.replicas
    topics = []
    denied = denied_topics(ctx, "DELETE", (t.name for t in req.topics))
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            out: dict[str, Any] = {"partition_index": rp.partition_index, "low_watermark": -1,
                                   "error_code": ErrorCode.NONE}
            p, err = replicas.get_partition_or_error(t.name, rp.partition_index)
            if t.name in denied:
                out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif t.name in INTERNAL_TOPICS:
                out["error_code"] = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif p is None:
                out["error_code"] = err
            else:
                offset = p.high_watermark if rp.offset == -1 else rp.offset
                if offset < 0 or offset > p.high_watermark:
                    out["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    try:
                        out["low_watermark"] = p.log.delete_records_before(offset)
                    except OffsetOutOfRangeError:
                        out["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                    except KafkaStorageError:
                        out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
            parts.append(out)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
