"""TLS for SSL and SASL_SSL listeners, with the standard library's `ssl`.

Kafka's PEM settings (`ssl.keystore.type=PEM`), each also accepted per listener as
`listener.name.<name>.<setting>`:

* key and certificate chain: `ssl.keystore.location` (one PEM file holding the
  private key and the chain) or `ssl.keystore.certificate.chain` +
  `ssl.keystore.key` (PEM text); `ssl.key.password` decrypts an encrypted key;
* trusted CAs for client certificates: `ssl.truststore.location` (PEM file) or
  `ssl.truststore.certificates` (PEM text);
* `ssl.enabled.protocols` (TLSv1.2, TLSv1.3), `ssl.cipher.suites` (TLS 1.2 suites),
  `ssl.client.auth` none / requested / required;
* `ssl.principal.mapping.rules`: DEFAULT (the subject's RFC 2253 name) and
  `RULE:pattern/replacement/[LU]` rules, first match wins, as Kafka's
  SslPrincipalMapper.

Certificates reload without a restart: `CertificateReloader` polls the files'
modification times (`jocko.ssl.reload.check.interval.ms`, default 10 s) and swaps
the context that new handshakes use (an SNI callback hands each handshake the
current context); established connections keep theirs. A file that does not load
keeps the previous context and is logged. JKS/PKCS12 keystores are not supported.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from jocko_py.broker.config import BrokerConfig, ConfigError

log = logging.getLogger("jocko_py.broker.security.tls")

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """PEM text as a private temporary file (ssl loads keys from files only)."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text.replace("\\n", "\n"))
        yield path
    finally:
        os.unlink(path)


@dataclass(frozen=True)
class TlsSettings:
    """One listener's TLS settings, read from the broker config."""

    listener: str
    keystore_location: str
    keystore_chain: str
    keystore_key: str
    key_password: str
    truststore_location: str
    truststore_certificates: str
    protocols: tuple[str, ...]
    ciphers: str
    client_auth: str

    @classmethod
    def read(cls, label: str, where: str, get: Callable[[str], str],
             client_auth: str) -> TlsSettings:
        """The settings as ``get`` gives Kafka's `ssl.*` names (a listener's, or a
        server's own with the broker's as fallback); PEM only, TLS 1.2/1.3 only.
        ``where`` names the settings in errors."""
        if (get("ssl.keystore.type") or "PEM").upper() != "PEM" or \
                (get("ssl.truststore.type") or "PEM").upper() != "PEM":
            raise ConfigError(f"{where}: only ssl.keystore.type=PEM and "
                              "ssl.truststore.type=PEM are supported")
        s = cls(
            listener=label,
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
        bad = [p for p in s.protocols if p not in _PROTOCOLS]
        if bad or not s.protocols:
            raise ConfigError(f"ssl.enabled.protocols: {bad or 'empty'} not supported "
                              "(TLSv1.2, TLSv1.3)")
        return s

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str) -> TlsSettings:
        def get(key: str) -> str:
            return config.listener_config(listener, key).strip()

        s = cls.read(listener, f"listener {listener}", get,
                     (get("ssl.client.auth") or "none").lower())
        if not s.keystore_location and not (s.keystore_chain and s.keystore_key):
            raise ConfigError(
                f"listener {listener} needs a key and certificate: ssl.keystore.location, "
                "or ssl.keystore.certificate.chain and ssl.keystore.key")
        if s.client_auth not in _CLIENT_AUTH:
            raise ConfigError(f"ssl.client.auth: {s.client_auth!r} is not one of "
                              "none, requested, required")
        if s.client_auth != "none" and not (s.truststore_location or s.truststore_certificates):
            raise ConfigError(f"listener {listener}: ssl.client.auth={s.client_auth} needs "
                              "ssl.truststore.location or ssl.truststore.certificates")
        return s

    def watched_files(self) -> list[str]:
        return [f for f in (self.keystore_location, self.truststore_location) if f]

    def build(self) -> ssl.SSLContext:
        """A server context; raises ConfigError with the reason if a file does not load."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        versions = sorted(_PROTOCOLS[p] for p in self.protocols)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
        password = self.key_password or None
        try:
            if self.keystore_location:
                ctx.load_cert_chain(self.keystore_location, password=password)
            else:
                with _pem_file(self.keystore_chain) as chain, _pem_file(self.keystore_key) as key:
                    ctx.load_cert_chain(chain, key, password=password)
            if self.truststore_location:
                ctx.load_verify_locations(cafile=self.truststore_location)
            elif self.truststore_certificates:
                ctx.load_verify_locations(cadata=self.truststore_certificates.replace("\\n", "\n"))
            if self.ciphers:
                ctx.set_ciphers(":".join(c.strip() for c in self.ciphers.split(",")))
        except (OSError, ssl.SSLError, ValueError) as e:
            raise ConfigError(f"listener {self.listener}: cannot load TLS key, certificates "
                              f"or ciphers: {e}") from e
        ctx.verify_mode = _CLIENT_AUTH[self.client_auth]
        return ctx


class CertificateReloader:
    """The context for new handshakes on one listener, rebuilt when its files change."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self.current = settings.build()
        self._mtimes = self._stat()
        # the context the server is built with: its SNI callback swaps in `current`,
        # so a reload reaches every later handshake
        self.server_context = settings.build()
        self.server_context.sni_callback = self._pick

    def _pick(self, sslobj: ssl.SSLObject, server_name: str | None,
              ctx: ssl.SSLContext) -> None:
        sslobj.context = self.current
        return None

    def _stat(self) -> list[float]:
        out = []
        for f in self.settings.watched_files():
            try:
                out.append(os.stat(f).st_mtime)
            except OSError:
                out.append(-1.0)
        return out

    def check(self) -> bool:
        """Reload if a watched file changed; True if a new context is in use."""
        m = self._stat()
        if m == self._mtimes:
            return False
        self._mtimes = m
        try:
            self.current = self.settings.build()
        except ConfigError as e:
            log.error("[listener=%s] certificate reload failed, keeping the previous ones: %s",
                      self.settings.listener, e)
            return False
        log.info("[listener=%s] reloaded TLS key and certificates", self.settings.listener)
        return True


# ------------------------------------------------------------------ principal

_ATTR = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
    "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
    "emailAddress": "EMAILADDRESS",
}


def _escape(v: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", v)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out


def subject_name(cert: dict[str, Any]) -> str | None:
    """The RFC 2253 form of a peer certificate's subject (as Java's
    X500Principal.getName(): last RDN first, no spaces), or None without one."""
    rdns = cert.get("subject") if cert else None
    if not rdns:
        return None
    parts = []
    for rdn in reversed(rdns):
        parts.append("+".join(f"{_ATTR.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(parts)


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class _Rule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""


def parse_mapping_rules(value: str) -> list[_Rule]:
    """`ssl.principal.mapping.rules`: `DEFAULT` and `RULE:pattern/replacement/[LU]`,
    comma separated (a pattern may hold commas; `\\/` is a slash)."""
    rules: list[_Rule] = []
    s = value.strip() or "DEFAULT"
    i = 0
    while i < len(s):
        while i < len(s) and s[i] in ", \t\n":
            i += 1
        if i >= len(s):
            break
        if s.startswith("DEFAULT", i):
            rules.append(_Rule(True))
            i += len("DEFAULT")
            continue
        if not s.startswith("RULE:", i):
            raise ConfigError(f"ssl.principal.mapping.rules: cannot parse {s[i:]!r}")
        i += len("RULE:")
        fields: list[str] = []
        for _ in range(2):
            buf = []
            while i < len(s) and s[i] != "/":
                if s[i] == "\\" and i + 1 < len(s) and s[i + 1] == "/":
                    buf.append("/")
                    i += 2
                    continue
                buf.append(s[i])
                i += 1
            if i >= len(s):
                raise ConfigError(f"ssl.principal.mapping.rules: unterminated rule in {value!r}")
            i += 1
            fields.append("".join(buf))
        case = ""
        if i < len(s) and s[i] in "LU":
            case = s[i]
            i += 1
        try:
            pattern = re.compile(fields[0])
        except re.error as e:
            raise ConfigError(f"ssl.principal.mapping.rules: bad pattern {fields[0]!r}: {e}") \
                from e
        # Java's $1 in a replacement is Python's \g<1>
        repl = re.sub(r"\$(\d+)", r"\\g<\1>", fields[1])
        rules.append(_Rule(False, pattern, repl, case))
    return rules


def map_principal(rules: list[_Rule], dn: str) -> str:
    for r in rules:
        if r.default:
            return dn
        assert r.pattern is not None
        if r.pattern.fullmatch(dn):
            out = r.pattern.sub(r.replacement, dn)
            return out.lower() if r.case == "L" else out.upper() if r.case == "U" else out
    raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {dn!r}")


def peer_principal(ssl_object: Any, rules: list[_Rule]) -> str:
    """`User:<mapped subject>` of a TLS peer, or `User:ANONYMOUS` without a certificate."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    dn = subject_name(cert or {})
    if dn is None:
        return "User:ANONYMOUS"
    return "User:" + map_principal(rules, dn)

