"""SCRAM (RFC 5802) against RFC 7677's SCRAM-SHA-256 test vector, both sides, and the
server's refusals (wrong proof, nonce, channel binding, unknown user, garbage)."""

from __future__ import annotations

import base64
import os
import random

import pytest

from jocko_py.broker.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    make_credential,
)

# RFC 7677 section 3
USER, PASSWORD = "user", "pencil"
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

CRED = make_credential("SCRAM-SHA-256", PASSWORD, 4096, SALT)


def server(cred: ScramCredential | None = CRED, mech: str = "SCRAM-SHA-256") -> ScramServer:
    return ScramServer(mech, lambda u: cred if u == USER else None, server_nonce=SERVER_NONCE)


def test_server_reproduces_rfc7677_vector() -> None:
    s = server()
    assert s.step(CLIENT_FIRST) == SERVER_FIRST
    assert s.step(CLIENT_FINAL) == SERVER_FINAL
    assert s.complete and s.username == USER


def test_client_reproduces_rfc7677_vector() -> None:
    c = ScramClient("SCRAM-SHA-256", USER, PASSWORD, client_nonce=CLIENT_NONCE)
    assert c.first() == CLIENT_FIRST
    assert c.final(SERVER_FIRST) == CLIENT_FINAL
    c.verify(SERVER_FINAL)


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree(mech: str) -> None:
    cred = make_credential(mech, "secret", 8192)
    s = ScramServer(mech, lambda u: cred if u == "bob" else None)
    c = ScramClient(mech, "bob", "secret")
    c.verify(s.step(c.final(s.step(c.first()))))
    assert s.complete


def test_wrong_password_fails() -> None:
    s = server()
    c = ScramClient("SCRAM-SHA-256", USER, "pen", client_nonce=CLIENT_NONCE)
    sf = s.step(c.first())
    with pytest.raises(ScramError):
        s.step(c.final(sf))
    assert not s.complete


def test_unknown_user_fails_at_the_first_message() -> None:
    with pytest.raises(ScramError):
        server().step(b"n,,n=nobody,r=abc")


@pytest.mark.parametrize("final", [
    CLIENT_FINAL.replace(b"r=rOpr", b"r=XOpr"),  # another nonce
    CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),  # channel binding y,, though n,, was sent
    CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"),  # altered proof
    CLIENT_FINAL.split(b",p=")[0],  # no proof
    b"c=biws,r=" + CLIENT_NONCE.encode() + SERVER_NONCE.encode() + b",p=AAAA",  # short proof
])
def test_bad_client_final_fails(final: bytes) -> None:
    s = server()
    s.step(CLIENT_FIRST)
    with pytest.raises(ScramError):
        s.step(final)
    with pytest.raises(ScramError):  # and the exchange is over
        s.step(CLIENT_FINAL)


@pytest.mark.parametrize("first", [
    b"p=tls-unique,,n=user,r=abc",  # channel binding asked
    b"n,a=other,n=user,r=abc",  # authzid of another user
    b"n,,r=abc,n=user", b"n,,n=user", b"", b"n,,", b"\xff\xfe", b"n,,n=us=zzer,r=abc",
    b"n,,n=user,r=" + b"a" * 5000,
])
def test_bad_client_first_fails(first: bytes) -> None:
    with pytest.raises(ScramError):
        server().step(first)


def test_replayed_client_final_fails_in_a_new_exchange() -> None:
    # a recorded exchange's final message is useless against a fresh server nonce
    s2 = ScramServer("SCRAM-SHA-256", lambda u: CRED)
    s2.step(CLIENT_FIRST)
    with pytest.raises(ScramError):
        s2.step(CLIENT_FINAL)


def test_random_input_only_ever_raises_scram_error() -> None:
    rnd = random.Random(1234)
    for _ in range(2000):
        s = server()
        try:
            if rnd.random() < 0.5:
                s.step(CLIENT_FIRST)
            n = rnd.randrange(0, 200)
            s.step(os.urandom(n) if rnd.random() < 0.5 else bytes(
                rnd.choice(b"nrcpvsi=,abc0123+/") for _ in range(n)))
        except ScramError:
            pass


def test_old_librdkafka_doubled_client_nonce_is_accepted_as_kafka_3_9_does() -> None:
    # librdkafka < 2.6.1 sends r=<client nonce><combined nonce> (the server nonce is
    # still in it, so a replay fails all the same); the proof covers what it sent
    import hashlib
    import hmac

    s = server()
    s.step(CLIENT_FIRST)
    doubled = f"c=biws,r={CLIENT_NONCE}{CLIENT_NONCE}{SERVER_NONCE}"
    auth = f"n=user,r={CLIENT_NONCE},{SERVER_FIRST.decode()},{doubled}".encode()
    salted = hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), SALT, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    sig = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True)))
    s.step(doubled.encode() + b",p=" + proof)
    assert s.complete
    s2 = server()  # any other prefix is still refused
    s2.step(CLIENT_FIRST)
    with pytest.raises(ScramError):
        s2.step(doubled.replace(f"r={CLIENT_NONCE}", "r=xx").encode() + b",p=" + proof)
