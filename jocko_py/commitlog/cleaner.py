"""Log compaction (``cleanup.policy=compact``): keep the latest record per key.

This module owns the cleaner: which compacted logs are due, the key -> latest
offset map, rewriting segments, and the cleaner checkpoint. Synchronous file
I/O, run by the broker between requests.

Rules (Kafka's):

* Only closed segments are cleaned, never the active one, and only those
  whose newest record is older than ``min.compaction.lag.ms``.
* A log is due when its dirty share (bytes after the last cleaned offset, the
  "first dirty offset") reaches ``min.cleanable.dirty.ratio``, when a dirty
  record is older than ``max.compaction.lag.ms``, or when a kept tombstone's
  delete horizon has passed.
* A record survives when it is the latest for its key within the cleaned
  range; records without a key are always kept. A surviving tombstone (null
  value) is kept for ``delete.retention.ms``: the first pass stamps its batch
  with a delete horizon (attribute bit 6, the horizon in baseTimestamp, as
  KIP-534), a later pass past the horizon drops it.
* Rewritten batches keep their base offset, last offset delta, leader epoch,
  producer fields and codec; records keep their offsets and timestamps.
  Batches left empty are dropped; segments left empty are dropped unless
  first.
* Transactions (KIP-98): cleaning stops before the first offset of the oldest open
  transaction; records of aborted transactions (found through the ``.txnindex``)
  neither count as the latest for their key nor survive. A marker (control batch)
  stays while any record of its transaction does (its producer's records since that
  producer's previous marker); once none is left, the marker is stamped with a delete
  horizon (now + ``delete.retention.ms``, as a tombstone) and a later pass past the
  horizon drops it, as Kafka's cleaner does.

Crash safety: a cleaned segment is written to ``<base>.log.cleaned``, fsynced
and renamed over the original (``Log.replace_segment``); leftovers ending in
``.cleaned`` are removed when a log opens, and indexes are rebuilt.

On-disk checkpoint ``<data_dir>/cleaner-offset-checkpoint``: Kafka's offset
checkpoint format (see manager.py), one first-dirty offset per compacted log.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from jocko_py.commitlog.log import Log
from jocko_py.commitlog.manager import LogManager, read_offset_checkpoint, write_offset_checkpoint
from jocko_py.commitlog.segment import LogSegment
from jocko_py.protocol import records as rb

__all__ = ["CleanStats", "LogCleaner", "clean_log"]

logger = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass
class CleanStats:
    records_read: int = 0
    records_kept: int = 0
    batches_rewritten: int = 0
    segments_rewritten: int = 0
    segments_dropped: int = 0
    first_dirty: int = 0
    next_horizon_ms: int | None = None
    markers_dropped: int = 0


def _now_ms() -> int:
    return int(time.time() * 1000)


def _segment_batches(seg: LogSegment) -> Iterator[tuple[rb.RecordBatchHeader, bytes]]:
    for pos, h in seg.iter_headers():
        yield h, seg.read_batch_at(pos, h)


def cleanable_segments(lg: Log, now_ms: int) -> list[LogSegment]:
    """Closed segments old enough for ``min.compaction.lag.ms``, oldest first."""
    out = []
    lag = lg.config.min_compaction_lag_ms
    for seg in lg.segments[:-1]:
        if lag > 0 and seg.max_timestamp >= 0 and now_ms - seg.max_timestamp < lag:
            break
        out.append(seg)
    return out


def _encode_batch(h: rb.RecordBatchHeader, kept: list[rb.Record], horizon: int | None) -> bytes:
    """A batch like ``h`` holding only ``kept`` (same offsets and timestamps)."""
    log_append = h.timestamp_type == 1
    if horizon is not None:
        base_ts = horizon
    else:
        base_ts = h.max_timestamp if log_append else min(r.timestamp for r in kept)
    body = bytearray()
    for rec in kept:
        ts_delta = 0 if log_append else rec.timestamp - base_ts
        rb._encode_record(body, rec.offset - h.base_offset, ts_delta, rec)
    payload: bytes | bytearray = body
    if h.compression:
        from jocko_py.protocol import compression as codecs  # noqa: PLC0415

        payload = codecs.compress(h.compression, bytes(body))
    attributes = h.attributes & ~rb.DELETE_HORIZON_MASK
    if horizon is not None:
        attributes |= rb.DELETE_HORIZON_MASK
    max_ts = h.max_timestamp if log_append else max(r.timestamp for r in kept)
    return rb._assemble(
        base_offset=h.base_offset,
        partition_leader_epoch=h.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=h.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        count=len(kept),
        payload=payload,
    )


def clean_log(
    lg: Log, now_ms: int | None = None, *, first_dirty: int = 0, force: bool = False
) -> CleanStats | None:
    """Compact ``lg`` once if it is due (or ``force``); None when nothing was done."""
    now = _now_ms() if now_ms is None else now_ms
    cfg = lg.config
    segs = cleanable_segments(lg, now)
    open_first = lg.producer_state.first_open_offset()
    if open_first is not None:
        segs = [s for s in segs if s.next_offset <= open_first]
    if not segs:
        return None
    aborted_ranges: dict[int, list[tuple[int, int]]] = {}
    for a in lg.collect_aborted(segs[0].base_offset, segs[-1].next_offset):
        aborted_ranges.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))

    def aborted(h: rb.RecordBatchHeader) -> bool:
        return h.is_transactional and any(
            first <= h.base_offset <= last for first, last in aborted_ranges.get(h.producer_id, ()))
    end = segs[-1].next_offset
    total = sum(s.size for s in segs)
    dirty = sum(s.size for s in segs if s.next_offset > first_dirty)
    due = force or (total > 0 and dirty / total >= cfg.min_cleanable_dirty_ratio and dirty > 0)
    if not due and dirty > 0 and cfg.max_compaction_lag_ms < 2**62:
        oldest_dirty = min(
            (
                s.first_batch_timestamp
                for s in segs
                if s.next_offset > first_dirty and s.first_batch_timestamp is not None
            ),
            default=None,
        )
        due = oldest_dirty is not None and now - oldest_dirty > cfg.max_compaction_lag_ms
    if not due:
        return None
    stats = CleanStats(first_dirty=end)
    # pass 1: the latest offset of every key in the cleanable range
    latest: dict[bytes, int] = {}
    for seg in segs:
        for h, data in _segment_batches(seg):
            if h.is_control or aborted(h):
                continue
            for rec in rb.decode_records(data, h):
                stats.records_read += 1
                if rec.key is not None:
                    latest[rec.key] = rec.offset
    # pass 2: rewrite each segment with the survivors
    delete_retention = cfg.delete_retention_ms
    # producer id -> a record of its current transaction survives (since its last marker)
    retained: dict[int, bool] = {}

    def note_horizon(horizon: int) -> None:
        nh = stats.next_horizon_ms
        stats.next_horizon_ms = horizon if nh is None else min(nh, horizon)

    for idx, seg in enumerate(segs):
        out = bytearray()
        changed = False
        for h, data in _segment_batches(seg):
            if h.is_control:
                if retained.pop(h.producer_id, False):
                    out += data  # its transaction still has records
                    continue
                horizon = h.base_timestamp if h.has_delete_horizon else None
                if horizon is not None and now >= horizon:
                    stats.markers_dropped += 1
                    changed = True
                    continue
                if horizon is None:
                    horizon = now + delete_retention
                    out += _encode_batch(h, rb.decode_records(data, h), horizon)
                    changed = True
                else:
                    out += data
                note_horizon(horizon)
                continue
            if aborted(h):
                stats.records_read += h.records_count
                changed = True
                continue
            recs = rb.decode_records(data, h)
            horizon = h.base_timestamp if h.has_delete_horizon else None
            kept: list[rb.Record] = []
            has_tombstone = False
            for rec in recs:
                if rec.key is not None and latest.get(rec.key) != rec.offset:
                    continue
                if rec.value is None and rec.key is not None:
                    if horizon is not None and now >= horizon:
                        continue
                    has_tombstone = True
                kept.append(rec)
            stats.records_kept += len(kept)
            if kept and h.is_transactional:
                retained[h.producer_id] = True
            new_horizon = horizon
            if has_tombstone and horizon is None:
                new_horizon = now + delete_retention
            if has_tombstone and new_horizon is not None:
                note_horizon(new_horizon)
            if not has_tombstone and horizon is not None and kept:
                new_horizon = None
            if len(kept) == len(recs) and new_horizon == horizon:
                out += data
                continue
            changed = True
            if kept:
                out += _encode_batch(h, kept, new_horizon)
                stats.batches_rewritten += 1
        if not changed:
            continue
        if not out and idx > 0:
            lg.replace_segment(seg, None)
            stats.segments_dropped += 1
            continue
        tmp = seg.log_path.with_name(seg.log_path.name + ".cleaned")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(out)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        lg.replace_segment(seg, tmp)
        stats.segments_rewritten += 1
    logger.info(
        "[log=%s] compacted up to offset %d: kept %d of %d records, %d segment(s) "
        "rewritten, %d dropped, %d transaction marker(s) dropped",
        lg.name,
        end,
        stats.records_kept,
        stats.records_read,
        stats.segments_rewritten,
        stats.segments_dropped,
        stats.markers_dropped,
    )
    return stats


class LogCleaner:
    """Runs compaction over every compacted log of a LogManager."""

    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self.path = logs.data_dir / CLEANER_CHECKPOINT
        self.first_dirty: dict[tuple[str, int], int] = read_offset_checkpoint(self.path)
        self.horizons: dict[tuple[str, int], int] = {}

    def compacted(self) -> list[tuple[str, int]]:
        return [tp for tp, lg in self.logs.logs.items() if lg.config.compact]

    def clean_all(
        self, now_ms: int | None = None, only: list[tuple[str, int]] | None = None
    ) -> int:
        """Compact every compacted log (or those in `only`); returns how many changed.

        A caller on an event loop passes one log at a time and yields between them,
        so a big compaction stalls requests for one log's worth of work at most.
        """
        now = _now_ms() if now_ms is None else now_ms
        cleaned = 0
        for tp in list(self.logs.logs) if only is None else only:
            lg = self.logs.logs.get(tp)
            if lg is None or not lg.config.compact:
                continue
            horizon = self.horizons.get(tp)
            force = horizon is not None and now >= horizon
            try:
                stats = clean_log(lg, now, first_dirty=self.first_dirty.get(tp, 0), force=force)
            except Exception:
                logger.exception("[partition=%s-%d] compaction failed", *tp)
                continue
            if stats is None:
                continue
            cleaned += 1
            self.first_dirty[tp] = stats.first_dirty
            if stats.next_horizon_ms is not None:
                self.horizons[tp] = stats.next_horizon_ms
            else:
                self.horizons.pop(tp, None)
        if cleaned:
            live = {tp: o for tp, o in self.first_dirty.items() if tp in self.logs.logs}
            self.first_dirty = live
            write_offset_checkpoint(self.path, live)
        return cleaned
