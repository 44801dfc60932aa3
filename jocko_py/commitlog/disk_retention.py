"""Retention by share of disk: keep the data directory's filesystem below a percentage.

This module owns the decision of which closed segments to delete when the filesystem
holding the data directory is fuller than `jocko.log.retention.disk.percent`, across all
topics. Kafka has no such setting (retention is per topic, by time or bytes); Jocko's
stated goal was to let a broker use a disk without the operator sizing every topic.

Rules
-----
- Nothing happens while the filesystem's used share is at or below the limit. Above
  it, the excess (used bytes - limit) is freed by deleting whole closed segments,
  oldest first within a partition; the active segment is never deleted.
- Fairness between topics: each topic has a weight, its topic config
  `jocko.retention.disk.share` (default 1). The next segment deleted is taken from
  the topic whose size divided by its weight is largest, so topics converge to sizes
  proportional to their weights; within that topic, from the partition whose oldest
  deletable segment is oldest.
- A segment is deletable only if every offset in it is below the partition's floor:
  the high watermark (never delete what is not yet committed), and, when the broker
  protects them, the lowest offset any consumer group has committed there. When
  nothing is deletable the filesystem stays over the limit (logged, not forced).
- Deletion moves the log start offset to the next segment's base offset, as
  DeleteRecords does, so consumers see OFFSET_OUT_OF_RANGE / a new log start, as
  after time retention.

Synchronous: called from the broker's retention task; the planning is a pure function
of sizes and offsets (`plan`), tested without a filesystem.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jocko_py.commitlog.log import Log

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    next_offset: int  # base offset of the next segment (everything here is below it)
    size: int
    largest_timestamp: int


@dataclass(frozen=True, slots=True)
class DiskUsage:
    total: int
    used: int

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.total if self.total else 0.0


def disk_usage(path: Path) -> DiskUsage:
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    return DiskUsage(total, total - st.f_bfree * st.f_frsize)


def closed_segments(lg: Log) -> list[SegmentInfo]:
    segs = lg.segments
    return [SegmentInfo(s.base_offset, segs[i + 1].base_offset, s.size, s.largest_timestamp)
            for i, s in enumerate(segs[:-1])]


def plan(excess: int, segments: Mapping[TopicPartition, list[SegmentInfo]],
         topic_sizes: Mapping[str, int], weights: Mapping[str, float],
         floors: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """New log start offset per partition so that at least ``excess`` bytes go (or as
    many as the floors allow). ``segments``: each partition's closed segments, oldest
    first; ``floors``: no deleted segment may hold an offset at or above it."""
    sizes = dict(topic_sizes)
    nxt = {tp: 0 for tp in segments}
    out: dict[TopicPartition, int] = {}

    def deletable(tp: TopicPartition) -> SegmentInfo | None:
        i = nxt[tp]
        segs = segments[tp]
        if i >= len(segs) or segs[i].next_offset > floors.get(tp, -1):
            return None
        return segs[i]

    while excess > 0:
        best: tuple[float, int, TopicPartition] | None = None
        for tp in segments:
            seg = deletable(tp)
            if seg is None:
                continue
            weight = max(weights.get(tp[0], 1.0), 1e-9)
            # the most over its share first; then the oldest data
            key = (-sizes.get(tp[0], 0) / weight, seg.largest_timestamp, tp)
            if best is None or key < best:
                best = key
        if best is None:
            break
        tp = best[2]
        seg = segments[tp][nxt[tp]]
        nxt[tp] += 1
        out[tp] = seg.next_offset
        excess -= seg.size
        sizes[tp[0]] = sizes.get(tp[0], 0) - seg.size
    return out


def apply_disk_retention(data_dir: Path, logs: Mapping[TopicPartition, Log], percent: float,
                         weights: Mapping[str, float], floors: Mapping[TopicPartition, int],
                         usage: DiskUsage | None = None) -> int:
    """Delete segments until the filesystem is below ``percent`` (or nothing more may
    go); returns the bytes of the segments deleted."""
    if percent < 0:
        return 0
    usage = usage or disk_usage(data_dir)
    limit = int(usage.total * percent / 100)
    excess = usage.used - limit
    if excess <= 0:
        return 0
    segments = {tp: closed_segments(lg) for tp, lg in logs.items() if lg.config.delete}
    topic_sizes: dict[str, int] = {}
    for (topic, _), lg in logs.items():
        topic_sizes[topic] = topic_sizes.get(topic, 0) + lg.size_bytes
    starts = plan(excess, segments, topic_sizes, weights, floors)
    freed = 0
    for tp, start in sorted(starts.items()):
        lg = logs[tp]
        before = lg.size_bytes
        lg.delete_records_before(start)
        freed += before - lg.size_bytes
        logger.info("[partition=%s-%d] disk %.1f%% over the %.1f%% limit: log start moved "
                    "to %d", tp[0], tp[1], usage.percent, percent, start)
    if freed < excess:
        logger.warning("disk use %.1f%% is over the %.1f%% limit and no more segments may "
                       "be deleted (active segments, high watermarks or committed offsets "
                       "hold them)", 100.0 * (usage.used - freed) / usage.total, percent)
    return freed
