"""The metadata publisher holds back until the broker caught up with the metadata log.

Regression (fault campaign, every restart): a restarted broker replayed the metadata
log delta by delta and became leader, then follower, of its partitions at every epoch
they ever had ("leader at epoch 1 ... resigning ... leader at epoch 3 ..."), briefly a
long-deposed leader that a client with stale metadata could write to. Now nothing is
published before the catch-up; then the whole image goes out as one delta."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from jocko_py.broker.metadata_cache import MetadataCache
from jocko_py.broker.metadata_publisher import MetadataPublisher
from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.metadata import MetadataDelta, MetadataImage


class Replicas:
    def __init__(self) -> None:
        self.deltas: list[MetadataDelta] = []

    def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        self.deltas.append(delta)

    def remove_stray_logs(self, image: MetadataImage) -> None:
        pass


def setup() -> tuple[Any, MetadataPublisher, MetadataImage, list[MetadataDelta]]:
    img = MetadataImage()
    quorum = SimpleNamespace(caught_up=lambda: False, image=img, incarnation=uuid.uuid4())
    broker: Any = SimpleNamespace(broker_id=1, quorum=quorum, replicas=Replicas(),
                                  serving=asyncio.Event(), config=SimpleNamespace(voters=""),
                                  metadata_cache=MetadataCache())
    pub = MetadataPublisher(broker)
    ctl = Controller(ControllerConfig())
    live = {b: BrokerInfo(b, "h", b, None, uuid.uuid4()) for b in (1, 2, 3)}
    deltas = [img.apply_batch(ctl.reconcile(img, live))]
    _, recs = ctl.create_topic(img, "t", 3, 3)
    deltas.append(img.apply_batch(recs))
    for moved in (2, 3):  # leaders move around while this broker replays
        deltas.append(img.apply_batch(ctl.reconcile(img, {b: live[b] for b in live
                                                          if b != moved})))
    return broker, pub, img, deltas


async def test_nothing_published_before_catch_up_then_one_delta() -> None:
    broker, pub, img, deltas = setup()
    for d in deltas:
        pub.on_delta(img, d)
    assert broker.replicas.deltas == []
    broker.quorum.caught_up = lambda: True
    pub.on_delta(img, deltas[-1])
    [whole] = broker.replicas.deltas
    assert {(r.topic, r.partition) for r in whole.partitions.values()} == {
        ("t", 0), ("t", 1), ("t", 2)}
    assert all(r.before is None for r in whole.partitions.values())
    pub.on_delta(img, deltas[-1])  # live: every later batch as it comes
    assert len(broker.replicas.deltas) == 2


async def test_catch_up_without_a_further_batch_still_publishes() -> None:
    broker, pub, img, deltas = setup()
    pub.on_delta(img, deltas[0])
    broker.quorum.caught_up = lambda: True  # the last batch carried nothing for us
    for _ in range(40):
        if broker.replicas.deltas:
            break
        await asyncio.sleep(0.05)
    assert pub.live and len(broker.replicas.deltas) == 1


async def test_requests_are_served_only_once_live() -> None:
    """Regression (fault campaign, hard bounce of the controller): a restarted broker
    answered Metadata from its still-empty image, so clients saw the topic vanish
    (librdkafka: "partition count changed from 10 to 0") and a consumer hung. The
    connection layer waits on `serving`, which goes up with the publisher."""
    broker, pub, img, deltas = setup()
    pub.on_delta(img, deltas[0])
    assert not broker.serving.is_set()
    broker.quorum.caught_up = lambda: True
    pub.on_delta(img, deltas[-1])
    assert broker.serving.is_set()


async def test_in_a_cluster_nothing_is_published_before_this_incarnation_is_unfenced() -> None:
    """Regression (fault campaign, power loss of a leader restarted within a second): the
    restarted broker caught up with a metadata log that still named it leader at its old
    epoch, acted as leader with the log that had lost its unflushed tail, and its
    followers truncated to it: 108 acknowledged writes lost. It now waits until the
    controller registered this incarnation (which takes it out of every ISR and moves
    its leaderships) and unfenced it."""
    broker, pub, _, _ = setup()
    ctl = Controller(ControllerConfig())
    img = MetadataImage()
    live = {b: BrokerInfo(b, "h", b, None, uuid.uuid4()) for b in (1, 2, 3)}
    img.apply_batch(ctl.reconcile(img, live))
    _, recs = ctl.create_topic(img, "t", 3, 3)
    img.apply_batch(recs)
    assert any(p.leader == 1 for p in img.topics["t"].partitions.values())
    broker.quorum.image = img
    broker.config.voters = "1@h:1,2@h:2,3@h:3"
    broker.quorum.caught_up = lambda: True
    pub.on_delta(img, img.apply_batch([]))
    assert not pub.live  # registered, but as the previous incarnation
    me = BrokerInfo(1, "h", 1, None, broker.quorum.incarnation)
    others = {b: BrokerInfo(b, "h", b, None, img.brokers[b].incarnation_id) for b in (2, 3)}
    recs = ctl.reconcile(img, {1: me} | others, caught_up=set())
    img.apply_batch(recs)
    for p in img.topics["t"].partitions.values():  # restarted: out of every ISR, leads none
        assert 1 not in p.isr and p.leader != 1
    pub.on_delta(img, img.apply_batch([]))
    assert not pub.live  # registered as this incarnation, still fenced
    img.apply_batch(ctl.reconcile(img, {1: me} | others, caught_up={1, 2, 3}))
    pub.on_delta(img, img.apply_batch([]))
    assert pub.live and broker.serving.is_set()
