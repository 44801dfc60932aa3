"""The SASL exchange on the wire, against a real broker: order, refusals, delays,
hostile input (truncated, oversized, out of order, replayed), re-authentication."""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jocko_py.broker.security.scram import ScramClient
from jocko_py.protocol.errors import ErrorCode
from tests.security.conftest import PASSWORDS, SecureBroker
from tests.security.raw import Raw
from tests.support.broker import REPO

pytestmark = pytest.mark.timeout(60)
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}


def plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def test_api_versions_then_plain_then_requests(secure_broker: SecureBroker) -> None:
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        assert c.call(18, 3, {"client_software_name": "t", "client_software_version": "1"}
                      ).error_code == 0
        hs = c.handshake("PLAIN")
        assert hs.error_code == 0 and list(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
        assert c.authenticate(plain("alice", PASSWORDS["alice"])).error_code == 0
        md = c.call(3, 12, METADATA_ALL)
        assert [b.port for b in md.brokers] == [secure_broker.ports["SASL_PLAINTEXT"]]


@pytest.mark.parametrize("api", [(3, 12, METADATA_ALL), (19, 7, {"topics": [], "timeout_ms": 1})])
def test_requests_before_authentication_close_the_connection(
        secure_broker: SecureBroker, api: tuple[int, int, dict[str, object]]) -> None:
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        assert c.call(*api) is None
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:  # also between handshake and auth
        assert c.handshake("PLAIN").error_code == 0
        assert c.call(*api) is None


def test_authenticate_before_handshake_is_illegal(secure_broker: SecureBroker) -> None:
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        r = c.authenticate(plain("alice", PASSWORDS["alice"]))
        assert r.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert c.closed()


@pytest.mark.parametrize("mech", ["SCRAM-SHA-512", "GSSAPI", "", "x" * 300])
def test_wrong_mechanism_is_refused_and_closed(secure_broker: SecureBroker, mech: str) -> None:
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        r = c.handshake(mech)
        assert r.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert list(r.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
        assert c.closed()


@pytest.mark.parametrize(("user", "password"), [
    ("alice", "wrong"), ("nobody", "whatever"), ("alice", ""), ("", "x")])
def test_bad_plain_credentials_are_refused_after_the_delay(
        secure_broker: SecureBroker, user: str, password: str) -> None:
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        c.handshake("PLAIN")
        t0 = time.monotonic()
        r = c.authenticate(plain(user, password))
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert time.monotonic() - t0 >= 0.25  # connection.failed.authentication.delay.ms=300
        assert c.closed()


def scram_exchange(c: Raw, mech: str, user: str, password: str) -> tuple[int, int]:
    """(error of the first step, error of the second) of a full SCRAM exchange."""
    assert c.handshake(mech).error_code == 0
    cl = ScramClient(mech, user, password)
    r1 = c.authenticate(cl.first())
    if r1.error_code:
        return r1.error_code, -1
    r2 = c.authenticate(cl.final(bytes(r1.auth_bytes)))
    if not r2.error_code:
        cl.verify(bytes(r2.auth_bytes))
    return r1.error_code, r2.error_code


def test_scram_success_wrong_password_unknown_user(secure_broker: SecureBroker) -> None:
    addr = secure_broker.addr("SASL_PLAINTEXT")
    with Raw(addr) as c:
        assert scram_exchange(c, "SCRAM-SHA-256", "scram256", PASSWORDS["scram256"]) == (0, 0)
        assert c.call(3, 12, METADATA_ALL) is not None
    with Raw(addr) as c:
        assert scram_exchange(c, "SCRAM-SHA-256", "scram256", "nope") == (
            0, ErrorCode.SASL_AUTHENTICATION_FAILED)
        assert c.closed()
    with Raw(addr) as c:
        assert scram_exchange(c, "SCRAM-SHA-256", "ghost", "x")[0] == \
            ErrorCode.SASL_AUTHENTICATION_FAILED
        assert c.closed()
    with Raw(addr) as c:  # a SHA-512 user has no SHA-256 credential
        assert scram_exchange(c, "SCRAM-SHA-256", "scram512", PASSWORDS["scram512"])[0] == \
            ErrorCode.SASL_AUTHENTICATION_FAILED


def test_replayed_scram_final_message_is_refused(secure_broker: SecureBroker) -> None:
    addr = secure_broker.addr("SASL_PLAINTEXT")
    cl = ScramClient("SCRAM-SHA-256", "scram256", PASSWORDS["scram256"], client_nonce="fixed")
    with Raw(addr) as c:
        c.handshake("SCRAM-SHA-256")
        final = cl.final(bytes(c.authenticate(cl.first()).auth_bytes))
        assert c.authenticate(final).error_code == 0
    with Raw(addr) as c:  # same client nonce, recorded final message: new server nonce
        c.handshake("SCRAM-SHA-256")
        assert c.authenticate(cl.first()).error_code == 0
        assert c.authenticate(final).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert c.closed()


def test_oversized_frame_before_authentication_closes_without_reading_it(
        secure_broker: SecureBroker) -> None:
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        c.sock.sendall(struct.pack(">i", 600_000) + b"\0" * 100)  # > sasl.server.max.receive.size
        assert c.closed()
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        c.sock.sendall(struct.pack(">i", 2**31 - 1))
        assert c.closed()


def test_truncated_and_garbage_sasl_input_never_hurts_the_broker(
        secure_broker: SecureBroker) -> None:
    addr = secure_broker.addr("SASL_PLAINTEXT")
    rnd = random.Random(42)
    for i in range(9):
        with Raw(addr) as c:
            mech = ["PLAIN", "SCRAM-SHA-256"][i % 2]
            c.handshake(mech)
            if i % 3 == 0:  # a frame cut short: header of SaslAuthenticate, then close
                c.sock.sendall(struct.pack(">i", 40) + struct.pack(">hhi", 36, 2, 9))
                continue
            token = os.urandom(rnd.randrange(0, 300)) if i % 3 == 1 else b"n,,n=" + b"=" * 50
            r = c.authenticate(token)
            assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED or (
                mech == "SCRAM-SHA-256" and r.error_code == 0 and i % 3 == 1)
    # a frame whose SaslAuthenticate bytes claim more than the frame holds
    with Raw(addr) as c:
        c.handshake("PLAIN")
        body = struct.pack(">hhih", 36, 1, 7, 3) + b"raw" + struct.pack(">i", 2**30) + b"xy"
        c.sock.sendall(struct.pack(">i", len(body)) + body)
        assert c.closed()
    with Raw(addr) as c:  # still serving
        c.handshake("PLAIN")
        assert c.authenticate(plain("alice", PASSWORDS["alice"])).error_code == 0


def test_reauthentication_keeps_the_principal(secure_broker: SecureBroker) -> None:
    with Raw(secure_broker.addr("SASL_SSL"), ca=str(secure_broker.pki.ca.cert)) as c:
        c.handshake("PLAIN")
        r = c.authenticate(plain("alice", PASSWORDS["alice"]), version=1)
        assert r.error_code == 0 and r.session_lifetime_ms == 60_000
        c.handshake("SCRAM-SHA-512")  # re-authenticate as another user: refused
        cl = ScramClient("SCRAM-SHA-512", "scram512", PASSWORDS["scram512"])
        r1 = c.authenticate(cl.first())
        r2 = c.authenticate(cl.final(bytes(r1.auth_bytes)))
        assert r2.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # another principal
        assert c.closed()
    with Raw(secure_broker.addr("SASL_SSL"), ca=str(secure_broker.pki.ca.cert)) as c:
        c.handshake("PLAIN")
        assert c.authenticate(plain("alice", PASSWORDS["alice"]), version=1).error_code == 0
        c.handshake("PLAIN")
        assert c.authenticate(plain("alice", PASSWORDS["alice"]), version=1).error_code == 0
        assert c.call(3, 12, METADATA_ALL) is not None


def test_plaintext_connection_to_a_tls_listener_gets_nothing(
        secure_broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure_broker.ports["SASL_SSL"]), 5) as s:
        s.sendall(b"\0\0\0\x0a" + b"\0" * 10)
        s.settimeout(5)
        try:
            data = s.recv(100)
        except ConnectionResetError:
            data = b""
        assert not data.startswith(b"\0\0\0")  # a TLS alert at most, never a Kafka frame


def test_acl_apis_without_an_authorizer_answer_security_disabled(
        secure_broker: SecureBroker) -> None:
    with Raw(secure_broker.addr("PLAINTEXT")) as c:
        r = c.call(29, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                           "pattern_type_filter": 1, "principal_filter": None,
                           "host_filter": None, "operation": 1, "permission_type": 1})
        assert r.error_code == ErrorCode.SECURITY_DISABLED


def test_scram_credentials_are_described_never_shown(secure_broker: SecureBroker) -> None:
    with Raw(secure_broker.addr("PLAINTEXT")) as c:
        r = c.call(50, 0, {"users": [{"name": "scram256"}, {"name": "ghost"}]})
        assert [(x.user, x.error_code, [(i.mechanism, i.iterations) for i in x.credential_infos])
                for x in r.results] == [("scram256", 0, [(1, 4096)]),
                                        ("ghost", ErrorCode.RESOURCE_NOT_FOUND, [])]
        bad = c.call(51, 0, {"upsertions": [
            {"name": "u1", "mechanism": 1, "iterations": 100, "salt": b"s",
             "salted_password": b"p" * 32},
            {"name": "u2", "mechanism": 9, "iterations": 4096, "salt": b"s",
             "salted_password": b"p" * 32},
            {"name": "", "mechanism": 1, "iterations": 4096, "salt": b"s",
             "salted_password": b"p" * 32}],
            "deletions": [{"name": "ghost", "mechanism": 1}]})
        assert [(x.user, x.error_code) for x in bad.results] == [
            ("ghost", ErrorCode.RESOURCE_NOT_FOUND), ("u1", ErrorCode.UNACCEPTABLE_CREDENTIAL),
            ("u2", ErrorCode.UNSUPPORTED_SASL_MECHANISM), ("", ErrorCode.UNACCEPTABLE_CREDENTIAL)]


def test_handshake_v0_then_bare_tokens(secure_broker: SecureBroker) -> None:
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        assert c.call(17, 0, {"mechanism": "SCRAM-SHA-256"}).error_code == 0
        cl = ScramClient("SCRAM-SHA-256", "scram256", PASSWORDS["scram256"])

        def bare(token: bytes) -> bytes | None:
            c.sock.sendall(struct.pack(">i", len(token)) + token)
            head = c._exact(4)
            return None if head is None else c._exact(struct.unpack(">i", head)[0])

        server_first = bare(cl.first())
        assert server_first is not None
        final = bare(cl.final(server_first))
        assert final is not None
        cl.verify(final)
        assert c.call(3, 12, METADATA_ALL) is not None
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        assert c.call(17, 0, {"mechanism": "PLAIN"}).error_code == 0
        token = plain("alice", "wrong")
        c.sock.sendall(struct.pack(">i", len(token)) + token)
        assert c.closed()


def test_describe_configs_hides_passwords(secure_broker: SecureBroker) -> None:
    with Raw(secure_broker.addr("PLAINTEXT")) as c:
        r = c.call(32, 4, {"resources": [{"resource_type": 4, "resource_name": "0",
                                          "configuration_keys": None}]})
        cfg = {x.name: (x.value, x.is_sensitive) for x in r.results[0].configs}
        assert cfg["sasl.jaas.config"] == (None, True)
        assert cfg["ssl.keystore.location"][1] is False  # a path is not a secret


def test_plain_users_file_is_reread_when_it_changes(secure_broker: SecureBroker) -> None:
    users = secure_broker.users_file
    before = users.read_text()
    try:
        users.write_text(before + "dave=dave-pw\n")
        with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
            c.handshake("PLAIN")
            assert c.authenticate(plain("dave", "dave-pw")).error_code == 0
    finally:
        users.write_text(before)
        os.utime(users, (time.time() + 5, time.time() + 5))  # a new mtime even if fast
    with Raw(secure_broker.addr("SASL_PLAINTEXT")) as c:
        c.handshake("PLAIN")
        assert c.authenticate(plain("dave", "dave-pw")).error_code == \
            ErrorCode.SASL_AUTHENTICATION_FAILED


@pytest.mark.parametrize(("overrides", "message"), [
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"},
     "sasl.enabled.mechanisms"),
    ({"listeners": "SSL://127.0.0.1:0"}, "needs a key and certificate"),
    ({"listeners": "FOO://127.0.0.1:0"}, "listener FOO has no security protocol"),
    ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name"),
    ({"authorizer.class.name": "kafka.security.Other"}, "authorizer.class.name"),
])
def test_security_config_mistakes_are_one_line(tmp_path: Path, overrides: dict[str, str],
                                                message: str) -> None:
    args = [sys.executable, "-m", "jocko_py.cli", "broker", "--broker-addr", "127.0.0.1:0",
            "--data-dir", str(tmp_path / "data")]
    for k, v in overrides.items():
        args += ["--override", f"{k}={v}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=REPO)
    assert r.returncode != 0
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr, r.stderr
