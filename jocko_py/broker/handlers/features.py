"""UpdateFeatures (key 57), versions 0-2; DescribeFeatures is ApiVersions v3+ (see
api_versions.py and `broker/features.py`).

Every update is checked against the levels this broker supports, the finalized ones
and the dependencies of the level asked for, taken against the levels the whole
request leads to (`features.check_update`); if all pass and the request is not validate-only, the
controller writes one FeatureLevelRecord per changed feature to the metadata log
(forwarded to it from any other broker). The whole request succeeds or fails: v0-1
report the same error for every feature, v2 only the top-level error, as Kafka's
KRaft controller. `timeout_ms` bounds nothing here: a change is committed or refused
at once.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.controller_channel import is_forwarded
from jocko_py.broker.features import (
    LEGACY,
    METADATA_VERSION,
    SAFE_DOWNGRADE,
    UPGRADE,
    check_update,
    finalized,
)
from jocko_py.protocol.errors import ErrorCode, KafkaError


@api(57, 0, 2)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    features = broker.image.features
    validate_only = ctx.version >= 1 and req.validate_only
    error, message = ErrorCode.NONE, None
    wanted: dict[str, int] = {}
    seen: set[str] = set()
    # dependencies are checked against the levels after the whole request, as Kafka's
    proposed = {u.feature: u.max_version_level for u in req.feature_updates}
    for u in req.feature_updates:
        if ctx.version == 0:
            kind = SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE
        else:
            kind = u.upgrade_type
        if u.feature in seen:
            error, message = (ErrorCode.INVALID_REQUEST,
                              f"Feature {u.feature} was specified more than once.")
            break
        seen.add(u.feature)
        error, message = check_update(features, u.feature, u.max_version_level, kind,
                                      proposed, controller_id=broker.controller_id)
        if error:
            # Kafka 4.4's controller words a refused update so (seen with kafka-features)
            message = ("The update failed for all features since the following feature "
                       f"had an error: {message}")
            break
        if u.max_version_level != finalized(features).get(u.feature, 0):
            wanted[u.feature] = u.max_version_level
    if not error and not validate_only and wanted and METADATA_VERSION not in features:
        # a log written before features were recorded: its legacy levels become records
        # with the first update, so they outlive the legacy rule (broker/features.py)
        for name, lvl in LEGACY.items():
            wanted.setdefault(name, lvl)
    if not error and not validate_only and wanted:
        try:
            await broker.controller_channel.update_features(
                wanted, forwarded=is_forwarded(ctx))
        except KafkaError as e:
            error, message = e.code, e.message
    out: dict[str, Any] = {"throttle_time_ms": 0, "error_code": error, "error_message": message}
    if ctx.version < 2:
        out["results"] = [{"feature": u.feature, "error_code": error, "error_message": message}
                          for u in req.feature_updates]
    return out
