"""SaslHandshake (key 17) v0-1 and SaslAuthenticate (key 36) v0-2.

SaslHandshake picks the mechanism (one of the listener's `sasl.enabled.mechanisms`,
else UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes);
SaslAuthenticate carries the mechanism's tokens (PLAIN: one; SCRAM: two). Success
sets the connection's principal to `User:<name>`; failure answers
SASL_AUTHENTICATION_FAILED after `connection.failed.authentication.delay.ms` and
closes. v1+ responses carry the session lifetime (`connections.max.reauth.ms`,
KIP-368); a re-authentication must keep the principal. On a listener without
SASL, or out of order, the answer is ILLEGAL_SASL_STATE and the connection closes.
JOCKO-CLUSTER (brokers proving they know the cluster secret, see
`security/cluster_auth.py`) is accepted on every listener with a v1 handshake and
never listed among the mechanisms; it marks the connection as a broker's
(`Session.cluster_broker_id`, principal `User:jocko-broker-<id>`).
After a v0 handshake (deprecated; older librdkafka needs v0 advertised to detect
SASL support) the client sends the mechanism's tokens as bare size-prefixed frames,
answered the same way (see `Connection`); a failure closes the connection.

Not implemented: GSSAPI, OAUTHBEARER, delegation tokens (the SCRAM `tokenauth`
extension is ignored).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.cluster_auth import MECHANISM as CLUSTER_MECHANISM
from jocko_py.broker.security.sasl import SaslExchange, SaslFailed
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.handlers.sasl")


@api(17, 0, 1)
async def handshake(ctx: RequestContext, req: Any) -> dict[str, Any]:
    s = ctx.session
    mech = str(req.mechanism or "")
    # a broker's own mechanism: on every listener, v1 only, never listed
    broker = mech == CLUSTER_MECHANISM and ctx.version >= 1
    if s is None or (s.sasl is None and not broker) or s.exchange is not None:
        if s is not None:
            s.close_after_response = 0.0
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    mechs = list(s.sasl.mechanisms) if s.sasl is not None else []
    if mech not in mechs and not broker:
        log.info("[peer=%s listener=%s] SASL mechanism %r not enabled", ctx.peer,
                 s.listener.name, mech)
        s.close_after_response = 0.0
        return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": mechs}
    security = ctx.broker.security
    s.exchange = SaslExchange(mech, s.sasl, security.scram_credential,
                              security.cluster_auth_server() if broker else None)
    s.raw_tokens = ctx.version == 0
    if s.authenticated and s.mechanism is not None:
        s.reauth_principal = s.principal  # KIP-368 re-authentication
    return {"error_code": ErrorCode.NONE, "mechanisms": mechs}


@api(36, 0, 2)
async def authenticate(ctx: RequestContext, req: Any) -> dict[str, Any]:
    s = ctx.session
    out: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None,
                           "auth_bytes": b"", "session_lifetime_ms": 0}
    if s is None or s.exchange is None:
        if s is not None:
            s.close_after_response = 0.0
        return dict(out, error_code=ErrorCode.ILLEGAL_SASL_STATE,
                    error_message="SaslAuthenticate without a SaslHandshake")
    security = ctx.broker.security
    ex = s.exchange
    try:
        token = ex.step(bytes(req.auth_bytes or b""))
        if ex.complete:
            principal = f"User:{ex.user}"
            if s.reauth_principal is not None and principal != s.reauth_principal:
                raise SaslFailed(f"Cannot change principals during re-authentication from "
                                 f"{s.reauth_principal} to {principal}")
    except SaslFailed as e:
        s.exchange = None
        s.authenticated = False
        s.close_after_response = security.failed_auth_delay_s
        # as Kafka's Selector logs it (INFO), with the user the client named, if any
        user = ex.attempted_user()
        log.info("[listener=%s] Failed authentication with /%s (%s%s)", s.listener.name,
                 ctx.peer.rsplit(":", 1)[0].strip("[]"), e.message,
                 f"; user {user!r}" if user else "")
        return dict(out, error_code=e.code, error_message=e.message)
    out["auth_bytes"] = token
    if ex.complete:
        s.exchange = None
        s.principal = principal
        s.cluster_broker_id = ex.cluster_broker_id
        s.mechanism = ex.mechanism
        s.authenticated = True
        s.reauth_principal = None
        if security.max_reauth_ms > 0 and ctx.version >= 1:
            out["session_lifetime_ms"] = security.max_reauth_ms
            s.expires_at = time.monotonic() + security.max_reauth_ms / 1000
        log.debug("[peer=%s listener=%s] authenticated %s with %s", ctx.peer,
                  s.listener.name, principal, ex.mechanism)
    return out
