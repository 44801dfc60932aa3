"""WriteTxnMarkers (key 27), versions 1-2 (v0 left Kafka 4.0): a transaction coordinator's
markers.

Sent by the coordinator of a transaction to the leaders of its partitions (a
coordinator writes the markers of partitions it leads itself, without a request).
Each partition led here gets one control batch (COMMIT or ABORT) with the producer
id and epoch and the coordinator epoch, appended with acks=all; a marker from an
older producer epoch gets INVALID_PRODUCER_EPOCH and one from an older coordinator
epoch TRANSACTION_COORDINATOR_FENCED. v2 (KIP-1228) names each marker's transaction
version: the marker of a transaction version 2 transaction must carry an epoch above
the producer's epoch on the partition (its batches', as the epoch is bumped at every
transaction's end), else INVALID_PRODUCER_EPOCH, unless it repeats the marker that set
it. Partitions not led here get
NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION). A commit marker on
`__consumer_offsets` makes the group coordinator apply the transaction's offsets.
Only brokers of the cluster may send it (CLUSTER_ACTION, see `security/authz.py`:
never an ordinary client, even without an authorizer; with an authorizer, a principal
allowed CLUSTER_ACTION too, as Kafka's admin `abortTransaction` needs); anyone else
gets CLUSTER_AUTHORIZATION_FAILED for every partition and nothing is written.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.broker.txn.coordinator import write_markers
from jocko_py.protocol.errors import ErrorCode


@api(27, 1, 2)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, "CLUSTER_ACTION"):  # brokers only
        return {"markers": [{"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                for p in t.partition_indexes]} for t in m.topics]} for m in req.markers]}
    out = []
    for m in req.markers:
        tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        res = await write_markers(ctx.broker, m.producer_id, m.producer_epoch,
                                  m.transaction_result, m.coordinator_epoch, tps,
                                  m.transaction_version if ctx.version >= 2 else 0)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p) in tps:
            by_topic.setdefault(t, []).append({"partition_index": p, "error_code": res[(t, p)]})
        out.append({"producer_id": m.producer_id, "topics": [
            {"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"markers": out}
