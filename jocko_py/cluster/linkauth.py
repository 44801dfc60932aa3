"""Authentication of the cluster links (raft over TCP, gossip over UDP) with a secret
the brokers share. Pure: bytes in, bytes out, ``now`` passed in; no sockets, no asyncio.

The secret (``jocko.cluster.secret.file``) is a text file of one or more keys, one per
line (blank lines and ``#`` comments are skipped; each key at least 32 characters,
``jocko-py cluster gen-secret`` writes 64 hex digits). The first key signs, every key
verifies, so keys rotate without downtime: add the new key as a second line on every
broker (restart each), make it the first line everywhere, then remove the old one.
Each key is named on the wire by an 8-byte key id derived from it (never the key), and
each link uses its own key derived with HKDF-SHA256, so a raft proof is never a valid
gossip tag.

Raft, before any frame: a mutual challenge-response.

    dialler  -> HELLO  magic "JKRH", version, node id, key id, nonce (32 bytes)
    listener -> REPLY  magic "JKRH", version, node id, key id, nonce, proof (32 bytes)
    dialler  -> PROOF  proof (32 bytes)

Each proof is HMAC-SHA256, under the raft key of the key id its sender named, of a
direction label (listener->dialler or dialler->listener, the raft purpose in it) and
the transcript (HELLO and REPLY without the proof: both nonces, both node ids, both key
ids). The dialler checks that the listener is the node it dialled. Both then derive a
session key from both keys and the transcript, and every frame after the handshake is
``[u32 length][body][16-byte tag]``, the tag an HMAC of a per-direction sequence number
and the body under that direction's session key: a frame cannot be forged, altered,
dropped silently, reordered or replayed on that connection (or on another).

Gossip: each datagram is ``header || body || tag``; the header is magic "JG", version,
flags (bit 0: encrypted), key id, the sender's wall-clock time in ms and a random
16-byte nonce. The body is the plain message or, when the sender encrypts, its
AES-256-GCM ciphertext (key derived from the secret with HKDF, nonce the first 12 bytes
of the header's nonce, the header as associated data). The tag is HMAC-SHA256 (first
16 bytes) of header and body. A receiver drops a datagram with an unknown key id, a bad
tag, a time more than ``window_ms`` from its own clock, or a nonce it has accepted
within the window (a bounded replay cache); it accepts plain and encrypted datagrams
alike, so encryption can be switched on broker by broker.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import os
import secrets
import ssl
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIN_KEY_CHARS = 32
KEY_ID_LEN = 8
NONCE_LEN = 32
PROOF_LEN = 32
TAG_LEN = 16

_PURPOSE_RAFT = b"jocko-py cluster link v1 raft"
_PURPOSE_GOSSIP_MAC = b"jocko-py cluster link v1 gossip mac"
_PURPOSE_GOSSIP_ENC = b"jocko-py cluster link v1 gossip aes-256-gcm"
_PURPOSE_KEY_ID = b"jocko-py cluster link v1 key id"


class SecretError(ValueError):
    """The secret file is missing, unreadable, empty or holds a key that is too short."""


class HandshakeError(ValueError):
    """A raft handshake or frame that does not authenticate (the reason is the text)."""


class GossipAuthError(ValueError):
    """A gossip datagram that does not authenticate (the reason is the text)."""


def hkdf_sha256(ikm: bytes, info: bytes, length: int = 32, salt: bytes = b"") -> bytes:
    """RFC 5869 HKDF with SHA-256."""
    prk = hmac.new(salt or b"\0" * 32, ikm, hashlib.sha256).digest()
    out, block = b"", b""
    i = 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        out += block
        i += 1
    return out[:length]


@dataclass(frozen=True)
class LinkKey:
    """One key of the secret and the keys derived from it."""

    key_id: bytes
    raft: bytes
    gossip_mac: bytes
    gossip_enc: bytes

    @classmethod
    def derive(cls, material: bytes) -> LinkKey:
        return cls(hkdf_sha256(material, _PURPOSE_KEY_ID, KEY_ID_LEN),
                   hkdf_sha256(material, _PURPOSE_RAFT),
                   hkdf_sha256(material, _PURPOSE_GOSSIP_MAC),
                   hkdf_sha256(material, _PURPOSE_GOSSIP_ENC))


@dataclass(frozen=True)
class ClusterSecret:
    """The keys of the secret file, the signing key first."""

    keys: tuple[LinkKey, ...]

    @classmethod
    def from_keys(cls, *keys: bytes) -> ClusterSecret:
        return cls(tuple(LinkKey.derive(k) for k in keys))

    @property
    def signing(self) -> LinkKey:
        return self.keys[0]

    def find(self, key_id: bytes) -> LinkKey | None:
        for k in self.keys:
            if hmac.compare_digest(k.key_id, key_id):
                return k
        return None


def generate_key() -> str:
    """A new random key (256 bits as 64 hex digits), one line of a secret file."""
    return secrets.token_hex(32)


def parse_secret(text: str, source: str) -> ClusterSecret:
    keys: list[bytes] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if len(line) < MIN_KEY_CHARS:
            raise SecretError(f"{source}: the key on line {n} is {len(line)} characters, at "
                              f"least {MIN_KEY_CHARS} are needed (jocko-py cluster gen-secret "
                              "makes one)")
        keys.append(line.encode())
    if not keys:
        raise SecretError(f"{source}: no key in the file (one key per line; jocko-py cluster "
                          "gen-secret makes one)")
    return ClusterSecret.from_keys(*keys)


def load_secret_file(path: str | Path) -> ClusterSecret:
    """The secret in ``path``; SecretError (one line, naming the file) if it cannot be used."""
    source = f"jocko.cluster.secret.file {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SecretError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SecretError(f"{source}: cannot read it: {e}") from None
    return parse_secret(text, source)


# ------------------------------------------------------------------ raft handshake

_RAFT_MAGIC = b"JKRH"
_RAFT_VERSION = 1
_HELLO = struct.Struct(f">4sBi{KEY_ID_LEN}s{NONCE_LEN}s")
HELLO_LEN = _HELLO.size
REPLY_LEN = _HELLO.size + PROOF_LEN
_LABEL_SERVER = _PURPOSE_RAFT + b" listener->dialler"
_LABEL_CLIENT = _PURPOSE_RAFT + b" dialler->listener"
_SEQ = struct.Struct(">Q")


def _proof(key: bytes, label: bytes, transcript: bytes) -> bytes:
    return hmac.new(key, label + transcript, hashlib.sha256).digest()


def _parse_hello(data: bytes, what: str) -> tuple[int, bytes, bytes]:
    if len(data) != HELLO_LEN:
        raise HandshakeError(f"{what}: {len(data)} bytes, expected {HELLO_LEN}")
    magic, version, node_id, key_id, nonce = _HELLO.unpack(data)
    if magic != _RAFT_MAGIC:
        raise HandshakeError(f"{what}: not a jocko-py raft handshake (no cluster secret "
                             "on the other side?)")
    if version != _RAFT_VERSION:
        raise HandshakeError(f"{what}: handshake version {version}, expected {_RAFT_VERSION}")
    return int(node_id), bytes(key_id), bytes(nonce)


@dataclass(frozen=True)
class FrameKeys:
    """Session keys of one authenticated raft connection, per direction."""

    send: bytes
    recv: bytes
    peer_id: int


def _session(k_dialler: LinkKey, k_listener: LinkKey, transcript: bytes,
             dialler: bool) -> tuple[bytes, bytes]:
    inner = hmac.new(k_listener.raft, _PURPOSE_RAFT + b" session" + transcript,
                     hashlib.sha256).digest()
    session = hmac.new(k_dialler.raft, inner, hashlib.sha256).digest()
    d2l = hmac.new(session, b"dialler->listener", hashlib.sha256).digest()
    l2d = hmac.new(session, b"listener->dialler", hashlib.sha256).digest()
    return (d2l, l2d) if dialler else (l2d, d2l)


class RaftDialler:
    """The dialling side of the handshake: ``hello()``, then ``on_reply(reply)`` gives
    the PROOF to send and the connection's frame keys (or raises HandshakeError)."""

    def __init__(self, secret: ClusterSecret, node_id: int, peer_id: int,
                 nonce: bytes | None = None) -> None:
        self.secret = secret
        self.node_id = node_id
        self.peer_id = peer_id
        self._hello = _HELLO.pack(_RAFT_MAGIC, _RAFT_VERSION, node_id, secret.signing.key_id,
                                  nonce if nonce is not None else os.urandom(NONCE_LEN))

    def hello(self) -> bytes:
        return self._hello

    def on_reply(self, reply: bytes) -> tuple[bytes, FrameKeys]:
        if len(reply) != REPLY_LEN:
            raise HandshakeError(f"reply of {len(reply)} bytes, expected {REPLY_LEN}")
        head, proof = reply[:HELLO_LEN], reply[HELLO_LEN:]
        peer, key_id, _ = _parse_hello(head, "reply")
        if peer != self.peer_id:
            raise HandshakeError(f"the listener says it is node {peer}, not node {self.peer_id}")
        theirs = self.secret.find(key_id)
        if theirs is None:
            raise HandshakeError(f"the listener signs with key id {key_id.hex()}, which is not "
                                 "in our secret file")
        transcript = self._hello + head
        if not hmac.compare_digest(_proof(theirs.raft, _LABEL_SERVER, transcript), proof):
            raise HandshakeError("the listener's proof does not verify (another secret)")
        mine = self.secret.signing
        send, recv = _session(mine, theirs, transcript, dialler=True)
        return _proof(mine.raft, _LABEL_CLIENT, transcript), FrameKeys(send, recv, peer)


class RaftListener:
    """The listening side: ``on_hello(hello)`` gives the REPLY to send, then
    ``on_proof(proof)`` gives the frame keys (or raises HandshakeError)."""

    def __init__(self, secret: ClusterSecret, node_id: int, nonce: bytes | None = None) -> None:
        self.secret = secret
        self.node_id = node_id
        self._nonce = nonce if nonce is not None else os.urandom(NONCE_LEN)
        self._transcript: bytes | None = None
        self._theirs: LinkKey | None = None
        self.peer_id = -1

    def on_hello(self, hello: bytes) -> bytes:
        peer, key_id, _ = _parse_hello(hello, "hello")
        theirs = self.secret.find(key_id)
        if theirs is None:
            raise HandshakeError(f"node {peer} signs with key id {key_id.hex()}, which is not "
                                 "in our secret file")
        mine = self.secret.signing
        head = _HELLO.pack(_RAFT_MAGIC, _RAFT_VERSION, self.node_id, mine.key_id, self._nonce)
        self._transcript = hello + head
        self._theirs = theirs
        self.peer_id = peer
        return head + _proof(mine.raft, _LABEL_SERVER, self._transcript)

    def on_proof(self, proof: bytes) -> FrameKeys:
        if self._transcript is None or self._theirs is None:
            raise HandshakeError("proof before hello")
        expected = _proof(self._theirs.raft, _LABEL_CLIENT, self._transcript)
        if len(proof) != PROOF_LEN or not hmac.compare_digest(expected, proof):
            raise HandshakeError(f"node {self.peer_id}'s proof does not verify (another secret)")
        send, recv = _session(self._theirs, self.secret.signing, self._transcript,
                              dialler=False)
        return FrameKeys(send, recv, self.peer_id)


class FrameSealer:
    """Tags the frames one side sends on an authenticated connection, in order."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.seq = 0

    def seal(self, body: bytes) -> bytes:
        tag = hmac.new(self.key, _SEQ.pack(self.seq) + body, hashlib.sha256).digest()[:TAG_LEN]
        self.seq += 1
        return tag


class FrameOpener:
    """Checks the frames one side receives, in order; HandshakeError on a bad tag."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.seq = 0

    def check(self, body: bytes, tag: bytes) -> None:
        want = hmac.new(self.key, _SEQ.pack(self.seq) + body, hashlib.sha256).digest()[:TAG_LEN]
        if not hmac.compare_digest(want, tag):
            raise HandshakeError(f"frame {self.seq} does not verify")
        self.seq += 1


# ------------------------------------------------------------------ gossip datagrams

_GOSSIP_MAGIC = b"JG"
_GOSSIP_VERSION = 1
_FLAG_ENCRYPTED = 1
_GHEAD = struct.Struct(f">2sBB{KEY_ID_LEN}sQ16s")
GOSSIP_OVERHEAD = _GHEAD.size + TAG_LEN  # (+16 bytes of GCM tag when encrypted)


class GossipCodec:
    """Seals outgoing gossip datagrams and opens incoming ones (see the module doc).
    ``encrypt`` decides only what this member sends; both forms are accepted."""

    def __init__(self, secret: ClusterSecret, encrypt: bool = False, window_ms: int = 30_000,
                 replay_cache_size: int = 65_536) -> None:
        self.secret = secret
        self.encrypt = encrypt
        self.window_ms = window_ms
        self.replay_cache_size = replay_cache_size
        # nonce -> the time (sender's clock, ms) after which a replay fails the window
        self._seen: collections.OrderedDict[bytes, int] = collections.OrderedDict()
        self._aeads: dict[bytes, Any] = {}
        if encrypt:
            self._aead(secret.signing)  # fail at start-up if `cryptography` is missing

    def _aead(self, key: LinkKey) -> Any:
        aead = self._aeads.get(key.key_id)
        if aead is None:
            try:
                from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            except ImportError as e:  # pragma: no cover - a runtime dependency
                raise SecretError("jocko.gossip.encrypt=true needs the `cryptography` "
                                  "package") from e
            aead = self._aeads[key.key_id] = AESGCM(key.gossip_enc)
        return aead

    def seal(self, payload: bytes, now_ms: int, nonce: bytes | None = None) -> bytes:
        key = self.secret.signing
        nonce = nonce if nonce is not None else os.urandom(16)
        flags = _FLAG_ENCRYPTED if self.encrypt else 0
        head = _GHEAD.pack(_GOSSIP_MAGIC, _GOSSIP_VERSION, flags, key.key_id,
                           max(0, now_ms), nonce)
        body = payload
        if self.encrypt:
            body = self._aead(key).encrypt(nonce[:12], payload, head)
        tag = hmac.new(key.gossip_mac, head + body, hashlib.sha256).digest()[:TAG_LEN]
        return head + body + tag

    def open(self, datagram: bytes, now_ms: int) -> bytes:
        """The payload of an authentic, fresh datagram; GossipAuthError otherwise."""
        if len(datagram) < GOSSIP_OVERHEAD:
            raise GossipAuthError("too short to carry an authentication tag (a peer without "
                                  "the cluster secret?)")
        head, body, tag = (datagram[:_GHEAD.size], datagram[_GHEAD.size:-TAG_LEN],
                           datagram[-TAG_LEN:])
        magic, version, flags, key_id, ts, nonce = _GHEAD.unpack(head)
        if magic != _GOSSIP_MAGIC:
            raise GossipAuthError("not an authenticated datagram (a peer without the cluster "
                                  "secret?)")
        if version != _GOSSIP_VERSION:
            raise GossipAuthError(f"version {version}, expected {_GOSSIP_VERSION}")
        key = self.secret.find(key_id)
        if key is None:
            raise GossipAuthError(f"unknown key id {key_id.hex()}")
        want = hmac.new(key.gossip_mac, head + body, hashlib.sha256).digest()[:TAG_LEN]
        if not hmac.compare_digest(want, tag):
            raise GossipAuthError("bad authentication tag")
        if abs(now_ms - ts) > self.window_ms:
            raise GossipAuthError(f"timestamp {now_ms - ts:+d} ms from our clock (window "
                                  f"±{self.window_ms} ms; are the clocks in sync?)")
        self._expire(now_ms)
        if nonce in self._seen:
            raise GossipAuthError("replayed datagram")
        payload = body
        if flags & _FLAG_ENCRYPTED:
            try:
                payload = self._aead(key).decrypt(nonce[:12], body, head)
            except Exception as e:  # cryptography's InvalidTag
                raise GossipAuthError("does not decrypt") from e
        self._seen[nonce] = ts + self.window_ms
        while len(self._seen) > self.replay_cache_size:
            self._seen.popitem(last=False)
        return payload

    def _expire(self, now_ms: int) -> None:
        # entries go in roughly in time order: drop expired ones from the front
        while self._seen:
            nonce, until = next(iter(self._seen.items()))
            if until >= now_ms:
                break
            del self._seen[nonce]


class LogLimiter:
    """At most one log line per reason every ``interval_ms``: ``allow(reason, now_ms)``
    is the number of lines suppressed since the last one, or None to stay quiet."""

    def __init__(self, interval_ms: int = 60_000, max_reasons: int = 1024) -> None:
        self.interval_ms = interval_ms
        self.max_reasons = max_reasons
        self._last: dict[str, tuple[int, int]] = {}

    def allow(self, reason: str, now_ms: int) -> int | None:
        last = self._last.get(reason)
        if last is not None and now_ms - last[0] < self.interval_ms:
            self._last[reason] = (last[0], last[1] + 1)
            return None
        if len(self._last) >= self.max_reasons:
            self._last.clear()
        self._last[reason] = (now_ms, 0)
        return 0 if last is None else last[1]


@dataclass(frozen=True)
class LinkSecurity:
    """What protects a node's cluster links: the shared secret (raft handshake and
    frame tags, gossip tags), gossip encryption, and mutual TLS for raft (a server
    context that requires client certificates and a client context with this node's
    certificate). All off: the links are open, as before."""

    secret: ClusterSecret | None = None
    gossip_encrypt: bool = False
    raft_server_ssl: ssl.SSLContext | None = None
    raft_client_ssl: ssl.SSLContext | None = None

    @property
    def authenticated(self) -> bool:
        return self.secret is not None or self.raft_server_ssl is not None
