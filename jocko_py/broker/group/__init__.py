"""The group coordinator service: classic consumer groups and committed offsets.

`install(broker)` (called from `Broker.start`, once the logs are loaded) builds
the `GroupCoordinator`, replays `__consumer_offsets` into it, puts it in
`broker.services["groups"]` and adds its background work to
`broker.services["background"]`: the 100 ms group timer (session and rebalance
timeouts), offset expiry every `offsets.retention.check.interval.ms`, and the
log cleaner (compaction) every `log.cleaner.backoff.ms` unless
`log.cleaner.enable=false`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from jocko_py.broker.group.coordinator import GroupCoordinator
from jocko_py.commitlog.cleaner import LogCleaner

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker

log = logging.getLogger("jocko_py.broker.group")

TICK_S = 0.1


def coordinator(broker: Broker) -> GroupCoordinator:
    c = broker.services["groups"]
    assert isinstance(c, GroupCoordinator)
    return c


def install(broker: Broker) -> GroupCoordinator:
    gc = GroupCoordinator(broker)
    gc.load()
    broker.replicas.role_listeners.append(gc.on_partition_role)
    broker.services["groups"] = gc
    backoff_raw = broker.config.get("log.cleaner.backoff.ms")
    backoff_s = max(0.05, (int(backoff_raw) if backoff_raw else 15000) / 1000)
    cleaner = LogCleaner(broker.replicas.logs)
    broker.services["cleaner"] = cleaner

    async def group_timer() -> None:
        while True:
            await asyncio.sleep(TICK_S)
            gc.tick()

    async def offset_expiry() -> None:
        interval = max(0.05, gc.config.offsets_retention_check_interval_ms / 1000)
        while True:
            await asyncio.sleep(interval)
            try:
                gc.expire_offsets()
            except Exception:
                log.exception("offset expiry failed")

    async def log_cleaner() -> None:
        while True:
            await asyncio.sleep(backoff_s)
            for tp in cleaner.compacted():
                try:
                    cleaner.clean_all(only=[tp])
                except Exception:
                    log.exception("log cleaner failed on %s-%d", *tp)
                await asyncio.sleep(0)  # let requests in between logs

    bg: list[Callable[[], Coroutine[Any, Any, None]]] = broker.services.setdefault(
        "background", [])
    bg += [group_timer, offset_expiry]
    if broker.config.get("log.cleaner.enable").lower() != "false":
        bg.append(log_cleaner)
    return gc
