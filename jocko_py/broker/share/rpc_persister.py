"""The broker's ``SharePersister``: the state RPCs sent to the share coordinator
(Kafka's ``DefaultStatePersister``).

This module owns how a share partition leader and the group coordinator reach the
durable state of a share partition (the broker builds one, ``Broker.share_persister``):
the coordinator of a key ``"<group>:<topic id>:<partition>"`` is found
(``make_persister``: from this broker's metadata, creating ``__share_group_state`` on
first use, as FindCoordinator key type 2 does), then InitializeShareGroupState (83 v0),
ReadShareGroupState (84 v0), WriteShareGroupState (85 v1), DeleteShareGroupState (86 v0)
or ReadShareGroupStateSummary (87 v1) goes to it over an inter-broker channel
(``broker/inter_broker.py``: authenticated as a broker of the cluster, as the RPCs are
served to brokers only). NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, a broker that cannot be reached and a request that times
out are retried, after finding the coordinator again, with a backoff doubling from
``retry_backoff_ms`` up to ``max_backoff_ms``, for at most ``deadline_ms`` in all; then
the caller gets COORDINATOR_NOT_AVAILABLE (or the last coordinator error).

When this broker is itself the coordinator of the key, the call goes straight to its
``ShareCoordinator`` (the same answer, without encoding a request to itself and
decoding it again); an answer telling to look elsewhere falls back to the RPC path.

The coordinator answers a read or write of a share partition never initialized with
INVALID_REQUEST and Kafka's message for it; the persister contract
(``persister.py``) names that UNKNOWN_TOPIC_OR_PARTITION, so it is mapped here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from jocko_py.broker.inter_broker import BrokerChannel, ClientSecurity
from jocko_py.broker.share.persister import (
    DeliveryState,
    SharePartitionKey,
    ShareState,
    ShareStateSummary,
    StateBatch,
)
from jocko_py.broker.share.shard import READ_UNINITIALIZED, WRITE_UNINITIALIZED, Answer
from jocko_py.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from jocko_py.broker.share.coordinator import ShareCoordinator
    from jocko_py.cluster.metadata import MetadataImage

log = logging.getLogger("jocko_py.broker.share.rpc_persister")

E = ErrorCode
RETRIABLE = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS,
                       E.COORDINATOR_NOT_AVAILABLE})
INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
_VERSIONS = {INITIALIZE: 0, READ: 0, WRITE: 1, DELETE: 0, SUMMARY: 1}

# the share coordinator of a key: (error, (host, port) or None)
Locate = Callable[[str], Awaitable[tuple[ErrorCode, tuple[str, int] | None]]]
# this broker's share coordinator when it is the coordinator of a key, else None
Local = Callable[[str], "ShareCoordinator | None"]


class RpcPersister:
    def __init__(self, locate: Locate, security: ClientSecurity | None, client_id: str,
                 *, retry_backoff_ms: int = 50, max_backoff_ms: int = 1000,
                 deadline_ms: int = 15000, request_timeout_ms: int = 10000,
                 local: Local | None = None) -> None:
        self.locate = locate
        self.local = local
        self.security = security
        self.client_id = client_id
        self.retry_backoff_ms = retry_backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.deadline_ms = deadline_ms
        self.request_timeout_ms = request_timeout_ms
        self._channels: dict[tuple[str, int], BrokerChannel] = {}

    def _channel(self, addr: tuple[str, int]) -> BrokerChannel:
        ch = self._channels.get(addr)
        if ch is None:
            ch = self._channels[addr] = BrokerChannel(addr[0], addr[1], self.client_id,
                                                      security=self.security)
        return ch

    async def close(self) -> None:
        chans, self._channels = list(self._channels.values()), {}
        for ch in chans:
            with contextlib.suppress(Exception):
                await ch.close()

    async def _call(self, key: SharePartitionKey, api_key: int,
                    partition: dict[str, Any]) -> tuple[ErrorCode, Any]:
        """One partition's result of ``api_key`` from the key's coordinator, retried
        while the coordinator is moving: (error, partition result or None)."""
        body = {"group_id": key.group_id, "topics": [{
            "topic_id": key.topic_id, "partitions": [{"partition": key.partition,
                                                      **partition}]}]}
        deadline = time.monotonic() + self.deadline_ms / 1000
        backoff = self.retry_backoff_ms
        last = E.COORDINATOR_NOT_AVAILABLE
        ck = key.coordinator_key()
        while True:
            err, addr = await self.locate(ck)
            if err == E.NONE and addr is not None:
                try:
                    resp = await self._channel(addr).request(
                        api_key, _VERSIONS[api_key], body, self.request_timeout_ms / 1000)
                    if not resp.results or not resp.results[0].partitions:
                        return E.INVALID_REQUEST, None  # refused whole (no group id)
                    part = resp.results[0].partitions[0]
                    err = E.of(part.error_code)
                    if err not in RETRIABLE:
                        return err, part
                except (ConnectionError, TimeoutError, OSError) as e:
                    log.debug("[key=%s] %s to %s:%d failed: %s", ck, api_key, addr[0],
                              addr[1], e)
                    err = E.COORDINATOR_NOT_AVAILABLE
            if err not in RETRIABLE:
                return err, None
            last = err
            if time.monotonic() + backoff / 1000 > deadline:
                log.warning("[key=%s] share coordinator not reachable: %s", ck, last.name)
                return last, None
            await asyncio.sleep(backoff / 1000)
            backoff = min(backoff * 2, self.max_backoff_ms)

    async def _local(self, key: SharePartitionKey,
                     run: Callable[[ShareCoordinator], Awaitable[Answer]]) -> Answer | None:
        """The answer of this broker's own share coordinator when it is the key's
        coordinator, or None (the RPC path then finds the coordinator)."""
        if self.local is None:
            return None
        sc = self.local(key.coordinator_key())
        if sc is None:
            return None
        a = await run(sc)
        return None if a.error in RETRIABLE else a

    # -- SharePersister --------------------------------------------------------------

    async def initialize(self, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> ErrorCode:
        a = await self._local(key, lambda sc: sc.initialize(key, state_epoch, start_offset))
        if a is not None:
            return a.error
        err, _ = await self._call(key, INITIALIZE, {"state_epoch": state_epoch,
                                                    "start_offset": start_offset})
        return err

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareState:
        a = await self._local(key, lambda sc: sc.read(key, leader_epoch))
        if a is not None:
            if a.error == E.INVALID_REQUEST and a.message == READ_UNINITIALIZED:
                return ShareState(E.UNKNOWN_TOPIC_OR_PARTITION, message=a.message)
            if a.error != E.NONE:
                return ShareState(a.error, message=a.message)
            return ShareState(E.NONE, a.state_epoch, a.start_offset, tuple(a.batches))
        err, p = await self._call(key, READ, {"leader_epoch": leader_epoch})
        if p is None or err != E.NONE:
            msg = None if p is None else p.error_message
            if err == E.INVALID_REQUEST and msg == READ_UNINITIALIZED:
                err = E.UNKNOWN_TOPIC_OR_PARTITION
            return ShareState(err, message=msg)
        batches = []
        for b in p.state_batches:
            try:
                state = DeliveryState(b.delivery_state)
            except ValueError:
                state = DeliveryState.AVAILABLE
            batches.append(StateBatch(b.first_offset, b.last_offset, state, b.delivery_count))
        return ShareState(E.NONE, p.state_epoch, p.start_offset, tuple(batches))

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...],
                    delivery_complete_count: int = -1) -> ErrorCode:
        a = await self._local(key, lambda sc: sc.write(
            key, state_epoch, leader_epoch, start_offset, tuple(batches),
            delivery_complete_count))
        if a is not None:
            if a.error == E.INVALID_REQUEST and a.message == WRITE_UNINITIALIZED:
                return E.UNKNOWN_TOPIC_OR_PARTITION
            return a.error
        err, p = await self._call(key, WRITE, {
            "state_epoch": state_epoch, "leader_epoch": leader_epoch,
            "start_offset": start_offset, "delivery_complete_count": delivery_complete_count,
            "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                               "delivery_state": int(b.delivery_state),
                               "delivery_count": b.delivery_count} for b in batches]})
        if err == E.INVALID_REQUEST and p is not None and p.error_message == WRITE_UNINITIALIZED:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        return err

    async def delete(self, key: SharePartitionKey) -> ErrorCode:
        a = await self._local(key, lambda sc: sc.delete(key))
        if a is not None:
            return a.error
        err, _ = await self._call(key, DELETE, {})
        return err

    async def read_summary(self, key: SharePartitionKey,
                           leader_epoch: int) -> ShareStateSummary:
        a = await self._local(key, lambda sc: sc.summary(key, leader_epoch))
        if a is not None:
            if a.error != E.NONE:
                return ShareStateSummary(a.error)
            return ShareStateSummary(E.NONE, a.state_epoch, a.start_offset, a.leader_epoch,
                                     a.delivery_complete_count)
        err, p = await self._call(key, SUMMARY, {"leader_epoch": leader_epoch})
        if p is None or err != E.NONE:
            return ShareStateSummary(err)
        return ShareStateSummary(E.NONE, p.state_epoch, p.start_offset, p.leader_epoch,
                                 p.delivery_complete_count)


def make_persister(sc: ShareCoordinator, image: Callable[[], MetadataImage],
                   security: ClientSecurity | None, broker_id: int) -> RpcPersister:
    """The persister a broker's share partitions and group coordinator use
    (``Broker.share_persister``): the one place it is built. The coordinator of a key
    is the leader of its ``__share_group_state`` partition in this broker's metadata
    (the topic is created on first use); channels authenticate as this broker."""

    async def locate(key: str) -> tuple[ErrorCode, tuple[str, int] | None]:
        try:
            await sc.ensure_topic()
        except KafkaError as e:
            log.warning("cannot create %s: %s", "__share_group_state", e.message)
            return E.COORDINATOR_NOT_AVAILABLE, None
        b = image().brokers.get(sc.leader_of(key))
        if b is None or b.fenced:
            return E.COORDINATOR_NOT_AVAILABLE, None
        # a broker's first registered endpoint is its inter-broker listener
        return E.NONE, (b.host, b.port)

    def local(key: str) -> ShareCoordinator | None:
        return sc if sc.topic_exists() and sc.leader_of(key) == broker_id else None

    return RpcPersister(locate, security, f"jocko-share-persister-{broker_id}",
                        deadline_ms=max(1000, 3 * sc.config.write_timeout_ms), local=local)
