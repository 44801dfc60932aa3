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
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import struct
from collections.abc import Callable
from typing import Protocol

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
    ) -> None:
        self.core = core
        self.storage = storage
        self.machine = machine
        self.listen = listen
        self.tick_ms = tick_ms
        self._clock = clock
        self.on_role = on_role
        self._server: asyncio.Server | None = None
        self._peers: dict[int, asyncio.Queue[bytes]] = {}
        self._peer_tasks: dict[int, asyncio.Task[None]] = {}
        self._inbound: dict[int, asyncio.StreamWriter] = {}
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
        self._server = await asyncio.start_server(self._serve, host, port)
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
        for t in list(self._tasks) + list(self._peer_tasks.values()):
            t.cancel()
        for t in list(self._tasks) + list(self._peer_tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for w in self._inbound.values():
            w.close()
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

    def _send(self, m: Message) -> None:
        frame = encode_message(m)
        data = _LEN.pack(len(frame)) + frame
        addr = self.core.voters.get(m.dest)
        if addr is None:
            w = self._inbound.get(m.dest)
            if w is not None and not w.is_closing():
                w.write(data)
            return
        q = self._peers.get(m.dest)
        if q is None:
            q = asyncio.Queue(maxsize=1024)
            self._peers[m.dest] = q
            self._peer_tasks[m.dest] = asyncio.create_task(self._peer_loop(m.dest, q))
        if q.full():
            return
        q.put_nowait(data)

    async def _peer_loop(self, peer: int, q: asyncio.Queue[bytes]) -> None:
        while not self._closed:
            addr = self.core.voters.get(peer)
            if addr is None:
                await q.get()  # no longer a voter: drain
                continue
            try:
                host, port = split_addr(addr)
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), timeout=1.0
                )
            except (TimeoutError, OSError):
                while not q.empty():
                    q.get_nowait()  # stale by the time we connect; raft will resend
                await asyncio.sleep(0.1)
                continue
            reader_task = asyncio.create_task(self._read_frames(reader, writer))
            get: asyncio.Future[bytes] | None = None
            try:
                while True:
                    get = asyncio.ensure_future(q.get())
                    done, _ = await asyncio.wait(
                        {get, reader_task}, return_when=asyncio.FIRST_COMPLETED
                    )
                    if get not in done:
                        break  # the peer closed the connection: re-dial
                    writer.write(get.result())
                    get = None
                    await writer.drain()
            except (OSError, ConnectionError):
                pass
            finally:
                if get is not None:
                    get.cancel()
                reader_task.cancel()
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._read_frames(reader, writer)
        finally:
            writer.close()

    async def _read_frames(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                (n,) = _LEN.unpack(head)
                if n > MAX_FRAME:
                    log.warning("[raft node=%d] oversized frame; closing", self.core.node_id)
                    return
                body = await reader.readexactly(n)
                try:
                    msg = decode_message(body)
                except Exception:
                    log.warning("[raft node=%d] garbled frame; closing", self.core.node_id)
                    return
                self._inbound[msg.src] = writer
                self.execute(self.core.receive(msg, self.now()))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return
