"""Delayed operations: fetches waiting for data, produces waiting for acks=all.

A waiter registers interest in partition keys and gets an asyncio future that
`notify(key)` completes; it then re-checks its condition. The caller bounds
every wait with its own timeout (`max_wait_ms`, `timeout_ms`).

`before_park()` must be called by any handler just before it waits for
something outside its own request (a purgatory wait, a rebalance): the
connection uses it to send the responses it already has for earlier pipelined
requests, so a fast reply never waits behind a long poll (Kafka answers
request n before it starts request n+1).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextvars import ContextVar

# Set by each connection's task (each task has its own context): flushes the
# responses that connection has queued but not yet written.
PARK_HOOK: ContextVar[Callable[[], None] | None] = ContextVar("jocko_park_hook", default=None)
# seconds the current request spent waiting (parked, for the disk or for other
# replicas): a connection sets a fresh one-element list per request; request-time
# quotas count the handler's time less this
PARK_TIME: ContextVar[list[float] | None] = ContextVar("jocko_park_time", default=None)


@contextlib.contextmanager
def parked() -> Iterator[None]:
    """Count the time spent inside as waiting, not as work of the request."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        acc = PARK_TIME.get()
        if acc is not None:
            acc[0] += time.perf_counter() - t0


def before_park() -> None:
    hook = PARK_HOOK.get()
    if hook is not None:
        hook()


class Purgatory:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = defaultdict(set)

    async def wait_any(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until any key is notified or `timeout` passes; True if notified."""
        if timeout <= 0:
            return False
        before_park()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for k in keys:
            self._waiters[k].add(fut)
        try:
            with parked():
                await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for k in keys:
                s = self._waiters.get(k)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[k]

    def size(self) -> int:
        """Operations waiting (each counted once, whatever the keys it waits on)."""
        waiting: set[asyncio.Future[None]] = set()
        for s in self._waiters.values():
            waiting |= s
        return len(waiting)

    def notify(self, key: Hashable) -> None:
        s = self._waiters.pop(key, None)
        if s:
            for fut in s:
                if not fut.done():
                    fut.set_result(None)
