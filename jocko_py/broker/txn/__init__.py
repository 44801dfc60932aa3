"""The transaction coordinator service (KIP-98).

The broker builds the `TransactionCoordinator` (`broker.transactions`, in
`broker/core.py`) and registers it for role changes of `__transaction_state`
partitions. Its decisions are in `shard.py` (one `TxnShard` per partition on the
coordinator runtime), with their timers (timed-out transactions, every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`; expired transactional
ids) on the runtime's clock; `coordinator.py` is the service and the marker sending.
"""
