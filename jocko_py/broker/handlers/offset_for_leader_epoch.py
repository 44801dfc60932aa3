"""OffsetForLeaderEpoch (key 23), versions 2-4.

For each partition (which this broker must lead, else NOT_LEADER_OR_FOLLOWER): the largest
leader epoch <= the requested one and the offset where it ended (the start of the
next epoch in the leader-epoch cache, or the log end for the latest), as Kafka's
`LeaderEpochFileCache.endOffsetFor`. A requested epoch below the first cached one
gets UNDEFINED (-1, -1). `current_leader_epoch` is checked as in Fetch
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). Consumers (KIP-320) use it to detect
log truncation after a leader change; followers here use diverging epochs in Fetch
instead. A request with a replica id (>= 0) is a follower's: only brokers of the
cluster may send it (CLUSTER_ACTION, see `security/authz.py`), anyone else gets
CLUSTER_AUTHORIZATION_FAILED for every partition, as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_cluster, denied_topics
from jocko_py.protocol.errors import ErrorCode


@api(23, 2, 4)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    replicas = ctx.broker.replicas
    topics = []
    names = [t.topic for t in req.topics]
    replica = req.replica_id >= 0
    refused = replica and not authorize_cluster(ctx, "CLUSTER_ACTION")
    denied = set() if replica else denied_topics(ctx, "DESCRIBE", names)
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            out: dict[str, Any] = {"error_code": ErrorCode.NONE, "partition": rp.partition,
                                   "leader_epoch": -1, "end_offset": -1}
            p, err = replicas.get_partition_or_error(t.topic, rp.partition)
            if refused:
                out["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            elif t.topic in denied:
                out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif p is None:
                out["error_code"] = err
            elif epoch_error := p.check_leader_epoch(rp.current_leader_epoch):
                out["error_code"] = epoch_error
            else:
                epoch, end = p.log.leader_epochs.end_offset_for(
                    rp.leader_epoch, p.log.log_end_offset)
                out["leader_epoch"], out["end_offset"] = epoch, end
            parts.append(out)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
