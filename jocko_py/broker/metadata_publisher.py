"""Hands each committed batch of metadata records to the parts of the broker it concerns.

A metadata change flows one way: records committed by the controller ->
`MetadataImage.apply_batch` -> `MetadataDelta` -> this publisher ->
`ReplicaManager.apply_delta` (partitions become leaders / followers / are deleted,
fetchers are added or removed, purgatories re-checked) -> role listeners (the group
coordinator is elected or resigns for `__consumer_offsets` partitions).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jocko_py.cluster.metadata import MetadataDelta, MetadataImage

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker

log = logging.getLogger("jocko_py.broker.metadata_publisher")


class MetadataPublisher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.batches = 0
        self._strays_removed = False

    def on_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        self.batches += 1
        self.broker.replicas.apply_delta(image, delta)
        if not self._strays_removed and self.broker.quorum.caught_up():
            # Only against a complete image: logs of partitions no longer placed here
            # (deleted or moved away while this broker was down).
            self._strays_removed = True
            self.broker.replicas.remove_stray_logs(image)
