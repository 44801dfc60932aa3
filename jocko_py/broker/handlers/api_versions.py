"""ApiVersions (key 18), versions 0-4.

Lists exactly the APIs and versions registered by handler modules. v3+ requests
carry the client's software name/version (accepted, not validated). Requests of
an unknown version never reach this handler: the connection answers them with
a v0 body carrying UNSUPPORTED_VERSION and these ranges. No features are
advertised (finalized features epoch -1).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, advertised_versions, api


@api(18, 0, 4)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, lo, hi in advertised_versions()
        ],
        "throttle_time_ms": 0,
        "finalized_features_epoch": -1,
    }
