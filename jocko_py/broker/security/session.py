"""Per-connection security state, and the broker-wide `SecurityManager` that builds it.

A `Session` knows its listener, the client's host and its principal
(`User:ANONYMOUS` until authenticated; the mapped certificate subject on an SSL
listener with a client certificate; `User:<name>` after SASL). On a SASL listener
only ApiVersions, SaslHandshake and SaslAuthenticate are served before
authentication, in that order (`gate`); anything else closes the connection, as
Kafka does. A failed authentication is answered after
`connection.failed.authentication.delay.ms` (100) and the connection closed.
With `connections.max.reauth.ms` > 0 (KIP-368) the session expires: the client
re-authenticates on the same connection (same principal required), and a request
other than the SASL exchange after expiry closes the connection. Frames before
authentication are capped at `sasl.server.max.receive.size` (524288).

Brokers authenticate to each other with JOCKO-CLUSTER (`cluster_auth.py`) on any
listener; such a session carries `cluster_broker_id` and `is_cluster_peer` holds for
it (the broker-only APIs; every authorization passes, as for a super user).
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from jocko_py.broker.config import BrokerConfig, ConfigError, Listener
from jocko_py.broker.security.authz import (
    AUTHORIZER_NAMES,
    CLUSTER,
    CLUSTER_NAME,
    OPERATIONS,
    Authorizer,
    Principal,
)
from jocko_py.broker.security.client import ClientSecurity
from jocko_py.broker.security.cluster_auth import ClusterAuthServer, NonceCache, derive_key
from jocko_py.broker.security.quotas import QuotaManager
from jocko_py.broker.security.sasl import (
    SaslExchange,
    SaslFailed,
    SaslSettings,
    jaas_options,
)
from jocko_py.broker.security.scram import MECHANISMS, ScramCredential
from jocko_py.broker.security.tls import (
    CertificateReloader,
    NoMatchingRule,
    TlsSettings,
    parse_mapping_rules,
    peer_principal,
)
from jocko_py.cluster.metadata import MetadataImage

log = logging.getLogger("jocko_py.broker.security")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
ANONYMOUS = "User:ANONYMOUS"


class AuthenticationError(Exception):
    """The peer cannot be given a principal (e.g. no certificate mapping rule matches)."""


@dataclass
class Session:
    listener: Listener
    client_host: str
    principal: str = ANONYMOUS
    authenticated: bool = True
    sasl: SaslSettings | None = None
    exchange: SaslExchange | None = None
    handshake_done: bool = False
    expires_at: float | None = None  # monotonic; KIP-368
    close_after_response: float | None = None  # delay (s) before closing, if set
    reauth_principal: str | None = None
    mechanism: str | None = None
    raw_tokens: bool = False  # after SaslHandshake v0: bare SASL tokens, no Kafka header
    # a broker of this cluster (authenticated with JOCKO-CLUSTER): its id, else None
    cluster_broker_id: int | None = None
    muted_until: float = 0.0  # monotonic; a throttled connection reads nothing before it
    extra: dict[str, object] = field(default_factory=dict)

    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    def raw_step(self, token: bytes, failed_auth_delay_s: float) -> bytes:
        """One bare SASL token after a v0 handshake: the bare answer, or raises
        SaslFailed (the caller closes, after the failure delay)."""
        ex = self.exchange
        assert ex is not None
        try:
            out = ex.step(token)
        except SaslFailed:
            self.exchange = None
            self.close_after_response = failed_auth_delay_s
            raise
        if ex.complete:
            self.cluster_broker_id = ex.cluster_broker_id
            self.exchange, self.raw_tokens = None, False
            self.principal, self.mechanism, self.authenticated = \
                f"User:{ex.user}", ex.mechanism, True
        return out

    def gate(self, api_key: int) -> str | None:
        """Why a request of ``api_key`` may not be served now (None: serve it)."""
        if api_key in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return None
        if self.exchange is not None:
            return "request during the SASL exchange"
        if not self.authenticated:
            return "request before SASL authentication"
        if self.expired():
            return "SASL session expired (connections.max.reauth.ms) without re-authentication"
        return None


class SecurityManager:
    """Everything security the connections share: TLS contexts, SASL settings,
    principal mapping, timings. Built once at start-up; raises ConfigError."""

    def __init__(self, config: BrokerConfig,
                 image: Callable[[], MetadataImage] | None = None) -> None:
        self.config = config
        self.image = image
        self.tls: dict[str, CertificateReloader] = {}
        self.sasl: dict[str, SaslSettings] = {}
        for x in config.listeners:
            if x.tls:
                self.tls[x.name] = CertificateReloader(TlsSettings.from_config(config, x.name))
            if x.sasl:
                self.sasl[x.name] = SaslSettings.from_config(config, x.name)
        self.rules = {x.name: parse_mapping_rules(
            config.listener_config(x.name, "ssl.principal.mapping.rules"))
            for x in config.listeners if x.tls}
        self.failed_auth_delay_s = max(
            0, int(config.get("connection.failed.authentication.delay.ms") or 100)) / 1000
        self.max_reauth_ms = int(config.get("connections.max.reauth.ms") or 0)
        self.sasl_max_receive = int(config.get("sasl.server.max.receive.size") or 524288)
        # how long a SASL connection may stay unauthenticated
        self.authentication_timeout_s = max(
            0.1, int(config.get("connections.max.idle.ms") or 600000) / 1000)
        self.quotas = QuotaManager(image or MetadataImage, config.int("quota.window.num"),
                                   float(config.get("quota.window.size.seconds")))
        self.cluster_nonces = NonceCache()
        self._cluster_key: tuple[bytes, bytes] | None = None
        self.authorizer: Authorizer | None = None
        az = config.get("authorizer.class.name").strip()
        if az:
            if az not in AUTHORIZER_NAMES:
                raise ConfigError(f"authorizer.class.name: {az} is not supported (use "
                                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer)")
            self.authorizer = Authorizer(
                image or MetadataImage,
                [u.strip() for u in config.get("super.users").split(";") if u.strip()],
                config.bool("allow.everyone.if.no.acl.found"))

    # ---- brokers among themselves (JOCKO-CLUSTER, see cluster_auth.py)

    def cluster_key(self) -> bytes | None:
        """The key derived from the cluster secret (None until this broker applied it)."""
        secret = self.image().cluster_secret if self.image is not None else None
        if secret is None:
            return None
        if self._cluster_key is None or self._cluster_key[0] != secret:
            self._cluster_key = (secret, derive_key(secret))
        return self._cluster_key[1]

    def cluster_auth_server(self) -> ClusterAuthServer:
        return ClusterAuthServer(self.cluster_key, self.cluster_nonces)

    def is_cluster_peer(self, s: Principal | None) -> bool:
        """May this connection use the broker-only APIs? An in-process caller; a broker
        of this cluster (JOCKO-CLUSTER); or, as Kafka's rule, a principal the configured
        authorizer allows CLUSTER_ACTION on the cluster (super.users or an ACL)."""
        if s is None or s.cluster_broker_id is not None:
            return True
        az = self.authorizer
        return az is not None and s.authenticated and az.authorize(
            s.principal, s.client_host, OPERATIONS["CLUSTER_ACTION"], CLUSTER, CLUSTER_NAME)

    def new_session(self, listener: Listener, client_host: str, ssl_object: object) -> Session:
        s = Session(listener, client_host)
        if listener.tls:
            try:
                s.principal = peer_principal(ssl_object, self.rules.get(listener.name, []))
            except NoMatchingRule as e:
                raise AuthenticationError(str(e)) from e
        if listener.sasl:
            s.authenticated = False
            s.sasl = self.sasl[listener.name]
        return s

    def broker_channel_security(self) -> ClientSecurity:
        """How this broker's own connections to the others (replica fetchers, requests
        to the controller, transaction markers) connect: TLS as `inter_broker_client`,
        and always JOCKO-CLUSTER (the cluster secret), on every listener, instead of the
        listener's SASL mechanism, so the other broker serves them the broker-only APIs."""
        return dataclasses.replace(self.inter_broker_client() or ClientSecurity(),
                                   cluster_broker_id=self.config.broker_id,
                                   cluster_key=self.cluster_key)

    def inter_broker_client(self) -> ClientSecurity | None:
        """TLS and SASL settings for connections to other brokers' inter-broker
        listener (None for PLAINTEXT). The client certificate is this broker's own
        keystore; SASL uses `sasl.mechanism.inter.broker.protocol` (PLAIN here; Kafka's
        GSSAPI default is not implemented) and the JAAS `username` / `password` of
        `listener.name.<listener>.<mechanism>.sasl.jaas.config` or `sasl.jaas.config`
        (required and checked as Kafka does; the brokers' own channels authenticate
        with JOCKO-CLUSTER instead, see `broker_channel_security`)."""
        cfg = self.config
        x = next((x for x in cfg.listeners if x.name == cfg.inter_broker_listener), None)
        if x is None or x.security_protocol == "PLAINTEXT":
            return None
        ctx = None
        if x.tls:
            tls = TlsSettings.from_config(cfg, x.name)
            ctx = ssl.create_default_context()
            if tls.truststore_location or tls.truststore_certificates:
                ctx.load_verify_locations(
                    cafile=tls.truststore_location or None,
                    cadata=tls.truststore_certificates.replace("\\n", "\n") or None)
            try:
                if tls.keystore_location:
                    ctx.load_cert_chain(tls.keystore_location,
                                        password=tls.key_password or None)
            except (OSError, ssl.SSLError) as e:
                raise ConfigError(f"inter-broker TLS: cannot load the keystore: {e}") from e
        if not x.sasl:
            return ClientSecurity(ssl=ctx)
        mech = (cfg.get("sasl.mechanism.inter.broker.protocol") or "PLAIN").strip().upper()
        if mech not in self.sasl[x.name].mechanisms:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol: {mech} is not enabled "
                              f"on the inter-broker listener {x.name}")
        jaas = (cfg.properties.get(f"listener.name.{x.name.lower()}.{mech.lower()}"
                                   ".sasl.jaas.config") or cfg.get("sasl.jaas.config"))
        opts = jaas_options(jaas)
        if not opts.get("username"):
            raise ConfigError(f"inter-broker SASL on {x.name} needs username and password in "
                              f"listener.name.{x.name.lower()}.{mech.lower()}.sasl.jaas.config "
                              "or sasl.jaas.config")
        return ClientSecurity(ctx, mech, opts["username"], opts.get("password", ""))

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        if self.image is None:
            return None
        rec = self.image().scram.get((user, MECHANISMS[mechanism][0]))
        if rec is None:
            return None
        return ScramCredential(rec.salt, rec.stored_key, rec.server_key, rec.iterations)

    def quotas_set(self) -> bool:
        """Is any client quota configured? (Handlers skip counting bytes otherwise.)"""
        return self.image is not None and bool(self.image().quotas)

    def throttle(self, ctx_session: Session | None, client_id: str | None, key: str,
                 nbytes: int) -> int:
        """Record ``nbytes`` against the client's ``key`` quota; the throttle time (ms),
        and the connection is muted for it."""
        if ctx_session is None or not self.image or not self.image().quotas:
            return 0
        user = ctx_session.principal.partition(":")[2]
        now = time.monotonic()
        ms = self.quotas.record(user, client_id or "", key, nbytes, now)
        if ms:
            ctx_session.muted_until = max(ctx_session.muted_until, now + ms / 1000)
        return ms

    def over_quota(self, ctx_session: Session | None, client_id: str | None, key: str) -> int:
        """How long (ms) the client's ``key`` rate is already over its quota (0: not over);
        nothing is recorded and the connection is not muted."""
        if ctx_session is None or not self.image or not self.image().quotas:
            return 0
        user = ctx_session.principal.partition(":")[2]
        return self.quotas.record(user, client_id or "", key, 0, time.monotonic())

    def check_certificates(self) -> None:
        for r in self.tls.values():
            r.check()
