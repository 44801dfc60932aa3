"""FindCoordinator (key 10), versions 0-6.

The coordinator of a group is the leader of its `__consumer_offsets` partition
(any broker answers, from its metadata image). The first lookup of a group
coordinator creates `__consumer_offsets` (`offsets.topic.num.partitions`,
compacted, `offsets.topic.replication.factor` capped to the live brokers), as
Kafka does; a partition without a live leader gets COORDINATOR_NOT_AVAILABLE. v4+ carries a batch of keys and answers per key.
The coordinator of a transactional id (key type 1) is the leader of its
`__transaction_state` partition, created likewise on the first lookup
(`transaction.state.log.num.partitions`, `transaction.state.log.replication.factor`
capped to the live brokers); it needs DESCRIBE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Unknown key types get INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_group, authorize_transactional_id
from jocko_py.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("jocko_py.broker.handlers.find_coordinator")

GROUP_KEY = 0
TXN_KEY = 1


async def _lookup(ctx: RequestContext, key: str, key_type: int
                  ) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) of the coordinator of ``key``."""
    if key_type == TXN_KEY:
        return await _lookup_txn(ctx, key)
    if key_type != GROUP_KEY:
        return ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}", -1, "", -1
    if not authorize_group(ctx, "DESCRIBE", key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, -1, "", -1
    gc = ctx.broker.groups
    try:
        await gc.ensure_active()
    except KafkaError as e:
        log.warning("[group=%s] cannot create the offsets topic: %s", key, e.message)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, e.message, -1, "", -1
    if not gc.loaded:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    leader = gc.store.leader_of(key)
    b = ctx.broker.image.brokers.get(leader)
    addr = None if b is None or b.fenced else ctx.address_of(b)
    if b is None or addr is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    return ErrorCode.NONE, None, b.broker_id, addr[0], addr[1]


async def _lookup_txn(ctx: RequestContext, key: str
                      ) -> tuple[ErrorCode, str | None, int, str, int]:
    if not key:
        return ErrorCode.INVALID_REQUEST, "empty transactional id", -1, "", -1
    if not authorize_transactional_id(ctx, "DESCRIBE", key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1, "", -1
    tc = ctx.broker.transactions
    try:
        await tc.ensure_topic()
    except KafkaError as e:
        log.warning("[txn=%s] cannot create the transaction state topic: %s", key, e.message)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, e.message, -1, "", -1
    b = ctx.broker.image.brokers.get(tc.leader_of(key))
    # the coordinator's address on the listener this request came in on, as for groups
    addr = None if b is None or b.fenced else ctx.address_of(b)
    if b is None or addr is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    return ErrorCode.NONE, None, b.broker_id, addr[0], addr[1]


@api(10, 0, 6)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    key_type = req.key_type if ctx.version >= 1 else GROUP_KEY
    if ctx.version < 4:
        err, msg, node, host, port = await _lookup(ctx, req.key, key_type)
        ok = err == ErrorCode.NONE
        return {"throttle_time_ms": 0, "error_code": err,
                "error_message": msg if not ok else None,
                "node_id": node if ok else -1, "host": host if ok else "",
                "port": port if ok else -1}
    out = []
    for key in req.coordinator_keys:
        err, msg, node, host, port = await _lookup(ctx, key, key_type)
        ok = err == ErrorCode.NONE
        out.append({"key": key, "node_id": node if ok else -1, "host": host if ok else "",
                    "port": port if ok else -1, "error_code": err, "error_message": msg})
    return {"throttle_time_ms": 0, "coordinators": out}
