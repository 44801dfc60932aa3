"""DescribeClientQuotas (key 48), versions 0-1.

Client quotas are not implemented (no produce/fetch byte rate or request share is
ever enforced, and AlterClientQuotas is not served), so no quota is configured
anywhere: every description answers no entries. Served because Kafka's
`kafka-configs --describe --entity-type users` asks for quotas beside the SCRAM
credentials. Unknown match types get INVALID_REQUEST; the principal needs
DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.protocol.errors import ErrorCode


@api(48, 0, 1)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    error, message = ErrorCode.NONE, None
    if not authorize_cluster(ctx, "DESCRIBE_CONFIGS"):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif any(c.match_type not in (0, 1, 2) for c in req.components):
        error, message = ErrorCode.INVALID_REQUEST, "Unknown match type"
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message,
            "entries": [] if not error else None}
