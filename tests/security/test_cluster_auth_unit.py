"""JOCKO-CLUSTER (broker/security/cluster_auth.py) and the cluster secret record, as
pure units: the exchange succeeds with the secret both ways; a wrong proof, a wrong
key, a replayed client nonce, a replayed proof, an impostor server and malformed
tokens are refused; the secret is committed once by the controller, survives a
snapshot, and is never printed."""

from __future__ import annotations

import itertools

import pytest

from jocko_py.broker.security.cluster_auth import (
    ClusterAuthClient,
    ClusterAuthError,
    ClusterAuthServer,
    NonceCache,
    derive_key,
)
from jocko_py.cluster.controller import Controller
from jocko_py.cluster.metadata import (
    ClusterSecretRecord,
    MetadataImage,
    decode_record,
    encode_record,
)

SECRET = bytes(range(32))
KEY = derive_key(SECRET)


def counter_random() -> object:
    """Distinct deterministic nonces."""
    c = itertools.count(1)
    return lambda n: next(c).to_bytes(n, "big")


def exchange(client: ClusterAuthClient, server: ClusterAuthServer) -> None:
    client.verify(server.step(client.final(server.step(client.first()))))


def test_exchange_with_the_secret_authenticates_both_sides() -> None:
    server = ClusterAuthServer(lambda: KEY, NonceCache())
    client = ClusterAuthClient(7, KEY)
    exchange(client, server)
    assert server.complete and server.broker_id == 7


def test_wrong_key_is_refused_by_the_server() -> None:
    server = ClusterAuthServer(lambda: KEY, NonceCache())
    client = ClusterAuthClient(1, derive_key(b"another cluster's secret........"))
    with pytest.raises(ClusterAuthError, match="wrong proof"):
        server.step(client.final(server.step(client.first())))
    assert not server.complete


def test_wrong_proof_is_refused() -> None:
    server = ClusterAuthServer(lambda: KEY, NonceCache())
    client = ClusterAuthClient(1, KEY)
    server.step(client.first())
    with pytest.raises(ClusterAuthError):
        server.step(b"\0" * 32)
    with pytest.raises(ClusterAuthError):
        ClusterAuthServer(lambda: KEY, NonceCache()).step(b"garbage")


def test_replayed_client_nonce_is_refused() -> None:
    seen = NonceCache()
    rnd = lambda n: b"\7" * n  # noqa: E731  the same client nonce twice
    first = ClusterAuthClient(1, KEY, random_bytes=rnd).first()
    ClusterAuthServer(lambda: KEY, seen).step(first)
    with pytest.raises(ClusterAuthError, match="replayed"):
        ClusterAuthServer(lambda: KEY, seen).step(first)


def test_replayed_proof_fails_against_a_fresh_server_nonce() -> None:
    """A recorded exchange (client-first and client-final) replayed on a new connection:
    the server's nonce differs, so the recorded proof does not match."""
    seen = NonceCache(capacity=0)  # even with the nonce cache out of the way
    rnd = counter_random()
    client = ClusterAuthClient(1, KEY)
    s1 = ClusterAuthServer(lambda: KEY, seen, random_bytes=rnd)  # type: ignore[arg-type]
    first = client.first()
    proof = client.final(s1.step(first))
    s1.step(proof)
    s2 = ClusterAuthServer(lambda: KEY, seen, random_bytes=rnd)  # type: ignore[arg-type]
    s2.step(first)
    with pytest.raises(ClusterAuthError):
        s2.step(proof)


def test_impostor_server_is_detected_by_the_client() -> None:
    real = ClusterAuthClient(1, KEY)
    impostor = ClusterAuthServer(lambda: derive_key(b"guess" * 7), NonceCache())
    real.final(impostor.step(real.first()))
    with pytest.raises(ClusterAuthError):
        real.verify(b"\0" * 32)
    echo = ClusterAuthClient(1, KEY)  # a server echoing the client's nonce (reflection)
    with pytest.raises(ClusterAuthError, match="echoed"):
        echo.final(b"\x01" + echo.first()[5:])


def test_server_without_the_secret_refuses() -> None:
    with pytest.raises(ClusterAuthError, match="does not know"):
        ClusterAuthServer(lambda: None, NonceCache()).step(ClusterAuthClient(1, KEY).first())


def test_proofs_are_bound_to_the_broker_id() -> None:
    """A proof computed for broker 1 does not authenticate a claim to be broker 2 (same
    nonces on both sides: only the id differs)."""
    same = lambda n: b"\x05" * n  # noqa: E731
    c1 = ClusterAuthClient(1, KEY, random_bytes=same)
    c2 = ClusterAuthClient(2, KEY, random_bytes=same)
    server = ClusterAuthServer(lambda: KEY, NonceCache(), random_bytes=lambda n: b"\x09" * n)
    server_first = server.step(c2.first())
    with pytest.raises(ClusterAuthError):
        server.step(c1.final(server_first))


def test_nonce_cache_is_bounded() -> None:
    cache = NonceCache(capacity=2)
    assert cache.add(b"a") and cache.add(b"b") and not cache.add(b"a")
    assert cache.add(b"c") and cache.add(b"a")  # "a" was forgotten first


def test_secret_record_round_trips_and_is_never_printed() -> None:
    rec = ClusterSecretRecord(SECRET)
    assert decode_record(encode_record(rec)) == rec
    assert SECRET.hex() not in repr(rec) and repr(SECRET) not in repr(rec)
    img = MetadataImage.from_records([rec, ClusterSecretRecord(b"\1" * 32)])
    assert img.cluster_secret == SECRET  # the first one stays
    assert MetadataImage.from_records(img.snapshot()).cluster_secret == SECRET
    assert repr(SECRET) not in repr(img)


def test_controller_commits_one_secret() -> None:
    c = Controller(random_bytes=lambda n: b"\3" * n)
    img = MetadataImage()
    recs = c.cluster_secret_records(img)
    assert recs == [ClusterSecretRecord(b"\3" * 32)]
    img.apply_batch(recs)
    assert c.cluster_secret_records(img) == []
    assert len(Controller().cluster_secret_records(MetadataImage())[0].secret) == 32  # type: ignore[union-attr]
