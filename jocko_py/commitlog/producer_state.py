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

On-disk snapshot, ``producer-state.json`` in the partition directory (JSON,
written to ``producer-state.tmp``, fsynced and renamed)::

    {"offset": <the state covers every batch below this offset>,
     "producers": [{"id": <producer id>, "epoch": <producer epoch>,
                    "batches": [[first_seq, last_seq, first_offset, last_offset,
                                 max_timestamp], ...]}, ...]}

``batches`` holds up to the last five batches, oldest first.  On load the log
replays the batches from ``offset`` to its end (:meth:`ProducerStateManager.observe`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.records import RecordBatchHeader

__all__ = [
    "PRODUCER_SNAPSHOT_FILE",
    "BatchMeta",
    "ProducerEntry",
    "ProducerStateManager",
    "SequenceCheck",
]

PRODUCER_SNAPSHOT_FILE = "producer-state.json"
MAX_CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1


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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


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

    def copy(self) -> ProducerStateManager:
        """An independent copy (BatchMeta records are never mutated, so they are shared)."""
        other = ProducerStateManager()
        other.producers = {
            pid: ProducerEntry(e.producer_id, e.epoch, list(e.batches), e.last_timestamp)
            for pid, e in self.producers.items()
        }
        return other

    def clear(self) -> None:
        self.producers = {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateManager):
            return NotImplemented
        return self.producers == other.producers

    __hash__ = None  # type: ignore[assignment]

    def check(self, h: RecordBatchHeader) -> SequenceCheck:
        if h.producer_id < 0:
            return OK
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return OK
        if h.producer_epoch < entry.epoch:
            return SequenceCheck(ErrorCode.INVALID_PRODUCER_EPOCH)
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

    def observe(self, h: RecordBatchHeader, first_offset: int) -> None:
        """Record an appended (or recovered) batch."""
        if h.producer_id < 0:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None or h.producer_epoch > entry.epoch:
            entry = ProducerEntry(h.producer_id, h.producer_epoch)
            self.producers[h.producer_id] = entry
        elif h.producer_epoch < entry.epoch:
            return
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

    def truncate_after(self, offset: int) -> None:
        """Forget batches at or beyond `offset`.

        Only approximate (an epoch bump or batches beyond the last five are not
        undone); :meth:`jocko_py.commitlog.log.Log.truncate_to` rebuilds the
        state from the log instead.
        """
        for pid in list(self.producers):
            e = self.producers[pid]
            e.batches = [b for b in e.batches if b.last_offset < offset]
            if not e.batches:
                del self.producers[pid]

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
            for p in data["producers"]:
                e = ProducerEntry(int(p["id"]), int(p["epoch"]))
                e.batches = [BatchMeta(*map(int, b)) for b in p["batches"]]
                e.last_timestamp = e.batches[-1].timestamp if e.batches else -1
                producers[e.producer_id] = e
            self.producers = producers
            return int(data["offset"])
        except (OSError, ValueError, KeyError, TypeError):
            self.producers = {}
            return 0
