"""The coordinator runtime alone (broker/coordinator/runtime.py), with a counter shard and
an in-memory log: answers only after their records are committed, loading and
unloading, errors as Kafka's coordinators give them, timers on the caller's clock, and
one operation at a time per shard."""

from __future__ import annotations

from typing import Any

from jocko_py.broker.coordinator.runtime import (
    CoordinatorResult,
    CoordinatorRuntime,
    Held,
    LogRecord,
    Record,
    Timer,
)
from jocko_py.protocol.errors import ErrorCode as E


class MemLog:
    def __init__(self) -> None:
        self.records: list[tuple[int, Record]] = []
        self.refuse: E | None = None

    def append(self, partition: int, records: list[Record], producer: tuple[int, int] | None,
               now: int) -> tuple[E, int]:
        if self.refuse is not None:
            return self.refuse, -1
        for r in records:
            self.records.append((partition, r))
        return E.NONE, len(self.records) - 1


class Counter:
    """A shard whose state is a sum: ``add`` writes a record, replayed into ``total``."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.total = 0
        self.held: list[int] = []
        self.loaded_at = -1

    def replay(self, rec: LogRecord) -> None:
        self.total += int(rec.value or b"0")

    def on_loaded(self, now: int) -> CoordinatorResult[None]:
        self.loaded_at = now
        return CoordinatorResult(None)

    def on_unloaded(self) -> list[tuple[int, object]]:
        return [(t, "unloaded") for t in self.held]


def add(n: int) -> Any:
    def op(s: Counter, now: int) -> CoordinatorResult[int]:
        return CoordinatorResult(s.total + n, records=[(b"k", str(n).encode())], replay=True)
    return op


def read_total(s: Counter, now: int) -> CoordinatorResult[int]:
    return CoordinatorResult(s.total)


class Answers:
    def __init__(self) -> None:
        self.got: list[tuple[Any, E]] = []

    def __call__(self, resp: Any, err: E) -> None:
        self.got.append((resp, err))


def loaded(records: list[LogRecord] | None = None, hw: int = 0
           ) -> tuple[CoordinatorRuntime[Counter], MemLog]:
    log = MemLog()
    rt: CoordinatorRuntime[Counter] = CoordinatorRuntime("test", Counter, log)
    assert rt.schedule_load(0, 1)
    assert rt.load(0, 1, records or [], 100, hw) == len(records or [])
    return rt, log


def test_answer_only_once_committed() -> None:
    rt, log = loaded()
    a = Answers()
    rt.write(0, add(5), a, 200)
    assert a.got == [] and log.records == [(0, (b"k", b"5"))]
    assert rt.shard(0) is not None and rt.shard(0).total == 5  # type: ignore[union-attr]
    # an operation without records waits for what was written before it
    b = Answers()
    rt.write(0, read_total, b, 201)
    assert b.got == []
    rt.committed(0, 0)  # the high watermark has not passed offset 0
    assert a.got == [] and b.got == []
    rt.committed(0, 1)
    assert a.got == [(5, E.NONE)] and b.got == [(5, E.NONE)]
    # nothing uncommitted left: answered at once
    c = Answers()
    rt.write(0, read_total, c, 202)
    assert c.got == [(5, E.NONE)]


def test_not_coordinator_and_loading() -> None:
    log = MemLog()
    rt: CoordinatorRuntime[Counter] = CoordinatorRuntime("test", Counter, log)
    a = Answers()
    rt.write(3, read_total, a, 0)
    assert a.got == [(None, E.NOT_COORDINATOR)]
    assert rt.schedule_load(3, 7) and not rt.schedule_load(3, 7)
    rt.write(3, read_total, a, 0)
    assert a.got[-1] == (None, E.COORDINATOR_LOAD_IN_PROGRESS)
    assert rt.loading() == [3]
    # a load for another epoch is not this one's
    assert rt.load(3, 6, [], 0, 0) == -1
    assert rt.load(3, 7, [LogRecord(b"k", b"2"), LogRecord(b"k", b"3")], 50, 2) == 2
    shard = rt.shard(3)
    assert shard is not None and shard.total == 5 and shard.loaded_at == 50
    rt.write(3, read_total, a, 0)
    assert a.got[-1] == (5, E.NONE)


def test_unload_answers_held_and_uncommitted() -> None:
    rt, _ = loaded()

    def hold(s: Counter, now: int) -> CoordinatorResult[str]:
        s.held.append(42)
        return CoordinatorResult(Held(42))

    held, pending = Answers(), Answers()
    rt.write(0, hold, held, 0)
    rt.write(0, add(1), pending, 0)
    rt._set_timer(0, Timer("t", 10, read_total))
    assert held.got == [] and pending.got == [] and rt.next_deadline() == 10
    rt.unload(0)
    assert held.got == [("unloaded", E.NONE)]
    assert pending.got == [(1, E.NOT_COORDINATOR)]
    assert rt.next_deadline() is None and rt.status(0) == E.NOT_COORDINATOR


def test_held_answer_released_by_a_completion() -> None:
    rt, _ = loaded()
    held, other = Answers(), Answers()
    rt.write(0, lambda s, now: CoordinatorResult(Held(1)), held, 0)
    rt.write(0, lambda s, now: CoordinatorResult(
        "done", records=[(b"k", b"0")], completions=[(1, "joined"), (99, "nobody")]), other, 0)
    assert held.got == [] and other.got == []
    rt.committed(0, 1)
    assert held.got == [("joined", E.NONE)] and other.got == [("done", E.NONE)]


def test_refused_append() -> None:
    rt, log = loaded()
    log.refuse = E.NOT_LEADER_OR_FOLLOWER
    a = Answers()
    rt.write(0, add(3), a, 0)
    # normalised as Kafka's coordinators do; the replayed state did not change
    assert a.got == [(None, E.NOT_COORDINATOR)]
    assert rt.shard(0).total == 0  # type: ignore[union-attr]

    def with_undo(s: Counter, now: int) -> CoordinatorResult[str]:
        return CoordinatorResult("ok", records=[(b"k", b"1")],
                                 on_append_error=lambda err: CoordinatorResult(f"undo {err.name}"))

    log.refuse = E.MESSAGE_TOO_LARGE
    rt.write(0, with_undo, a, 0)
    assert a.got[-1] == ("undo INVALID_COMMIT_OFFSET_SIZE", E.NONE)
    log.refuse = E.REQUEST_TIMED_OUT
    rt.write(0, add(1), a, 0)
    assert a.got[-1] == (None, E.COORDINATOR_NOT_AVAILABLE)


def test_write_not_replicated_in_time() -> None:
    rt, _ = loaded()
    a = Answers()
    rt.write(0, add(2), a, 0)
    rt.write_failed(0, 0, E.REQUEST_TIMED_OUT)
    assert a.got == [(2, E.COORDINATOR_NOT_AVAILABLE)]


def test_timers_on_the_callers_clock() -> None:
    rt, _ = loaded()
    fired: list[int] = []

    def tick(s: Counter, now: int) -> CoordinatorResult[None]:
        fired.append(now)
        return CoordinatorResult(None, timers=[Timer("tick", now + 100, tick)])

    rt._set_timer(0, Timer("tick", 1000, tick))
    rt._set_timer(0, Timer("other", 500, tick))
    rt._set_timer(0, Timer("other", 0, None))  # cancelled
    assert rt.fire_due(999) == 0 and rt.next_deadline() == 1000
    assert rt.fire_due(1000) == 1 and fired == [1000]
    assert rt.timer(0, "tick") == 1100
    rt._set_timer(0, Timer("tick", 2000, tick))  # replaced
    assert rt.fire_due(1500) == 0 and rt.fire_due(2000) == 1 and fired == [1000, 2000]


def test_one_operation_at_a_time() -> None:
    """An operation submitted while another runs (here, from an answer released by the
    first) is queued and runs after it, never inside it."""
    rt, _ = loaded(hw=0)
    order: list[str] = []

    def first(s: Counter, now: int) -> CoordinatorResult[str]:
        order.append("first starts")
        return CoordinatorResult("first")

    def second(s: Counter, now: int) -> CoordinatorResult[str]:
        order.append("second")
        return CoordinatorResult("second")

    def on_first(resp: Any, err: E) -> None:
        order.append("first answered")
        rt.write(0, second, lambda r, e: order.append("second answered"), 0)
        order.append("after submitting second")

    rt.write(0, first, on_first, 0)
    assert order == ["first starts", "first answered", "after submitting second", "second",
                     "second answered"]


def test_new_epoch_reloads() -> None:
    rt, log = loaded()
    a = Answers()
    rt.write(0, add(4), a, 0)
    rt.committed(0, 1)
    assert rt.schedule_load(0, 2)  # re-elected at a new epoch: unloaded, then loaded
    assert rt.status(0) == E.COORDINATOR_LOAD_IN_PROGRESS
    rt.load(0, 2, [LogRecord(k, v) for _, (k, v) in log.records], 0, 1)
    rt.write(0, read_total, a, 0)
    assert a.got[-1] == (4, E.NONE)


def test_effects_run_once_committed_and_never_for_a_lost_write() -> None:
    rt, _ = loaded()
    done: list[tuple[int, object]] = []
    rt.on_effect = lambda p, e: done.append((p, e))
    a = Answers()

    def with_effect(name: str) -> Any:
        def op(s: Counter, now: int) -> CoordinatorResult[str]:
            return CoordinatorResult("ok", records=[(b"k", b"1")], effects=[name])
        return op

    rt.write(0, with_effect("send markers"), a, 0)
    assert done == []
    rt.committed(0, 1)
    assert done == [(0, "send markers")]
    rt.write(0, with_effect("never"), a, 0)
    rt.unload(0)
    assert done == [(0, "send markers")]
