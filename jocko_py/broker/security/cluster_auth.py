"""JOCKO-CLUSTER: how a broker proves to another that it belongs to the cluster.

The key is derived from the cluster secret (`ClusterSecretRecord`, committed once by
the active controller; every broker learns it by applying the metadata log, which
clients cannot read). A broker's inter-broker connection authenticates with this SASL
mechanism (SaslHandshake v1, then SaslAuthenticate rounds) before its first request,
on every listener, PLAINTEXT included; the mechanism is accepted everywhere but never
advertised to clients. It is a mutual challenge-response (nothing replayable crosses
the wire, the secret never does):

    client-first  = 0x01 | broker id (int32) | client nonce (32 bytes)
    server-first  = 0x01 | server nonce (32 bytes)
    client-final  = HMAC-SHA256(key, "jocko-cluster client" | id | cnonce | snonce)
    server-final  = HMAC-SHA256(key, "jocko-cluster server" | id | cnonce | snonce)

where key = HMAC-SHA256(secret, "jocko-cluster-auth/1"). The server's fresh nonce
makes a recorded client proof useless on another connection; the server also refuses
a client nonce it has already seen (`NonceCache`), and the client checks the server's
proof, so a broker never talks to an impostor either. The labels differ per direction,
so one side's proof cannot be reflected as the other's.

The secret is only as private as the metadata log: each broker's data directory and
the raft port. The operator's `jocko.cluster.secret.file` (authenticated raft and
gossip, `cluster/linkauth.py`) and `jocko.raft.ssl.enable` (encrypted raft) keep other
processes from fetching or overhearing it; without them the raft port must be reachable
by brokers only, as Kafka's controller listener.

Pure: no sockets, no clock; the caller supplies the key and the randomness.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections import OrderedDict
from collections.abc import Callable

MECHANISM = "JOCKO-CLUSTER"
PRINCIPAL_PREFIX = "jocko-broker-"
NONCE_BYTES = 32
_VERSION = b"\x01"
_ID = struct.Struct(">i")
_CLIENT, _SERVER = b"jocko-cluster client", b"jocko-cluster server"


class ClusterAuthError(Exception):
    """The exchange failed (the message says why; it is logged, not sent)."""


def derive_key(secret: bytes) -> bytes:
    return hmac.new(secret, b"jocko-cluster-auth/1", hashlib.sha256).digest()


def _proof(key: bytes, label: bytes, broker_id: int, cnonce: bytes, snonce: bytes) -> bytes:
    return hmac.new(key, label + _ID.pack(broker_id) + cnonce + snonce,
                    hashlib.sha256).digest()


class NonceCache:
    """The client nonces seen lately (bounded: the oldest are forgotten first)."""

    def __init__(self, capacity: int = 65536) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def add(self, nonce: bytes) -> bool:
        """Remember ``nonce``; False if it was already seen."""
        if nonce in self._seen:
            return False
        self._seen[nonce] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return True


class ClusterAuthServer:
    """The accepting broker's side of one exchange."""

    def __init__(self, key: Callable[[], bytes | None], seen: NonceCache,
                 random_bytes: Callable[[int], bytes] = os.urandom) -> None:
        self._key_source = key
        self._seen = seen
        self._random = random_bytes
        self._key: bytes | None = None
        self._cnonce = self._snonce = b""
        self.broker_id: int | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise ClusterAuthError("token after the exchange completed")
        if self._key is None:
            return self._first(token)
        return self._final(token)

    def _first(self, token: bytes) -> bytes:
        if len(token) != 1 + _ID.size + NONCE_BYTES or token[:1] != _VERSION:
            raise ClusterAuthError("malformed client-first message")
        (broker_id,) = _ID.unpack_from(token, 1)
        if broker_id < 0:
            raise ClusterAuthError(f"invalid broker id {broker_id}")
        key = self._key_source()
        if key is None:
            raise ClusterAuthError("this broker does not know the cluster secret yet")
        cnonce = token[1 + _ID.size:]
        if not self._seen.add(cnonce):
            raise ClusterAuthError("client nonce replayed")
        self._key, self._cnonce, self.broker_id = key, cnonce, broker_id
        self._snonce = self._random(NONCE_BYTES)
        return _VERSION + self._snonce

    def _final(self, token: bytes) -> bytes:
        assert self._key is not None and self.broker_id is not None
        expected = _proof(self._key, _CLIENT, self.broker_id, self._cnonce, self._snonce)
        if not hmac.compare_digest(token, expected):
            raise ClusterAuthError(f"wrong proof for broker {self.broker_id}")
        self.complete = True
        return _proof(self._key, _SERVER, self.broker_id, self._cnonce, self._snonce)


class ClusterAuthClient:
    """The connecting broker's side of one exchange."""

    def __init__(self, broker_id: int, key: bytes,
                 random_bytes: Callable[[int], bytes] = os.urandom) -> None:
        self.broker_id = broker_id
        self._key = key
        self._cnonce = random_bytes(NONCE_BYTES)
        self._snonce = b""

    def first(self) -> bytes:
        return _VERSION + _ID.pack(self.broker_id) + self._cnonce

    def final(self, server_first: bytes) -> bytes:
        if len(server_first) != 1 + NONCE_BYTES or server_first[:1] != _VERSION:
            raise ClusterAuthError("malformed server-first message")
        self._snonce = server_first[1:]
        if self._snonce == self._cnonce:
            raise ClusterAuthError("server echoed the client nonce")
        return _proof(self._key, _CLIENT, self.broker_id, self._cnonce, self._snonce)

    def verify(self, server_final: bytes) -> None:
        expected = _proof(self._key, _SERVER, self.broker_id, self._cnonce, self._snonce)
        if not self._snonce or not hmac.compare_digest(server_final, expected):
            raise ClusterAuthError("the server does not know the cluster secret")
