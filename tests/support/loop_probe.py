"""How long others held the event loop: a task that takes a turn as often as it can and
records the CPU time between two of its turns (`held`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


@asynccontextmanager
async def loop_probe() -> AsyncIterator[list[float]]:
    """``async with loop_probe() as held:`` — ``held`` fills with the CPU seconds the loop
    went without the probe's turn, one entry a turn, until the block ends."""
    held: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        last = time.thread_time()
        while not done.is_set():
            await asyncio.sleep(0)
            now = time.thread_time()
            held.append(now - last)
            last = now

    task = asyncio.create_task(probe())
    await asyncio.sleep(0)  # the probe's first turn: it takes its first reading
    try:
        yield held
    finally:
        done.set()
        await task
