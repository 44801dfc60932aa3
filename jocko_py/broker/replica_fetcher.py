"""Follower side of replication: one fetcher task per source (leader) broker.

Each fetcher sends Fetch v12 requests with this broker's replica id for every
partition it follows on that leader, batched in one request: fetch offset = our
log end, the current leader epoch, and the last fetched epoch (the latest epoch in
our leader-epoch cache) so the leader can report a diverging epoch (KIP-279). On a
diverging epoch we truncate to min(leader's end offset for that epoch, our own end
offset for it) and fetch again; the loop converges to the common prefix. Data is
appended as the leader wrote it (offsets and epochs kept), and the follower's HW
follows the leader's, capped at our own log end.

Errors: NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH /
UNKNOWN_TOPIC_OR_PARTITION back the partition off until metadata moves it (a newer
epoch reaches us through the metadata log); OFFSET_OUT_OF_RANGE below the leader's
log start restarts our log there; a lost connection backs off and re-dials.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from jocko_py.broker.inter_broker import BrokerChannel
from jocko_py.broker.partition import Partition, Role
from jocko_py.commitlog.errors import KafkaStorageError
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.inter_broker import ClientSecurity
    from jocko_py.broker.stats import BrokerStats
    from jocko_py.commitlog.manager import LogManager

log = logging.getLogger("jocko_py.broker.replica_fetcher")

FETCH_VERSION = 12
# Fetch v12 carries no broker epoch (KIP-903 adds one in v15): the follower's client id
# carries its process incarnation instead, so a fetch sent by a process that has since
# restarted (and maybe lost its unflushed tail) never counts as the new one's position.
REPLICA_CLIENT_PREFIX = "jocko-py-replica-"


def replica_incarnation(client_id: str | None) -> str | None:
    """The incarnation a follower's fetch names in its client id, if any."""
    if not client_id or not client_id.startswith(REPLICA_CLIENT_PREFIX):
        return None
    _, _, inc = client_id[len(REPLICA_CLIENT_PREFIX):].partition("-")
    return inc or None
BACKOFF_S = 0.2


class FollowerOutcome(enum.Enum):
    APPENDED = "appended"  # records (or a HW / log start move) taken
    IDLE = "idle"  # nothing new
    TRUNCATED = "truncated"  # diverging epoch or out of range: the log was cut or reset
    BACK_OFF = "back off"  # an error that only new metadata resolves


def fetch_position(p: Partition) -> tuple[int, int, int]:
    """What a follower asks its leader for: (fetch offset = our log end, our current
    leader epoch, last fetched epoch = the newest epoch in our leader-epoch cache)."""
    lg = p.log
    return lg.log_end_offset, p.leader_epoch, lg.leader_epochs.latest_epoch()


def response_applies(p: Partition, fetch_offset: int, leader_epoch: int) -> bool:
    """A response still applies if nothing moved the partition while it was in flight."""
    return (p.role is Role.FOLLOWER and p.leader_epoch == leader_epoch
            and p.log.log_end_offset == fetch_offset)


def handle_fetch_response(p: Partition, error: int, high_watermark: int,
                          log_start_offset: int, records: bytes | memoryview | None,
                          diverging_epoch: tuple[int, int] | None) -> FollowerOutcome:
    """The follower's decision on one partition of a Fetch response (KIP-279): truncate
    on a diverging epoch, else append what the leader sent and follow its HW; below
    the leader's log start, restart there."""
    if error == ErrorCode.NONE:
        if diverging_epoch is not None:
            p.truncate_on_divergence(*diverging_epoch)
            return FollowerOutcome.TRUNCATED
        n = p.append_as_follower(records if records is not None else b"",
                                 high_watermark, log_start_offset)
        return FollowerOutcome.APPENDED if n or records else FollowerOutcome.IDLE
    if error == ErrorCode.OFFSET_OUT_OF_RANGE:
        if log_start_offset >= 0 and p.log.log_end_offset < log_start_offset:
            p.truncate_fully_and_start_at(log_start_offset)
        elif high_watermark >= 0 and p.log.log_end_offset > high_watermark:
            # ahead of a leader that has no diverging epoch to tell: keep what is
            # committed only
            p.truncate_to(high_watermark)
        return FollowerOutcome.TRUNCATED
    return FollowerOutcome.BACK_OFF


class FollowerHost(Protocol):
    """What a fetcher uses of the replica manager: who this broker is, how to reach and
    ask a leader, its logs (to take a failed dir offline), its counters, and whom to
    tell of a follower that appended or truncated."""

    @property
    def broker_id(self) -> int: ...

    @property
    def incarnation(self) -> str: ...

    @property
    def channel_security(self) -> ClientSecurity | None: ...

    @property
    def replica_fetch_wait_max_ms(self) -> int: ...

    @property
    def replica_fetch_max_bytes(self) -> int: ...

    @property
    def logs(self) -> LogManager: ...

    @property
    def stats(self) -> BrokerStats: ...

    def on_follower_appended(self, p: Partition) -> None: ...

    def on_follower_truncated(self, p: Partition) -> None: ...


class ReplicaFetcher:
    def __init__(self, manager: FollowerHost, source_id: int, host: str, port: int) -> None:
        self.manager = manager
        self.source_id = source_id
        # the client id names this process's incarnation: the leader records positions
        # only from the incarnation the metadata registered (see REPLICA_CLIENT_PREFIX)
        self.channel = BrokerChannel(
            host, port, f"{REPLICA_CLIENT_PREFIX}{manager.broker_id}-{manager.incarnation}",
            security=manager.channel_security)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._backoff_until: dict[tuple[str, int], float] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # checked every round as well as cancelling the task: Python 3.11's wait_for can
        # lose a cancellation that races with its result, and a fetcher left running
        # after shutdown kept appending to closed logs and held the process up
        self._closed = False
        self.cfg_max_wait_ms = manager.replica_fetch_wait_max_ms
        self.cfg_max_bytes = manager.replica_fetch_max_bytes

    def add(self, p: Partition) -> None:
        self.partitions[(p.topic, p.partition)] = p
        self._backoff_until.pop((p.topic, p.partition), None)
        self._changed.set()
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)
        self._changed.set()

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        await self.channel.close()

    def _ready(self) -> list[Partition]:
        now = time.monotonic()
        return [p for k, p in self.partitions.items()
                if p.role is Role.FOLLOWER and p.leader_id == self.source_id
                and self._backoff_until.get(k, 0) <= now]

    async def _run(self) -> None:
        while not self._closed:
            ready = self._ready()
            if not ready:
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), BACKOFF_S)
                except TimeoutError:
                    pass
                continue
            try:
                await self._fetch_once(ready)
            except (ConnectionError, OSError, TimeoutError) as e:
                log.info("[broker=%d] fetch from broker %d failed: %s", self.manager.broker_id,
                         self.source_id, e)
                await asyncio.sleep(BACKOFF_S)
            except asyncio.CancelledError:
                raise
            except KafkaStorageError as e:
                # the follower's own disk failed: its log dir is offline, replication
                # into it stops (the broker stops, see LogManager.mark_offline)
                self.manager.logs.mark_offline(e.message)
                return
            except Exception:
                log.exception("[broker=%d] replica fetcher for broker %d failed; retrying",
                              self.manager.broker_id, self.source_id)
                await asyncio.sleep(BACKOFF_S)

    async def _fetch_once(self, ready: list[Partition]) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        sent: dict[tuple[str, int], tuple[Partition, int, int]] = {}
        for p in ready:
            fetch_offset, epoch, last_epoch = fetch_position(p)
            sent[(p.topic, p.partition)] = (p, fetch_offset, epoch)
            by_topic.setdefault(p.topic, []).append({
                "partition": p.partition, "current_leader_epoch": epoch,
                "fetch_offset": fetch_offset, "last_fetched_epoch": last_epoch,
                "log_start_offset": p.log.log_start_offset,
                "partition_max_bytes": self.cfg_max_bytes,
            })
        body = {
            "replica_id": self.manager.broker_id, "max_wait_ms": self.cfg_max_wait_ms,
            "min_bytes": 1, "max_bytes": self.cfg_max_bytes * 4, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "forgotten_topics_data": [], "rack_id": "",
        }
        resp = await self.channel.request(1, FETCH_VERSION, body,
                                          timeout=self.cfg_max_wait_ms / 1000 + 10)
        if resp.error_code:
            log.info("[broker=%d] fetch from %d: error %s", self.manager.broker_id,
                     self.source_id, ErrorCode.of(resp.error_code).name)
            await asyncio.sleep(BACKOFF_S)
            return
        for tr in resp.responses:
            for pr in tr.partitions:
                key = (tr.topic, pr.partition_index)
                entry = sent.get(key)
                if entry is None:
                    continue
                p, fetch_offset, epoch = entry
                # metadata may have moved the partition while the fetch was in flight
                if self.partitions.get(key) is not p or not response_applies(
                        p, fetch_offset, epoch):
                    continue
                div = pr.diverging_epoch
                if (not pr.records and not pr.error_code and (div is None or div.epoch < 0)
                        and min(pr.high_watermark, fetch_offset) <= p.high_watermark
                        and pr.log_start_offset <= p.log.log_start_offset):
                    # an idle partition (most of a fetch when a few of many partitions
                    # take writes): nothing to append, HW and log start unchanged
                    continue
                self._handle_partition(p, pr)

    def _handle_partition(self, p: Partition, pr: Any) -> None:
        key = (p.topic, p.partition)
        err = pr.error_code
        div = pr.diverging_epoch
        diverging = (div.epoch, div.end_offset) if (
            div is not None and div.epoch >= 0 and div.end_offset >= 0) else None
        outcome = handle_fetch_response(p, err, pr.high_watermark, pr.log_start_offset,
                                        pr.records, diverging)
        if outcome is FollowerOutcome.TRUNCATED:
            self.manager.on_follower_truncated(p)
        elif outcome is FollowerOutcome.APPENDED:
            if pr.records:
                self.manager.stats.replication_bytes_in[p.topic] += len(pr.records)
            self.manager.on_follower_appended(p)
        elif outcome is FollowerOutcome.BACK_OFF:
            self._backoff_until[key] = time.monotonic() + BACKOFF_S * 2
            log.debug("[partition=%s] fetch from %d: %s", p.name, self.source_id,
                      ErrorCode.of(err).name)
