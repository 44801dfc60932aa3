"""ApiVersions (key 18), versions 0-4; also what Admin.describeFeatures reads.

Lists exactly the APIs and versions registered by handler modules, less the
controller APIs (AlterPartition, BrokerHeartbeat, AllocateProducerIds: Kafka lists
them only on its controller listener) unless the connection is a broker's. v3+ requests
carry the client's software name/version (accepted, not validated). Requests of
an unknown version never reach this handler: the connection answers them with
a v0 body carrying UNSUPPORTED_VERSION and these ranges. v3+ responses carry the
supported features and the finalized levels with their epoch (the count of metadata
records applied; see `broker/features.py`).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, advertised_versions, api
from jocko_py.broker.features import SUPPORTED, finalized


@api(18, 0, 4)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, lo, hi in advertised_versions(ctx.broker.security.is_cluster_peer(ctx.session))
        ],
        "throttle_time_ms": 0,
        "finalized_features_epoch": -1,
    }
    if ctx.version >= 3:
        image = ctx.broker.topics.image
        out["supported_features"] = [
            {"name": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(SUPPORTED.items())]
        out["finalized_features_epoch"] = image.records_applied
        out["finalized_features"] = [
            {"name": k, "max_version_level": v, "min_version_level": v}
            for k, v in sorted(finalized(image.features).items())]
    return out
