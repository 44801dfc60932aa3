"""DescribeCluster (key 60), versions 0-2.

Cluster id, controller id and the live (unfenced) brokers; from v2 (KIP-1073) also
the fenced ones when the request includes them, each flagged `is_fenced`. v1's endpoint type must be
brokers (1); asking for controllers gets UNSUPPORTED_ENDPOINT_TYPE as on a
broker listener. Brokers are listed at their address for the request's listener;
the cluster's authorized operations are computed when asked.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import CLUSTER, CLUSTER_NAME, authorized_operations
from jocko_py.protocol.errors import ErrorCode


@api(60, 0, 2)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    error = ErrorCode.NONE
    if ctx.version >= 1 and req.endpoint_type != 1:
        error = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    image = broker.image
    with_fenced = ctx.version >= 2 and req.include_fenced_brokers
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": None if not error else "The endpoint type is not supported",
        "endpoint_type": 1,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.controller_id,
        "brokers": [
            {"broker_id": b.broker_id, "host": a[0], "port": a[1], "rack": b.rack,
             "is_fenced": b.fenced}
            for _, b in sorted(image.brokers.items())
            if (with_fenced or not b.fenced) and (a := ctx.address_of(b)) is not None
        ],
        "cluster_authorized_operations": authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
        if req.include_cluster_authorized_operations else -(2**31),
    }
