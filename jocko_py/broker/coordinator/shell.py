"""The asyncio shell of a coordinator runtime: elections, waiting and timers.

This module owns the only asyncio code of a coordinator (``runtime.py`` is
synchronous): it loads a shard when this broker becomes leader of one of the
coordinator topic's partitions (a replica manager role listener; the elections of one
metadata batch are loaded together, on the next loop turn), turns the runtime's
deliveries into awaitable answers, waits for each write to reach the ISR (acks=all,
``offsets.commit.timeout.ms``) before the runtime releases its answers, and runs the
runtime's timers with ``loop.call_later`` on the injected clock.

``ReplicaLog`` is the one internal acks=all write of the coordinators: a batch of
(key, value) records (optionally transactional) appended as the partition's leader,
then waited on until the high watermark passes it; and the reader of a coordinator
partition for loading (transactional records at their commit marker, dropped at an
abort, and with their producer id when still open at the log's end).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from jocko_py.broker.coordinator.runtime import (
    CoordinatorResult,
    CoordinatorRuntime,
    CoordinatorShard,
    LogRecord,
    Record,
)
from jocko_py.broker.purgatory import before_park, parked
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.partition import Partition
    from jocko_py.broker.replica_manager import ReplicaManager

log = logging.getLogger("jocko_py.broker.coordinator")

E = ErrorCode
R = TypeVar("R")
S = TypeVar("S", bound=CoordinatorShard)


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class ReplicaLog:
    """Appends to and reads a coordinator topic's partitions through the replica manager."""

    def __init__(self, replicas: ReplicaManager, topic: str) -> None:
        self.replicas = replicas
        self.topic = topic

    def partition(self, idx: int) -> Partition | None:
        return self.replicas.get(self.topic, idx)

    def append(self, partition: int, records: list[Record],
               producer: tuple[int, int] | None, now: int) -> tuple[ErrorCode, int]:
        p = self.partition(partition)
        if p is None or not p.is_leader:
            return E.NOT_LEADER_OR_FOLLOWER, -1
        recs = [rb.NewRecord(k, v, (), now) for k, v in records]
        if producer is not None:
            if p.log.producer_state.check_marker(producer[0], producer[1], -1) \
                    == E.INVALID_PRODUCER_EPOCH:
                return E.PRODUCER_FENCED, -1
            batch = rb.build_batch(recs, producer_id=producer[0], producer_epoch=producer[1],
                                   is_transactional=True)
        else:
            batch = rb.build_batch(recs)
        r = p.append_internal(batch, now)
        if r.error != E.NONE:
            log.warning("[partition=%s] coordinator write failed: %s %s", p.name,
                        r.error.name, r.message)
            return r.error, -1
        self.replicas.notify_append(p)
        return E.NONE, r.last_offset

    async def wait_committed(self, partition: int, offset: int, timeout_s: float
                             ) -> tuple[ErrorCode, int]:
        """Wait until the high watermark passes ``offset``: (error, high watermark)."""
        p = self.partition(partition)
        if p is None:
            return E.NOT_LEADER_OR_FOLLOWER, -1
        err = await self.replicas.wait_replicated(p, offset, time.monotonic() + timeout_s)
        return err, p.high_watermark

    def high_watermark(self, partition: int) -> int:
        p = self.partition(partition)
        return -1 if p is None else p.high_watermark

    def read(self, idx: int) -> Iterator[tuple[int, int, LogRecord]]:
        """(timestamp, offset, record) of every record of the local replica, in log
        order; a transactional record comes out at its commit marker, not at all when
        aborted, and with its producer id at the end when its transaction is open."""
        p = self.partition(idx)
        if p is None:
            return
        lg = p.log
        start = lg.log_start_offset
        open_txns: dict[int, list[rb.Record]] = {}
        for seg in list(lg.segments):
            for pos, h in seg.iter_headers():
                if h.next_offset <= start:
                    continue
                data = seg.read_batch_at(pos, h)
                if h.is_control:
                    try:
                        ctype, _ = rb.control_marker(data, h)
                    except rb.RecordError:
                        continue
                    held = open_txns.pop(h.producer_id, [])
                    if ctype == rb.ControlType.COMMIT:
                        for rec in held:
                            yield rec.timestamp, rec.offset, LogRecord(rec.key or b"",
                                                                       rec.value)
                    continue
                try:
                    recs = rb.decode_records(data, h)
                except Exception:
                    log.exception("[partition=%s] skipping undecodable batch", p.name)
                    continue
                for rec in recs:
                    if rec.offset < start or rec.key is None:
                        continue
                    if h.is_transactional:
                        open_txns.setdefault(h.producer_id, []).append(rec)
                        continue
                    yield rec.timestamp, rec.offset, LogRecord(rec.key, rec.value)
        for pid, held in open_txns.items():
            for rec in held:
                yield rec.timestamp, rec.offset, LogRecord(rec.key or b"", rec.value, pid)


# partitions to load -> their records, in replay order
Reader = Callable[[list[int]], dict[int, list[LogRecord]]]


class CoordinatorShell(Generic[S]):
    """Drives a ``CoordinatorRuntime`` on the event loop (see the module docstring)."""

    def __init__(self, runtime: CoordinatorRuntime[S], log_: ReplicaLog, reader: Reader,
                 clock: Clock, write_timeout_ms: Callable[[], int]) -> None:
        self.runtime = runtime
        self.log = log_
        self.reader = reader
        self.clock = clock
        self.write_timeout_ms = write_timeout_ms
        self._load_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        runtime.on_append = self._on_append

    # -- elections -----------------------------------------------------------------

    def on_partition_role(self, p: Any, leader: bool) -> None:
        if p.topic != self.log.topic:
            return
        if not leader:
            if p.partition in self.runtime.contexts:
                self.runtime.unload(p.partition)
                log.info("[partition=%s] resigned as %s coordinator", p.name,
                         self.runtime.name)
            return
        if self.runtime.schedule_load(p.partition, p.leader_epoch) \
                and not self._load_scheduled:
            # one load for every partition elected by the same metadata batch
            self._load_scheduled = True
            asyncio.get_running_loop().call_soon(self._load_elected)

    def _load_elected(self) -> None:
        self._load_scheduled = False
        wanted = []
        for idx in self.runtime.loading():
            p = self.log.partition(idx)
            if p is None or not p.is_leader:
                self.runtime.unload(idx)
            else:
                wanted.append(idx)
        if not wanted:
            return
        t0 = time.monotonic()
        try:
            recs = self.reader(wanted)
        except Exception:
            # a segment rolled or truncated under the reader: the partitions stay
            # LOADING (clients retry on COORDINATOR_LOAD_IN_PROGRESS) and load again
            log.exception("loading %s coordinator partitions %s failed; retrying in 1 s",
                          self.runtime.name, wanted)
            self._load_scheduled = True
            asyncio.get_running_loop().call_later(1.0, self._load_elected)
            return
        now = self.clock.now_ms()
        n = 0
        for idx in wanted:
            p = self.log.partition(idx)
            assert p is not None
            n += max(0, self.runtime.load(idx, p.leader_epoch, recs.get(idx, []), now,
                                          p.high_watermark))
        log.info("elected %s coordinator for %d partition(s) of %s: %d record(s) loaded "
                 "in %.2fs", self.runtime.name, len(wanted), self.log.topic, n,
                 time.monotonic() - t0)
        self._arm()

    # -- operations ----------------------------------------------------------------

    async def write(self, partition: int, op: Callable[[S, int], CoordinatorResult[R]]
                    ) -> tuple[R | None, ErrorCode]:
        """Run ``op`` on the shard; its answer once its records are committed."""
        fut: asyncio.Future[tuple[Any, ErrorCode]] = \
            asyncio.get_running_loop().create_future()

        def deliver(resp: Any, err: ErrorCode) -> None:
            if not fut.done():
                fut.set_result((resp, err))

        self.runtime.write(partition, op, deliver, self.clock.now_ms())
        self._arm()
        if not fut.done():
            before_park()
            with parked():
                resp, err = await fut
        else:
            resp, err = fut.result()
        return resp, err

    def write_nowait(self, partition: int, op: Callable[[S, int], CoordinatorResult[Any]]
                     ) -> None:
        self.runtime.write(partition, op, lambda r, e: None, self.clock.now_ms())
        self._arm()

    # -- waiting for the ISR -------------------------------------------------------

    def _on_append(self, partition: int, offset: int) -> None:
        task = asyncio.get_running_loop().create_task(self._wait(partition, offset))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _wait(self, partition: int, offset: int) -> None:
        err, hw = await self.log.wait_committed(partition, offset,
                                                self.write_timeout_ms() / 1000)
        if err == E.NONE:
            self.runtime.committed(partition, hw)
        else:
            self.runtime.write_failed(partition, offset, err)
        self._arm()

    # -- timers --------------------------------------------------------------------

    def _arm(self) -> None:
        deadline = self.runtime.next_deadline()
        if deadline is None or (self._timer_at is not None and self._timer_at <= deadline):
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, (deadline - self.clock.now_ms()) / 1000)
        self._timer_at = deadline
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = self._timer_at = None
        try:
            self.runtime.fire_due(self.clock.now_ms())
            for idx in list(self.runtime.contexts):
                hw = self.log.high_watermark(idx)
                if hw >= 0:
                    self.runtime.committed(idx, hw)
        except Exception:
            log.exception("%s coordinator timers failed", self.runtime.name)
        self._arm()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for t in self._tasks:
            t.cancel()
