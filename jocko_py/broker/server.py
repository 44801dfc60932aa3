"""The asyncio TCP servers, one per listener (`listeners`): accept connections
(TLS for SSL and SASL_SSL listeners) and run one `Connection` each."""

from __future__ import annotations

import asyncio
import functools
import logging
import socket

from jocko_py.broker.config import Listener
from jocko_py.broker.connection import Connection
from jocko_py.broker.core import Broker

log = logging.getLogger("jocko_py.broker.server")


class Server:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.servers: list[asyncio.Server] = []
        self.connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        cfg = self.broker.config
        listeners = cfg.listeners or (Listener("PLAINTEXT", "PLAINTEXT", cfg.host, cfg.port),)
        try:
            for x in listeners:
                tls = self.broker.security.tls.get(x.name)
                self.servers.append(await asyncio.start_server(
                    functools.partial(self._accept, x), x.host, x.port, reuse_address=True,
                    limit=1 << 20, ssl=tls.server_context if tls is not None else None,
                    ssl_handshake_timeout=10.0 if tls is not None else None))
        except BaseException:
            for srv in self.servers:
                srv.close()
            raise

    async def _accept(self, listener: Listener, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
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
            await Connection(self.broker, reader, writer, listener).run()
        except asyncio.CancelledError:
            # shutdown closes open connections; that is their normal end, not an error
            writer.close()
        finally:
            self.connections.discard(task)
            stats.connections_closed += 1

    async def stop(self) -> None:
        for srv in self.servers:
            srv.close()
        for t in list(self.connections):
            t.cancel()
        if self.connections:
            await asyncio.wait(self.connections, timeout=5)
        for srv in self.servers:
            await srv.wait_closed()
