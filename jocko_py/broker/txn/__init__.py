"""The transaction coordinator service (KIP-98).

`install(broker)` (called from `Broker.start` after the group coordinator) builds
the `TransactionCoordinator` (its decisions in `shard.py`, one `TxnShard` per
`__transaction_state` partition on the coordinator runtime; its timers, timed-out
transactions and expired transactional ids, on the runtime's clock), registers it for
role changes of `__transaction_state` partitions and puts it in
`broker.services["transactions"]`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jocko_py.broker.txn.coordinator import TransactionCoordinator

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker


def coordinator(broker: Broker) -> TransactionCoordinator:
    c = broker.services["transactions"]
    assert isinstance(c, TransactionCoordinator)
    return c


def install(broker: Broker) -> TransactionCoordinator:
    tc = TransactionCoordinator(broker)
    broker.replicas.role_listeners.append(tc.on_partition_role)
    broker.services["transactions"] = tc
    broker.replicas.txn_verifier = tc.verify  # KIP-890 part 1, for transactional produce
    return tc
