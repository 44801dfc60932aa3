"""The group coordinator service: classic and consumer groups and committed offsets.

`install(broker)` (called from `Broker.start`, once the logs are loaded) builds
the `GroupCoordinator` (its shards load as this broker is elected leader of
`__consumer_offsets` partitions; their timers, the 100 ms group timer and offset
expiry every `offsets.retention.check.interval.ms`, run on the coordinator runtime),
puts it in `broker.services["groups"]` and adds the log cleaner (compaction) every
`log.cleaner.backoff.ms` unless `log.cleaner.enable=false` to
`broker.services["background"]`.

Modules: `shard.py` (the group decisions: one shard per partition, on the coordinator
runtime in `broker/coordinator/`), `offsets.py` (committed offsets, apart from the
rebalance protocol), `coordinator.py` (the service the handlers call), `state.py` (a
classic group and its state machine), `consumer.py` (a KIP-848 group),
`offsets_store.py` (the topic and its record layout).
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


def coordinator(broker: Broker) -> GroupCoordinator:
    c = broker.services["groups"]
    assert isinstance(c, GroupCoordinator)
    return c


def install(broker: Broker) -> GroupCoordinator:
    gc = GroupCoordinator(broker)
    gc.load()
    broker.replicas.role_listeners.append(gc.on_partition_role)
    broker.services["groups"] = gc
    gc.share.wire()  # if the share partitions are installed already
    backoff_raw = broker.config.get("log.cleaner.backoff.ms")
    backoff_s = max(0.05, (int(backoff_raw) if backoff_raw else 15000) / 1000)
    cleaner = LogCleaner(broker.replicas.logs)
    broker.services["cleaner"] = cleaner

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
    if broker.config.get("log.cleaner.enable").lower() != "false":
        bg.append(log_cleaner)
    return gc
