"""A response a handler built wrong (a body its version cannot carry) closes only that
connection with one clear log line; the broker and its other connections go on. Before,
the encoding error escaped the connection task as "Unhandled exception in
client_connected_cb" with a traceback (seen once with DescribeQuorum)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from jocko_py.app import build_quorum
from jocko_py.broker import handlers
from jocko_py.broker.config import build_config
from jocko_py.broker.core import Broker
from jocko_py.broker.server import Server
from jocko_py.protocol import codec
from tests.support.broker import free_port


async def _scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[bool, int]:
    handlers.load_all()
    port = free_port()
    cfg = build_config(broker_addr=f"127.0.0.1:{port}", data_dir=str(tmp_path / "data"))
    quorum = build_quorum(cfg)
    broker = Broker(cfg, "unencodable", quorum)
    broker.start()
    server = Server(broker)
    await server.start()
    await quorum.start()
    real = codec.encode_response_parts

    def broken(api_key: int, *a: object, **k: object) -> object:
        if api_key == 3:  # Metadata: as if the handler had built a bad body
            raise ValueError("field 'nodes' cannot be encoded")
        return real(api_key, *a, **k)  # type: ignore[arg-type]
    monkeypatch.setattr(codec, "encode_response_parts", broken)
    try:
        from jocko_py.client import Client

        def metadata_fails() -> bool:
            try:
                with Client(f"127.0.0.1:{port}", timeout=5) as c:
                    c.metadata()
            except (OSError, ConnectionError):
                return True
            return False

        def brokers_listed() -> int:
            with Client(f"127.0.0.1:{port}", timeout=5) as c:
                return len(c.metadata().brokers)

        closed = await asyncio.to_thread(metadata_fails)
        monkeypatch.setattr(codec, "encode_response_parts", real)
        return closed, await asyncio.to_thread(brokers_listed)  # the broker still serves
    finally:
        await server.stop()
        await quorum.close()
        broker.close()


def test_an_unencodable_response_closes_only_that_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    closed, brokers = asyncio.run(_scenario(tmp_path, monkeypatch))
    assert closed and brokers == 1
    assert any("response cannot be encoded" in r.getMessage() for r in caplog.records)
    assert not any("Unhandled exception" in r.getMessage() for r in caplog.records)
