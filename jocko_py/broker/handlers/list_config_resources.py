"""ListConfigResources (key 74, ListClientMetricsResources before KIP-1142), versions 0-1.

v0 lists the client-metrics resources (type 16); v1 the resources of the types asked
(none: every type): topics (2, every topic, internal ones too), brokers (4) and broker
loggers (8) (every registered broker), client metrics (16) and groups (32: the groups
with group configs set, as Kafka's GroupConfigManager lists them). This broker keeps no
client-metrics configs, so there are never any of those. A type outside these gets UNSUPPORTED_VERSION and nothing
else, as Apache Kafka 4.4.0 answers; the request needs DESCRIBE_CONFIGS on the cluster.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
V1_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


@api(74, 0, 1)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "config_resources": []}
    if not authorize_cluster(ctx, "DESCRIBE_CONFIGS"):
        out["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return out
    if ctx.version == 0:
        return out  # client metrics resources: none
    types = list(req.resource_types) or list(V1_TYPES)
    if any(t not in V1_TYPES for t in types):
        out["error_code"] = ErrorCode.UNSUPPORTED_VERSION
        return out
    image = ctx.broker.image
    found: list[dict[str, Any]] = []
    for t in dict.fromkeys(types):
        if t == TOPIC:
            names = sorted(image.topics)
        elif t in (BROKER, BROKER_LOGGER):
            names = [str(b) for b in sorted(image.brokers)]
        elif t == GROUP:
            names = image.config_resources(GROUP)
        else:
            names = []
        found += [{"resource_name": n, "resource_type": t} for n in names]
    out["config_resources"] = found
    return out
