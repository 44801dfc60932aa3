"""Incremental fetch sessions (KIP-227): the session cache and the per-request context.

Rules (Kafka's FetchSession / FetchSessionCache / FetchContext):

- A request names a session id and an epoch. Epoch -1 (FINAL) with id 0 is a
  sessionless full fetch; -1 with an id closes that session and is answered as
  sessionless. Epoch 0 (INITIAL) is a full fetch that asks for a new session: an
  id given with it closes that old session first; the broker answers every partition
  and a new session id, or id 0 when the cache has no room for it.
- Any other epoch is incremental: the session must exist (else
  FETCH_SESSION_ID_NOT_FOUND) and expect that epoch (else INVALID_FETCH_SESSION_EPOCH)
  and name topics the way it was opened, by id (v13+) or by name (else
  FETCH_SESSION_TOPIC_ID_ERROR);
  both errors come back at the top level with no partitions, and clients fall back to
  a full fetch. The request's partitions are added to the session or update it (fetch
  offset, epochs, max bytes), its forgotten topics leave it, and the whole session is
  read. The expected epoch then moves on (wrapping from 2^31-1 to 1).
- An incremental response carries only the partitions with something to say: records,
  an error, a diverging epoch, or a high watermark, last stable or log start offset that
  differs from what the session last sent. Partitions that returned records move to the
  end of the session's order, so a busy partition cannot starve the others of
  `max_bytes`.
- The cache holds `max.incremental.fetch.session.cache.slots` sessions (Kafka counts
  sessions). A new session that does not fit evicts the least recently used session
  idle for longer than `eviction_ms` (Kafka's 120 s); failing that, a follower's
  ("privileged") new session evicts the consumer session with the fewest partitions;
  otherwise no session is created (id 0: the client keeps fetching in full). jocko-py's
  own replica fetchers do not use sessions.

Takes `now` (ms) and returns what to read and what to answer; no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jocko_py.commitlog.segment import FileRegion
from jocko_py.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000
_INT32_MAX = 2**31 - 1

Key = tuple[str, int]


class Requested(Protocol):
    """One partition of a fetch request (broker.replica_manager.FetchPartition)."""

    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int


class Result(Protocol):
    """What was read for one partition (broker.partition.ReadResult)."""

    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | memoryview | FileRegion | None
    diverging_epoch: tuple[int, int] | None


@dataclass(slots=True)
class CachedPartition:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int
    # what the session last told the client (-1: nothing yet, so the first answer has it)
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    topic_id: Any = None  # set when the session's requests name topics by id (v13+)

    def update_request(self, fp: Requested) -> None:
        self.fetch_offset = fp.fetch_offset
        self.current_leader_epoch = fp.current_leader_epoch
        self.last_fetched_epoch = fp.last_fetched_epoch
        self.max_bytes = fp.max_bytes

    def must_respond(self, r: Result) -> bool:
        """Whether an incremental response must carry this partition; remembers what
        it reports."""
        respond = bool(r.records) or r.error != ErrorCode.NONE or r.diverging_epoch is not None
        if r.high_watermark != self.high_watermark:
            respond = True
            self.high_watermark = r.high_watermark
        if r.last_stable_offset != self.last_stable_offset:
            respond = True
            self.last_stable_offset = r.last_stable_offset
        if r.log_start_offset != self.log_start_offset:
            respond = True
            self.log_start_offset = r.log_start_offset
        return respond


def _cached(fp: Requested) -> CachedPartition:
    return CachedPartition(fp.topic, fp.partition, fp.fetch_offset, fp.current_leader_epoch,
                           fp.last_fetched_epoch, fp.max_bytes,
                           topic_id=getattr(fp, "topic_id", None))


@dataclass(slots=True)
class FetchSession:
    id: int
    privileged: bool
    partitions: dict[Key, CachedPartition]
    created_ms: int
    last_used_ms: int
    epoch: int = 1  # the epoch the next incremental request must carry
    uses_topic_ids: bool = False

    def value(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey order: privileged, then size, then id."""
        return (self.privileged, len(self.partitions), self.id)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _INT32_MAX else epoch + 1


@dataclass(slots=True)
class SessionCounters:
    created: int = 0
    evicted: int = 0
    closed: int = 0
    full_fetches: int = 0
    incremental_fetches: int = 0
    not_found: int = 0
    invalid_epoch: int = 0
    not_cached: int = 0  # full fetches that asked for a session the cache had no room for


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, eviction_ms: int = EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.counters = SessionCounters()
        self._rng = rng or random.Random()

    def __len__(self) -> int:
        return len(self.sessions)

    def _new_id(self) -> int:
        while True:
            sid = self._rng.randint(1, _INT32_MAX)
            if sid not in self.sessions:
                return sid

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Make room for a new session, if Kafka's policy allows it."""
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now - stale.last_used_ms > self.eviction_ms:
            del self.sessions[stale.id]
            self.counters.evicted += 1
            return True
        if not privileged:
            return False  # a consumer's session only ever replaces a stale one
        candidates = [s for s in self.sessions.values() if not s.privileged]
        if not candidates:
            return False
        weakest = min(candidates, key=FetchSession.value)
        del self.sessions[weakest.id]
        self.counters.evicted += 1
        return True

    def maybe_create(self, now: int, privileged: bool,
                     partitions: dict[Key, CachedPartition], uses_topic_ids: bool = False) -> int:
        """A new session for these partitions, or INVALID_SESSION_ID if none fits."""
        if self.max_slots <= 0:
            self.counters.not_cached += 1
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_slots and not self._try_evict(
                privileged, len(partitions), now):
            self.counters.not_cached += 1
            return INVALID_SESSION_ID
        sid = self._new_id()
        self.sessions[sid] = FetchSession(sid, privileged, partitions, now, now,
                                          uses_topic_ids=uses_topic_ids)
        self.counters.created += 1
        return sid

    def remove(self, sid: int) -> FetchSession | None:
        s = self.sessions.pop(sid, None)
        if s is not None:
            self.counters.closed += 1
        return s

    # ------------------------------------------------------------------ per request

    def new_context(self, session_id: int, epoch: int, privileged: bool,
                    fetch_data: Sequence[Requested], forgotten: Iterable[Key],
                    now: int, uses_topic_ids: bool = False) -> FetchContext:
        """Kafka's FetchManager.newContext: decide what kind of fetch this is."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            self.counters.full_fetches += 1
            return FetchContext(self, "full" if epoch == INITIAL_EPOCH else "sessionless",
                                list(fetch_data), privileged=privileged,
                                uses_topic_ids=uses_topic_ids)
        session = self.sessions.get(session_id)
        if session is None:
            self.counters.not_found += 1
            return FetchContext(self, "error", [], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            self.counters.invalid_epoch += 1
            return FetchContext(self, "error", [], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            # a session opened with topic ids continued with names, or the reverse
            return FetchContext(self, "error", [], error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for fp in fetch_data:
            key = (fp.topic, fp.partition)
            cp = session.partitions.get(key)
            if cp is None:
                session.partitions[key] = _cached(fp)
            else:
                cp.update_request(fp)
        for key in forgotten:
            session.partitions.pop(key, None)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now
        self.counters.incremental_fetches += 1
        return FetchContext(self, "incremental", list(session.partitions.values()),
                            session=session)


@dataclass(slots=True)
class FetchContext:
    """One fetch request's view of its session: `to_read` is what to read, in order;
    `respond(results)` says which partitions the response carries and under which id."""

    cache: FetchSessionCache
    kind: str  # "sessionless", "full", "incremental" or "error"
    to_read: Sequence[Requested]
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    privileged: bool = False
    uses_topic_ids: bool = False

    def respond(self, results: Sequence[Result], now: int) -> tuple[int, list[int]]:
        """(response session id, indexes into `to_read`/`results` to answer)."""
        if self.kind == "sessionless":
            return INVALID_SESSION_ID, list(range(len(results)))
        if self.kind == "full":
            parts: dict[Key, CachedPartition] = {}
            for fp, r in zip(self.to_read, results, strict=True):
                cp = _cached(fp)
                cp.must_respond(r)
                parts[(fp.topic, fp.partition)] = cp
            sid = self.cache.maybe_create(now, self.privileged, parts, self.uses_topic_ids)
            return sid, list(range(len(results)))
        if self.kind == "incremental":
            assert self.session is not None
            keep: list[int] = []
            busy: list[Key] = []
            for i, (fp, r) in enumerate(zip(self.to_read, results, strict=True)):
                assert isinstance(fp, CachedPartition)
                if fp.must_respond(r):
                    keep.append(i)
                if r.records:
                    busy.append((fp.topic, fp.partition))
            parts = self.session.partitions
            for key in busy:  # round robin: a partition that had data goes last
                cp2 = parts.pop(key, None)
                if cp2 is not None:
                    parts[key] = cp2
            return self.session.id, keep
        return INVALID_SESSION_ID, []
