"""ListOffsets (key 2), versions 1-11.

Timestamps: -2 earliest (log start offset), -1 latest (high watermark, or the
last stable offset for read_committed), -3 the record with the largest
timestamp (v7+), -4 earliest local (v8+: the log start offset, all of the log being
local), -5 latest tiered (v9+) and -6 earliest pending upload (v11+, KIP-1023): offset
-1 and leader epoch -1, as Kafka answers without tiered storage,
otherwise the first offset whose timestamp is >= the given one (offset -1 /
timestamp -1 when there is none). The leader epoch is reported from v4. v10's
`timeout_ms` bounds remote-storage lookups, which do not exist here: nothing waits.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import denied_topics
from jocko_py.protocol.errors import ErrorCode

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -4, -5, -6


@api(2, 1, 11)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    replicas = ctx.broker.replicas
    topics = []
    denied = denied_topics(ctx, "DESCRIBE", (t.name for t in req.topics))
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            out: dict[str, Any] = {"partition_index": rp.partition_index, "error_code": ErrorCode.NONE,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1}
            p, err = replicas.get_partition_or_error(t.name, rp.partition_index)
            if t.name in denied:
                out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif p is None:
                out["error_code"] = err
            elif epoch_error := p.check_leader_epoch(rp.current_leader_epoch):
                out["error_code"] = epoch_error
            else:
                ts = rp.timestamp
                if ctx.version >= 4:  # LeaderEpoch is v4+ and not ignorable
                    out["leader_epoch"] = p.leader_epoch
                # read_committed readers see up to the LSO (v2+ has the isolation level)
                upper = p.last_stable_offset if ctx.version >= 2 and req.isolation_level == 1 \
                    else p.high_watermark
                if ts == LATEST:
                    out["offset"] = upper
                elif ts == EARLIEST or (ts == EARLIEST_LOCAL and ctx.version >= 8):
                    out["offset"] = p.log.log_start_offset
                elif (ts == LATEST_TIERED and ctx.version >= 9) or \
                        (ts == EARLIEST_PENDING_UPLOAD and ctx.version >= 11):
                    out["leader_epoch"] = -1  # no tiered storage: nothing uploaded
                elif ts == MAX_TIMESTAMP and ctx.version < 7:
                    out["error_code"] = ErrorCode.UNSUPPORTED_VERSION  # KIP-734: v7+
                elif ts == MAX_TIMESTAMP:
                    found = p.log.latest_timestamp_offset()
                    if found is not None:
                        out["timestamp"], out["offset"] = found[1], found[0]
                elif ts < 0:
                    out["error_code"] = ErrorCode.UNSUPPORTED_VERSION
                else:
                    found = p.log.offset_for_timestamp(ts)
                    if found is not None and found[0] < upper:
                        out["offset"], out["timestamp"] = found
            parts.append(out)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
