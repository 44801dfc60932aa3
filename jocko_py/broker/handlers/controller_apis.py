"""Broker-to-controller APIs, served by the active controller's broker, to brokers only.

- AlterPartition (56) v2-3: a partition leader asks to change the ISR. The requesting
  broker's epoch must be its registration's (else STALE_BROKER_EPOCH, as Kafka's
  controller checks it). Accepted only
  from the current leader with the current leader epoch (else FENCED_LEADER_EPOCH) and
  partition epoch (else INVALID_UPDATE_VERSION), with an ISR of unfenced replicas
  containing the leader (INELIGIBLE_REPLICA / INVALID_REQUEST); v3's
  NewIsrWithEpochs (KIP-903) also refuses a member whose broker epoch is no longer its
  registration's (INELIGIBLE_REPLICA); the answer carries the partition as committed. Not the controller: NOT_CONTROLLER.
- BrokerHeartbeat (63) v0-1: a broker's liveness and applied metadata offset; the
  controller fences a broker whose heartbeats lapse for `broker.session.timeout.ms` and
  unfences one only once it has caught up with the metadata log. A registered broker's
  heartbeat must carry its registration's epoch (else STALE_BROKER_EPOCH, and it is
  not counted); one not registered yet is counted (here the controller registers the
  brokers that gossip and heartbeats show alive).
- AllocateProducerIds (67) v0: a block of producer ids for a broker with its current
  broker epoch (else STALE_BROKER_EPOCH), valid once its record is committed.

Kafka serves these on its controller listener only. Here the controller runs inside a
broker, so they arrive on the broker's listeners, but they are served only to brokers
of the cluster (connections authenticated with JOCKO-CLUSTER, see
`security/cluster_auth.py`; or a principal the configured authorizer allows
CLUSTER_ACTION, Kafka's rule): they are not advertised in ApiVersions to anyone else,
and a connection that is not a broker's and sends one is closed (`broker_only` in
the API registry), as Kafka closes a connection that sends an API its listener does
not enable. The CLUSTER_AUTHORIZATION_FAILED answers below are the second line.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.cluster.quorum import RaftQuorum
from jocko_py.protocol.errors import ErrorCode


@api(56, 2, 3, broker_only=True)
async def alter_partition(ctx: RequestContext, req: Any) -> dict[str, Any]:
    channel = ctx.broker.controller_channel
    if not authorize_cluster(ctx, "CLUSTER_ACTION"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "topics": []}
    if not channel.quorum.is_active_controller():
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
    b = ctx.broker.image.brokers.get(req.broker_id)
    if b is None or b.broker_epoch != req.broker_epoch:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code = await channel.alter_partition_local(
                req.broker_id, t.topic_id, p.partition_index, p.leader_epoch,
                p.partition_epoch, *_isr_and_epochs(ctx.version, p), forwarded=True)
            if code == ErrorCode.NOT_CONTROLLER:
                return {"throttle_time_ms": 0, "error_code": code, "topics": []}
            ti = ctx.broker.image.topic_by_id(t.topic_id)
            cur = None if ti is None else ti.partitions.get(p.partition_index)
            parts.append({
                "partition_index": p.partition_index, "error_code": code,
                "leader_id": cur.leader if cur else -1,
                "leader_epoch": cur.leader_epoch if cur else -1,
                "isr": list(cur.isr) if cur else [], "leader_recovery_state": 0,
                "partition_epoch": cur.partition_epoch if cur else -1,
            })
        out.append({"topic_id": t.topic_id, "partitions": parts})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "topics": out}


@api(63, 0, 1, broker_only=True)
async def broker_heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
    """BrokerHeartbeat: liveness and metadata progress of a broker (see app.py)."""
    quorum = ctx.broker.quorum
    if not authorize_cluster(ctx, "CLUSTER_ACTION"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "is_caught_up": False, "is_fenced": True, "should_shut_down": False}
    if not isinstance(quorum, RaftQuorum) or not quorum.is_active_controller():
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "is_caught_up": False, "is_fenced": True, "should_shut_down": False}
    b = ctx.broker.image.brokers.get(req.broker_id)
    if b is not None and b.broker_epoch != req.broker_epoch:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.STALE_BROKER_EPOCH,
                "is_caught_up": False, "is_fenced": True, "should_shut_down": False}
    caught_up, fenced = quorum.node.record_heartbeat(req.broker_id, req.current_metadata_offset)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "is_caught_up": caught_up,
            "is_fenced": fenced, "should_shut_down": False}


@api(67, 0, 0, broker_only=True)
async def allocate_producer_ids(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, "CLUSTER_ACTION"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "producer_id_start": -1,
                "producer_id_len": 0}
    code, start, count = await ctx.broker.controller_channel.allocate_producer_block(
        req.broker_id, req.broker_epoch, forwarded=True)
    return {"throttle_time_ms": 0, "error_code": code,
            "producer_id_start": start if not code else -1,
            "producer_id_len": count if not code else 0}


def _isr_and_epochs(version: int, p: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if version >= 3:
        members = list(p.new_isr_with_epochs)
        return tuple(m.broker_id for m in members), tuple(m.broker_epoch for m in members)
    return tuple(p.new_isr), ()
