"""Asyncio TCP adapter for the raft core: moves frames and timer ticks, nothing else.

Frames on the wire are ``[u32 big-endian length][encode_message bytes]``. Each node
listens on its raft address; messages to a voter go over one outbound connection per
peer (connected lazily, re-dialled after a failure; a message that cannot be sent is
dropped, which raft tolerates). Messages to replicas we have no address for (observers)
go back over the connection they last arrived on. Actions run in order, and every
persistence action completes before any later action (rule: persist before answering):
persistence (write + fsync) runs in a worker thread so it never blocks the event loop,
and the actions after it wait in a queue, drained by one task (``persister``) in order.
A batch without persistence runs at once when nothing is queued.

Cluster links (``LinkSecurity``): with mutual TLS, both sides present a certificate the
other's truststore verifies (the dialler also checks the listener's host name); with
the cluster secret, every connection starts with the challenge-response of
``cluster/linkauth.py`` and every frame after it carries a tag
(``[u32 length][body][tag]``), and a frame whose ``src`` is not the authenticated node
closes the connection. A connection that fails either (or sends no handshake within
``HANDSHAKE_TIMEOUT``) is closed before anything reaches the core, and logged at most
once a minute per peer host.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Callable
from typing import Protocol

from jocko_py.cluster.linkauth import (
    HELLO_LEN,
    PROOF_LEN,
    REPLY_LEN,
    TAG_LEN,
    FrameKeys,
    FrameOpener,
    FrameSealer,
    HandshakeError,
    LinkSecurity,
    LogLimiter,
    RaftDialler,
    RaftListener,
)
from jocko_py.cluster.raft.core import NotLeaderError, RaftCore
from jocko_py.cluster.raft.messages import (
    Action,
    AppendLog,
    Commit,
    Entry,
    LoadSnapshot,
    Message,
    PersistQuorumState,
    PersistSnapshot,
    RoleChanged,
    Send,
    Snapshot,
    TruncateLog,
    decode_message,
    encode_message,
)

_PERSIST = (PersistQuorumState, AppendLog, TruncateLog, PersistSnapshot)

log = logging.getLogger("jocko_py.cluster.raft.transport")

_LEN = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024
# connect + TLS + the secret's handshake, either side
HANDSHAKE_TIMEOUT = 2.0


class Storage(Protocol):
    def execute(self, action: Action) -> None: ...


class StateMachine(Protocol):
    def on_commit(self, entries: tuple[Entry, ...]) -> None: ...
    def on_load_snapshot(self, snapshot: Snapshot) -> None: ...


def split_addr(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class RaftTransport:
    def __init__(
        self,
        core: RaftCore,
        storage: Storage,
        machine: StateMachine,
        listen: str,
        tick_ms: int = 10,
        clock: Callable[[], int] | None = None,
        on_role: Callable[[RoleChanged], None] | None = None,
        security: LinkSecurity | None = None,
    ) -> None:
        self.core = core
        self.storage = storage
        self.machine = machine
        self.listen = listen
        self.tick_ms = tick_ms
        self._clock = clock
        self.on_role = on_role
        self.security = security or LinkSecurity()
        self._log_limit = LogLimiter()
        self._server: asyncio.Server | None = None
        self._listen_sock: socket.socket | None = None
        self._peers: dict[int, asyncio.Queue[bytes]] = {}
        self._peer_tasks: dict[int, asyncio.Task[None]] = {}
        self._inbound: dict[int, _Link] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._commit_waiters: dict[int, asyncio.Future[int]] = {}
        self._closed = False
        self._queue: collections.deque[list[Action]] = collections.deque()
        self._wake = asyncio.Event()
        # Drains queued actions in order, persisting in a thread (supervised like the
        # ticker: if a write fails the task ends with the error).
        self.persister: asyncio.Task[None] | None = None
        # The tick loop; an exception in a tick is logged and ends it (see ClusterNode,
        # which supervises it and stops the process).
        self.ticker: asyncio.Task[None] | None = None

    def now(self) -> int:
        if self._clock is not None:
            return self._clock()
        return int(asyncio.get_running_loop().time() * 1000)

    async def start(self) -> None:
        host, port = split_addr(self.listen)
        if self.security.raft_server_ssl is None:
            self._server = await asyncio.start_server(self._serve, host, port)
        else:
            self._listen_sock = _listen(host, port)
            a = asyncio.create_task(self._accept_tls_loop(self._listen_sock))
            self._tasks.add(a)
        p = asyncio.create_task(self._persist_loop())
        self._tasks.add(p)
        self.persister = p
        self.execute(self.core.start(self.now()))
        t = asyncio.create_task(self._ticker())
        self._tasks.add(t)
        self.ticker = t

    async def close(self) -> None:
        self._closed = True
        if self._server is not None:
            self._server.close()
        if self._listen_sock is not None:
            self._listen_sock.close()
        for t in list(self._tasks) + list(self._peer_tasks.values()):
            t.cancel()
        for t in list(self._tasks) + list(self._peer_tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for link in self._inbound.values():
            link.writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    # ------------------------------------------------------------------ core I/O

    def execute(self, actions: list[Action]) -> None:
        if not actions:
            return
        if self.persister is None or (
                not self._queue and not any(isinstance(a, _PERSIST) for a in actions)):
            for a in actions:
                self._run(a)
            return
        self._queue.append(actions)
        self._wake.set()

    async def _persist_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                for a in self._queue[0]:
                    if isinstance(a, _PERSIST):
                        await asyncio.to_thread(self.storage.execute, a)
                    else:
                        self._run(a)
                self._queue.popleft()

    def _run(self, a: Action) -> None:
        if isinstance(a, Send):
            self._send(a.message)
        elif isinstance(a, Commit):
            self.machine.on_commit(a.entries)
            for e in a.entries:
                fut = self._commit_waiters.pop(e.offset, None)
                if fut is not None and not fut.done():
                    fut.set_result(e.offset)
        elif isinstance(a, LoadSnapshot):
            self.machine.on_load_snapshot(a.snapshot)
        elif isinstance(a, RoleChanged):
            if a.role != "leader":
                for fut in self._commit_waiters.values():
                    if not fut.done():
                        fut.set_exception(NotLeaderError(a.leader_id, a.epoch))
                self._commit_waiters.clear()
            if self.on_role is not None:
                self.on_role(a)
        else:
            self.storage.execute(a)

    async def propose(self, datas: list[bytes]) -> int:
        """Append as leader and wait until committed; returns the last entry's offset."""
        first, actions = self.core.propose(datas, self.now())
        last = first + len(datas) - 1
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._commit_waiters[last] = fut
        self.execute(actions)
        return await fut

    async def _ticker(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.tick_ms / 1000)
            try:
                self.execute(self.core.tick(self.now()))
            except Exception:
                log.exception("[raft node=%d] tick failed", self.core.node_id)
                raise

    # ------------------------------------------------------------------ network

    def _refused(self, where: str, peer: object, reason: object) -> None:
        """A connection that did not authenticate: logged once a minute per peer host."""
        host = peer[0] if isinstance(peer, tuple) and peer else peer
        n = self._log_limit.allow(f"{where} {host}", self.now())
        if n is not None:
            more = f" ({n} more since the last report)" if n else ""
            if isinstance(reason, asyncio.IncompleteReadError):
                reason = "closed during the handshake"
            elif isinstance(reason, BaseException):
                reason = str(reason) or type(reason).__name__
            log.warning("[raft node=%d] %s %s refused: %s%s", self.core.node_id, where, peer,
                        reason, more)

    def _send(self, m: Message) -> None:
        body = encode_message(m)
        addr = self.core.voters.get(m.dest)
        if addr is None:
            link = self._inbound.get(m.dest)
            if link is not None and not link.writer.is_closing():
                link.write(body)
            return
        q = self._peers.get(m.dest)
        if q is None:
            q = asyncio.Queue(maxsize=1024)
            self._peers[m.dest] = q
            self._peer_tasks[m.dest] = asyncio.create_task(self._peer_loop(m.dest, q))
        if q.full():
            return
        q.put_nowait(body)

    async def _dial(self, peer: int, addr: str) -> _Link:
        """Connect to a voter: TLS when configured, then the secret's handshake."""
        host, port = split_addr(addr)
        sec = self.security
        reader, writer = await asyncio.open_connection(
            host, port, ssl=sec.raft_client_ssl,
            server_hostname=host if sec.raft_client_ssl is not None else None)
        try:
            if sec.secret is None:
                return _Link(reader, writer, None)
            d = RaftDialler(sec.secret, self.core.node_id, peer)
            writer.write(d.hello())
            proof, keys = d.on_reply(await reader.readexactly(REPLY_LEN))
            writer.write(proof)
            return _Link(reader, writer, keys)
        except BaseException:
            writer.close()
            raise

    async def _peer_loop(self, peer: int, q: asyncio.Queue[bytes]) -> None:
        while not self._closed:
            addr = self.core.voters.get(peer)
            if addr is None:
                await q.get()  # no longer a voter: drain
                continue
            try:
                link = await asyncio.wait_for(
                    self._dial(peer, addr),
                    timeout=HANDSHAKE_TIMEOUT if self.security.authenticated else 1.0)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, HandshakeError) as e:
                refused = isinstance(e, HandshakeError | ssl.SSLError | asyncio.IncompleteReadError)
                if refused:
                    self._refused(f"connection to node {peer} at", addr, e)
                while not q.empty():
                    q.get_nowait()  # stale by the time we connect; raft will resend
                await asyncio.sleep(0.5 if refused else 0.1)
                continue
            reader_task = asyncio.create_task(self._read_frames(link))
            get: asyncio.Future[bytes] | None = None
            try:
                while True:
                    get = asyncio.ensure_future(q.get())
                    done, _ = await asyncio.wait(
                        {get, reader_task}, return_when=asyncio.FIRST_COMPLETED
                    )
                    if get not in done:
                        break  # the peer closed the connection: re-dial
                    link.write(get.result())
                    get = None
                    await link.writer.drain()
            except (OSError, ConnectionError):
                pass
            finally:
                if get is not None:
                    get.cancel()
                reader_task.cancel()
                link.writer.close()
                with contextlib.suppress(Exception):
                    await link.writer.wait_closed()

    async def _accept_tls_loop(self, sock: socket.socket) -> None:
        """Accept raft connections for mutual TLS (the sockets are accepted here, so a
        failed TLS handshake is seen, with the peer's address, and logged)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except OSError as e:  # e.g. out of file descriptors: wait, go on
                if self._closed:
                    return
                log.warning("[raft node=%d] accept failed: %s", self.core.node_id, e)
                await asyncio.sleep(0.1)
                continue
            t = asyncio.create_task(self._serve_tls(conn, peer))
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _serve_tls(self, conn: socket.socket, peer: object) -> None:
        """An inbound connection with mutual TLS: the TLS handshake (a client certificate
        the truststore verifies is required), then as any other."""
        assert self.security.raft_server_ssl is not None
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        try:
            tls, _ = await asyncio.wait_for(loop.connect_accepted_socket(
                lambda: protocol, conn, ssl=self.security.raft_server_ssl,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT), timeout=HANDSHAKE_TIMEOUT + 0.5)
        except (OSError, TimeoutError) as e:
            self._refused("TLS connection from", peer, "no TLS handshake within "
                          f"{HANDSHAKE_TIMEOUT:g} s" if isinstance(e, TimeoutError) else e)
            conn.close()
            return
        await self._serve(reader, asyncio.StreamWriter(tls, protocol, reader, loop))

    async def _accept(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> _Link:
        """An inbound connection (after TLS): the secret's handshake."""
        sec = self.security
        if sec.secret is None:
            return _Link(reader, writer, None)
        lis = RaftListener(sec.secret, self.core.node_id)
        writer.write(lis.on_hello(await reader.readexactly(HELLO_LEN)))
        return _Link(reader, writer, lis.on_proof(await reader.readexactly(PROOF_LEN)))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            try:
                link = await asyncio.wait_for(self._accept(reader, writer),
                                              timeout=HANDSHAKE_TIMEOUT)
            except TimeoutError:
                self._refused("connection from", peer, "no handshake within "
                              f"{HANDSHAKE_TIMEOUT:g} s")
                return
            except (OSError, asyncio.IncompleteReadError, HandshakeError) as e:
                self._refused("connection from", peer, e)
                return
            await self._read_frames(link)
        finally:
            writer.close()

    async def _read_frames(self, link: _Link) -> None:
        try:
            while True:
                try:
                    body = await link.read()
                except HandshakeError as e:
                    self._refused("frame from", link.writer.get_extra_info("peername"), e)
                    return
                if body is None:
                    log.warning("[raft node=%d] oversized frame; closing", self.core.node_id)
                    return
                try:
                    msg = decode_message(body)
                except Exception:
                    log.warning("[raft node=%d] garbled frame; closing", self.core.node_id)
                    return
                if link.peer_id is not None and msg.src != link.peer_id:
                    self._refused("frame from", link.writer.get_extra_info("peername"),
                                  f"node {link.peer_id} sent a message as node {msg.src}")
                    return
                self._inbound[msg.src] = link
                self.execute(self.core.receive(msg, self.now()))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (the first address host resolves to)."""
    family, kind, proto, _, addr = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class _Link:
    """One raft connection's frames: ``[u32 length][body]``, or with the cluster secret
    ``[u32 length][body][tag]`` with each direction's frames sealed in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 keys: FrameKeys | None) -> None:
        self.reader = reader
        self.writer = writer
        self.peer_id = keys.peer_id if keys is not None else None
        self._sealer = FrameSealer(keys.send) if keys is not None else None
        self._opener = FrameOpener(keys.recv) if keys is not None else None

    def write(self, body: bytes) -> None:
        if self._sealer is None:
            self.writer.write(_LEN.pack(len(body)) + body)
        else:
            tag = self._sealer.seal(body)
            self.writer.write(_LEN.pack(len(body) + TAG_LEN) + body + tag)

    async def read(self) -> bytes | None:
        """The next frame's body; None for an oversized frame; HandshakeError for one
        that does not verify."""
        (n,) = _LEN.unpack(await self.reader.readexactly(4))
        if n > MAX_FRAME:
            return None
        data = await self.reader.readexactly(n)
        if self._opener is None:
            return data
        if n < TAG_LEN:
            raise HandshakeError("a frame too short to carry its tag")
        body, tag = data[:-TAG_LEN], data[-TAG_LEN:]
        self._opener.check(body, tag)
        return body
