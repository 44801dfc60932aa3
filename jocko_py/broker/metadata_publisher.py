"""Hands each committed batch of metadata records to the parts of the broker it concerns.

A metadata change flows one way: records committed by the controller ->
`MetadataImage.apply_batch` -> `MetadataDelta` -> this publisher ->
`ReplicaManager.apply_delta` (partitions become leaders / followers / are deleted,
fetchers are added or removed, purgatories re-checked) -> role listeners (the group
coordinator is elected or resigns for `__consumer_offsets` partitions).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_BROKER,
    LocalChanges,
    MetadataDelta,
    MetadataImage,
)

if TYPE_CHECKING:
    from jocko_py.broker.config import BrokerConfig
    from jocko_py.broker.metadata_cache import MetadataCache
    from jocko_py.broker.replica_manager import ReplicaManager
    from jocko_py.cluster.quorum import MetadataQuorum

log = logging.getLogger("jocko_py.broker.metadata_publisher")


class PublisherHost(Protocol):
    """What the publisher reads (the quorum, this broker's id and config) and whom it
    hands each change to (the dynamic configs, the Metadata cache, the replicas); it
    sets `serving` once live."""

    @property
    def broker_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def quorum(self) -> MetadataQuorum: ...

    @property
    def serving(self) -> asyncio.Event: ...

    @property
    def metadata_cache(self) -> MetadataCache: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    def apply_dynamic_configs(self, image: MetadataImage) -> None: ...


class MetadataPublisher:
    """Publishes nothing until the broker has caught up with the committed metadata log
    and is registered and unfenced as this process (see ``may_go_live``; Kafka's broker
    waits for its initial catch-up and its unfencing likewise): replaying a long log at start-up
    would otherwise make this broker leader and follower of partitions at every epoch
    they ever had, briefly serving as a long-deposed leader and dialling fetchers to
    brokers that no longer lead. Once caught up, the whole image is published as one
    delta (from the empty image), then every batch as it commits.

    The Metadata cache takes each delta at once. The replicas take a small one at once
    too; one touching more than `AT_ONCE` partitions (topics of thousands of partitions
    created, a broker's leaderships moved here) goes to them `SLICE` partitions at a
    time, the event loop serving requests between slices (a few milliseconds each), and
    later deltas wait their turn behind it. So a CreateTopics of 1,000 partitions is answered once committed, as
    Kafka's is, and no request waits for a thousand logs to be made: until its slice
    is applied, a new partition answers NOT_LEADER_OR_FOLLOWER, as it does on a Kafka
    broker that has not yet applied the delta its Metadata cache already shows. The
    catch-up's delta (the whole image, at start-up) goes the same way, and the broker
    serves once it is applied.
    """

    CATCH_UP_POLL_S = 0.05
    #: the most partitions a delta may touch to be applied to the replicas at once
    AT_ONCE = 100
    #: partitions of a bigger delta applied to the replicas in one go (see the class doc)
    SLICE = 25

    def __init__(self, broker: PublisherHost) -> None:
        self.broker = broker
        self.batches = 0
        self.live = False
        self._strays_removed = False
        self._waiting: asyncio.Task[None] | None = None
        # deltas the replicas have yet to take (oldest first), and the task feeding them
        self._backlog: collections.deque[tuple[MetadataImage, MetadataDelta]] = (
            collections.deque())
        self._feeder: asyncio.Task[None] | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._closed = False

    def may_go_live(self) -> bool:
        """Caught up with the metadata log, and, in a cluster, registered as this very
        process (its incarnation) and unfenced. The controller registers a restarted
        incarnation fenced and, in the same batch, takes it out of every ISR and moves
        its leaderships (it may have lost what it had not flushed); it unfences it once
        caught up. Before that, the image may still name this broker leader of
        partitions at the epoch it led before the crash: acting on that with a log that
        lost its unflushed tail made followers truncate to it (acknowledged writes lost:
        found by the power-loss nemesis)."""
        q = self.broker.quorum
        if not q.caught_up():
            return False
        if not self.broker.config.voters:
            return True  # a single node: nobody else could lead
        b = q.image.brokers.get(self.broker.broker_id)
        return b is not None and b.incarnation_id == q.incarnation and not b.fenced

    def on_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        self.batches += 1
        if not self.live:
            if not self.may_go_live():
                self._wait_for_catch_up()
                return
            self._go_live(image)
            return
        self._apply(image, delta)

    def _go_live(self, image: MetadataImage) -> None:
        self.live = True
        log.info("[broker=%d] caught up with the metadata log: publishing it",
                 self.broker.broker_id)
        self._apply(image, MetadataImage.diff(MetadataImage(), image))
        if self._feeder is None:
            self.broker.serving.set()
            return
        # tens of thousands of partitions: applied in slices like any big delta, so
        # raft and gossip keep their turns on the loop (a restarted broker holding it
        # for seconds lost its heartbeats and made the quorum elect again and again);
        # requests are served once all is applied, as before

        async def serve_when_applied() -> None:
            await self.settled()
            if self._closed:
                return
            self.broker.serving.set()
            log.info("[broker=%d] the metadata image is applied: serving",
                     self.broker.broker_id)

        self._serve_task = asyncio.get_running_loop().create_task(serve_when_applied())

    def _wait_for_catch_up(self) -> None:
        """The batch that completes the catch-up may carry no change for this broker (no
        delta, no call): look again until caught up."""
        if self._waiting is not None:
            return

        async def wait() -> None:
            while not self.live:
                await asyncio.sleep(self.CATCH_UP_POLL_S)
                if not self.live and self.may_go_live():
                    self._go_live(self.broker.quorum.image)
            self._waiting = None

        self._waiting = asyncio.get_running_loop().create_task(wait())

    def _apply(self, image: MetadataImage, delta: MetadataDelta) -> None:
        if any(rtype == CONFIG_RESOURCE_BROKER and name in ("", str(self.broker.broker_id))
               for rtype, name in delta.configs):
            self.broker.apply_dynamic_configs(image)
        self.broker.metadata_cache.apply_delta(delta)
        self._apply_replicas(image, delta)
        if not self._strays_removed and self.broker.quorum.caught_up():
            # Only against a complete image: logs of partitions no longer placed here
            # (deleted or moved away while this broker was down).
            self._strays_removed = True
            self.broker.replicas.remove_stray_logs(image)

    # ---- the replicas' share of each delta, big ones in slices

    def _apply_replicas(self, image: MetadataImage, delta: MetadataDelta) -> None:
        if not self._backlog and _size(delta) <= self.AT_ONCE:
            self.broker.replicas.apply_delta(image, delta)
            return
        self._backlog.append((image, delta))
        if self._feeder is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (a test's direct call): all at once
                self._feed_all_now()
                return
            self._feeder = loop.create_task(self._feed())

    def _feed_all_now(self) -> None:
        while self._backlog:
            image, delta = self._backlog.popleft()
            self.broker.replicas.apply_delta(image, delta)

    async def _feed(self) -> None:
        replicas = self.broker.replicas
        try:
            while self._backlog:
                image, delta = self._backlog[0]
                for part in _slices(delta.local_changes(self.broker.broker_id), self.SLICE):
                    try:
                        replicas.apply_local_changes(image, part)
                    except Exception:
                        log.exception("[broker=%d] applying metadata to the replicas failed",
                                      self.broker.broker_id)
                    await asyncio.sleep(0)
                try:
                    replicas.apply_broker_and_config_changes(image, delta)
                except Exception:
                    log.exception("[broker=%d] applying metadata to the replicas failed",
                                  self.broker.broker_id)
                self._backlog.popleft()
        finally:
            self._feeder = None

    @property
    def pending(self) -> int:
        """Deltas the replicas have not fully taken yet."""
        return len(self._backlog)

    async def settled(self) -> None:
        """Until the replicas have taken every delta published so far."""
        while self._feeder is not None:
            await asyncio.shield(self._feeder)

    def close(self) -> None:
        """The broker stops: deltas not yet applied are dropped (the next start applies
        the whole image)."""
        self._closed = True
        self._backlog.clear()
        if self._feeder is not None:
            self._feeder.cancel()
            self._feeder = None


def _size(delta: MetadataDelta) -> int:
    """At least the partitions the delta may change on any broker."""
    return len(delta.partitions) + sum(len(t.partitions) for t in delta.deleted_topics.values())


def _slices(local: LocalChanges, n: int) -> Iterator[LocalChanges]:
    """``local`` cut into parts of at most ``n`` partitions, in its order (deleted,
    leaders, followers: each partition is in one list only)."""
    refs = [(0, r) for r in local.deleted] + [(1, r) for r in local.leaders] + [
        (2, r) for r in local.followers]
    for i in range(0, max(len(refs), 1), n):
        part = LocalChanges()
        for kind, r in refs[i:i + n]:
            (part.deleted, part.leaders, part.followers)[kind].append(r)
        yield part
