"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: mechanisms PLAIN and
SCRAM-SHA-256/512, one `SaslExchange` per authentication on a connection.

Settings (each also per listener as `listener.name.<name>.<setting>`):

* `sasl.enabled.mechanisms` (default here PLAIN,SCRAM-SHA-256,SCRAM-SHA-512: Kafka's
  default, GSSAPI, is not implemented; GSSAPI and OAUTHBEARER are refused at start-up).
* PLAIN users: `sasl.jaas.config` / `listener.name.<name>.plain.sasl.jaas.config`
  with Kafka's PlainLoginModule options `user_<name>="<password>"`, and/or the file
  `jocko.sasl.plain.users.file`: one `name=password` line per user (Java properties
  syntax, `#` comments), re-read when it changes.
* SCRAM users: UserScramCredentialRecords in the metadata image (managed with
  AlterUserScramCredentials; salted, never in clear).

Besides these, every listener (PLAINTEXT and SSL too) accepts JOCKO-CLUSTER, the
brokers' own mechanism (`cluster_auth.py`), which is never advertised.

A failed exchange raises `SaslFailed` with the message the client gets (one
generic message: no hint whether the user or the password was wrong).
"""

from __future__ import annotations

import hmac
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from jocko_py.broker.config import BrokerConfig, ConfigError, parse_properties
from jocko_py.broker.security.cluster_auth import (
    PRINCIPAL_PREFIX,
    ClusterAuthError,
    ClusterAuthServer,
)
from jocko_py.broker.security.scram import MECHANISMS, ScramCredential, ScramError, ScramServer
from jocko_py.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("jocko_py.broker.security.sasl")

SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_MECHANISMS = ",".join(SUPPORTED)
MAX_PLAIN = 4096

_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class SaslFailed(KafkaError):
    """Authentication failed (SASL_AUTHENTICATION_FAILED); the message is what the
    client is told."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED
    message: str

    def __init__(self, message: str) -> None:
        super().__init__(type(self).code, message)


def jaas_options(jaas: str) -> dict[str, str]:
    """The `key="value"` options of a JAAS entry (after its login module name)."""
    body = jaas.split(" required", 1)[1] if " required" in jaas else jaas
    return {m.group(1): re.sub(r"\\(.)", r"\1", m.group(2) if m.group(2) is not None
                                else m.group(3)) for m in _JAAS_OPTION.finditer(body)}


def jaas_plain_users(jaas: str) -> dict[str, str]:
    """`user_<name>="<password>"` options of a PlainLoginModule JAAS entry."""
    if "PlainLoginModule" not in jaas:
        return {}
    out = {}
    for m in _JAAS_OPTION.finditer(jaas.split("PlainLoginModule", 1)[1]):
        key, value = m.group(1), m.group(2) if m.group(2) is not None else m.group(3)
        if key.startswith("user_"):
            out[key[5:]] = re.sub(r"\\(.)", r"\1", value)
    return out


@dataclass
class PlainUsers:
    """PLAIN users of one listener: JAAS options plus the users file."""

    jaas: dict[str, str]
    path: Path | None
    _mtime: float = -2.0
    _file: dict[str, str] = field(default_factory=dict)

    def lookup(self, user: str) -> str | None:
        if self.path is not None:
            try:
                m = os.stat(self.path).st_mtime
            except OSError:
                m = -1.0
            if m != self._mtime:
                self._mtime = m
                try:
                    self._file = parse_properties(self.path.read_text())
                except OSError as e:
                    log.error("cannot read jocko.sasl.plain.users.file %s: %s", self.path, e)
                    self._file = {}
        pw = self._file.get(user)
        return pw if pw is not None else self.jaas.get(user)


@dataclass(frozen=True)
class SaslSettings:
    listener: str
    mechanisms: tuple[str, ...]
    plain: PlainUsers

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str) -> SaslSettings:
        raw = config.listener_config(listener, "sasl.enabled.mechanisms") or DEFAULT_MECHANISMS
        mechs = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
        bad = [m for m in mechs if m not in SUPPORTED]
        if bad or not mechs:
            raise ConfigError(f"sasl.enabled.mechanisms ({listener}): {bad or 'empty'} not "
                              f"supported (one or more of {', '.join(SUPPORTED)})")
        props = config.properties
        jaas = (props.get(f"listener.name.{listener.lower()}.plain.sasl.jaas.config")
                or props.get("sasl.jaas.config", ""))
        users_file = config.listener_config(listener, "jocko.sasl.plain.users.file")
        path = Path(users_file) if users_file else None
        if "PLAIN" in mechs and path is not None and not path.is_file():
            raise ConfigError(f"jocko.sasl.plain.users.file: {users_file} not found")
        return cls(listener, mechs, PlainUsers(jaas_plain_users(jaas), path))


ScramLookup = Callable[[str, str], ScramCredential | None]


class SaslExchange:
    """One authentication: the mechanism chosen by SaslHandshake, then tokens. With
    ``cluster`` it is a broker's JOCKO-CLUSTER exchange (`cluster_auth.py`): on success
    ``cluster_broker_id`` is the broker's id."""

    def __init__(self, mechanism: str, settings: SaslSettings | None, scram: ScramLookup,
                 cluster: ClusterAuthServer | None = None) -> None:
        self.mechanism = mechanism
        self.settings = settings
        self.user: str | None = None
        self.complete = False
        self.cluster_broker_id: int | None = None
        self._attempted: str | None = None
        self._cluster = cluster
        self._scram = (ScramServer(mechanism, lambda u: scram(u, mechanism))
                       if mechanism in MECHANISMS else None)

    def attempted_user(self) -> str | None:
        """The user name the client gave, when it got that far (for the failure log)."""
        if self._scram is not None:
            return self._scram.username
        return self._attempted

    def failure(self) -> str:
        return ("Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.mechanism}")

    def step(self, token: bytes) -> bytes:
        """The server's answer to one client token; raises SaslFailed."""
        if self.complete:
            raise SaslFailed(f"unexpected {self.mechanism} token after authentication")
        if self._cluster is not None:
            try:
                out = self._cluster.step(token)
            except ClusterAuthError as e:
                log.debug("[mechanism=%s] broker authentication failed: %s", self.mechanism, e)
                raise SaslFailed(self.failure()) from None
            if self._cluster.complete:
                self.cluster_broker_id = self._cluster.broker_id
                self.user = f"{PRINCIPAL_PREFIX}{self.cluster_broker_id}"
                self.complete = True
            return out
        if self._scram is not None:
            try:
                out = self._scram.step(token)
            except ScramError as e:
                log.debug("[mechanism=%s] SCRAM authentication failed: %s", self.mechanism, e)
                raise SaslFailed(self.failure()) from None
            if self._scram.complete:
                self.user = self._scram.username
                self.complete = True
            return out
        return self._plain(token)

    def _plain(self, token: bytes) -> bytes:
        # [authzid] NUL authcid NUL passwd (RFC 4616)
        parts = token.split(b"\0") if len(token) <= MAX_PLAIN else []
        if len(parts) != 3:
            raise SaslFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user or not password:
            raise SaslFailed("Authentication failed: username or password not specified")
        if authzid and authzid != user:
            raise SaslFailed("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        expected = self.settings.plain.lookup(user) if self.settings is not None else None
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            self._attempted = user
            raise SaslFailed("Authentication failed: Invalid username or password")
        self.user = user
        self.complete = True
        return b""
