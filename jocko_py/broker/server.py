"""The asyncio TCP server: accepts connections and runs one `Connection` each."""

from __future__ import annotations

import asyncio
import logging
import socket

from jocko_py.broker.connection import Connection
from jocko_py.broker.core import Broker

log = logging.getLogger("jocko_py.broker.server")


class Server:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        cfg = self.broker.config
        self.server = await asyncio.start_server(
            self._accept, cfg.host, cfg.port, reuse_address=True, limit=1 << 20
        )

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        stats = self.broker.stats
        stats.connections_created += 1
        try:
            await Connection(self.broker, reader, writer).run()
        except asyncio.CancelledError:
            # shutdown closes open connections; that is their normal end, not an error
            writer.close()
        finally:
            self.connections.discard(task)
            stats.connections_closed += 1

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for t in list(self.connections):
            t.cancel()
        if self.connections:
            await asyncio.wait(self.connections, timeout=5)
        if self.server is not None:
            await self.server.wait_closed()
