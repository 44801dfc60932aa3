"""ApiVersions (key 18), versions 0-5; also what Admin.describeFeatures reads.

Lists exactly the APIs and versions registered by handler modules, less the
controller APIs (AlterPartition, BrokerHeartbeat, AllocateProducerIds: Kafka lists
them only on its controller listener) unless the connection is a broker's. v3+ requests
carry the client's software name/version (accepted, not validated). Requests of
an unknown version never reach this handler: the connection answers them with
a v0 body carrying UNSUPPORTED_VERSION and these ranges. v3+ responses carry the
supported features (below v4 without those whose minimum level is 0, as Kafka) and the
finalized levels with their epoch (the count of metadata records applied; see
`broker/features.py`). v5 (KIP-1242): a client that names the
cluster and node it means gets REBOOTSTRAP_REQUIRED from another one, INVALID_REQUEST
when it names only one of them, as Kafka 4.4 answers (nothing else in the body).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, advertised_versions, api
from jocko_py.broker.features import SUPPORTED, finalized
from jocko_py.protocol.errors import ErrorCode


@api(18, 0, 5)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.version >= 5 and (req.cluster_id is not None or req.node_id != -1):
        err = ErrorCode.INVALID_REQUEST if req.cluster_id is None or req.node_id == -1 \
            else ErrorCode.NONE if (req.cluster_id, req.node_id) == (
                ctx.broker.cluster_id, ctx.broker.broker_id) \
            else ErrorCode.REBOOTSTRAP_REQUIRED
        if err:
            return {"error_code": err, "api_keys": [], "throttle_time_ms": 0,
                    "finalized_features_epoch": -1}
    out: dict[str, Any] = {
        "error_code": ErrorCode.NONE,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, lo, hi in advertised_versions(ctx.broker.security.is_cluster_peer(ctx.session))
        ],
        "throttle_time_ms": 0,
        "finalized_features_epoch": -1,
    }
    if ctx.version >= 3:
        image = ctx.broker.image
        # below v4 a feature whose minimum is 0 is left out: older clients cannot read
        # it (Kafka's KAFKA-17492)
        out["supported_features"] = [
            {"name": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(SUPPORTED.items()) if ctx.version >= 4 or lo > 0]
        out["finalized_features_epoch"] = image.records_applied
        out["finalized_features"] = [
            {"name": k, "max_version_level": v, "min_version_level": v}
            for k, v in sorted(finalized(image.features).items())]
    return out
