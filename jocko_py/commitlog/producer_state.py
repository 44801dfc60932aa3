"""Idempotent-producer state of one partition: producer id -> epoch and recent batches.

This module owns that state and its snapshot file.  The partition's
:class:`~jocko_py.commitlog.log.Log` keeps one :class:`ProducerStateManager`
(``Log.producer_state``): it observes every appended batch (leader and
follower), is truncated with the log, and is saved on close.  The broker asks
:meth:`ProducerStateManager.check` before a leader append.

Kafka's rules, as followed here:
- A batch from producer id P with epoch E older than P's current epoch is
  fenced: INVALID_PRODUCER_EPOCH.
- A newer epoch resets P's sequence: its first batch must start at sequence 0
  (a producer seen for the first time may start anywhere, since its earlier
  state may have expired).
- Within an epoch the batch's first sequence must follow the last one
  (wrapping at 2^31-1): otherwise OUT_OF_ORDER_SEQUENCE_NUMBER. A batch equal to
  one of the last five batches is a duplicate: it is not appended again and is
  answered with the offset it got the first time.
- Only idempotent batches (producer id >= 0) are tracked.
- While a producer's first transactional batch here is being verified with the
  transaction coordinator (KIP-890), the lowest sequence being verified is kept
  (Kafka's VerificationStateEntry, in memory only): a batch of that epoch with a
  higher first sequence is OUT_OF_ORDER_SEQUENCE_NUMBER until a batch of the producer
  is appended. So when the first batch's verification fails (the coordinator still
  completing the previous transaction) a later batch in flight cannot be appended
  first, which would leave a gap the first batch's retry runs into.

Transactions (KIP-98), as Kafka's ProducerStateManager:
- A producer's first transactional batch after a marker opens its transaction:
  ``txn_first_offset`` is that batch's first offset. A non-transactional batch while
  it is open is refused (INVALID_TXN_STATE).
- A control batch (COMMIT or ABORT marker, written by the transaction coordinator)
  closes it and returns a :class:`CompletedTxn`; the log indexes aborted ones
  (``.txnindex``). A marker carries the producer epoch (it may bump it, resetting
  sequences) and the coordinator epoch; a marker from an older producer epoch is
  refused (INVALID_PRODUCER_EPOCH) and one from an older coordinator epoch too
  (TRANSACTION_COORDINATOR_FENCED).
- The first unstable offset is the smallest first offset of an open transaction,
  or of a completed one whose marker the high watermark has not passed yet; the
  last stable offset (LSO) is the smaller of it and the high watermark.

On-disk snapshot, ``producer-state.json`` in the partition directory (JSON,
written to ``producer-state.tmp``, fsynced and renamed)::

    {"offset": <the state covers every batch below this offset>,
     "producers": [{"id": <producer id>, "epoch": <producer epoch>,
                    "batches": [[first_seq, last_seq, first_offset, last_offset,
                                 max_timestamp], ...],
                    "txn": <first offset of the open transaction, or -1>,
                    "coordinator_epoch": <epoch of the last marker's coordinator, or -1>},
                   ...]}

(``txn`` and ``coordinator_epoch`` are absent from snapshots written before
transactions: read as -1.)

``batches`` holds up to the last five batches, oldest first.  On load the log
replays the batches from ``offset`` to its end (:meth:`ProducerStateManager.observe`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.records import ControlType, RecordBatchHeader

__all__ = [
    "PRODUCER_SNAPSHOT_FILE",
    "BatchMeta",
    "CompletedTxn",
    "ProducerEntry",
    "ProducerStateManager",
    "SequenceCheck",
]

PRODUCER_SNAPSHOT_FILE = "producer-state.json"
MAX_CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1
INT16_MAX = 2**15 - 1


@dataclass
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: list[BatchMeta] = field(default_factory=list)
    last_timestamp: int = -1
    txn_first_offset: int = -1
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int = -1


class SequenceCheck:
    """Outcome of checking a batch: an error, a duplicate, or OK to append."""

    __slots__ = ("error", "duplicate")

    def __init__(self, error: ErrorCode = ErrorCode.NONE, duplicate: BatchMeta | None = None):
        self.error = error
        self.duplicate = duplicate


OK = SequenceCheck()


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction
        self.ongoing: dict[int, int] = {}
        # completed transactions whose marker may still be above the high watermark
        self.unreplicated: list[CompletedTxn] = []
        # markers seen per producer since this manager was built (in memory only): a
        # transactional produce verified with the coordinator (KIP-890) is appended
        # only if no marker ended the transaction meanwhile
        self.markers_seen: dict[int, int] = {}
        # producer id -> (epoch, lowest first sequence) of its batches being verified
        self.verifying: dict[int, tuple[int, int]] = {}

    def begin_verification(self, producer_id: int, producer_epoch: int,
                           base_sequence: int) -> None:
        """A transactional batch of the producer is being verified (KIP-890): a later
        batch of that epoch may not be appended before it (see the module's rules)."""
        cur = self.verifying.get(producer_id)
        if cur is None or producer_epoch > cur[0]:
            self.verifying[producer_id] = (producer_epoch, base_sequence)
        elif producer_epoch == cur[0] and base_sequence < cur[1]:
            self.verifying[producer_id] = (producer_epoch, base_sequence)

    def copy(self) -> ProducerStateManager:
        """An independent copy (BatchMeta records are never mutated, so they are shared)."""
        other = ProducerStateManager()
        other.producers = {
            pid: ProducerEntry(e.producer_id, e.epoch, list(e.batches), e.last_timestamp,
                               e.txn_first_offset, e.coordinator_epoch)
            for pid, e in self.producers.items()
        }
        other.ongoing = dict(self.ongoing)
        other.unreplicated = list(self.unreplicated)
        return other

    def clear(self) -> None:
        self.producers = {}
        self.ongoing = {}
        self.unreplicated = []

    def replace_with(self, other: ProducerStateManager) -> None:
        """Take ``other``'s state in place (callers may hold a reference to this one)."""
        for pid, n in other.markers_seen.items():
            self.markers_seen[pid] = self.markers_seen.get(pid, 0) + n
        self.producers = other.producers
        self.ongoing = other.ongoing
        self.unreplicated = other.unreplicated

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is now below the HW."""
        if self.unreplicated and self.unreplicated[0].last_offset < high_watermark:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset a read_committed reader must not pass (None: none)."""
        if self.unreplicated:
            self.on_high_watermark(high_watermark)
        first = min(self.ongoing.values(), default=None)
        for t in self.unreplicated:
            if first is None or t.first_offset < first:
                first = t.first_offset
        return first

    def verification_token(self, producer_id: int) -> tuple[int, int, int]:
        """What must not change while a transactional produce is being verified: the
        markers seen for the producer, its epoch and its open transaction."""
        e = self.producers.get(producer_id)
        return (self.markers_seen.get(producer_id, 0), e.epoch if e is not None else -1,
                e.txn_first_offset if e is not None else -1)

    def in_transaction(self, producer_id: int, producer_epoch: int | None = None) -> bool:
        """The producer has a transaction open here (at ``producer_epoch``, when given:
        a batch of another epoch belongs to another transaction, as Kafka's
        hasOngoingTransaction checks)."""
        e = self.producers.get(producer_id)
        return e is not None and e.txn_first_offset >= 0 and (
            producer_epoch is None or e.epoch == producer_epoch)

    def first_open_offset(self) -> int | None:
        """The first offset of the oldest open transaction (the cleaner stops there)."""
        return min(self.ongoing.values(), default=None)

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def check_marker(self, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int, transaction_version: int = 0) -> ErrorCode:
        """May the coordinator write a marker for this producer (Kafka's rules)? The
        marker of a transaction version 2 transaction carries the epoch bumped past its
        batches' (KIP-890 part 2), so it must be above the producer's epoch here, unless
        it repeats the marker that set that epoch (nothing open, or the epoch is at its
        maximum), as Kafka 4.4 checks (KIP-1228)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if transaction_version >= 2 and producer_epoch == entry.epoch \
                and entry.txn_first_offset >= 0 and producer_epoch != INT16_MAX:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateManager):
            return NotImplemented
        return self.producers == other.producers

    __hash__ = None  # type: ignore[assignment]

    def check(self, h: RecordBatchHeader) -> SequenceCheck:
        if h.producer_id < 0:
            return OK
        v = self.verifying.get(h.producer_id)
        if v is not None and h.producer_epoch == v[0] and h.base_sequence > v[1]:
            # an earlier batch is (or was) being verified and is not appended yet
            return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return OK
        if h.producer_epoch < entry.epoch:
            return SequenceCheck(ErrorCode.INVALID_PRODUCER_EPOCH)
        if entry.txn_first_offset >= 0 and not h.is_transactional:
            return SequenceCheck(ErrorCode.INVALID_TXN_STATE)
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return OK
        last_seq = h.base_sequence + h.last_offset_delta
        if last_seq > INT32_MAX:
            last_seq -= INT32_MAX + 1
        for b in entry.batches:
            if b.first_seq == h.base_sequence and b.last_seq == last_seq:
                return SequenceCheck(duplicate=b)
        if entry.batches and h.base_sequence != _next_seq(entry.last_seq):
            return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return OK

    def observe(self, h: RecordBatchHeader, first_offset: int,
                marker: tuple[ControlType, int] | None = None) -> CompletedTxn | None:
        """Record an appended (or recovered) batch; ``marker`` (type, coordinator epoch)
        for a control batch. Returns the transaction a marker completed."""
        if h.producer_id < 0:
            return None
        pid = h.producer_id
        entry = self.producers.get(pid)
        if marker is not None:
            return self._observe_marker(h, first_offset, entry, marker)
        if self.verifying and h.producer_epoch >= self.verifying.get(pid, (1 << 16, 0))[0]:
            # a batch of the producer made it here (a marker does not: the previous
            # transaction's may land while the first batch of the next is verified)
            del self.verifying[pid]
        if entry is None or h.producer_epoch > entry.epoch:
            # an open transaction survives the epoch bump: only a marker ends it
            txn = entry.txn_first_offset if entry is not None else -1
            coord = entry.coordinator_epoch if entry is not None else -1
            entry = ProducerEntry(pid, h.producer_epoch, txn_first_offset=txn,
                                  coordinator_epoch=coord)
            self.producers[pid] = entry
        elif h.producer_epoch < entry.epoch:
            return None
        if h.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = first_offset
            self.ongoing[pid] = first_offset
        last_seq = h.base_sequence + h.last_offset_delta
        if last_seq > INT32_MAX:
            last_seq -= INT32_MAX + 1
        entry.batches.append(
            BatchMeta(
                h.base_sequence, last_seq, first_offset,
                first_offset + h.last_offset_delta, h.max_timestamp,
            )
        )
        if len(entry.batches) > MAX_CACHED_BATCHES:
            del entry.batches[0]
        entry.last_timestamp = h.max_timestamp
        return None

    def _observe_marker(self, h: RecordBatchHeader, offset: int, entry: ProducerEntry | None,
                        marker: tuple[ControlType, int]) -> CompletedTxn | None:
        pid = h.producer_id
        self.markers_seen[pid] = self.markers_seen.get(pid, 0) + 1
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, h.producer_epoch)
        elif h.producer_epoch > entry.epoch:
            entry.epoch = h.producer_epoch
            entry.batches = []  # a new epoch starts its sequences at 0
        entry.coordinator_epoch = max(entry.coordinator_epoch, marker[1])
        entry.last_timestamp = h.max_timestamp
        first = entry.txn_first_offset
        entry.txn_first_offset = -1
        self.ongoing.pop(pid, None)
        if first < 0:
            return None  # nothing open here (a retried marker, or an empty transaction)
        lso = min(self.ongoing.values(), default=offset + 1)
        done = CompletedTxn(pid, first, offset, marker[0] == ControlType.ABORT, lso)
        self.unreplicated.append(done)
        return done

    def truncate_after(self, offset: int) -> None:
        """Forget batches at or beyond `offset`.

        Only approximate (an epoch bump or batches beyond the last five are not
        undone); :meth:`jocko_py.commitlog.log.Log.truncate_to` rebuilds the
        state from the log instead.
        """
        for pid in list(self.producers):
            e = self.producers[pid]
            e.batches = [b for b in e.batches if b.last_offset < offset]
            if e.txn_first_offset >= offset:
                e.txn_first_offset = -1
                self.ongoing.pop(pid, None)
            if not e.batches and e.txn_first_offset < 0:
                del self.producers[pid]
        self.unreplicated = [t for t in self.unreplicated if t.last_offset < offset]

    # -- snapshot ------------------------------------------------------------------

    def save(self, path: Path, offset: int) -> None:
        data = {
            "offset": offset,
            "producers": [
                {
                    "id": e.producer_id, "epoch": e.epoch,
                    "batches": [
                        [b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                        for b in e.batches
                    ],
                    "txn": e.txn_first_offset,
                    "coordinator_epoch": e.coordinator_epoch,
                }
                for e in self.producers.values()
            ],
        }
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def load(self, path: Path) -> int:
        """Load a snapshot; returns the offset it covers up to (0 when absent or bad)."""
        try:
            data = json.loads(path.read_text())
            producers = {}
            ongoing = {}
            for p in data["producers"]:
                e = ProducerEntry(int(p["id"]), int(p["epoch"]))
                e.batches = [BatchMeta(*map(int, b)) for b in p["batches"]]
                e.last_timestamp = e.batches[-1].timestamp if e.batches else -1
                e.txn_first_offset = int(p.get("txn", -1))
                e.coordinator_epoch = int(p.get("coordinator_epoch", -1))
                producers[e.producer_id] = e
                if e.txn_first_offset >= 0:
                    ongoing[e.producer_id] = e.txn_first_offset
            self.producers = producers
            self.ongoing = ongoing
            self.unreplicated = []
            return int(data["offset"])
        except (OSError, ValueError, KeyError, TypeError):
            self.clear()
            return 0
