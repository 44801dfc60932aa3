"""The transaction coordinator service (KIP-98).

`install(broker)` (called from `Broker.start` after the group coordinator) builds
the `TransactionCoordinator`, registers it for role changes of `__transaction_state`
partitions, puts it in `broker.services["transactions"]` and adds its timer (timed-out
transactions, every `transaction.abort.timed.out.transaction.cleanup.interval.ms`) to
`broker.services["background"]`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from jocko_py.broker.txn.coordinator import TransactionCoordinator

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker

log = logging.getLogger("jocko_py.broker.txn")


def coordinator(broker: Broker) -> TransactionCoordinator:
    c = broker.services["transactions"]
    assert isinstance(c, TransactionCoordinator)
    return c


def install(broker: Broker) -> TransactionCoordinator:
    tc = TransactionCoordinator(broker)
    broker.replicas.role_listeners.append(tc.on_partition_role)
    broker.services["transactions"] = tc
    broker.replicas.txn_verifier = tc.verify  # KIP-890 part 1, for transactional produce

    async def txn_timer() -> None:
        interval = tc.config.abort_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                tc.tick()
            except Exception:
                log.exception("transaction timer failed")

    bg: list[Callable[[], Coroutine[Any, Any, None]]] = broker.services.setdefault(
        "background", [])
    bg.append(txn_timer)
    return tc
