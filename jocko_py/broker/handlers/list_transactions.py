"""ListTransactions (key 66), versions 0-2: the transactions this broker coordinates.

Every transactional id of the `__transaction_state` partitions this broker leads,
filtered by state name (names this broker does not know are returned in
UnknownStateFilters), by producer id and, from v1, by duration: only transactions
Ongoing for at least DurationFilter ms, and from v2 (KIP-1152) by a regular
expression the whole transactional id must match (null or empty: no filter; one
that does not compile: INVALID_REGULAR_EXPRESSION). COORDINATOR_LOAD_IN_PROGRESS while a
partition is being loaded. Admin clients send it to every broker and merge.
"""

from __future__ import annotations

import re
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_transactional_id
from jocko_py.broker.txn.state import TxnState
from jocko_py.protocol.errors import ErrorCode


@api(66, 0, 2)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    pattern: re.Pattern[str] | None = None
    if ctx.version >= 2 and req.transactional_id_pattern:
        try:
            pattern = re.compile(req.transactional_id_pattern)
        except re.error:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REGULAR_EXPRESSION,
                    "unknown_state_filters": [], "transaction_states": []}
    known = {s.kafka_name for s in TxnState}
    wanted = set(req.state_filters or [])
    unknown = sorted(wanted - known)
    err, txns = ctx.broker.transactions.list_transactions(
        wanted & known if wanted else None, set(req.producer_id_filters or []) or None,
        req.duration_filter if ctx.version >= 1 else -1)
    if wanted and not wanted & known:
        txns = []  # only unknown states asked for: nothing can match
    return {"throttle_time_ms": 0, "error_code": err, "unknown_state_filters": unknown,
            "transaction_states": [
                {"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                 "transaction_state": m.state.kafka_name} for m in txns
                if (pattern is None or pattern.fullmatch(m.transactional_id))
                and authorize_transactional_id(ctx, "DESCRIBE", m.transactional_id)]}
