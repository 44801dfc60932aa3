"""The group coordinator service: classic and consumer groups and committed offsets.

The broker builds the `GroupCoordinator` (`broker.groups`, in `broker/core.py`); its
shards load as this broker is elected leader of `__consumer_offsets` partitions; their
timers, the 100 ms group timer and offset expiry every
`offsets.retention.check.interval.ms`, run on the coordinator runtime.

Modules: `shard.py` (the group decisions: one shard per partition, on the coordinator
runtime in `broker/coordinator/`), `offsets.py` (committed offsets, apart from the
rebalance protocol), `coordinator.py` (the service the handlers call), `state.py` (a
classic group and its state machine), `consumer.py` (a KIP-848 group),
`offsets_store.py` (the topic and its record layout).
"""
