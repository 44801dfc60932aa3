"""Session lifetimes (KIP-368) and unauthenticated connections, on a broker with
connections.max.reauth.ms=1000 and connections.max.idle.ms=1000: a session is
extended by re-authenticating on the same connection, an expired one is closed at
its next request, a connection that never authenticates is closed, and librdkafka
re-authenticates on its own while producing for longer than a session."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.security.raw import Raw
from tests.support.broker import BrokerProcess, free_port, wait_for_port

pytestmark = pytest.mark.timeout(60)
MD = (3, 12, {"topics": None})


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    work = tmp_path_factory.mktemp("reauth")
    (work / "users").write_text("alice=alice-pw\n")
    sasl = free_port()
    proc = BrokerProcess(work / "data", overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "jocko.sasl.plain.users.file": str(work / "users"),
        "connections.max.reauth.ms": "1000", "connections.max.idle.ms": "1000"})
    proc.start()
    try:
        wait_for_port("127.0.0.1", sasl, timeout=10)
        proc.sasl_addr = f"127.0.0.1:{sasl}"  # type: ignore[attr-defined]
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def addr(broker: BrokerProcess) -> str:
    return str(broker.sasl_addr)  # type: ignore[attr-defined]


def login(c: Raw) -> int:
    assert c.handshake("PLAIN").error_code == 0
    r = c.authenticate(b"\0alice\0alice-pw", version=1)
    assert r.error_code == 0
    return int(r.session_lifetime_ms)


def test_expired_session_is_closed_at_its_next_request(addr: str) -> None:
    with Raw(addr) as c:
        assert login(c) == 1000
        assert c.call(*MD) is not None
        time.sleep(1.2)
        assert c.call(*MD) is None


def test_reauthentication_extends_the_session(addr: str) -> None:
    with Raw(addr) as c:
        login(c)
        for _ in range(3):
            time.sleep(0.6)
            assert login(c) == 1000
        assert c.call(*MD) is not None


def test_a_connection_that_never_authenticates_is_closed(addr: str) -> None:
    with Raw(addr) as c:
        t0 = time.monotonic()
        assert c.call(18, 0, {}) is not None  # ApiVersions is fine, but no login follows
        assert c.closed()
        assert 0.8 < time.monotonic() - t0 < 5.0
    with Raw(addr) as c:  # a handshake alone does not count either
        assert c.handshake("PLAIN").error_code == 0
        assert c.closed()


def test_librdkafka_reauthenticates_by_itself(broker: BrokerProcess, addr: str) -> None:
    from confluent_kafka import Producer

    before = broker.log_path.read_text().count("session expired")
    p = Producer({"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                  "sasl.password": "alice-pw", "message.timeout.ms": 10000, "linger.ms": 0})
    errors: list[object] = []
    for i in range(10):  # 3 s of traffic: three session lifetimes
        p.produce("reauth", f"v{i}".encode(), on_delivery=lambda e, m: errors.append(e))
        p.flush(5)
        time.sleep(0.3)
    assert errors == [None] * 10
    # re-authenticated on its connections: none was closed for an expired session
    assert broker.log_path.read_text().count("session expired") == before
