"""JSON log lines (`--log-format json`): context fields from the message prefix and from
the request being served (peer, client id), checked on a real broker connection."""

from __future__ import annotations

import io
import json
import logging
import socket
import struct
import time
from collections.abc import Callable

from jocko_py.embedded import EmbeddedBroker
from jocko_py.logfmt import JsonFormatter, split_context
from jocko_py.protocol import codec


def test_message_prefix_becomes_fields() -> None:
    assert split_context("[broker=1 partition=orders-3] ISR shrink") == (
        {"broker": 1, "topic_partition": "orders-3"}, "ISR shrink")
    assert split_context("no prefix [x=1]") == ({}, "no prefix [x=1]")
    rec = logging.LogRecord("jocko_py.x", logging.WARNING, __file__, 1,
                            "[partition=%s] failed", ("t-0",), None)
    out = json.loads(JsonFormatter().format(rec))
    assert out["level"] == "WARNING" and out["logger"] == "jocko_py.x"
    assert out["message"] == "failed" and out["topic_partition"] == "t-0"


def test_connection_log_lines_carry_peer_and_client_id(
        kafka_broker_factory: Callable[..., EmbeddedBroker]) -> None:
    broker = kafka_broker_factory()
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("jocko_py.broker.connection")
    logger.addHandler(handler)
    try:
        with socket.create_connection((broker.host, broker.port), timeout=10) as s:
            s.sendall(codec.encode_request(18, 3, 1, "probe-client", {
                "client_software_name": "probe", "client_software_version": "1"}))
            size = struct.unpack(">i", s.recv(4))[0]
            while size > 0:
                size -= len(s.recv(size))
            # a well-framed request for an API key nobody serves: connection closed
            cid = b"probe-client"
            body = struct.pack(">hhih", 9999, 0, 3, len(cid)) + cid
            s.sendall(struct.pack(">i", len(body)) + body)
            host, port = s.getsockname()
            local = f"{host}:{port}"
            assert s.recv(100) == b""
        deadline = time.monotonic() + 10
        while "closing connection" not in buf.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        logger.removeHandler(handler)
    line = json.loads(buf.getvalue().splitlines()[0])
    assert line["peer"] == local
    assert line["client_id"] == "probe-client"
    assert line["message"].startswith("closing connection")
