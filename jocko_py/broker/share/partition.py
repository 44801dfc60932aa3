"""One share partition: the in-flight records of one topic partition for one share group
(KIP-932), the sole owner of their states, delivery counts and acquisition locks.

Pure: no asyncio, no clock, no I/O. Decisions take `now` (ms) and return what the caller
must do; the asyncio shell (`manager.py`) reads the log, keeps the lock timer at
`next_deadline()` and writes `begin_write()`'s snapshot through the persister.

Rules (Kafka's `SharePartition.java`, followed here)
----------------------------------------------------
- Offsets below `start_offset` are done (acknowledged or archived); offsets at or above
  `end_offset` have never been acquired. In between, every offset has a state:
  AVAILABLE, ACQUIRED (by one member, with a lock deadline), ACKNOWLEDGED or ARCHIVED,
  and a delivery count.
- Acquisition (a ShareFetch) takes AVAILABLE records and new ones from the log, bumps
  their delivery count and locks them for the lock duration to the member. New records
  are taken only while `end_offset - start_offset` stays within
  `group.share.partition.max.record.locks`. An AVAILABLE record whose count already
  reached the delivery count limit is archived instead (it comes back so from the
  persisted state of an older leader that wrote it while acquired; loading archives it).
- read_committed: records of aborted transactions are archived when first met, never
  acquired. Offsets without a data record (control records, compacted holes) are acquired
  like any other; the client acknowledges them as GAP (type 0), which archives them.
- Acknowledgement (types 0 gap, 1 accept, 2 release, 3 reject, 4 renew) applies only to
  records ACQUIRED by the acknowledging member: anything else is INVALID_RECORD_STATE, an
  offset never acquired INVALID_REQUEST; a partition's acknowledgement is all or nothing.
  Accept -> ACKNOWLEDGED, reject and gap -> ARCHIVED, release -> AVAILABLE (ARCHIVED once
  the delivery count reached the limit), renew keeps the record acquired with a new lock.
- Release (a lock that expires, the member's session closing, the member leaving the
  group) follows the release rule above.
- An acknowledgement is *pending* until a state write including it succeeded: its
  records are in their new state but nobody can acquire or release them, and the answer
  to the client waits (`complete_write`). A failed write rolls the pending changes back
  (the records are ACQUIRED by the member again; their lock may then expire).
- `start_offset` moves up over done records; what is written is the whole state in
  batches of equal (state, count): offsets from the start offset (as it will be once the
  write's pending acknowledgements commit) to `end_offset`, those AVAILABLE with count 0
  left out; ACQUIRED is written AVAILABLE with its count.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from jocko_py.broker.share.persister import DeliveryState, ShareState, StateBatch
from jocko_py.protocol.errors import ErrorCode

E = ErrorCode
NO_DEADLINE = -1


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def done(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AckType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4



ACK_TYPE_VALUES = frozenset(int(a) for a in AckType)


@dataclass(frozen=True)
class SharePartitionConfig:
    """The limits of one share partition: broker defaults and the group's configs."""
    max_in_flight: int = 2000            # group.share.partition.max.record.locks
    delivery_count_limit: int = 5        # share.delivery.count.limit
    lock_duration_ms: int = 30000        # share.record.lock.duration.ms
    read_committed: bool = False         # share.isolation.level


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str = ""
    deadline: int = NO_DEADLINE
    pending: int = 0  # id of the pending acknowledgement that set this state, 0: none


@dataclass(frozen=True)
class FetchedBatch:
    """What the share partition needs of one batch read from the log."""
    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


@dataclass(frozen=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AckBatch:
    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True)
class AckResult:
    """`error` NONE and `pending` the id to wait for (0 when nothing is to be written, as
    for renew only), or the error and nothing changed."""
    error: ErrorCode = E.NONE
    message: str | None = None
    pending: int = 0


@dataclass(frozen=True)
class StateWrite:
    """A snapshot to write; `covers` are the pending acknowledgements it includes."""
    start_offset: int
    batches: tuple[StateBatch, ...]
    covers: frozenset[int]
    # KIP-1226: records at or past the start offset already done (acknowledged or
    # archived), from which the group's lag is computed
    delivery_complete_count: int = 0


@dataclass(slots=True)
class _Pending:
    member_id: str
    undo: dict[int, InFlight] = field(default_factory=dict)


class SharePartition:
    def __init__(self, config: SharePartitionConfig, start_offset: int,
                 state_epoch: int = 0) -> None:
        self.config = config
        self.start_offset = start_offset
        self.end_offset = start_offset  # exclusive: next offset never acquired
        self.state_epoch = state_epoch
        self.records: dict[int, InFlight] = {}
        self._pending: dict[int, _Pending] = {}
        self._next_pending = 1
        self.dirty = False  # a change not yet in any write

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_state(cls, config: SharePartitionConfig, state: ShareState) -> SharePartition:
        """The share partition as the persisted `state` (read without error) leaves it."""
        sp = cls(config, state.start_offset, state.state_epoch)
        for b in sorted(state.batches, key=lambda b: b.first_offset):
            for off in range(max(b.first_offset, sp.start_offset), b.last_offset + 1):
                st = RecordState(int(b.delivery_state)) \
                    if int(b.delivery_state) in (0, 2, 4) else RecordState.AVAILABLE
                sp.records[off] = InFlight(st, b.delivery_count)
            sp.end_offset = max(sp.end_offset, b.last_offset + 1)
        for off in range(sp.start_offset, sp.end_offset):
            r = sp.records.get(off)
            if r is None:
                sp.records[off] = InFlight(RecordState.AVAILABLE, 0)
            elif r.state is RecordState.AVAILABLE and \
                    r.delivery_count >= config.delivery_count_limit:
                # delivered the last time by an older leader (written while acquired)
                r.state = RecordState.ARCHIVED
                sp.dirty = True
        sp._advance_start()
        return sp

    # ------------------------------------------------------------------ fetch side

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def next_fetch_offset(self) -> int | None:
        """Where the next acquisition reads the log from: the first AVAILABLE record, else
        the end offset, or None when nothing can be acquired (in-flight limit reached)."""
        for off in range(self.start_offset, self.end_offset):
            r = self.records[off]
            if r.state is RecordState.AVAILABLE and not r.pending:
                return off
        if self.in_flight() >= self.config.max_in_flight:
            return None
        return self.end_offset

    def acquire(self, member_id: str, fetch_offset: int, batches: Sequence[FetchedBatch],
                max_records: int, now: int, aborted: Iterable[tuple[int, int]] = (),
                strict_limit: bool = False) -> list[AcquiredRange]:
        """Acquire for `member_id` what is available from `fetch_offset` (as
        `next_fetch_offset()` said) to the end of `batches` (read from the log there, in
        offset order): at most `max_records` records, or up to the end of the batch that
        reached it unless `strict_limit` (Kafka's batch-optimized acquire mode). Offsets
        without a batch (holes) are acquired too: the client acknowledges them as GAP."""
        deadline = now + self.config.lock_duration_ms
        aborted_ranges = self._aborted_ranges(batches, aborted) \
            if self.config.read_committed else []
        acquired: list[tuple[int, int]] = []  # (offset, delivery count)
        count = 0
        cursor = max(fetch_offset, self.start_offset)
        full = False
        for b in batches:
            if count >= max_records or full:
                break
            for off in range(cursor, b.last_offset + 1):
                if count >= max_records and strict_limit:
                    break
                if off >= self.end_offset:
                    if self.in_flight() >= self.config.max_in_flight:
                        full = True
                        break
                    self.records[off] = InFlight(RecordState.AVAILABLE, 0)
                    self.end_offset = off + 1
                    self.dirty = True
                r = self.records[off]
                if r.state is not RecordState.AVAILABLE or r.pending:
                    continue
                if any(a <= off <= z for a, z in aborted_ranges) or \
                        r.delivery_count >= self.config.delivery_count_limit:
                    r.state, r.member_id, r.deadline = RecordState.ARCHIVED, "", NO_DEADLINE
                    self.dirty = True
                    continue
                r.state, r.member_id, r.deadline = RecordState.ACQUIRED, member_id, deadline
                r.delivery_count += 1
                self.dirty = True
                acquired.append((off, r.delivery_count))
                count += 1
            cursor = max(cursor, b.last_offset + 1)
        self._advance_start()
        return _ranges(acquired)

    @staticmethod
    def _aborted_ranges(batches: Sequence[FetchedBatch],
                        aborted: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """The offset ranges of aborted transactions' data batches, as a read_committed
        consumer finds them: a producer's batches from its first offset to its marker."""
        starts = sorted(aborted, key=lambda a: a[1])
        active: set[int] = set()
        out: list[tuple[int, int]] = []
        i = 0
        for b in batches:
            while i < len(starts) and starts[i][1] <= b.last_offset:
                active.add(starts[i][0])
                i += 1
            if not b.is_transactional or b.producer_id not in active:
                continue
            if b.is_control:
                active.discard(b.producer_id)
            else:
                out.append((b.base_offset, b.last_offset))
        return out

    # ------------------------------------------------------------------ acknowledgement

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], now: int) -> AckResult:
        """Apply a partition's acknowledgements as one pending change (or refuse them all)."""
        changes: dict[int, AckType] = {}
        for b in batches:
            if b.last_offset < b.first_offset or not b.types:
                return AckResult(E.INVALID_REQUEST, "invalid acknowledgement batch")
            # bounds first: a range is never iterated past what was acquired
            if b.last_offset >= self.end_offset:
                return AckResult(E.INVALID_REQUEST,
                                 f"offset {b.last_offset} is past the acquired records")
            if b.first_offset < self.start_offset:
                return AckResult(E.INVALID_RECORD_STATE,
                                 f"offset {b.first_offset} is not in the acquired state")
            n = b.last_offset - b.first_offset + 1
            if len(b.types) not in (1, n):
                return AckResult(E.INVALID_REQUEST,
                                 "acknowledge types must be one or one per offset")
            for i, off in enumerate(range(b.first_offset, b.last_offset + 1)):
                t = b.types[0] if len(b.types) == 1 else b.types[i]
                if t not in ACK_TYPE_VALUES:
                    return AckResult(E.INVALID_REQUEST, f"invalid acknowledge type {t}")
                if off in changes:
                    return AckResult(E.INVALID_REQUEST, f"offset {off} acknowledged twice")
                changes[off] = AckType(t)
        for off in changes:
            if off >= self.end_offset:
                return AckResult(E.INVALID_REQUEST,
                                 f"offset {off} is past the acquired records")
            r = self.records.get(off)
            if r is None or r.state is not RecordState.ACQUIRED or r.pending:
                return AckResult(E.INVALID_RECORD_STATE,
                                 f"offset {off} is not in the acquired state")
            if r.member_id != member_id:
                return AckResult(E.INVALID_RECORD_STATE,
                                 f"member is not the owner of offset {off}")
        pending = _Pending(member_id)
        for off, t in changes.items():
            r = self.records[off]
            if t is AckType.RENEW:
                r.deadline = now + self.config.lock_duration_ms
                continue
            pending.undo[off] = InFlight(r.state, r.delivery_count, r.member_id, r.deadline)
            if t is AckType.ACCEPT:
                new = RecordState.ACKNOWLEDGED
            elif t is AckType.RELEASE:
                new = self._released_state(r)
            else:  # reject, gap
                new = RecordState.ARCHIVED
            r.state, r.member_id, r.deadline = new, "", NO_DEADLINE
        if not pending.undo:
            return AckResult()
        pid = self._next_pending
        self._next_pending += 1
        for off in pending.undo:
            self.records[off].pending = pid
        self._pending[pid] = pending
        self.dirty = True
        return AckResult(pending=pid)

    def _released_state(self, r: InFlight) -> RecordState:
        return RecordState.ARCHIVED \
            if r.delivery_count >= self.config.delivery_count_limit else RecordState.AVAILABLE

    def release_member(self, member_id: str) -> int:
        """Release every record `member_id` holds (its share session closed or it left the
        group); returns how many."""
        n = 0
        for r in self.records.values():
            if r.state is RecordState.ACQUIRED and r.member_id == member_id and not r.pending:
                r.state, r.member_id, r.deadline = self._released_state(r), "", NO_DEADLINE
                n += 1
        if n:
            self.dirty = True
            self._advance_start()
        return n

    def expire_locks(self, now: int) -> int:
        """Release the records whose acquisition lock has expired; returns how many."""
        n = 0
        for r in self.records.values():
            if r.state is RecordState.ACQUIRED and not r.pending and 0 <= r.deadline <= now:
                r.state, r.member_id, r.deadline = self._released_state(r), "", NO_DEADLINE
                n += 1
        if n:
            self.dirty = True
            self._advance_start()
        return n

    def next_deadline(self) -> int | None:
        ds = [r.deadline for r in self.records.values()
              if r.state is RecordState.ACQUIRED and not r.pending]
        return min(ds) if ds else None

    def log_start_moved(self, log_start_offset: int) -> None:
        """Records below the log start offset are gone (retention): they are done."""
        if log_start_offset <= self.start_offset:
            return
        for off in range(self.start_offset, min(log_start_offset, self.end_offset)):
            r = self.records.get(off)
            if r is not None and not r.pending:
                r.state, r.member_id, r.deadline = RecordState.ARCHIVED, "", NO_DEADLINE
        if log_start_offset > self.end_offset and not self._pending:
            # nothing in flight is left: start afresh there (never one entry per offset)
            self.records.clear()
            self.start_offset = self.end_offset = log_start_offset
        self.dirty = True
        self._advance_start()

    # ------------------------------------------------------------------ durability

    def begin_write(self) -> StateWrite:
        """The whole state as of now, to write; it covers the pending acknowledgements.
        Its start offset is where the start offset moves once they commit (the write
        succeeding is what commits them), so the durable start offset is never behind."""
        self.dirty = False
        start = self.start_offset
        while start < self.end_offset and self.records[start].state.done:
            start += 1
        out: list[StateBatch] = []
        for off in range(start, self.end_offset):
            r = self.records[off]
            st = DeliveryState.AVAILABLE if r.state is RecordState.ACQUIRED \
                else DeliveryState(int(r.state))
            if st is DeliveryState.AVAILABLE and r.delivery_count == 0:
                continue
            last = out[-1] if out else None
            if last is not None and last.last_offset == off - 1 and \
                    last.delivery_state is st and last.delivery_count == r.delivery_count:
                out[-1] = StateBatch(last.first_offset, off, st, r.delivery_count)
            else:
                out.append(StateBatch(off, off, st, r.delivery_count))
        done = sum(b.last_offset - b.first_offset + 1 for b in out
                   if b.delivery_state in (DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED))
        return StateWrite(start, tuple(out), frozenset(self._pending), done)

    def complete_write(self, write: StateWrite, error: ErrorCode) -> dict[int, ErrorCode]:
        """The outcome of `write`: each pending acknowledgement it covered is answered
        with `error` (NONE: committed; else rolled back). Returns {pending id: error}."""
        out: dict[int, ErrorCode] = {}
        for pid in write.covers:
            p = self._pending.pop(pid, None)
            if p is None:
                continue
            out[pid] = error
            for off, before in p.undo.items():
                r = self.records.get(off)
                if r is None:
                    continue
                if error == E.NONE:
                    r.pending = 0
                else:
                    self.records[off] = before
        if error != E.NONE:
            self.dirty = True
        self._advance_start()
        return out

    def pending_ids(self) -> frozenset[int]:
        return frozenset(self._pending)

    def _advance_start(self) -> None:
        while self.start_offset < self.end_offset:
            r = self.records[self.start_offset]
            if not r.state.done or r.pending:
                break
            del self.records[self.start_offset]
            self.start_offset += 1

    # ------------------------------------------------------------------ views

    def state_of(self, offset: int) -> InFlight | None:
        if offset < self.start_offset:
            return None
        return self.records.get(offset)

    def count(self, state: RecordState) -> int:
        return sum(1 for r in self.records.values() if r.state is state)


def _ranges(acquired: list[tuple[int, int]]) -> list[AcquiredRange]:
    out: list[AcquiredRange] = []
    for off, dc in acquired:
        if out and out[-1].last_offset == off - 1 and out[-1].delivery_count == dc:
            out[-1] = AcquiredRange(out[-1].first_offset, off, dc)
        else:
            out.append(AcquiredRange(off, off, dc))
    return out
