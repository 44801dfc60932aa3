"""Group commit: with `log.flush.interval.messages=1` (fsync before acknowledging
every append), produce requests that arrive together on different connections share
one flush pass instead of one fsync pass each, and no acknowledged record is left
unflushed. In-process broker with the real TCP server and raw produce requests; the
only hook is a counter wrapped around the log manager's flush pass."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

from jocko_py.app import build_quorum
from jocko_py.broker import handlers
from jocko_py.broker.config import build_config
from jocko_py.broker.core import Broker
from jocko_py.broker.server import Server
from jocko_py.protocol import codec
from jocko_py.protocol.records import NewRecord, build_batch
from tests.support.broker import free_port

CONNECTIONS = 8
REQUESTS_PER_CONNECTION = 25
TOPIC = "group-commit"


async def _produce_many(port: int, partition: int, acked: list[int]) -> None:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    try:
        for i in range(REQUESTS_PER_CONNECTION):
            batch = build_batch([NewRecord(b"k", b"v%d" % i, (), 1000 + i)])
            body = {
                "acks": 1,
                "timeout_ms": 5000,
                "topic_data": [
                    {"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}
                ],
            }
            writer.write(codec.encode_request(0, 9, i, "group-commit", body))
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
            payload = await asyncio.wait_for(reader.readexactly(size), 10)
            _, resp = codec.decode_response(0, 9, payload)
            p = resp.responses[0].partition_responses[0]
            assert p.error_code == 0, p
            acked.append(int(p.base_offset))
    finally:
        writer.close()


async def _scenario(tmp_path: Path) -> tuple[int, int, Broker]:
    handlers.load_all()
    port = free_port()
    cfg = build_config(
        broker_addr=f"127.0.0.1:{port}",
        data_dir=str(tmp_path / "data"),
        overrides={"log.flush.interval.messages": "1", "num.partitions": str(CONNECTIONS)},
    )
    quorum = build_quorum(cfg)
    broker = Broker(cfg, "group-commit-cluster", quorum)
    broker.start()
    passes = 0
    logs = broker.replicas.logs
    real_flush = logs.begin_flush_due

    def counting_flush(*args: Any, **kwargs: Any) -> Any:
        nonlocal passes
        passes += 1
        return real_flush(*args, **kwargs)

    logs.begin_flush_due = counting_flush  # type: ignore[method-assign]
    server = Server(broker)
    await server.start()
    await quorum.start()
    try:
        from jocko_py.client import Client

        await asyncio.to_thread(lambda: Client(f"127.0.0.1:{port}").create_topic(TOPIC, CONNECTIONS))
        passes = 0
        acked: list[list[int]] = [[] for _ in range(CONNECTIONS)]
        await asyncio.wait_for(
            asyncio.gather(*(_produce_many(port, p, acked[p]) for p in range(CONNECTIONS))), 60
        )
        assert all(a == list(range(REQUESTS_PER_CONNECTION)) for a in acked), acked
        for p in range(CONNECTIONS):
            lg = logs.get(TOPIC, p)
            assert lg is not None
            # every acknowledged append was flushed before its ack
            assert lg.recovery_point == lg.log_end_offset == REQUESTS_PER_CONNECTION
        return passes, CONNECTIONS * REQUESTS_PER_CONNECTION, broker
    finally:
        await server.stop()
        await quorum.close()
        broker.close()


def test_concurrent_produces_share_flush_passes(tmp_path: Path) -> None:
    passes, requests, _ = asyncio.run(_scenario(tmp_path))
    assert passes > 0, "flush.messages=1 must flush"
    # 8 connections in lock step: far fewer passes than requests (one per loop turn)
    assert passes <= requests // 2, f"{passes} flush passes for {requests} produce requests"
