"""The transaction coordinator service (KIP-98).

The broker builds the `TransactionCoordinator` (`broker.transactions`, in
`broker/core.py`), registers it for role changes of `__transaction_state` partitions
and runs its timer (timed-out transactions, every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`).
"""
