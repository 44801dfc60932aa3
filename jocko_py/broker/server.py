"""The asyncio TCP servers, one per listener (`listeners`): accept connections
(TLS for SSL and SASL_SSL listeners) and run one `Connection` each; close the
connections idle for longer than `connections.max.idle.ms`.

Out of descriptors: a new connection that leaves fewer than `FD_HEADROOM` descriptors
under the process's open-file limit (descriptors are numbered lowest free first, so
the new socket's number counts those in use) is closed at once, with one clear log
line a minute saying which limit to raise: the last descriptors stay for the logs
(a segment reopened, an index or checkpoint written), whose failure would take a log
directory offline, rather than going to one more client. Past the limit itself the
event loop drops new connections (libuv's reserve-descriptor trick): never a crash.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import resource
import socket
import time

from jocko_py.broker.config import Listener
from jocko_py.broker.connection import Connection
from jocko_py.broker.core import Broker
from jocko_py.cluster.addr import bind_error
from jocko_py.commitlog.fd_cache import CONFIG_NAME, HANDLES

log = logging.getLogger("jocko_py.broker.server")

FD_HEADROOM = 32
REFUSED_LOG_INTERVAL_S = 60.0


def open_file_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 30 if soft == resource.RLIM_INFINITY or soft <= 0 else soft


class Server:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.servers: list[asyncio.Server] = []
        self.connections: set[asyncio.Task[None]] = set()
        self.live: dict[asyncio.Task[None], Connection] = {}
        self.idle_s = max(0, int(broker.config.get("connections.max.idle.ms") or 0)) / 1000
        self._reaper: asyncio.Task[None] | None = None
        self.fd_limit = open_file_limit()
        self.refused = 0  # connections refused for want of descriptors, since logged
        self._refused_logged = -REFUSED_LOG_INTERVAL_S

    def close_idle(self, now: float | None = None) -> int:
        """Close every connection idle for longer than connections.max.idle.ms."""
        if self.idle_s <= 0:
            return 0
        now = time.monotonic() if now is None else now
        closed = 0
        for conn in list(self.live.values()):
            since = conn.idle_since
            if since is not None and now - since > self.idle_s and \
                    not conn.writer.is_closing():
                log.info("[peer=%s listener=%s] closing connection: idle for more than "
                         "connections.max.idle.ms (%d ms)", conn.peer, conn.listener.name,
                         int(self.idle_s * 1000))
                conn.writer.close()
                closed += 1
        return closed

    async def _reap_idle(self) -> None:
        period = min(max(self.idle_s / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(period)
            try:
                self.close_idle()
            except Exception:
                log.exception("closing idle connections failed")

    async def start(self) -> None:
        if self.idle_s > 0:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())
        cfg = self.broker.config
        listeners = cfg.listeners or (Listener("PLAINTEXT", "PLAINTEXT", cfg.host, cfg.port),)
        try:
            for x in listeners:
                tls = self.broker.security.tls.get(x.name)
                try:
                    self.servers.append(await asyncio.start_server(
                        functools.partial(self._accept, x), x.host, x.port,
                        reuse_address=True, limit=1 << 20,
                        ssl=tls.server_context if tls is not None else None,
                        ssl_handshake_timeout=10.0 if tls is not None else None))
                except OSError as e:
                    raise bind_error(f"Kafka listener {x.name}", x.host, x.port, e) from None
        except BaseException:
            for srv in self.servers:
                srv.close()
            if self._reaper is not None:
                self._reaper.cancel()
            raise

    async def _accept(self, listener: Listener, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            if sock.fileno() >= self.fd_limit - FD_HEADROOM:
                self._refuse(listener, writer)
                return
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        stats = self.broker.stats
        stats.connections_created += 1
        conn = Connection(self.broker, reader, writer, listener)
        self.live[task] = conn
        try:
            await conn.run()
        except asyncio.CancelledError:
            # shutdown closes open connections; that is their normal end, not an error
            writer.close()
        finally:
            self.connections.discard(task)
            self.live.pop(task, None)
            stats.connections_closed += 1

    def _refuse(self, listener: Listener, writer: asyncio.StreamWriter) -> None:
        """Close a new connection for want of descriptors (see the module docstring)."""
        writer.close()
        self.refused += 1
        now = time.monotonic()
        if now - self._refused_logged >= REFUSED_LOG_INTERVAL_S:
            self._refused_logged = now
            log.error("out of file descriptors: closing new connections on listener %s "
                      "(%d since this was last said; at least %d descriptors in use of the open-file limit %d, the "
                      "last %d kept for the logs; %d live connections, segment files up to "
                      "%s=%d): raise `ulimit -n` or lower %s", listener.name, self.refused,
                      self.fd_limit - FD_HEADROOM, self.fd_limit, FD_HEADROOM,
                      len(self.live), CONFIG_NAME, HANDLES.limit, CONFIG_NAME)
            self.refused = 0

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for srv in self.servers:
            srv.close()
        for t in list(self.connections):
            t.cancel()
        if self.connections:
            await asyncio.wait(self.connections, timeout=5)
        for srv in self.servers:
            await srv.wait_closed()
