"""Fetch (key 1), versions 4-18, for consumers and for follower replicas.

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
gets FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer). Only a broker of
the cluster may fetch as a follower (CLUSTER_ACTION, see `security/authz.py`: never
an ordinary client, even without an authorizer); anyone else setting a replica id gets
TOPIC_AUTHORIZATION_FAILED for every partition, as Kafka answers, and nothing moves.

Fetch sessions (KIP-227, v7+; rules in `broker/fetch_session.py`): a full fetch with
epoch 0 opens a session (its id in the response) when
`max.incremental.fetch.session.cache.slots` allows; incremental fetches name only the
partitions that changed and forgotten ones, and get back only the partitions with news;
an unknown session or a wrong epoch gets FETCH_SESSION_ID_NOT_FOUND or
INVALID_FETCH_SESSION_EPOCH at the top level. Epoch -1 is sessionless (jocko-py's
replica fetchers). The handler only translates: `ReplicaManager.fetch_messages`
decides.

Versions: v13+ name topics by id (an unknown id gets UNKNOWN_TOPIC_ID; a session keeps
the naming it was opened with, else FETCH_SESSION_TOPIC_ID_ERROR); v14 adds nothing
without tiered storage; v15+ carry the replica id in `replica_state` (its broker
epoch is not checked: jocko-py's followers fetch at v12 and are told apart by their
registered incarnation); v16+ answer NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH with
the current leader and its endpoint (KIP-951); v17's replica directory id (JBOD
followers) is ignored; v18 (KIP-1166): a follower's fetch carries the high watermark it
knows per partition, and one the leader's high watermark is past (or -1, unknown) is
answered at once rather than waiting for data; a waiting one is answered when the high
watermark moves past it (Long.MAX_VALUE: the follower does not say; consumers' is ignored).

Zero-copy: on a connection without TLS (`ctx.zero_copy`), a partition's read of 64 KiB
or more is a region of its segment file, not bytes; the connection sends it with
sendfile (see connection.py), so the records never pass through the broker's memory.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.leader_discovery import LEADER_HINT_ERRORS, current_leader, node_endpoints
from jocko_py.broker.replica_fetcher import replica_incarnation
from jocko_py.broker.replica_manager import FetchParams, FetchPartition, ReadResult
from jocko_py.broker.security.authz import authorize_cluster, denied_topics
from jocko_py.protocol.errors import ErrorCode

ZERO = uuid.UUID(int=0)
HW_NOT_SENT = 2**63 - 1  # v18: the follower does not track it (the field's default)


@api(1, 4, 18)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.version
    sessions = ctx.broker.fetch_sessions
    image = ctx.broker.image
    by_id = v >= 13
    replica_id = req.replica_state.replica_id if v >= 15 else req.replica_id
    requested: list[FetchPartition] = []
    unknown: list[tuple[uuid.UUID, list[int]]] = []  # topic ids not in the metadata
    follower_hws: dict[tuple[str, int], int] = {}  # v18 (KIP-1166)
    for ft in req.topics:
        tid = None
        if by_id:
            t = image.topic_by_id(ft.topic_id)
            if t is None:
                unknown.append((ft.topic_id, [fp.partition for fp in ft.partitions]))
                continue
            name, tid = t.name, ft.topic_id
        else:
            name = ft.topic
        for fp in ft.partitions:
            if v >= 18 and replica_id >= 0 and fp.high_watermark != HW_NOT_SENT:
                follower_hws[(name, fp.partition)] = fp.high_watermark
            requested.append(FetchPartition(
                name, fp.partition, fp.fetch_offset, fp.current_leader_epoch,
                fp.last_fetched_epoch if v >= 12 else -1, fp.partition_max_bytes, tid))
    if v >= 7:
        forgotten = []
        for ft in req.forgotten_topics_data:
            if by_id:
                t = image.topic_by_id(ft.topic_id)
                if t is None:
                    continue
                forgotten += [(t.name, p) for p in ft.partitions]
            else:
                forgotten += [(ft.topic, p) for p in ft.partitions]
        context = sessions.new_context(req.session_id, req.session_epoch, replica_id >= 0,
                                       requested, forgotten, _now_ms(), uses_topic_ids=by_id)
    else:
        context = sessions.new_context(0, -1, replica_id >= 0, requested, (), _now_ms())
    if context.error:
        return {"throttle_time_ms": 0, "error_code": context.error, "session_id": 0,
                "responses": []}
    to_read = [fp if isinstance(fp, FetchPartition) else
               FetchPartition(fp.topic, fp.partition, fp.fetch_offset, fp.current_leader_epoch,
                              fp.last_fetched_epoch, fp.max_bytes,
                              getattr(fp, "topic_id", None))
               for fp in context.to_read]
    # a session's partition whose topic was deleted (or re-created under a new id) since
    # the request that named it: UNKNOWN_TOPIC_ID, never the new topic's records
    gone = {i for i, fp in enumerate(to_read) if fp.topic_id is not None and (
        (t := image.topics.get(fp.topic)) is None or t.topic_id != fp.topic_id)}
    # followers need CLUSTER_ACTION, consumers READ on each topic
    names = {fp.topic for fp in to_read}
    denied_names = (set() if authorize_cluster(ctx, "CLUSTER_ACTION") else names) \
        if replica_id >= 0 else denied_topics(ctx, "READ", names)
    denied = {i for i, fp in enumerate(to_read) if fp.topic in denied_names} - gone
    params = FetchParams(
        replica_incarnation=replica_incarnation(ctx.header.client_id),
        replica_id=replica_id, max_wait_ms=0 if gone else req.max_wait_ms,
        min_bytes=req.min_bytes,
        max_bytes=req.max_bytes if v >= 3 else 2**31 - 1,
        isolation_level=req.isolation_level,
        partitions=[fp for i, fp in enumerate(to_read) if i not in gone and i not in denied],
        replica_high_watermarks=follower_hws,
        zero_copy=ctx.zero_copy,
    )
    read = iter(await ctx.broker.replicas.fetch_messages(params))
    results = [ReadResult(ErrorCode.UNKNOWN_TOPIC_ID) if i in gone
               else ReadResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED) if i in denied
               else next(read) for i in range(len(to_read))]
    session_id, answer = context.respond(results, _now_ms())
    image = ctx.broker.image  # leaders may have moved while the fetch waited
    topics: list[dict[str, Any]] = []
    leaders: list[int] = []
    for i in answer:
        fp, r = to_read[i], results[i]
        out: dict[str, Any] = {
            "partition_index": fp.partition, "error_code": r.error,
            "high_watermark": r.high_watermark,
            "last_stable_offset": r.last_stable_offset,
            "log_start_offset": r.log_start_offset,
            "aborted_transactions": None if v < 4 else [
                {"producer_id": pid, "first_offset": first}
                for pid, first in r.aborted_transactions or ()],
            "preferred_read_replica": -1,
            # never null, errors included: Kafka sends empty records, and librdkafka
            # rejects a null record set as a parse failure of the whole response
            "records": r.records if r.records is not None else b"",
        }
        if r.diverging_epoch is not None and v >= 12:
            out["diverging_epoch"] = {"epoch": r.diverging_epoch[0],
                                      "end_offset": r.diverging_epoch[1]}
        if v >= 16 and r.error in LEADER_HINT_ERRORS:
            out["current_leader"] = current_leader(image, fp.topic, fp.partition)
            leaders.append(out["current_leader"]["leader_id"])
        key: dict[str, Any] = {"topic_id": fp.topic_id or ZERO} if by_id else {"topic": fp.topic}
        # consecutive partitions of one topic share an entry, as Kafka builds it
        if topics and all(topics[-1][k] == val for k, val in key.items()):
            topics[-1]["partitions"].append(out)
        else:
            topics.append({**key, "partitions": [out]})
    for tid, parts in unknown:
        topics.append({"topic_id": tid, "partitions": [
            {"partition_index": p, "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
             "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
             "aborted_transactions": [], "preferred_read_replica": -1, "records": b""}
            for p in parts]})
    throttle = 0
    if replica_id < 0 and ctx.broker.security.quotas_set():
        throttle = ctx.broker.security.throttle(
            ctx.session, ctx.header.client_id, "consumer_byte_rate",
            sum(len(p["records"]) for t in topics for p in t["partitions"]))
    resp: dict[str, Any] = {"throttle_time_ms": throttle, "error_code": ErrorCode.NONE,
                            "session_id": session_id, "responses": topics}
    if leaders:
        resp["node_endpoints"] = node_endpoints(image, leaders)
    return resp


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
