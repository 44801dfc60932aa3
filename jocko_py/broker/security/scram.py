"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), server side. Pure: no I/O.

Credentials are stored as Kafka stores them (UserScramCredentialRecord): salt,
iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key"); never the password.

`ScramServer.step(token)` runs the exchange:

1. client-first `gs2-header n=<user>,r=<client nonce>[,extensions]`: the gs2 header
   is `n,,` or `y,,` (channel binding `p=` is refused), an authzid `a=` must name the
   user itself (as Kafka); an unknown user fails here. Answer:
   `r=<client nonce><server nonce>,s=<salt>,i=<iterations>`.
2. client-final `c=<base64 gs2 header>,r=<nonce>[,ext],p=<proof>`: the channel
   binding must repeat the gs2 header, the nonce must be the combined one (or, as
   Kafka 3.9 accepts from librdkafka < 2.6.1, the client nonce followed by it), and the
   proof must satisfy H(proof XOR HMAC(StoredKey, AuthMessage)) == StoredKey.
   Answer: `v=<ServerSignature>`.

Any other message, a message after completion or a malformed one raises
`ScramError`; the caller fails the authentication (one generic message to the
client, as Kafka: no hint whether the user or the password was wrong).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

from jocko_py.cluster.scram_control import MAX_ITERATIONS, MIN_ITERATIONS, scram_keys

MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
MAX_MESSAGE = 4096  # a SCRAM message is a few hundred bytes


class ScramError(ValueError):
    pass


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def salted_password(hash_name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)


def credential_from_salted(hash_name: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    stored_key, server_key = scram_keys(hash_name, salted)
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = 4096,
                    salt: bytes | None = None) -> ScramCredential:
    hash_name = MECHANISMS[mechanism][1]
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(
        hash_name, salted_password(hash_name, password.encode(), salt, iterations), salt,
        iterations)


def _decode_saslname(name: str) -> str:
    out = []
    i = 0
    while i < len(name):
        c = name[i]
        if c == "=":
            code = name[i + 1:i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ScramError("invalid escape in user name")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _attrs(msg: str) -> list[tuple[str, str]]:
    out = []
    for part in msg.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"malformed attribute {part[:16]!r}")
        out.append((part[0], part[2:]))
    return out


class ScramServer:
    """One SCRAM exchange. ``lookup(user)`` returns the stored credential or None."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 server_nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ScramError(f"unsupported mechanism {mechanism}")
        self.mechanism = mechanism
        self.hash_name = MECHANISMS[mechanism][1]
        self.lookup = lookup
        self._server_nonce = server_nonce
        self.state = "first"
        self.username: str | None = None
        self._cred: ScramCredential | None = None
        self._gs2 = ""
        self._nonce = ""
        self._client_nonce = ""
        self._auth_prefix = ""

    @property
    def complete(self) -> bool:
        return self.state == "done"

    def step(self, token: bytes) -> bytes:
        if len(token) > MAX_MESSAGE:
            raise ScramError("SCRAM message too long")
        try:
            msg = token.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ScramError("SCRAM message is not UTF-8") from e
        if self.state == "first":
            return self._client_first(msg)
        if self.state == "final":
            return self._client_final(msg)
        raise ScramError(f"unexpected SCRAM message in state {self.state}")

    def _client_first(self, msg: str) -> bytes:
        self.state = "failed"
        parts = msg.split(",", 2)
        if len(parts) != 3:
            raise ScramError("malformed client-first message")
        cbind, authzid, bare = parts
        if cbind not in ("n", "y"):
            raise ScramError("channel binding is not supported")
        attrs = _attrs(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise ScramError("client-first message must start with n= and r=")
        user = _decode_saslname(attrs[0][1])
        client_nonce = attrs[1][1]
        if not user or not client_nonce:
            raise ScramError("empty user name or nonce")
        if authzid:
            if not authzid.startswith("a=") or _decode_saslname(authzid[2:]) != user:
                raise ScramError("authorization id differs from the user name")
        cred = self.lookup(user)
        if cred is None:
            raise ScramError(f"unknown user {user}")
        server_nonce = self._server_nonce or base64.b64encode(os.urandom(24)).decode()
        self._nonce = client_nonce + server_nonce
        self._client_nonce = client_nonce
        self._gs2 = f"{cbind},{authzid},"
        self._cred = cred
        self.username = user
        server_first = (f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},"
                        f"i={cred.iterations}")
        self._auth_prefix = f"{bare},{server_first},"
        self.state = "final"
        return server_first.encode()

    def _client_final(self, msg: str) -> bytes:
        self.state = "failed"
        head, sep, proof_b64 = msg.rpartition(",p=")
        if not sep:
            raise ScramError("client-final message without proof")
        attrs = _attrs(head)
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise ScramError("client-final message must start with c= and r=")
        try:
            cbind = base64.b64decode(attrs[0][1], validate=True).decode()
            proof = base64.b64decode(proof_b64, validate=True)
        except (ValueError, UnicodeDecodeError) as e:
            raise ScramError("bad base64 in client-final message") from e
        if cbind != self._gs2:
            raise ScramError("channel binding does not match the gs2 header")
        # librdkafka before 2.6.1 sends its own nonce twice (client + combined nonce);
        # Kafka 3.8.1-3.9 accept that (the server nonce is still there, so a replay
        # fails as well); Kafka 4 does not. Accept exactly that form and the RFC's.
        if attrs[1][1] not in (self._nonce, self._client_nonce + self._nonce):
            raise ScramError("nonce mismatch")
        cred = self._cred
        assert cred is not None
        auth_message = (self._auth_prefix + head).encode()
        signature = _hmac(self.hash_name, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("bad proof length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(),
                                   cred.stored_key):
            raise ScramError("invalid credentials")
        self.state = "done"
        server_sig = _hmac(self.hash_name, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_sig)


class ScramClient:
    """The client side of one exchange (the CLI's `--command-config`, and tests)."""

    def __init__(self, mechanism: str, user: str, password: str,
                 client_nonce: str | None = None) -> None:
        self.hash_name = MECHANISMS[mechanism][1]
        self.user = user.replace("=", "=3D").replace(",", "=2C")
        self.password = password
        self.nonce = client_nonce or base64.b64encode(os.urandom(18)).decode()
        self._bare = f"n={self.user},r={self.nonce}"
        self._server_sig = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        msg = server_first.decode()
        attrs = dict(_attrs(msg))
        nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        if not nonce.startswith(self.nonce):
            raise ScramError("server nonce does not extend the client nonce")
        salted = salted_password(self.hash_name, self.password.encode(), salt, iterations)
        client_key = _hmac(self.hash_name, salted, b"Client Key")
        stored = hashlib.new(self.hash_name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth = f"{self._bare},{msg},{without_proof}".encode()
        sig = _hmac(self.hash_name, stored, auth)
        proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
        self._server_sig = _hmac(self.hash_name, _hmac(self.hash_name, salted, b"Server Key"),
                                 auth)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        if server_final != b"v=" + base64.b64encode(self._server_sig):
            raise ScramError("server signature does not verify")


def verify_password(mechanism: str, cred: ScramCredential, password: bytes) -> bool:
    """Does ``password`` match a stored credential? (HTTP Basic against SCRAM users:
    the salted password from the stored salt and iterations, its StoredKey compared in
    constant time; the iterations are bounded as at AlterUserScramCredentials.)"""
    hash_name = MECHANISMS[mechanism][1]
    if not MIN_ITERATIONS <= cred.iterations <= MAX_ITERATIONS:
        return False
    derived = credential_from_salted(
        hash_name, salted_password(hash_name, password, cred.salt, cred.iterations),
        cred.salt, cred.iterations)
    return hmac.compare_digest(derived.stored_key, cred.stored_key)
