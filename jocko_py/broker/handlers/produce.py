"""Produce (key 0), versions 3-13 served; 0-2 advertised (KAFKA-18659), a request of them
closes the connection, as Kafka 4 does.

Each partition's records blob must be exactly one magic-2 batch with a valid
CRC-32C (else CORRUPT_MESSAGE / INVALID_RECORD); idempotent batches are checked
against the partition's producer state (duplicates get their original offset).
acks=0 sends no response; acks=1 answers after the leader's append; acks=all
also waits until the high watermark covers the batch (the in-sync followers
fetched it), failing with NOT_ENOUGH_REPLICAS when the ISR is below
`min.insync.replicas` before the append and NOT_ENOUGH_REPLICAS_AFTER_APPEND when
it shrank meanwhile. A partition this broker does not lead gets
NOT_LEADER_OR_FOLLOWER, with the current leader and its endpoint from v10 (KIP-951,
`leader_discovery.py`). The handler only translates: `ReplicaManager.append_records`
decides. Transactional batches are appended like idempotent ones (the partition's
producer state opens the producer's transaction; a plain batch inside it gets
INVALID_TXN_STATE). The first transactional batch of a transaction on a partition is
verified with the transaction coordinator of the request's transactional id (KIP-890
part 1): a partition not in the producer's ongoing transaction gets INVALID_TXN_STATE
(TRANSACTION_ABORTABLE from v11, as Kafka 4.x),
a coordinator not ready NOT_ENOUGH_REPLICAS (retriable for every client). A request
with transactional batches needs WRITE on its transactional id (Kafka's
handleProduceRequest): without it, or without a transactional id, every partition gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Internal topics cannot be written by clients.

v12 (KIP-890 part 2), while `transaction.version` 2 is finalized: the first
transactional batch of a transaction on a partition adds the partition to the
transaction itself (the leader asks the coordinator, AddPartitionsToTxn v5 as a
broker) instead of being verified; the producer sent no AddPartitionsToTxn. A batch of
an epoch the coordinator has moved past is fenced (INVALID_PRODUCER_EPOCH), so a
delayed produce of an ended transaction never lands in the next one. Below
transaction.version 2, v12 means v11 (Kafka 4.x clients check the finalized level
before relying on it). v13 names topics by id (KIP-516): an unknown id gets
UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import NO_RESPONSE, NoResponse, RequestContext, api
from jocko_py.broker.features import txn_v2
from jocko_py.broker.leader_discovery import LEADER_HINT_ERRORS, current_leader, node_endpoints
from jocko_py.broker.partition import AppendResult
from jocko_py.broker.security.authz import authorize_topic, authorize_transactional_id
from jocko_py.broker.topic_names import INTERNAL_TOPICS, validate_topic_name
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode, KafkaError, ProtocolError


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


@api(0, 3, 13, advertise_min=0)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any] | NoResponse:
    replicas = ctx.broker.replicas
    acks = req.acks
    image = ctx.broker.image
    by_id = ctx.version >= 13
    # (topic, topic id, partition) -> result; entries to append keep their position
    slots: list[tuple[str, uuid.UUID | None, list[tuple[int, AppendResult | None]]]] = []
    entries: list[tuple[str, int, Any]] = []
    denied = _transactional_denied(ctx, req)
    for td in req.topic_data:
        tid: uuid.UUID | None = None
        unknown: AppendResult | None = None
        if by_id:
            tid = td.topic_id
            timg = image.topic_by_id(tid)
            name = timg.name if timg is not None else ""
            if timg is None:
                unknown = AppendResult(ErrorCode.UNKNOWN_TOPIC_ID)
        else:
            name = td.name
        parts: list[tuple[int, AppendResult | None]] = []
        for pd in td.partition_data:
            r = denied or unknown or _precheck(ctx, name, pd.records, acks)
            if r is None:
                entries.append((name, pd.index, pd.records))
            parts.append((pd.index, r))
        slots.append((name, tid, parts))
    add = ctx.version >= 12 and txn_v2(image.features)
    appended = iter(await replicas.append_records(entries, acks, req.timeout_ms,
                                                  transactional_id=req.transactional_id,
                                                  abortable_supported=ctx.version >= 11,
                                                  add_partitions=add))
    results: list[dict[str, Any]] = []
    for name, tid, parts in slots:
        presps = [_partition_response(idx, r if r is not None else next(appended))
                  for idx, r in parts]
        results.append({"topic_id": tid, "name": name, "partition_responses": presps}
                       if by_id else {"name": name, "partition_responses": presps})
    if acks == 0:
        failed = [(t["name"], p["index"], p["error_code"]) for t in results
                  for p in t["partition_responses"] if p["error_code"]]
        if failed:
            # no response can carry the error, so the client must learn it from the
            # closed connection (as Kafka does)
            raise ProtocolError(f"acks=0 produce failed {failed}; closing the connection")
        return NO_RESPONSE
    throttle = ctx.broker.security.throttle(
        ctx.session, ctx.header.client_id, "producer_byte_rate",
        sum(len(e[2]) for e in entries)) if ctx.broker.security.quotas_set() else 0
    out: dict[str, Any] = {"responses": results, "throttle_time_ms": throttle}
    if ctx.version >= 10:
        leaders = []
        for t in results:
            for p in t["partition_responses"]:
                if p["error_code"] in LEADER_HINT_ERRORS:
                    p["current_leader"] = current_leader(image, t["name"], p["index"])
                    leaders.append(p["current_leader"]["leader_id"])
        if leaders:
            out["node_endpoints"] = node_endpoints(image, leaders)
    return out


def _transactional_denied(ctx: RequestContext, req: Any) -> AppendResult | None:
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a request carrying transactional batches
    whose principal may not WRITE its transactional id (or that names none). A broker of
    the cluster (JOCKO-CLUSTER) or an in-process caller is not checked, as everywhere
    else (`security/authz.authorize`)."""
    s = ctx.session
    if ctx.broker.security.authorizer is None or s is None or s.cluster_broker_id is not None:
        return None
    for td in req.topic_data:
        for pd in td.partition_data:
            data = pd.records
            # a batch too short for a header is refused later, per partition
            if data is None or len(data) < rb.HEADER_SIZE:
                continue
            if rb.parse_header(memoryview(data)).is_transactional:
                tid = req.transactional_id
                if tid is None or not authorize_transactional_id(ctx, "WRITE", tid):
                    return AppendResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                return None
    return None


def _precheck(ctx: RequestContext, topic: str, data: Any, acks: int) -> AppendResult | None:
    """Request-level checks; None when the records go to the replica manager."""
    if acks not in (-1, 0, 1):
        return AppendResult(ErrorCode.INVALID_REQUIRED_ACKS)
    if not authorize_topic(ctx, "WRITE", topic):
        return AppendResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if ctx.broker.replicas.get(topic, 0) is None and topic not in ctx.broker.image.topics:
        try:
            validate_topic_name(topic)
        except KafkaError as e:
            return AppendResult(e.code, message=e.message)
    if topic in INTERNAL_TOPICS:
        return AppendResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                            message=f"Cannot append to internal topic {topic}")
    if data is None:
        return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="null records")
    return None
