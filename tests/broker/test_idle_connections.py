"""`connections.max.idle.ms`: the broker closes a connection idle for longer, as Kafka's
Selector does; a connection that keeps talking, or whose request is parked (a long-poll
fetch), is not idle."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from jocko_py.client import Client
from tests.support.broker import BrokerProcess

IDLE_MS = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("idle") / "data",
                      overrides={"connections.max.idle.ms": str(IDLE_MS)})
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _closed_by_broker(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_an_idle_connection_is_closed(broker: BrokerProcess) -> None:
    c = Client(broker.bootstrap)
    try:
        c.metadata()
        t0 = time.monotonic()
        assert _closed_by_broker(c.sock, 10.0)
        waited = time.monotonic() - t0
        assert IDLE_MS / 1000 * 0.9 <= waited < 5.0, waited
    finally:
        c.close()
    assert "idle for more than connections.max.idle.ms" in broker.log_tail()


def test_a_connection_in_use_stays_open(broker: BrokerProcess) -> None:
    with Client(broker.bootstrap) as c:
        c.create_topic("idle-busy", 1)
        deadline = time.monotonic() + 3 * IDLE_MS / 1000
        while time.monotonic() < deadline:  # a request every 0.3 s: never idle
            c.metadata(["idle-busy"])
            time.sleep(0.3)
        # a long-poll fetch parked for 1.5 x the idle limit is not idleness either
        t0 = time.monotonic()
        p = c.fetch("idle-busy", 0, 0, max_wait_ms=int(1.5 * IDLE_MS))
        assert time.monotonic() - t0 >= 1.4 * IDLE_MS / 1000 and not p.records
        c.metadata(["idle-busy"])  # the same connection still answers
