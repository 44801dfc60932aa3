"""The coordinator runtime: shards of a coordinator, one per partition of its topic.

This module owns the lifecycle of coordinator shards (Kafka's ``CoordinatorRuntime``)
and the order in which their operations run, write and answer. It is synchronous and
does no I/O: the log is reached through a ``CoordinatorWriter``, time comes in as
``now`` (milliseconds), and the asyncio shell (``shell.py``) feeds it elections,
committed offsets and timer deadlines. The same runtime runs in the simulation
(``tests/groups/sim_groups.py``) with an in-memory log and a simulated clock.

Interface for a coordinator (group, transaction, share, streams)
-----------------------------------------------------------------
A coordinator is a *shard* class (one instance per partition of its topic, e.g.
``__consumer_offsets``) and *operations* on it. An operation is a function
``op(shard, now) -> CoordinatorResult[R]``: it reads and changes the shard's state and
returns

- ``response``: the answer (any type ``R``), or ``Held(token)`` when the answer comes
  later (a JoinGroup waiting for the rebalance): a later operation names ``token`` in
  its ``completions`` with the answer;
- ``records``: (key, value) pairs (value None: a tombstone) to append to the shard's
  partition, all in one batch (``producer``: a transactional batch of that producer);
- ``replay``: True when the state change *is* those records: the runtime replays them
  into the shard (``shard.replay``) once the batch is appended, as it does when it
  loads the partition, so a refused write changes nothing. False when the operation
  changed the state itself and the records only persist it;
- ``timers``: ``Timer(key, deadline_ms, op)`` to run ``op`` (an operation with
  response None) at the deadline on the same clock; a key set again is replaced,
  ``op=None`` cancels it;
- ``completions``: (token, answer) of requests held earlier;
- ``effects``: what must happen outside the shard once the records are committed (the
  transaction coordinator's markers to send, say): handed to ``runtime.on_effect``
  with the partition, after the commit, never for a write that failed;
- ``on_append_error``: what the operation answers (and undoes) if the append is
  refused; without it the caller gets the (normalised) error.
- ``undo``: run first when the append is refused, whatever the answer: rolls back
  bookkeeping the operation changed on the belief that its records would be written
  (the group shard's record of what it last wrote, which later writes diff against).

A shard implements ``CoordinatorShard``: ``replay`` (one record of its partition, in
log order, while loading and for ``replay=True`` results), ``on_loaded(now)`` (the
partition is loaded: return its first timers) and ``on_unloaded()`` (the answers to the
requests it still holds, usually NOT_COORDINATOR).

Coordinators on it: the group coordinator (``broker/group/shard.py``, one ``GroupShard``
per ``__consumer_offsets`` partition, served by ``broker/group/coordinator.py`` through
``shell.CoordinatorShell``) and the transaction coordinator (``broker/txn/shard.py``,
one ``TxnShard`` per ``__transaction_state`` partition holding its ``TxnMetadata``,
each API an operation returning the transaction's next state as a record; the markers
are sent outside the shard by ``broker/txn/coordinator.py``, started by the
``effects`` of the committed PrepareCommit/Abort). Both run in the seeded simulations
(``tests/groups/sim_groups.py``, ``tests/txn/sim_txn.py``).

Rules
-----
- Kafka semantics for writes: an operation's response, and the completions it carries,
  are released only once its records are committed (the partition's high watermark
  passed them, acks=all). An operation without records answers once everything the
  shard wrote before it is committed, so no answer shows an uncommitted state.
- One operation at a time per shard, in arrival order: operations submitted while
  another runs (from a callback) are queued and run after it (the shard's event queue).
- A partition not led here answers NOT_COORDINATOR; one being loaded,
  COORDINATOR_LOAD_IN_PROGRESS. Losing the partition (or a new leader epoch) unloads
  the shard: held requests get its ``on_unloaded`` answers, uncommitted answers
  NOT_COORDINATOR, and its timers are dropped. Election loads it again from the log.
- Errors from the log are normalised as Kafka's coordinators do (``normalize``).
"""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.coordinator")

E = ErrorCode
R = TypeVar("R")
S = TypeVar("S", bound="CoordinatorShard")

Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A record of a coordinator partition as replay sees it."""

    key: bytes
    value: bytes | None
    producer_id: int = -1  # >= 0: a transactional record still open at the log's end
    offset: int = -1  # its offset in the partition, where the reader knows it


@dataclass(frozen=True, slots=True)
class Held:
    """The operation's answer is given later, by a completion naming ``token``."""

    token: int


@dataclass(frozen=True, slots=True)
class Timer:
    key: str
    deadline_ms: int
    op: Callable[[Any, int], CoordinatorResult[None]] | None


@dataclass(slots=True)
class CoordinatorResult(Generic[R]):
    response: R | Held
    records: list[Record] = field(default_factory=list)
    replay: bool = False
    producer: tuple[int, int] | None = None
    timers: list[Timer] = field(default_factory=list)
    completions: list[tuple[int, object]] = field(default_factory=list)
    effects: list[object] = field(default_factory=list)
    on_append_error: Callable[[ErrorCode], CoordinatorResult[R]] | None = None
    undo: Callable[[], None] | None = None


Op = Callable[[S, int], CoordinatorResult[R]]
# how an answer reaches its caller: (response or None, error)
Deliver = Callable[[Any, ErrorCode], None]


class CoordinatorShard(Protocol):
    def replay(self, record: LogRecord) -> None: ...

    def on_loaded(self, now: int) -> CoordinatorResult[None]: ...

    def on_unloaded(self) -> list[tuple[int, object]]: ...


class CoordinatorWriter(Protocol):
    def append(self, partition: int, records: list[Record],
               producer: tuple[int, int] | None, now: int) -> tuple[ErrorCode, int]:
        """Append one batch as the partition's leader: (error, last offset)."""
        ...


def normalize(err: ErrorCode) -> ErrorCode:
    """A log error as a coordinator's client sees it (Kafka's normalizeException)."""
    if err in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR,
               E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.NOT_COORDINATOR):
        return E.NOT_COORDINATOR
    if err in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    if err in (E.NONE, E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH,
               E.COORDINATOR_LOAD_IN_PROGRESS, E.INVALID_COMMIT_OFFSET_SIZE):
        return err
    return E.COORDINATOR_NOT_AVAILABLE


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass
class _Context(Generic[S]):
    partition: int
    epoch: int
    state: ShardState
    shard: S | None = None
    last_written: int = -1  # offset of the last record this shard appended
    committed: int = 0  # the partition's high watermark as last reported
    # answers waiting for the high watermark: offset -> [(deliver, response)]
    deferred: dict[int, list[tuple[Deliver, Any]]] = field(default_factory=dict)
    held: dict[int, Deliver] = field(default_factory=dict)
    queue: deque[tuple[Callable[[Any, int], CoordinatorResult[Any]], Deliver]] = field(
        default_factory=deque)
    running: bool = False


class CoordinatorRuntime(Generic[S]):
    """The shards of one coordinator and their event queues, writes and timers."""

    def __init__(self, name: str, new_shard: Callable[[int], S], writer: CoordinatorWriter,
                 ) -> None:
        self.name = name
        self.new_shard = new_shard
        self.writer = writer
        self.contexts: dict[int, _Context[S]] = {}
        self._timers: dict[tuple[int, str], tuple[int, int, Callable[[Any, int], Any]]] = {}
        self._heap: list[tuple[int, int, int, str]] = []
        self._seq = itertools.count()
        # called with (partition, offset) after every append (the shell waits for it)
        self.on_append: Callable[[int, int], None] = lambda p, o: None
        # called with (partition, effect) for each effect of a committed result
        self.on_effect: Callable[[int, object], None] = lambda p, e: None

    # -- lifecycle ---------------------------------------------------------------------

    def schedule_load(self, partition: int, epoch: int) -> bool:
        """Elected leader of ``partition`` at ``epoch``: load it (``load``) next; until
        then its operations get COORDINATOR_LOAD_IN_PROGRESS. False if it is loaded or
        loading at that epoch already."""
        ctx = self.contexts.get(partition)
        if ctx is not None and ctx.epoch == epoch:
            return False
        if ctx is not None:
            self.unload(partition)
        self.contexts[partition] = _Context(partition, epoch, ShardState.LOADING)
        return True

    def loading(self) -> list[int]:
        return [p for p, c in self.contexts.items() if c.state is ShardState.LOADING]

    def load(self, partition: int, epoch: int, records: Iterable[LogRecord], now: int,
             high_watermark: int) -> int:
        """Replay the partition's records into a new shard and activate it; the count
        replayed (-1 if the partition is no longer waiting for this load)."""
        ctx = self.contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.state is not ShardState.LOADING:
            return -1
        shard = self.new_shard(partition)
        n = 0
        for rec in records:
            n += 1
            try:
                shard.replay(rec)
            except Exception:
                log.exception("[%s partition=%d] skipping a record it cannot replay",
                              self.name, partition)
        ctx.shard = shard
        ctx.state = ShardState.ACTIVE
        ctx.committed = high_watermark
        ctx.last_written = high_watermark - 1
        self._run(ctx, lambda s, t: s.on_loaded(t), _ignore, now)
        return n

    def unload(self, partition: int) -> None:
        """Resigned (or a new epoch): held and uncommitted answers fail, timers go."""
        ctx = self.contexts.pop(partition, None)
        if ctx is None:
            return
        for key in [k for k in self._timers if k[0] == partition]:
            del self._timers[key]
        answers: list[tuple[int, object]] = []
        if ctx.shard is not None:
            try:
                answers = ctx.shard.on_unloaded()
            except Exception:
                log.exception("[%s partition=%d] unload failed", self.name, partition)
        for token, resp in answers:
            d = ctx.held.pop(token, None)
            if d is not None:
                d(resp, E.NONE)
        for d in ctx.held.values():
            d(None, E.NOT_COORDINATOR)
        for waiting in ctx.deferred.values():
            for d, resp in waiting:
                d(resp, E.NOT_COORDINATOR)
        for d, resp in ((d, None) for _, d in ctx.queue):
            d(resp, E.NOT_COORDINATOR)

    def shard(self, partition: int) -> S | None:
        """The active shard of ``partition`` (for reads), or None."""
        ctx = self.contexts.get(partition)
        return ctx.shard if ctx is not None and ctx.state is ShardState.ACTIVE else None

    def status(self, partition: int) -> ErrorCode:
        ctx = self.contexts.get(partition)
        if ctx is None:
            return E.NOT_COORDINATOR
        if ctx.state is ShardState.LOADING:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return E.NONE

    # -- operations --------------------------------------------------------------------

    def write(self, partition: int, op: Callable[[S, int], CoordinatorResult[R]],
              deliver: Deliver, now: int) -> None:
        """Run ``op`` on the partition's shard (after those queued before it); its
        answer reaches ``deliver`` once its records are committed."""
        ctx = self.contexts.get(partition)
        err = self.status(partition)
        if ctx is None or err != E.NONE:
            deliver(None, err)
            return
        self._run(ctx, op, deliver, now)

    def read(self, partition: int, fn: Callable[[S], R]) -> tuple[R | None, ErrorCode]:
        """A read of the shard's current state (no write, no wait)."""
        err = self.status(partition)
        shard = self.shard(partition)
        if err != E.NONE or shard is None:
            return None, err
        return fn(shard), E.NONE

    def _run(self, ctx: _Context[S], op: Callable[[S, int], CoordinatorResult[Any]],
             deliver: Deliver, now: int) -> None:
        ctx.queue.append((op, deliver))
        if ctx.running:
            return  # the running operation's loop takes it next
        ctx.running = True
        try:
            while ctx.queue and self.contexts.get(ctx.partition) is ctx:
                op1, deliver1 = ctx.queue.popleft()
                self._execute(ctx, op1, deliver1, now)
        finally:
            ctx.running = False

    def _execute(self, ctx: _Context[S], op: Callable[[S, int], CoordinatorResult[Any]],
                 deliver: Deliver, now: int) -> None:
        shard = ctx.shard
        assert shard is not None
        try:
            result = op(shard, now)
        except Exception:
            log.exception("[%s partition=%d] operation failed", self.name, ctx.partition)
            deliver(None, E.UNKNOWN_SERVER_ERROR)
            return
        offset = ctx.last_written
        if result.records:
            err, last = self.writer.append(ctx.partition, result.records, result.producer,
                                           now)
            if err != E.NONE:
                err = normalize(err)
                log.warning("[%s partition=%d] write refused: %s", self.name, ctx.partition,
                            err.name)
                if result.undo is not None:
                    result.undo()
                if result.on_append_error is None:
                    deliver(None, err)
                    return
                result = result.on_append_error(err)
                if result.records:
                    log.error("[%s partition=%d] an append-error answer may not write",
                              self.name, ctx.partition)
                offset = ctx.last_written
            else:
                ctx.last_written = offset = last
                if result.replay:
                    first = last - len(result.records) + 1
                    for i, (k, v) in enumerate(result.records):
                        shard.replay(LogRecord(k, v, result.producer[0]
                                               if result.producer else -1, first + i))
                self.on_append(ctx.partition, last)
        for t in result.timers:
            self._set_timer(ctx.partition, t)
        answers: list[tuple[Deliver, Any]] = []
        if isinstance(result.response, Held):
            ctx.held[result.response.token] = deliver
        else:
            answers.append((deliver, result.response))
        for token, resp in result.completions:
            d = ctx.held.pop(token, None)
            if d is not None:
                answers.append((d, resp))
        for effect in result.effects:
            answers.append((self._effect_deliver(ctx.partition), effect))
        if not answers:
            return
        if offset < ctx.committed:
            for d, resp in answers:
                d(resp, E.NONE)
        else:
            ctx.deferred.setdefault(offset, []).extend(answers)

    def _effect_deliver(self, partition: int) -> Deliver:
        def deliver(effect: Any, err: ErrorCode) -> None:
            if err == E.NONE:
                self.on_effect(partition, effect)
        return deliver

    # -- the log's progress ------------------------------------------------------------

    def committed(self, partition: int, high_watermark: int) -> None:
        """The partition's high watermark moved: release the answers below it."""
        ctx = self.contexts.get(partition)
        if ctx is None or ctx.state is not ShardState.ACTIVE:
            return
        if high_watermark > ctx.committed:
            ctx.committed = high_watermark
        for off in sorted(o for o in ctx.deferred if o < ctx.committed):
            for d, resp in ctx.deferred.pop(off):
                d(resp, E.NONE)

    def write_failed(self, partition: int, offset: int, err: ErrorCode) -> None:
        """The write at ``offset`` was not committed in time: its answers fail."""
        ctx = self.contexts.get(partition)
        if ctx is None:
            return
        for d, resp in ctx.deferred.pop(offset, []):
            d(resp, normalize(err))

    # -- timers ------------------------------------------------------------------------

    def _set_timer(self, partition: int, t: Timer) -> None:
        key = (partition, t.key)
        if t.op is None:
            self._timers.pop(key, None)
            return
        seq = next(self._seq)
        self._timers[key] = (t.deadline_ms, seq, t.op)
        heapq.heappush(self._heap, (t.deadline_ms, seq, partition, t.key))

    def next_deadline(self) -> int | None:
        while self._heap:
            deadline, seq, p, key = self._heap[0]
            cur = self._timers.get((p, key))
            if cur is not None and cur[1] == seq:
                return deadline
            heapq.heappop(self._heap)  # replaced or cancelled
        return None

    def fire_due(self, now: int) -> int:
        """Run every timer whose deadline is ``now`` or earlier; the count run."""
        n = 0
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > now:
                return n
            _, seq, p, key = heapq.heappop(self._heap)
            _, _, op = self._timers.pop((p, key))
            ctx = self.contexts.get(p)
            if ctx is None or ctx.state is not ShardState.ACTIVE:
                continue
            n += 1
            self._run(ctx, op, _ignore, now)

    def timer(self, partition: int, key: str) -> int | None:
        t = self._timers.get((partition, key))
        return None if t is None else t[0]


def _ignore(_resp: Any, err: ErrorCode) -> None:
    if err != E.NONE:
        log.debug("coordinator timer write failed: %s", err.name)
