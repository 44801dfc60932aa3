"""DescribeQuorum (key 55), versions 0-2: the metadata quorum, as `kafka-metadata-quorum`
reads it.

One topic, `__cluster_metadata`, partition 0: the raft leader, its epoch and high
watermark, and each voter's and observer's log end offset with its last fetch and
last caught-up times (from the leader's view). Answered by the active controller; any
other broker forwards the request to it. A single node is a one-voter quorum on its
local metadata log: it is the leader, with its applied record count as the HW.
v2 adds the nodes (listeners of the voters); replica directory ids are zero.
"""

from __future__ import annotations

import time
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.controller_channel import is_forwarded
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.cluster.quorum import RaftQuorum
from jocko_py.protocol.errors import ErrorCode, KafkaError

METADATA_TOPIC = "__cluster_metadata"


def _replica(rid: int, leo: int, fetch: int, caught: int) -> dict[str, Any]:
    return {"replica_id": rid, "log_end_offset": leo, "last_fetch_timestamp": fetch,
            "last_caught_up_timestamp": caught}


def _answer(error: ErrorCode, partition: dict[str, Any] | None, nodes: list[dict[str, Any]],
            message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": error, "error_message": message,
        "topics": [] if partition is None else [
            {"topic_name": METADATA_TOPIC, "partitions": [partition]}],
        "nodes": nodes,
    }


@api(55, 0, 2)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    quorum = broker.quorum
    image = broker.image
    if not authorize_cluster(ctx, "DESCRIBE"):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, [])
    nodes = [{"node_id": b.broker_id, "listeners": [
        {"name": e.name, "host": e.host, "port": e.port} for e in b.endpoints]
        or [{"name": "PLAINTEXT", "host": b.host, "port": b.port}]}
        for _, b in sorted(image.brokers.items())] if ctx.version >= 2 else []
    if not isinstance(quorum, RaftQuorum):
        now = int(time.time() * 1000)
        n = image.records_applied
        part = {"partition_index": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "leader_id": broker.broker_id, "leader_epoch": 0, "high_watermark": n,
                "current_voters": [_replica(broker.broker_id, n, now, now)], "observers": []}
        return _answer(ErrorCode.NONE, part, nodes)
    if quorum.is_active_controller():
        core = quorum.node.core
        dq = core.describe_quorum(quorum.node.raft.now())
        # raft times are monotonic ms; clients expect wall-clock ms
        offset = int(time.time() * 1000) - quorum.node.raft.now()

        def wall(t: int) -> int:
            return t + offset if t >= 0 else -1

        part = {
            "partition_index": 0, "error_code": dq.error_code, "error_message": None,
            "leader_id": dq.leader_id, "leader_epoch": dq.leader_epoch,
            "high_watermark": dq.high_watermark,
            "current_voters": [_replica(r.replica_id, r.log_end_offset,
                                        wall(r.last_fetch_timestamp),
                                        wall(r.last_caught_up_timestamp))
                               for r in dq.current_voters],
            "observers": [_replica(r.replica_id, r.log_end_offset,
                                   wall(r.last_fetch_timestamp),
                                   wall(r.last_caught_up_timestamp))
                          for r in dq.observers],
        }
        return _answer(ErrorCode.NONE, part, nodes)
    if is_forwarded(ctx):
        return _answer(ErrorCode.NOT_CONTROLLER, None, [])
    body = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
    try:
        resp = await broker.controller_channel.forward(55, ctx.version, body,
                                           ok=lambda r: r.error_code != ErrorCode.NOT_CONTROLLER)
    except KafkaError as e:
        return _answer(e.code, None, [], e.message)
    return dict(resp)
