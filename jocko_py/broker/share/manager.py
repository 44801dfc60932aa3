"""The share partitions this broker leads (Kafka's `SharePartitionManager`): the thin
asyncio shell around `partition.py` (the decisions) and `session.py` (share sessions).

- A share partition is loaded from the persister when first fetched while this broker
  leads the topic partition (state epoch and start offset from the durable state; an
  uninitialised state gets its start offset from `share.auto.offset.reset`: latest, the
  default, is the high watermark, earliest the log start, `by_duration:<ISO-8601>` the
  first record at or after now minus the duration) and dropped when leadership moves.
- ShareFetch: acknowledgements first, then acquisition: the log is read from the share
  partition's next fetch offset through the replica manager (the consumer read path of
  Fetch: up to the high watermark, or the last stable offset for read_committed), what is
  available is acquired, and the response carries the batches covering it. With nothing
  to acquire it waits up to `max_wait_ms` for new records or released ones.
- An acknowledgement is answered once a state write that includes it succeeded; writes of
  one share partition are serialized, and each writes the whole state as of its start
  (acknowledgements arriving meanwhile ride the next write).
- Acquisition locks expire on a timer per share partition; a member's records are
  released when its share session closes (epoch -1, or the connection it was opened on
  closes) or when it leaves the group (`member_left`).

The persister is the broker's (`Broker.share_persister`, shared with the group
coordinator), read on every use.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from jocko_py.broker.share.partition import (
    AckBatch,
    AcquiredRange,
    FetchedBatch,
    SharePartition,
    SharePartitionConfig,
)
from jocko_py.broker.share.persister import SharePartitionKey, SharePersister
from jocko_py.broker.share.session import ShareSessionCache
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.partition import Partition
    from jocko_py.broker.replica_manager import ReplicaManager

log = logging.getLogger("jocko_py.broker.share")
E = ErrorCode

# broker-level settings of the share partitions that are not group configs
BROKER_DEFAULTS = {
    "group.share.max.share.sessions": "2000",
}


class ShareGroupSettings(Protocol):
    """A share group's settings as the group side resolves them (its group configs over
    the broker's `group.share.*`, within their limits)."""

    @property
    def record_lock_duration_ms(self) -> int: ...

    @property
    def delivery_count_limit(self) -> int: ...

    @property
    def partition_max_record_locks(self) -> int: ...

    @property
    def isolation_level(self) -> str: ...

    @property
    def auto_offset_reset(self) -> str: ...


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class FetchRequestPartition:
    topic_id: uuid.UUID
    topic: str
    partition: int
    acknowledgements: list[AckBatch] = field(default_factory=list)


@dataclass
class PartitionFetchResult:
    error: ErrorCode = E.NONE
    message: str | None = None
    ack_error: ErrorCode = E.NONE
    ack_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRange] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1
    acked: bool = False  # the request acknowledged something here


@dataclass
class _Entry:
    key: SharePartitionKey
    topic: str
    sp: SharePartition
    leader_epoch: int
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiters: dict[int, asyncio.Future[ErrorCode]] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None
    fetch_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # log bytes per record of what this partition last returned (0: not known yet):
    # sizes the next log read from the records asked for, not only from the bytes
    bytes_per_record: float = 0.0


# the least a share fetch reads from the log of one partition when it asks for fewer
# records than the bytes it may take would hold (a read is sized from the records asked
# for and the log's bytes per record, so a 500-record ShareFetch with fetch.max.bytes of
# 50 MiB does not read, copy and parse 50 MiB to hand out 500 records)
_MIN_READ_BYTES = 1 << 20


class SharePartitionManager:
    def __init__(self, replicas: ReplicaManager, persister: Callable[[], SharePersister],
                 prop: Callable[[str], str],
                 settings: Callable[[dict[str, str]], ShareGroupSettings],
                 broker_id: int = -1) -> None:
        self.replicas = replicas
        self._settings = settings
        self._persister = persister
        self._prop = prop
        self.broker_id = broker_id
        self.sessions = ShareSessionCache(self.int_prop("group.share.max.share.sessions"))
        self.entries: dict[tuple[str, str, int], _Entry] = {}
        self._loading: dict[tuple[str, str, int], asyncio.Future[None]] = {}
        # the group configs set on a share group (the group coordinator's hook)
        self.group_config: Callable[[str], dict[str, str]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # acquisition locks expired, per (group, topic, partition) (metrics.py reads them)
        self.lock_expiries: dict[tuple[str, str, int], int] = {}

    @property
    def persister(self) -> SharePersister:
        return self._persister()

    def int_prop(self, key: str) -> int:
        raw = self._prop(key)
        try:
            return int(raw) if raw else int(BROKER_DEFAULTS[key])
        except ValueError:
            return int(BROKER_DEFAULTS[key])

    # ------------------------------------------------------------------ config

    def partition_config(self, group_id: str) -> tuple[SharePartitionConfig, str]:
        """The share partition settings of `group_id` and its `share.auto.offset.reset`:
        the group's configs (`group_config`, set by the group coordinator) over the
        broker's `group.share.*` defaults, as the share group reads them."""
        c = self._settings(self.group_config(group_id)
                           if self.group_config is not None else {})
        return SharePartitionConfig(
            max_in_flight=c.partition_max_record_locks,
            delivery_count_limit=c.delivery_count_limit,
            lock_duration_ms=c.record_lock_duration_ms,
            read_committed=c.isolation_level == "read_committed"), c.auto_offset_reset

    def lock_duration_ms(self, group_id: str) -> int:
        return self.partition_config(group_id)[0].lock_duration_ms

    # ------------------------------------------------------------------ loading

    async def _entry(self, group_id: str, topic: str, topic_id: uuid.UUID,
                     partition: int) -> tuple[_Entry | None, ErrorCode, str | None]:
        p, err = self.replicas.get_partition_or_error(topic, partition)
        if p is None:
            return None, err, None
        k = (group_id, topic, partition)
        while True:
            e = self.entries.get(k)
            if e is not None and e.leader_epoch == p.leader_epoch and \
                    e.key.topic_id == topic_id:
                return e, E.NONE, None
            loading = self._loading.get(k)
            if loading is None:
                break
            await asyncio.shield(loading)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._loading[k] = fut
        try:
            return await self._load(k, p, topic_id)
        finally:
            del self._loading[k]
            fut.set_result(None)

    async def _load(self, k: tuple[str, str, int], p: Partition,
                    topic_id: uuid.UUID) -> tuple[_Entry | None, ErrorCode, str | None]:
        group_id, topic, partition = k
        old = self.entries.pop(k, None)
        if old is not None:
            self._drop(old)
        key = SharePartitionKey(group_id, topic_id, partition)
        epoch = p.leader_epoch
        cfg, reset = self.partition_config(group_id)
        try:
            state = await self.persister.read(key, epoch)
            if state.error == E.UNKNOWN_TOPIC_OR_PARTITION:
                start = self._reset_offset(p, reset)
                err = await self.persister.initialize(key, 0, start)
                if err != E.NONE:
                    return None, self._client_error(err), "share state not initialized"
                state = await self.persister.read(key, epoch)
            if state.error != E.NONE:
                return None, self._client_error(state.error), state.message
        except Exception as exc:  # the persister's transport: the client retries
            log.warning("[share partition %s] state read failed: %r", key, exc)
            return None, E.COORDINATOR_NOT_AVAILABLE, None
        if p.leader_epoch != epoch:
            return None, E.NOT_LEADER_OR_FOLLOWER, None
        if state.start_offset < 0:
            state = replace(state, start_offset=self._reset_offset(p, reset), batches=())
            sp = SharePartition.from_state(cfg, state)
            sp.dirty = True
        else:
            sp = SharePartition.from_state(cfg, state)
        if sp.start_offset < p.log.log_start_offset:
            sp.log_start_moved(p.log.log_start_offset)
        e = _Entry(key, topic, sp, epoch)
        self.entries[k] = e
        log.info("[share partition %s/%s-%d] loaded: start offset %d, %d in flight, "
                 "state epoch %d", group_id, topic, partition, sp.start_offset,
                 sp.in_flight(), sp.state_epoch)
        if sp.dirty:
            self._spawn(self._flush(e))
        return e, E.NONE, None

    def _reset_offset(self, p: Partition, reset: str) -> int:
        if reset == "earliest":
            return p.log.log_start_offset
        m = re.fullmatch(r"by_duration:(.+)", reset)
        if m:
            ms = _iso_duration_ms(m.group(1))
            if ms is not None:
                found = p.log.offset_for_timestamp(int(time.time() * 1000) - ms)
                return found[0] if found is not None else p.high_watermark
        return p.high_watermark

    @staticmethod
    def _client_error(err: ErrorCode) -> ErrorCode:
        if err in (E.FENCED_LEADER_EPOCH, E.FENCED_STATE_EPOCH):
            return E.NOT_LEADER_OR_FOLLOWER
        if err in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS):
            return E.COORDINATOR_NOT_AVAILABLE
        return err

    def on_partition_role(self, p: Partition, leader: bool) -> None:
        """Leadership moved (or a new epoch): the share partitions of it are dropped and
        loaded again from the durable state when next fetched."""
        for k in [k for k in self.entries if k[1] == p.topic and k[2] == p.partition]:
            self._drop(self.entries.pop(k))

    def _drop(self, e: _Entry) -> None:
        if e.timer is not None:
            e.timer.cancel()
            e.timer = None

    # ------------------------------------------------------------------ writes

    async def _flush(self, e: _Entry) -> None:
        async with e.write_lock:
            sp = e.sp
            if not sp.dirty and not sp.pending_ids():
                return
            w = sp.begin_write()
            try:
                err = await self.persister.write(e.key, sp.state_epoch, e.leader_epoch,
                                                 w.start_offset, w.batches,
                                                 w.delivery_complete_count)
            except Exception as exc:
                log.warning("[share partition %s] state write failed: %r", e.key, exc)
                err = E.COORDINATOR_NOT_AVAILABLE
            if err != E.NONE:
                log.warning("[share partition %s] state write refused: %s", e.key, err.name)
                if err in (E.FENCED_STATE_EPOCH, E.FENCED_LEADER_EPOCH):
                    k = (e.key.group_id, e.topic, e.key.partition)
                    if self.entries.get(k) is e:  # stale: reload on the next fetch
                        self._drop(self.entries.pop(k))
            for pid, res in sp.complete_write(w, err).items():
                fut = e.waiters.pop(pid, None)
                if fut is not None and not fut.done():
                    fut.set_result(self._client_error(res))
            self._changed(e)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def _changed(self, e: _Entry) -> None:
        """Records may have become available: wake waiting fetches, re-arm the timer."""
        self.replicas.fetch_waiters.notify(("share", e.key.group_id, e.topic, e.key.partition))
        self._arm(e)

    def _arm(self, e: _Entry) -> None:
        d = e.sp.next_deadline()
        if e.timer is not None:
            e.timer.cancel()
            e.timer = None
        if d is None:
            return
        loop = asyncio.get_running_loop()
        e.timer = loop.call_later(max(0.0, (d - now_ms()) / 1000) + 0.001, self._expire, e)

    def _expire(self, e: _Entry) -> None:
        e.timer = None
        n = e.sp.expire_locks(now_ms())
        if n:
            k = (e.key.group_id, e.topic, e.key.partition)
            self.lock_expiries[k] = self.lock_expiries.get(k, 0) + n
            log.debug("[share partition %s] %d acquisition locks expired", e.key, n)
            self._spawn(self._flush(e))
        self._changed(e)

    # ------------------------------------------------------------------ acknowledgement

    async def acknowledge(self, group_id: str, member_id: str, tp: FetchRequestPartition
                          ) -> tuple[ErrorCode, str | None]:
        e, err, msg = await self._entry(group_id, tp.topic, tp.topic_id, tp.partition)
        if e is None:
            return err, msg
        res = e.sp.acknowledge(member_id, tp.acknowledgements, now_ms())
        if res.error != E.NONE:
            return res.error, res.message
        if not res.pending:
            self._arm(e)  # renewed locks
            return E.NONE, None
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        e.waiters[res.pending] = fut
        await self._flush(e)
        result = await fut
        return result, None

    async def release_member(self, group_id: str, member_id: str,
                             only: Sequence[tuple[uuid.UUID, int]] | None = None) -> None:
        """Release what `member_id` holds in the share partitions of `group_id` here."""
        wanted = None if only is None else set(only)
        for e in [e for k, e in self.entries.items() if k[0] == group_id]:
            if wanted is not None and (e.key.topic_id, e.key.partition) not in wanted:
                continue
            if e.sp.release_member(member_id):
                self._changed(e)
                await self._flush(e)

    def connection_closed(self, connection: str) -> None:
        """The share sessions opened on `connection` end: their members' records are
        released (Kafka 4.x releases them when the client's connection drops)."""
        for s in self.sessions.close_connection(connection):
            self._spawn(self.release_member(s.group_id, s.member_id))

    def member_left(self, group_id: str, member_id: str) -> None:
        """The share group's hook: `member_id` left `group_id` (or was fenced)."""
        self.sessions.remove(group_id, member_id)
        self._spawn(self.release_member(group_id, member_id))

    # ------------------------------------------------------------------ fetch

    async def fetch(self, group_id: str, member_id: str, parts: Sequence[FetchRequestPartition],
                    max_wait_ms: int, min_bytes: int, max_bytes: int, max_records: int,
                    strict_limit: bool = False) -> list[PartitionFetchResult]:
        """Acquire records of `parts` for the member, waiting up to `max_wait_ms` while
        nothing could be acquired."""
        results = [PartitionFetchResult() for _ in parts]
        deadline = time.monotonic() + max(0, max_wait_ms) / 1000
        while True:
            keys: list[object] = []
            failed = False
            for i, tp in enumerate(parts):
                r = results[i]
                if r.error != E.NONE or r.acquired:
                    continue
                e, err, msg = await self._entry(group_id, tp.topic, tp.topic_id, tp.partition)
                if e is None:
                    r.error, r.message, failed = err, msg, True
                    continue
                keys += [(tp.topic, tp.partition),
                         ("share", group_id, tp.topic, tp.partition)]
                got_bytes = sum(len(x.records) for x in results)
                got_records = sum(a.last_offset - a.first_offset + 1
                                  for x in results for a in x.acquired)
                if got_bytes >= max_bytes or got_records >= max_records:
                    continue
                data, acquired, err = await self._acquire(
                    e, member_id, max_bytes - got_bytes, max_records - got_records,
                    strict_limit)
                if err != E.NONE:
                    r.error, failed = err, True
                elif acquired:
                    r.records, r.acquired = data, acquired
            got_bytes = sum(len(x.records) for x in results)
            got = any(x.acquired for x in results)
            left = deadline - time.monotonic()
            if failed or (got and got_bytes >= min_bytes) or left <= 0 or not keys:
                return results
            await self.replicas.fetch_waiters.wait_any(keys, left)

    async def _acquire(self, e: _Entry, member_id: str, max_bytes: int, max_records: int,
                       strict_limit: bool) -> tuple[bytes, list[AcquiredRange], ErrorCode]:
        from jocko_py.broker.replica_manager import FetchParams, FetchPartition

        async with e.fetch_lock:  # one acquisition of a share partition at a time
            sp = e.sp
            offset = sp.next_fetch_offset()
            if offset is None:
                return b"", [], E.NONE
            cfg = sp.config
            read_bytes = max_bytes
            if e.bytes_per_record > 0:
                read_bytes = min(max_bytes, max(_MIN_READ_BYTES,
                                                int(e.bytes_per_record * max_records * 1.25)))
            params = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=0,
                                 max_bytes=read_bytes, isolation_level=int(cfg.read_committed),
                                 partitions=[FetchPartition(e.topic, e.key.partition, offset,
                                                            max_bytes=read_bytes)])
            (res,) = await self.replicas.fetch_messages(params)
            if res.error == E.OFFSET_OUT_OF_RANGE:
                p = self.replicas.get(e.topic, e.key.partition)
                if p is not None and offset < p.log.log_start_offset:
                    sp.log_start_moved(p.log.log_start_offset)
                    self._spawn(self._flush(e))
                return b"", [], E.NONE
            if res.error != E.NONE:
                return b"", [], res.error
            data = (memoryview(res.records) if isinstance(res.records, (bytes, memoryview))
                    else memoryview(b""))
            if not data:
                return b"", [], E.NONE
            headers = list(rb.iter_batches(data, validate_crc=False, allow_partial_tail=True))
            if headers:
                last = headers[-1]
                span = last[0] + last[1].size
                count = last[1].last_offset - headers[0][1].base_offset + 1
                if count > 0:
                    e.bytes_per_record = span / count
            batches = [FetchedBatch(h.base_offset, h.last_offset, h.producer_id,
                                    h.is_transactional, h.is_control) for _, h in headers]
            acquired = sp.acquire(member_id, offset, batches, max_records, now_ms(),
                                  res.aborted_transactions or (), strict_limit)
            self._arm(e)
            if not acquired:
                return b"", [], E.NONE
            lo, hi = acquired[0].first_offset, acquired[-1].last_offset
            keep = [(pos, h) for pos, h in headers if h.last_offset >= lo and h.base_offset <= hi]
            if not keep:
                return b"", acquired, E.NONE
            start = keep[0][0]
            end = keep[-1][0] + keep[-1][1].size
            return bytes(data[start:end]), acquired, E.NONE

    def leader_of(self, topic: str, partition: int) -> tuple[int, int]:
        p = self.replicas.get(topic, partition)
        if p is None:
            return -1, -1
        return p.leader_id, p.leader_epoch


def _iso_duration_ms(text: str) -> int | None:
    """An ISO-8601 duration (PnDTnHnMnS) in milliseconds, as Kafka's `by_duration`."""
    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text)
    if m is None or text in ("P", "PT"):
        return None
    d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)
