"""Asyncio UDP adapter for the gossip core: datagrams and timer ticks, nothing else.

One datagram per message (``encode_datagram``). Garbled datagrams are dropped with a
debug log; they never reach the core. Member events are handed to ``on_event``.

With the cluster secret (``LinkSecurity``), every datagram is sealed and opened by
``cluster/linkauth.py``'s ``GossipCodec`` (an authentication tag, a wall-clock time
and a nonce; AES-256-GCM too when ``gossip_encrypt``); one that does not open is
dropped before decoding and logged at most once a minute per sender host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from jocko_py.cluster.gossip.core import GossipAction, GossipCore
from jocko_py.cluster.gossip.messages import (
    GossipDecodeError,
    MemberEvent,
    Send,
    decode_datagram,
    encode_datagram,
)
from jocko_py.cluster.linkauth import GossipAuthError, GossipCodec, LinkSecurity, LogLimiter

log = logging.getLogger("jocko_py.cluster.gossip.transport")


def _split(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class _Proto(asyncio.DatagramProtocol):
    def __init__(self, owner: GossipTransport) -> None:
        self.owner = owner

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        self.owner._on_datagram(data, addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("[gossip] socket error: %s", exc)


class GossipTransport:
    def __init__(
        self,
        core: GossipCore,
        tick_ms: int = 20,
        on_event: Callable[[MemberEvent], None] | None = None,
        clock: Callable[[], int] | None = None,
        security: LinkSecurity | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.core = core
        sec = security or LinkSecurity()
        self.codec = (GossipCodec(sec.secret, encrypt=sec.gossip_encrypt)
                      if sec.secret is not None else None)
        # the datagrams' timestamps: wall clock, comparable between hosts
        self._wall_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        self._log_limit = LogLimiter()
        self.tick_ms = tick_ms
        self.on_event = on_event
        self._clock = clock
        self._udp: asyncio.DatagramTransport | None = None
        self._task: asyncio.Task[None] | None = None
        # The tick loop; an exception in a tick is logged and ends it (see ClusterNode,
        # which supervises it and stops the process).
        self.ticker: asyncio.Task[None] | None = None

    def now(self) -> int:
        if self._clock is not None:
            return self._clock()
        return int(asyncio.get_running_loop().time() * 1000)

    async def start(self, seeds: list[str]) -> None:
        loop = asyncio.get_running_loop()
        host, port = _split(self.core.addr)
        udp, _ = await loop.create_datagram_endpoint(lambda: _Proto(self), local_addr=(host, port))
        self._udp = udp
        self._execute(self.core.join(seeds, self.now()))
        self._task = asyncio.create_task(self._ticker())
        self.ticker = self._task

    async def leave(self) -> None:
        self._execute(self.core.leave(self.now()))
        await asyncio.sleep(0.05)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task  # a tick failure was logged when it happened
        if self._udp is not None:
            self._udp.close()

    def _on_datagram(self, data: bytes, addr: tuple[str | object, ...] = ()) -> None:
        if self.codec is not None:
            try:
                data = self.codec.open(data, self._wall_ms())
            except GossipAuthError as e:
                host = addr[0] if addr else "?"
                n = self._log_limit.allow(str(host), self._wall_ms())
                if n is not None:
                    more = f" ({n} more since the last report)" if n else ""
                    log.warning("[gossip %s] dropping a datagram from %s: %s%s",
                                self.core.name, addr[:2] if addr else "?", e, more)
                return
        try:
            msg = decode_datagram(data)
        except GossipDecodeError as e:
            log.debug("[gossip %s] dropping garbled datagram: %s", self.core.name, e)
            return
        self._execute(self.core.receive(msg, self.now()))

    def _execute(self, actions: list[GossipAction]) -> None:
        for a in actions:
            if isinstance(a, Send):
                if self._udp is not None:
                    try:
                        data = encode_datagram(a.message)
                        if self.codec is not None:
                            data = self.codec.seal(data, self._wall_ms())
                        self._udp.sendto(data, _split(a.addr))
                    except (OSError, ValueError) as e:
                        log.debug("[gossip %s] send to %s failed: %s", self.core.name, a.addr, e)
            elif self.on_event is not None:
                self.on_event(a)

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(self.tick_ms / 1000)
            try:
                self._execute(self.core.tick(self.now()))
            except Exception:
                log.exception("[gossip %s] tick failed", self.core.name)
                raise
