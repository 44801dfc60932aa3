"""FindCoordinator (key 10), versions 0-6.

Single node: this broker coordinates every group. The first lookup of a group
coordinator creates `__consumer_offsets` (`offsets.topic.num.partitions`,
compacted), as Kafka does. v4+ carries a batch of keys and answers per key.
Transaction coordinators (key type 1) are not available: transactions are not
supported, so those keys get COORDINATOR_NOT_AVAILABLE. Unknown key types get
INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.group import coordinator
from jocko_py.broker.topics import TopicError
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.handlers.find_coordinator")

GROUP_KEY = 0
TXN_KEY = 1


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type == TXN_KEY:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not supported"
    if key_type != GROUP_KEY:
        return ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}"
    gc = coordinator(ctx.broker)
    try:
        gc.ensure_active()
    except TopicError as e:
        log.warning("[group=%s] cannot create the offsets topic: %s", key, e.message)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, e.message
    if not gc.loaded:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    return ErrorCode.NONE, None


@api(10, 0, 6)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    b = ctx.broker
    host, port, node = b.config.advertised_host, b.config.advertised_port, b.broker_id
    key_type = req.key_type if ctx.version >= 1 else GROUP_KEY
    if ctx.version < 4:
        err, msg = _lookup(ctx, req.key, key_type)
        ok = err == ErrorCode.NONE
        return {"throttle_time_ms": 0, "error_code": err,
                "error_message": msg if not ok else None,
                "node_id": node if ok else -1, "host": host if ok else "",
                "port": port if ok else -1}
    out = []
    for key in req.coordinator_keys:
        err, msg = _lookup(ctx, key, key_type)
        ok = err == ErrorCode.NONE
        out.append({"key": key, "node_id": node if ok else -1, "host": host if ok else "",
                    "port": port if ok else -1, "error_code": err, "error_message": msg})
    return {"throttle_time_ms": 0, "coordinators": out}
