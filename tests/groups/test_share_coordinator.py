"""The share coordinator's shard (broker/share/shard.py) on the coordinator runtime with
an in-memory log: every state operation, Kafka's record choice (snapshot, then updates,
a snapshot again every `share.coordinator.snapshot.update.records.per.snapshot`),
replay after a reload, fencing, the batch merge, and pruning keeping what a reload
needs."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from jocko_py.broker.coordinator.runtime import CoordinatorRuntime, LogRecord, Record
from jocko_py.broker.share import records
from jocko_py.broker.share.batches import combine
from jocko_py.broker.share.persister import DeliveryState as D
from jocko_py.broker.share.persister import SharePartitionKey, StateBatch
from jocko_py.broker.share.shard import (
    READ_UNINITIALIZED,
    WRITE_UNINITIALIZED,
    Answer,
    Prune,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
)
from jocko_py.protocol.errors import ErrorCode as E

TOPIC = uuid.UUID("11111111-2222-3333-4444-555555555555")
GONE = uuid.UUID("99999999-2222-3333-4444-555555555555")
KEY = SharePartitionKey("g1", TOPIC, 0)


class MemLog:
    """One partition's log: appended records with their offsets; committed at once."""

    def __init__(self) -> None:
        self.records: list[tuple[int, Record]] = []
        self.start = 0

    def append(self, partition: int, recs: list[Record], producer: tuple[int, int] | None,
               now: int) -> tuple[E, int]:
        for r in recs:
            self.records.append((len(self.records), r))
        return E.NONE, len(self.records) - 1

    def live(self) -> list[LogRecord]:
        return [LogRecord(k, v, -1, off) for off, (k, v) in self.records if off >= self.start]


class Coord:
    def __init__(self, updates: int = 3, log: MemLog | None = None) -> None:
        self.config = ShareCoordinatorConfig(snapshot_updates=updates, prune_interval_ms=1000,
                                             cold_snapshot_interval_ms=5000)
        self.log = log or MemLog()
        self.effects: list[object] = []
        self.now = 1000
        self.rt: CoordinatorRuntime[ShareCoordinatorShard] = CoordinatorRuntime(
            "share", lambda p: ShareCoordinatorShard(p, self.config, self.topics), self.log)
        self.rt.on_effect = lambda p, e: self.effects.append(e)
        assert self.rt.schedule_load(0, 1)
        live = self.log.live()
        assert self.rt.load(0, 1, live, self.now, len(self.log.records)) == len(live)

    @staticmethod
    def topics(tid: uuid.UUID) -> int | None:
        return 3 if tid == TOPIC else None

    def run(self, op: Any) -> Any:
        got: list[tuple[Any, E]] = []
        self.rt.write(0, op, lambda r, e: got.append((r, e)), self.now)
        self.rt.committed(0, len(self.log.records))
        assert len(got) == 1 and got[0][1] == E.NONE, got
        return got[0][0]

    @property
    def shard(self) -> ShareCoordinatorShard:
        s = self.rt.shard(0)
        assert s is not None
        return s

    def init(self, key: SharePartitionKey = KEY, state_epoch: int = 0, start: int = 0
             ) -> Answer:
        a: Answer = self.run(lambda s, now: s.initialize(now, key, state_epoch, start))
        return a

    def read(self, leader_epoch: int, key: SharePartitionKey = KEY) -> Answer:
        a: Answer = self.run(lambda s, now: s.read(now, key, leader_epoch))
        return a

    def write(self, batches: tuple[StateBatch, ...], start: int = -1, leader_epoch: int = 1,
              state_epoch: int = 0, key: SharePartitionKey = KEY) -> Answer:
        a: Answer = self.run(lambda s, now: s.write(now, key, state_epoch, leader_epoch, start,
                                                    batches, 7))
        return a

    def kinds(self) -> list[str]:
        out = []
        for _, (k, v) in self.log.records:
            d = records.decode_key(k)
            assert d is not None
            out.append("tomb" if v is None else "snap" if d[0] == records.SNAPSHOT else "upd")
        return out


def B(first: int, last: int, state: D = D.ACKNOWLEDGED, count: int = 1) -> StateBatch:
    return StateBatch(first, last, state, count)


def test_initialize_read_write_delete_and_summary() -> None:
    c = Coord()
    assert c.init(state_epoch=2, start=10).error == E.NONE
    a = c.read(leader_epoch=1)
    assert (a.error, a.state_epoch, a.start_offset, a.batches) == (E.NONE, 2, 10, ())
    assert c.write((B(10, 14), B(15, 19, D.ARCHIVED, 5)), start=10, state_epoch=2).error \
        == E.NONE
    assert c.write((B(20, 20, D.AVAILABLE, 2),), state_epoch=2).error == E.NONE
    a = c.read(leader_epoch=1)
    assert a.start_offset == 10 and a.state_epoch == 2
    assert a.batches == (B(10, 14), B(15, 19, D.ARCHIVED, 5), B(20, 20, D.AVAILABLE, 2))
    s = c.shard.summary(KEY, 1)
    assert (s.error, s.state_epoch, s.start_offset, s.leader_epoch,
            s.delivery_complete_count) == (E.NONE, 2, 10, 1, 7)
    # the start offset moves up: batches below it go
    assert c.write((), start=15, state_epoch=2).error == E.NONE
    assert c.read(1).batches == (B(15, 19, D.ARCHIVED, 5), B(20, 20, D.AVAILABLE, 2))
    assert c.run(lambda s, now: s.delete(now, KEY)).error == E.NONE
    assert c.kinds()[-1] == "tomb"
    assert c.read(1).error == E.INVALID_REQUEST
    # deleting what is not there: no record, no error; summary of it: start -1
    n = len(c.log.records)
    assert c.run(lambda s, now: s.delete(now, KEY)).error == E.NONE
    assert len(c.log.records) == n
    s = c.shard.summary(KEY, 1)
    assert (s.error, s.start_offset) == (E.NONE, -1)


def test_fencing_and_invalid_requests() -> None:
    c = Coord()
    assert c.read(0).message == READ_UNINITIALIZED
    assert c.write((B(0, 1),)).message == WRITE_UNINITIALIZED
    c.init(state_epoch=3)
    assert c.read(5).error == E.NONE
    # an older share-partition leader: fenced on read and write
    assert c.read(4).error == E.FENCED_LEADER_EPOCH
    assert c.write((B(0, 1),), leader_epoch=4, state_epoch=3).error == E.FENCED_LEADER_EPOCH
    # an older state epoch (the group was re-initialized since)
    assert c.write((B(0, 1),), leader_epoch=5, state_epoch=2).error == E.FENCED_STATE_EPOCH
    assert c.init(state_epoch=2).error == E.FENCED_STATE_EPOCH
    # a leader epoch check comes before the state epoch one (Kafka's order)
    assert c.write((B(0, 1),), leader_epoch=4, state_epoch=2).error == E.FENCED_LEADER_EPOCH
    assert c.write((B(0, 1),), leader_epoch=-1).error == E.INVALID_REQUEST
    assert c.init(key=SharePartitionKey("g1", uuid.UUID(int=0), 0)).error == E.INVALID_REQUEST
    assert c.init(key=SharePartitionKey("g1", TOPIC, -1)).error == E.INVALID_REQUEST
    assert c.init(key=SharePartitionKey("g1", GONE, 0)).error == E.UNKNOWN_TOPIC_OR_PARTITION
    assert c.init(key=SharePartitionKey("g1", TOPIC, 3)).error == E.UNKNOWN_TOPIC_OR_PARTITION
    # a refused operation wrote nothing
    assert c.kinds() == ["snap", "upd"]  # init, and the read at the new leader epoch 5


def test_read_at_a_new_leader_epoch_is_durable() -> None:
    c = Coord()
    c.init()
    c.read(7)
    n = len(c.log.records)
    c.read(7)  # same epoch: no write
    assert len(c.log.records) == n
    c2 = Coord(log=c.log)  # reloaded by a new coordinator
    assert c2.read(6).error == E.FENCED_LEADER_EPOCH
    assert c2.read(7).error == E.NONE


def test_snapshot_cadence_as_kafka() -> None:
    c = Coord(updates=3)
    c.init()
    for i in range(10):
        c.write((B(i, i),))
    # after the first snapshot Kafka writes updates+1 updates, then a snapshot every
    # `updates` updates
    assert c.kinds() == ["snap", "upd", "upd", "upd", "upd", "snap", "upd", "upd", "upd",
                         "snap", "upd"]
    snaps = [records.decode_value(records.SNAPSHOT, v) for _, (k, v) in c.log.records
             if v is not None and records.decode_key(k) == (records.SNAPSHOT, KEY)]
    assert [s.snapshot_epoch for s in snaps] == [0, 1, 2]
    # a snapshot holds the whole merged state
    assert snaps[-1].batches == (B(0, 8),)
    assert c.read(1).batches == (B(0, 9),)


def test_reload_rebuilds_every_key(seed: int | None = None) -> None:
    seed = seed if seed is not None else random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    c = Coord(updates=4)
    keys = [SharePartitionKey(f"g{i % 3}", TOPIC, i % 3) for i in range(6)]
    for k in keys:
        c.init(key=k)
    for _ in range(200):
        k = rng.choice(keys)
        first = rng.randrange(0, 100)
        batch = B(first, first + rng.randrange(0, 5), rng.choice(list(D)),
                  rng.randrange(0, 4))
        start = rng.choice([-1, -1, -1, rng.randrange(0, 50)])
        assert c.write((batch,), start=start, key=k).error == E.NONE
    if rng.random() < 0.5:
        c.run(lambda s, now: s.delete(now, keys[0]))
    before = {k: c.shard.state(k) for k in keys}
    c2 = Coord(updates=4, log=c.log)
    assert {k: c2.shard.state(k) for k in keys} == before


def test_pruning_keeps_what_a_reload_needs() -> None:
    c = Coord(updates=2)
    other = SharePartitionKey("g2", TOPIC, 1)
    c.init()
    c.init(key=other)
    for i in range(12):
        c.write((B(i, i, D.ARCHIVED, 1),))
    # `other` holds the log back at its first snapshot (offset 1)
    assert c.shard.redundant_offset() == 1
    c.write((B(0, 0),), key=other)
    c.now += 6000  # cold: its snapshot is old and not the last record
    c.rt.fire_due(c.now)  # the cold snapshot (and a prune still held back)
    c.rt.committed(0, len(c.log.records))
    c.now += 1000
    c.rt.fire_due(c.now)  # the next prune
    prunes = [e for e in c.effects if isinstance(e, Prune)]
    assert prunes, "the prune timer handed out an offset"
    c.log.start = max(p.offset for p in prunes)
    assert c.log.start > 1
    state = {k: c.shard.state(k) for k in (KEY, other)}
    c2 = Coord(updates=2, log=c.log)
    assert {k: c2.shard.state(k) for k in (KEY, other)} == state
    assert c2.read(1).batches == (B(0, 11, D.ARCHIVED, 1),)


@pytest.mark.parametrize(("old", "new", "start", "want"), [
    # a higher delivery count wins where batches overlap
    ((B(0, 9, D.AVAILABLE, 1),), (B(3, 5, D.AVAILABLE, 2),), -1,
     (B(0, 2, D.AVAILABLE, 1), B(3, 5, D.AVAILABLE, 2), B(6, 9, D.AVAILABLE, 1))),
    # same count: the higher state wins (ARCHIVED > ACKNOWLEDGED > AVAILABLE)
    ((B(0, 9, D.ACKNOWLEDGED, 1),), (B(5, 14, D.ARCHIVED, 1),), -1,
     (B(0, 4, D.ACKNOWLEDGED, 1), B(5, 14, D.ARCHIVED, 1))),
    # a lower priority does not overwrite
    ((B(0, 9, D.ARCHIVED, 3),), (B(2, 4, D.AVAILABLE, 1),), -1, (B(0, 9, D.ARCHIVED, 3),)),
    # contiguous batches of one state and count become one
    ((B(0, 4),), (B(5, 9), B(10, 10)), -1, (B(0, 10),)),
    # the start offset drops and cuts
    ((B(0, 4), B(6, 9, D.ARCHIVED)), (), 7, (B(7, 9, D.ARCHIVED),)),
])
def test_combine(old: tuple[StateBatch, ...], new: tuple[StateBatch, ...], start: int,
                 want: tuple[StateBatch, ...]) -> None:
    assert combine(old, new, start) == want


def test_combine_matches_offset_by_offset_priority() -> None:
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    for _ in range(300):
        bs = [B(f, f + rng.randrange(0, 6), rng.choice(list(D)), rng.randrange(0, 3))
              for f in (rng.randrange(0, 30) for _ in range(rng.randrange(0, 6)))]
        start = rng.choice([-1, rng.randrange(0, 20)])
        got = combine(bs[:2], bs[2:], start)
        want: dict[int, tuple[int, int]] = {}
        for b in bs:
            for o in range(max(b.first_offset, start), b.last_offset + 1):
                want[o] = max(want.get(o, (-1, -1)), (b.delivery_count, int(b.delivery_state)))
        flat = {o: (b.delivery_count, int(b.delivery_state))
                for b in got for o in range(b.first_offset, b.last_offset + 1)}
        assert flat == want, (seed, bs, start, got)
        for a, b in zip(got, got[1:], strict=False):
            assert a.last_offset < b.first_offset
            assert not (a.last_offset + 1 == b.first_offset and
                        (a.delivery_count, a.delivery_state) ==
                        (b.delivery_count, b.delivery_state))


def test_state_of_a_deleted_topic_goes_at_the_next_prune() -> None:
    c = Coord()
    c.init()
    c.write((B(0, 3),))
    del_key = SharePartitionKey("g1", GONE, 0)
    c.shard.states[del_key] = c.shard.states[KEY]  # as if GONE existed when written
    c.shard.snapshot_offsets[del_key] = 0
    c.now += 1000
    c.rt.fire_due(c.now)
    c.rt.committed(0, len(c.log.records))
    assert del_key not in c.shard.states and KEY in c.shard.states
    assert c.kinds()[-1] == "tomb"


def test_rpc_persister_gives_up_after_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No coordinator to be found: the persister retries with a doubling backoff capped
    at its maximum, then gives the last error once the next wait would pass its deadline
    (on a fake clock: the waits are what the persister asks for)."""
    import asyncio
    import types

    from jocko_py.broker.share import rpc_persister

    clock = [100.0]
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)
        clock[0] += s

    monkeypatch.setattr(rpc_persister, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(rpc_persister, "asyncio", types.SimpleNamespace(sleep=sleep))

    async def locate(key: str) -> tuple[E, tuple[str, int] | None]:
        return E.COORDINATOR_LOAD_IN_PROGRESS, None

    p = rpc_persister.RpcPersister(locate, None, "t", retry_backoff_ms=10,
                                   max_backoff_ms=80, deadline_ms=400)
    assert asyncio.run(p.initialize(KEY, 0, 0)) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert waits == [0.01, 0.02, 0.04, 0.08, 0.08, 0.08, 0.08]
    assert sum(waits) <= 0.4
