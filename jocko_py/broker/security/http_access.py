"""Who may use the broker's HTTP servers, the web console and the metrics endpoint:
their TLS and their authentication (the `authenticate` hook of broker/http.py).

Settings, for S = `console` or `metrics`:

* `jocko.S.auth`: `none`, `basic`, `mtls` or `basic,mtls` (either authenticates).
  Empty (the default): `none` while every listener is PLAINTEXT (a development
  broker: `make run` stays one command), `basic` once any listener is SSL or SASL.
  Without authentication every request's principal is `User:ANONYMOUS`.
* `basic`: HTTP Basic (RFC 7617) against the broker's users: the SCRAM credentials in
  the metadata image (AlterUserScramCredentials; the password is checked by
  computing SCRAM's salted password with the stored salt and iterations and
  comparing the StoredKey in constant time, in a worker thread), and the PLAIN users
  of the broker's JAAS `user_<name>` options and `jocko.sasl.plain.users.file`.
  Principal `User:<name>`. No or malformed credentials: 401 with
  `WWW-Authenticate: Basic realm="jocko-py"`; wrong ones: 401 after
  `connection.failed.authentication.delay.ms`, and one log line naming the user and
  the peer (at most one per user and peer every 10 s, with the count since).
* `mtls`: the client certificate's subject mapped by `ssl.principal.mapping.rules`
  (as on an SSL listener); needs `jocko.S.ssl.enable`. Without a certificate: 403.
* `jocko.S.ssl.enable` (false): serve HTTPS. Key, certificates and protocols are the
  broker's `ssl.*` PEM settings (`ssl.keystore.location`, `ssl.keystore.certificate.chain`
  + `ssl.keystore.key`, `ssl.key.password`, `ssl.truststore.location` /
  `ssl.truststore.certificates`, `ssl.enabled.protocols`, `ssl.cipher.suites`), each
  overridden by `jocko.S.ssl.<same name>`. `jocko.S.ssl.client.auth` none / requested /
  required (default: required for `mtls`, requested for `basic,mtls`, else none). The
  certificates reload with the broker's (`jocko.ssl.reload.check.interval.ms`).
* `jocko.console.read.only`: when not set, true once any listener is SSL or SASL.

What an authenticated principal may do on the console (authorization) is the
console's business (console.py); every authenticated principal may scrape metrics.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import logging
import os
import ssl
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from jocko_py.broker.config import BrokerConfig, ConfigError
from jocko_py.broker.http import Request, Response
from jocko_py.broker.security.sasl import PlainUsers, jaas_plain_users
from jocko_py.broker.security.scram import MECHANISMS, ScramCredential, verify_password
from jocko_py.broker.security.session import ANONYMOUS, SecurityManager
from jocko_py.broker.security.tls import (
    _CLIENT_AUTH,
    _PROTOCOLS,
    CertificateReloader,
    NoMatchingRule,
    TlsSettings,
    parse_mapping_rules,
    peer_principal,
)

log = logging.getLogger("jocko_py.broker.security.http_access")

REALM = "jocko-py"
AUTH_MODES = ("basic", "mtls")
MAX_CREDENTIALS = 4096  # an Authorization header longer than this is refused
FAILURE_LOG_INTERVAL_S = 10.0
_TLS_KEYS = ("ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
             "ssl.key.password", "ssl.truststore.location", "ssl.truststore.certificates")


def listeners_secured(config: BrokerConfig) -> bool:
    """Is any listener SSL or SASL? (Then the HTTP servers are secured by default.)"""
    return any(x.security_protocol != "PLAINTEXT" for x in config.listeners)


def console_read_only(config: BrokerConfig) -> bool:
    """`jocko.console.read.only` when set; else true once listeners are secured."""
    if "jocko.console.read.only" in config.explicit:
        return config.bool("jocko.console.read.only")
    return listeners_secured(config)


def parse_basic(header: str) -> tuple[str, str] | None:
    """User and password of an `Authorization: Basic <base64(user:password)>` header
    (UTF-8, RFC 7617), or None if it is not one."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic" or not token or len(token) > MAX_CREDENTIALS:
        return None
    try:
        raw = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    user, sep, password = raw.partition(":")
    if not sep or not user:
        return None
    return user, password


class FailureLog:
    """Rate-limits the failed-authentication log lines: the first failure of a (user,
    peer) is logged, later ones within `interval_s` are counted and reported by the
    next line after it. Pure: takes `now`."""

    def __init__(self, interval_s: float = FAILURE_LOG_INTERVAL_S, max_keys: int = 1024) -> None:
        self.interval_s = interval_s
        self.max_keys = max_keys
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def record(self, user: str, peer: str, now: float) -> int | None:
        """None: do not log; else log now, with this many failures suppressed since the
        previous line."""
        key = (user, peer)
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return None
        if len(self._last) >= self.max_keys:
            self._last = {k: v for k, v in self._last.items()
                          if now - v[0] < self.interval_s}
            if len(self._last) >= self.max_keys:  # a flood of distinct names: forget them
                self._last.clear()
        self._last[key] = (now, 0)
        return last[1] if last is not None else 0


@dataclass(frozen=True)
class HttpAccessSettings:
    """One HTTP server's access settings, read from the broker config."""

    server: str  # "console" or "metrics"
    modes: frozenset[str]  # empty: no authentication
    tls: TlsSettings | None

    @classmethod
    def from_config(cls, config: BrokerConfig, server: str) -> HttpAccessSettings:
        prefix = f"jocko.{server}."
        raw = config.get(prefix + "auth").strip().lower()
        if not raw:
            raw = "basic" if listeners_secured(config) else "none"
        names = [m.strip() for m in raw.split(",") if m.strip()]
        bad = [m for m in names if m not in ("none", *AUTH_MODES)]
        if bad or not names or ("none" in names and len(names) > 1):
            raise ConfigError(f"{prefix}auth: {raw!r} is not none, basic, mtls or basic,mtls")
        modes = frozenset(m for m in names if m != "none")
        tls = None
        if config.bool(prefix + "ssl.enable"):
            tls = _tls_settings(config, server, modes)
        elif "mtls" in modes:
            raise ConfigError(f"{prefix}auth=mtls needs {prefix}ssl.enable=true")
        if config.get(prefix + "ssl.client.auth").strip() and tls is None:
            raise ConfigError(f"{prefix}ssl.client.auth needs {prefix}ssl.enable=true")
        return cls(server, modes, tls)

    def describe(self) -> str:
        return "authentication " + (" or ".join(sorted(self.modes)) or "none")


def _tls_settings(config: BrokerConfig, server: str, modes: frozenset[str]) -> TlsSettings:
    """TlsSettings (built by broker/security/tls.py) from `jocko.<server>.ssl.*`, each
    falling back to the broker's `ssl.*`."""
    prefix = f"jocko.{server}."

    def get(key: str) -> str:
        own = config.get(prefix + key).strip() if key in _TLS_KEYS else ""
        return own or config.get(key).strip()

    if (get("ssl.keystore.type") or "PEM").upper() != "PEM" or \
            (get("ssl.truststore.type") or "PEM").upper() != "PEM":
        raise ConfigError(f"{prefix}ssl: only ssl.keystore.type=PEM and "
                          "ssl.truststore.type=PEM are supported")
    client_auth = config.get(prefix + "ssl.client.auth").strip().lower() or (
        "required" if modes == {"mtls"} else "requested" if "mtls" in modes else "none")
    s = TlsSettings(
        listener=f"{prefix}ssl",
        keystore_location=get("ssl.keystore.location"),
        keystore_chain=get("ssl.keystore.certificate.chain"),
        keystore_key=get("ssl.keystore.key"),
        key_password=get("ssl.key.password"),
        truststore_location=get("ssl.truststore.location"),
        truststore_certificates=get("ssl.truststore.certificates"),
        protocols=tuple(p.strip() for p in
                        (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",")
                        if p.strip()),
        ciphers=get("ssl.cipher.suites"),
        client_auth=client_auth,
    )
    if not s.keystore_location and not (s.keystore_chain and s.keystore_key):
        raise ConfigError(f"{prefix}ssl.enable=true needs a key and certificate: "
                          f"{prefix}ssl.keystore.location or ssl.keystore.location (or the "
                          "certificate.chain and key settings)")
    bad = [p for p in s.protocols if p not in _PROTOCOLS]
    if bad or not s.protocols:
        raise ConfigError(f"ssl.enabled.protocols: {bad or 'empty'} not supported "
                          "(TLSv1.2, TLSv1.3)")
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(f"{prefix}ssl.client.auth: {client_auth!r} is not one of "
                          "none, requested, required")
    if "mtls" in modes and client_auth == "none":
        raise ConfigError(f"{prefix}auth=mtls needs {prefix}ssl.client.auth requested or "
                          "required")
    if client_auth != "none" and not (s.truststore_location or s.truststore_certificates):
        raise ConfigError(f"{prefix}ssl.client.auth={client_auth} needs a truststore: "
                          f"{prefix}ssl.truststore.location or ssl.truststore.location")
    return s


class PasswordCheck:
    """HTTP Basic passwords against the broker's SCRAM and PLAIN users. A verified
    (credential, password) pair is remembered (as a keyed hash, never the password),
    so a browser sending the same credentials with every page costs one PBKDF2."""

    def __init__(self, scram: SecurityManager, plain: list[PlainUsers],
                 cache_size: int = 256) -> None:
        self.security = scram
        self.plain = plain
        self.cache_size = cache_size
        self._key = os.urandom(32)
        self._ok: OrderedDict[tuple[str, str, bytes, bytes], bytes] = OrderedDict()

    def _tag(self, password: bytes) -> bytes:
        return hmac.new(self._key, password, "sha256").digest()

    async def verify(self, user: str, password: str) -> bool:
        pw = password.encode("utf-8")
        creds: list[tuple[str, ScramCredential]] = []
        for mech in MECHANISMS:
            cred = self.security.scram_credential(user, mech)
            if cred is not None:
                creds.append((mech, cred))
        tag = self._tag(pw)
        for mech, cred in creds:
            key = (user, mech, cred.salt, cred.stored_key)
            known = self._ok.get(key)
            if known is not None and hmac.compare_digest(known, tag):
                self._ok.move_to_end(key)
                return True
        for users in self.plain:
            expected = users.lookup(user)
            if expected is not None and hmac.compare_digest(expected.encode("utf-8"), pw):
                return True
        for mech, cred in creds:
            # PBKDF2 (4096-16384 rounds) off the event loop that serves Kafka
            if await asyncio.to_thread(verify_password, mech, cred, pw):
                self._ok[(user, mech, cred.salt, cred.stored_key)] = tag
                while len(self._ok) > self.cache_size:
                    self._ok.popitem(last=False)
                return True
        return False


class HttpAccess:
    """The TLS context and the authentication of one HTTP server."""

    def __init__(self, settings: HttpAccessSettings, security: SecurityManager) -> None:
        self.settings = settings
        self.security = security
        config = security.config
        self.reloader: CertificateReloader | None = None
        if settings.tls is not None:
            self.reloader = CertificateReloader(settings.tls)
            # reloaded with the listeners' certificates (the broker's periodic check
            # goes over every entry; the servers look up listener names only)
            security.tls[f"http:{settings.server}"] = self.reloader
        self.rules = parse_mapping_rules(config.get("ssl.principal.mapping.rules"))
        plain = [s.plain for s in security.sasl.values()]
        # the broker-wide PLAIN users too (also when no listener is SASL)
        users_file = config.get("jocko.sasl.plain.users.file").strip()
        plain.append(PlainUsers(jaas_plain_users(config.get("sasl.jaas.config")),
                                Path(users_file) if users_file else None))
        self.passwords = PasswordCheck(security, plain)
        self.failures = FailureLog()
        self.failed_delay_s = security.failed_auth_delay_s
        if not settings.modes and listeners_secured(config):
            log.warning("jocko.%s.auth=none on a broker with secured listeners: whoever "
                        "reaches the %s's address is not asked who they are",
                        settings.server, settings.server)

    @classmethod
    def from_config(cls, security: SecurityManager, server: str) -> HttpAccess:
        return cls(HttpAccessSettings.from_config(security.config, server), security)

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        return self.reloader.server_context if self.reloader is not None else None

    @staticmethod
    def challenge(text: str = "authentication required\n") -> Response:
        return Response(401, text.encode(), "text/plain; charset=utf-8",
                        {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'})

    async def authenticate(self, req: Request) -> Response | None:
        modes = self.settings.modes
        if not modes:
            req.principal = ANONYMOUS
            return None
        if "mtls" in modes and req.ssl_object is not None and \
                req.ssl_object.getpeercert():
            try:
                req.principal = peer_principal(req.ssl_object, self.rules)
            except NoMatchingRule as e:
                log.info("[%s peer=%s] client certificate refused: %s", self.settings.server,
                         req.peer, e)
                return Response(403, b"client certificate not accepted\n", "text/plain")
            return None
        if "basic" not in modes:
            return Response(403, b"a client certificate is required\n", "text/plain")
        creds = parse_basic(req.headers.get("authorization", ""))
        if creds is None:
            return self.challenge()
        user, password = creds
        if await self.passwords.verify(user, password):
            req.principal = f"User:{user}"
            return None
        suppressed = self.failures.record(user, req.peer, asyncio.get_running_loop().time())
        if suppressed is not None:
            log.warning("[%s] failed authentication for user %r from %s%s",
                        self.settings.server, user, req.peer,
                        f" ({suppressed} more since the previous line)" if suppressed else "")
        await asyncio.sleep(self.failed_delay_s)
        return self.challenge("invalid user name or password\n")
