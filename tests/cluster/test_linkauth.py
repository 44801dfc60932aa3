"""cluster/linkauth.py: the secret file, the raft handshake and frame tags, the gossip
datagram codec (tags, key rotation, replay and time window, encryption), pure."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jocko_py.cluster.linkauth import (
    HELLO_LEN,
    REPLY_LEN,
    ClusterSecret,
    FrameOpener,
    FrameSealer,
    GossipAuthError,
    GossipCodec,
    HandshakeError,
    LogLimiter,
    RaftDialler,
    RaftListener,
    SecretError,
    generate_key,
    hkdf_sha256,
    load_secret_file,
)

OLD = b"o" * 40
NEW = b"n" * 40
OTHER = b"x" * 40
T0 = 1_800_000_000_000  # a wall-clock time in ms


def secret(*keys: bytes) -> ClusterSecret:
    return ClusterSecret.from_keys(*keys)


# ------------------------------------------------------------------ secret file


def test_hkdf_matches_rfc5869_test_case_1() -> None:
    okm = hkdf_sha256(bytes.fromhex("0b" * 22), bytes.fromhex("f0f1f2f3f4f5f6f7f8f9"), 42,
                      salt=bytes.fromhex("000102030405060708090a0b0c"))
    assert okm.hex() == ("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                         "34007208d5b887185865")


def test_secret_file_keys_in_order_comments_and_blank_lines_skipped(tmp_path: Path) -> None:
    k1, k2 = generate_key(), generate_key()
    assert len(k1) == 64 and k1 != k2
    f = tmp_path / "secret"
    f.write_text(f"# cluster secret\n{k1}\n\n  {k2}  \n")
    s = load_secret_file(f)
    assert s == secret(k1.encode(), k2.encode())
    assert s.signing == s.keys[0]
    assert s.find(s.keys[1].key_id) == s.keys[1]
    assert s.find(b"\0" * 8) is None


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("", "no key in the file"),
    ("# only a comment\n\n", "no key in the file"),
    ("short\n", "line 1 is 5 characters, at least 32"),
    ("k" * 40 + "\n" + "tooshort\n", "line 2 is 8 characters"),
])
def test_secret_file_errors_are_one_line_naming_the_file(
        tmp_path: Path, content: str | None, message: str) -> None:
    f = tmp_path / "secret"
    if content is not None:
        f.write_text(content)
    with pytest.raises(SecretError) as e:
        load_secret_file(f)
    text = str(e.value)
    assert "\n" not in text and str(f) in text and message in text, text


def test_a_key_is_never_on_the_wire_and_purposes_differ() -> None:
    s = secret(OLD)
    k = s.signing
    assert len({k.key_id, k.raft, k.gossip_mac, k.gossip_enc}) == 4
    assert OLD not in k.key_id


# ------------------------------------------------------------------ raft handshake


def handshake(dialler_secret: ClusterSecret, listener_secret: ClusterSecret,
              peer_id: int = 2) -> tuple[bytes, bytes]:
    """Run the three-message handshake between node 1 (dialler) and node 2; returns one
    frame sealed each way and opened on the other side."""
    d = RaftDialler(dialler_secret, 1, peer_id)
    lis = RaftListener(listener_secret, 2)
    hello = d.hello()
    assert len(hello) == HELLO_LEN
    reply = lis.on_hello(hello)
    assert len(reply) == REPLY_LEN
    proof, dkeys = d.on_reply(reply)
    lkeys = lis.on_proof(proof)
    assert (dkeys.peer_id, lkeys.peer_id) == (2, 1)
    sent = b"vote for me"
    FrameOpener(lkeys.recv).check(sent, FrameSealer(dkeys.send).seal(sent))
    FrameOpener(dkeys.recv).check(sent, FrameSealer(lkeys.send).seal(sent))
    return dkeys.send, lkeys.send


def test_raft_handshake_with_the_same_key_authenticates_both_sides() -> None:
    a, b = handshake(secret(OLD), secret(OLD))
    assert a != b  # one key per direction
    # each connection has its own session keys (fresh nonces)
    assert handshake(secret(OLD), secret(OLD)) != (a, b)


def test_raft_handshake_with_a_wrong_key_is_refused_on_both_sides() -> None:
    # the dialler has another secret: the listener does not know its key id
    lis = RaftListener(secret(OLD), 2)
    with pytest.raises(HandshakeError, match="not in our secret file"):
        lis.on_hello(RaftDialler(secret(OTHER), 1, 2).hello())
    # the listener has another secret: the dialler refuses its reply
    d = RaftDialler(secret(OLD), 1, 2)
    with pytest.raises(HandshakeError, match="not in our secret file"):
        d.on_reply(RaftListener(secret(OTHER), 2).on_hello(
            RaftDialler(secret(OTHER), 1, 2).hello()))


def test_raft_handshake_forged_proofs_are_refused() -> None:
    # an attacker who knows the key id (it is on the wire) but not the key
    real = secret(OLD)
    forged = ClusterSecret((type(real.signing)(real.signing.key_id, b"k" * 32, b"", b""),))
    lis = RaftListener(real, 2)
    d = RaftDialler(forged, 1, 2)
    reply = lis.on_hello(d.hello())
    with pytest.raises(HandshakeError, match="does not verify"):
        d.on_reply(reply)  # the dialler cannot check the listener either
    with pytest.raises(HandshakeError, match="does not verify"):
        lis.on_proof(b"\0" * 32)
    # a proof replayed from another connection (other nonces) is refused
    d2 = RaftDialler(real, 1, 2)
    proof, _ = d2.on_reply(RaftListener(real, 2).on_hello(d2.hello()))
    lis3 = RaftListener(real, 2)
    lis3.on_hello(d2.hello())
    with pytest.raises(HandshakeError, match="does not verify"):
        lis3.on_proof(proof)


def test_raft_handshake_a_reply_from_another_node_or_garbage_is_refused() -> None:
    s = secret(OLD)
    d = RaftDialler(s, 1, peer_id=3)
    with pytest.raises(HandshakeError, match="says it is node 2, not node 3"):
        d.on_reply(RaftListener(s, 2).on_hello(d.hello()))
    with pytest.raises(HandshakeError, match="not a jocko-py raft handshake"):
        RaftListener(s, 2).on_hello(b"\0\0\0\x30" + b"{" * (HELLO_LEN - 4))
    with pytest.raises(HandshakeError, match="proof before hello"):
        RaftListener(s, 2).on_proof(b"\0" * 32)


def test_raft_handshake_across_a_key_rotation() -> None:
    # step 1: the new key added second everywhere; step 2: some brokers sign with it
    both_old_first, both_new_first = secret(OLD, NEW), secret(NEW, OLD)
    handshake(both_old_first, both_new_first)
    handshake(both_new_first, both_old_first)
    # step 3: a broker that dropped the old key still talks to one that signs with the new
    handshake(secret(NEW), both_new_first)
    # but not to one still signing with the old key it no longer lists
    with pytest.raises(HandshakeError):
        handshake(both_old_first, secret(NEW))


def test_raft_frames_tampered_reordered_or_replayed_are_refused() -> None:
    s = secret(OLD)
    d = RaftDialler(s, 1, 2)
    lis = RaftListener(s, 2)
    proof, dk = d.on_reply(lis.on_hello(d.hello()))
    lk = lis.on_proof(proof)
    seal, opener = FrameSealer(dk.send), FrameOpener(lk.recv)
    t1, t2 = seal.seal(b"one"), seal.seal(b"two")
    with pytest.raises(HandshakeError):
        opener.check(b"onE", t1)  # altered
    with pytest.raises(HandshakeError):
        opener.check(b"two", t2)  # out of order (frame 0 expected)
    opener.check(b"one", t1)
    with pytest.raises(HandshakeError):
        opener.check(b"one", t1)  # replayed
    opener.check(b"two", t2)
    # a frame of one direction is not valid in the other
    with pytest.raises(HandshakeError):
        FrameOpener(dk.recv).check(b"one", t1)


# ------------------------------------------------------------------ gossip


def test_gossip_right_key_accepted_wrong_key_refused() -> None:
    a, b = GossipCodec(secret(OLD)), GossipCodec(secret(OLD))
    dg = a.seal(b'{"t":"ping"}', T0)
    assert b.open(dg, T0 + 5) == b'{"t":"ping"}'
    with pytest.raises(GossipAuthError, match="unknown key id"):
        GossipCodec(secret(OTHER)).open(a.seal(b"x", T0), T0)


def test_gossip_tampered_or_unauthenticated_datagrams_refused() -> None:
    a, b = GossipCodec(secret(OLD)), GossipCodec(secret(OLD))
    dg = bytearray(a.seal(b'{"t":"sync","updates":[]}', T0))
    dg[40] ^= 1
    with pytest.raises(GossipAuthError, match="bad authentication tag"):
        b.open(bytes(dg), T0)
    with pytest.raises(GossipAuthError):
        b.open(b'{"t":"ping","src":"broker-9"}', T0)  # a plain datagram, as before
    with pytest.raises(GossipAuthError, match="too short"):
        b.open(b"{}", T0)
    # a forged tag with the right key id but another key
    real = secret(OLD)
    forged = ClusterSecret((type(real.signing)(real.signing.key_id, b"", b"m" * 32, b""),))
    with pytest.raises(GossipAuthError, match="bad authentication tag"):
        b.open(GossipCodec(forged).seal(b"x", T0), T0)


def test_gossip_replayed_datagram_refused() -> None:
    a, b = GossipCodec(secret(OLD)), GossipCodec(secret(OLD))
    dg = a.seal(b"x", T0)
    assert b.open(dg, T0) == b"x"
    with pytest.raises(GossipAuthError, match="replayed"):
        b.open(dg, T0 + 1000)
    assert b.open(a.seal(b"x", T0 + 1), T0 + 1000) == b"x"  # same payload, new nonce


def test_gossip_stale_or_future_timestamp_refused() -> None:
    a, b = GossipCodec(secret(OLD)), GossipCodec(secret(OLD), window_ms=30_000)
    with pytest.raises(GossipAuthError, match="window"):
        b.open(a.seal(b"x", T0 - 30_001), T0)
    with pytest.raises(GossipAuthError, match="window"):
        b.open(a.seal(b"x", T0 + 30_001), T0)
    assert b.open(a.seal(b"x", T0 - 30_000), T0) == b"x"


def test_gossip_replay_cache_is_bounded_and_expires() -> None:
    a, b = GossipCodec(secret(OLD)), GossipCodec(secret(OLD), window_ms=1000,
                                                  replay_cache_size=100)
    for i in range(500):
        b.open(a.seal(b"x", T0 + i), T0 + i)
    assert len(b._seen) <= 100
    b.open(a.seal(b"x", T0 + 10_000), T0 + 10_000)
    assert len(b._seen) == 1  # everything older than the window is forgotten


def test_gossip_key_rotation_old_key_accepted_while_listed_second() -> None:
    old_only, old_first, new_first, new_only = (
        GossipCodec(secret(OLD)), GossipCodec(secret(OLD, NEW)),
        GossipCodec(secret(NEW, OLD)), GossipCodec(secret(NEW)))
    assert new_first.open(old_only.seal(b"a", T0), T0) == b"a"
    assert old_first.open(new_first.seal(b"b", T0), T0) == b"b"
    assert new_only.open(new_first.seal(b"c", T0), T0) == b"c"
    with pytest.raises(GossipAuthError, match="unknown key id"):
        new_only.open(old_first.seal(b"d", T0), T0)


def test_gossip_encryption_hides_the_payload_and_tampered_ciphertext_is_refused() -> None:
    enc, plain = GossipCodec(secret(OLD), encrypt=True), GossipCodec(secret(OLD))
    payload = b'{"t":"sync","src":"broker-1","updates":[]}'
    dg = enc.seal(payload, T0)
    assert b"broker-1" not in dg
    assert plain.open(dg, T0) == payload  # a receiver takes both forms
    assert enc.open(plain.seal(payload, T0), T0) == payload
    bad = bytearray(enc.seal(payload, T0))
    bad[45] ^= 0x80
    with pytest.raises(GossipAuthError, match="bad authentication tag"):
        plain.open(bytes(bad), T0)
    # even with a valid tag (a holder of the MAC key only), a ciphertext that does not
    # decrypt is refused
    s = secret(OLD)
    k = s.signing
    wrong_enc = ClusterSecret((type(k)(k.key_id, k.raft, k.gossip_mac, b"w" * 32),))
    with pytest.raises(GossipAuthError, match="does not decrypt"):
        plain.open(GossipCodec(wrong_enc, encrypt=True).seal(payload, T0), T0)


def test_log_limiter_one_line_per_reason_per_interval() -> None:
    lim = LogLimiter(interval_ms=60_000)
    assert lim.allow("10.0.0.9", 0) == 0
    assert [lim.allow("10.0.0.9", t) for t in (1, 2, 3)] == [None] * 3
    assert lim.allow("10.0.0.8", 4) == 0
    assert lim.allow("10.0.0.9", 60_000) == 3


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_refused_cleanly_never_crash(data: bytes) -> None:
    """Whatever a peer sends: the codecs raise their own error, nothing else."""
    s = secret(OLD)
    with pytest.raises(GossipAuthError):
        GossipCodec(s).open(data, T0)
    lis = RaftListener(s, 2)
    with pytest.raises(HandshakeError):
        lis.on_hello(data[:HELLO_LEN].ljust(HELLO_LEN, b"\0"))
        lis.on_proof(data[:32])
    d = RaftDialler(s, 1, 2)
    with pytest.raises(HandshakeError):
        d.on_reply(data)
    with pytest.raises(HandshakeError):
        FrameOpener(b"k" * 32).check(data, data[:16])
