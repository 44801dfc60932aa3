"""ElectLeaders (43) v0-2, AlterPartitionReassignments (45) v0-1,
ListPartitionReassignments (46) v0: what `kafka-leader-election` and
`kafka-reassign-partitions` drive.

Decided by the active controller (see `cluster/controller.py` for the rules), through
the broker's one commit-or-forward path: any other broker forwards the request to it
and relays the answer.

- ElectLeaders: preferred (type 0): the first replica leads if it is alive and in
  the ISR (else PREFERRED_LEADER_NOT_AVAILABLE; ELECTION_NOT_NEEDED if it already
  leads). Unclean (type 1): only a leaderless partition gets a live replica.
  A null topic list means every partition.
- AlterPartitionReassignments: target replicas are added, caught up (they join the
  ISR through AlterPartition) and then the old ones dropped; null replicas cancel.
  Manual placement of new replicas on unknown brokers: INVALID_REPLICA_ASSIGNMENT.
  v1 (KIP-860) with `allow_replication_factor_change` false refuses a target whose
  length differs from the replica set the partition is headed for
  (INVALID_REPLICATION_FACTOR, Kafka's message), and echoes the flag.
- ListPartitionReassignments: partitions with adding or removing replicas.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.controller_channel import Forward, is_forwarded
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import MetadataImage, MetadataRecord
from jocko_py.protocol.errors import ErrorCode, KafkaError


def _relay(ctx: RequestContext, key: int, req: Any) -> Forward[dict[str, Any]]:
    """Forward the request as it came and relay the controller's answer."""
    return Forward(key, ctx.version, dict(req), lambda r: dict(r),
                   lambda r: r.error_code == ErrorCode.NOT_CONTROLLER)


@api(43, 0, 2)
async def elect_leaders(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    if not authorize_cluster(ctx, "ALTER"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "replica_election_results": []}
    unclean = ctx.version >= 1 and req.election_type == 1

    def decide(img: MetadataImage) -> ControllerResult[dict[str, Any]]:
        if req.topic_partitions is None:
            wanted = [(n, p) for n, t in sorted(img.topics.items()) for p in sorted(t.partitions)]
        else:
            wanted = [(tp.topic, p) for tp in req.topic_partitions for p in tp.partitions]
        results, records = broker.quorum.controller.elect_leaders(img, wanted, unclean)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, pid), c in results.items():
            code = ErrorCode.of(c)
            by_topic.setdefault(topic, []).append(
                {"partition_id": pid, "error_code": code,
                 "error_message": None if code == ErrorCode.NONE else code.name})
        out: dict[str, Any] = {"throttle_time_ms": 0, "replica_election_results": [
            {"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}
        if ctx.version >= 1:
            out["error_code"] = ErrorCode.NONE
        return ControllerResult(records, out)

    try:
        return await broker.controller_channel.submit(decide, _relay(ctx, 43, req),
                                          forwarded=is_forwarded(ctx))
    except KafkaError as e:
        return {"throttle_time_ms": 0, "error_code": e.code, "replica_election_results": []}


def _replication_factor_change(image: MetadataImage, topic: str, partition: int,
                               target: tuple[int, ...]) -> str | None:
    """Kafka's message when ``target`` changes the partition's replication factor; None
    when it does not, or when another check answers first (unknown topic or broker)."""
    t = image.topics.get(topic)
    p = t.partitions.get(partition) if t is not None else None
    if p is None or len(set(target)) != len(target) or \
            any(b not in image.brokers for b in target):
        return None
    if p.adding_replicas or p.removing_replicas:
        current = len((set(p.replicas) | set(p.adding_replicas)) - set(p.removing_replicas))
    else:
        current = len(p.replicas)
    if current == len(target):
        return None
    return f"The replication factor is changed from {current} to {len(target)}"


@api(45, 0, 1)
async def alter_partition_reassignments(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    allow_rf_change = ctx.version < 1 or bool(req.allow_replication_factor_change)
    if not authorize_cluster(ctx, "ALTER"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                "responses": [], "allow_replication_factor_change": allow_rf_change}

    def decide(img: MetadataImage) -> ControllerResult[dict[str, Any]]:
        # one decision for the whole request, on one image (Kafka's
        # ReplicationControlManager.alterPartitionReassignments)
        records: list[MetadataRecord] = []
        responses = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                target = tuple(p.replicas) if p.replicas is not None else None
                why = None if target is None or allow_rf_change else \
                    _replication_factor_change(img, t.name, p.partition_index, target)
                if why is not None:
                    parts.append({"partition_index": p.partition_index,
                                  "error_code": ErrorCode.INVALID_REPLICATION_FACTOR,
                                  "error_message": why})
                    continue
                c, recs = broker.quorum.controller.reassign(img, t.name, p.partition_index,
                                                            target)
                code = ErrorCode.of(c)
                if code == ErrorCode.NONE:
                    records.extend(recs)
                parts.append({"partition_index": p.partition_index, "error_code": code,
                              "error_message": None if code == ErrorCode.NONE else code.name})
            responses.append({"name": t.name, "partitions": parts})
        return ControllerResult(records, {
            "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": responses, "allow_replication_factor_change": allow_rf_change})

    try:
        return await broker.controller_channel.submit(decide, _relay(ctx, 45, req),
                                          forwarded=is_forwarded(ctx))
    except KafkaError as e:
        return {"throttle_time_ms": 0, "error_code": e.code, "error_message": None,
                "responses": [], "allow_replication_factor_change": allow_rf_change}


@api(46, 0, 0)
async def list_partition_reassignments(ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = ctx.broker.image
    if not authorize_cluster(ctx, "DESCRIBE"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                "topics": []}
    wanted: dict[str, set[int] | None] = {}
    if req.topics is None:
        wanted = {n: None for n in image.topics}
    else:
        wanted = {t.name: set(t.partition_indexes) for t in req.topics}
    topics = []
    for name, pids in sorted(wanted.items()):
        t = image.topics.get(name)
        if t is None:
            continue
        parts = [
            {"partition_index": pid, "replicas": list(p.replicas),
             "adding_replicas": list(p.adding_replicas),
             "removing_replicas": list(p.removing_replicas)}
            for pid, p in sorted(t.partitions.items())
            if (pids is None or pid in pids) and (p.adding_replicas or p.removing_replicas)
        ]
        if parts:
            topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "topics": topics}
