"""How the share coordinator merges state batches (Kafka's ``PersisterStateBatchCombiner``).

Pure: the batches stored so far and the batches of a write become one sorted list
without overlaps. Batches wholly below the start offset are dropped and one crossing
it is cut at it (unless the start offset is -1: "not changed"). Where batches overlap,
each offset takes the batch of the highest priority, the higher delivery count first,
then the higher delivery state (AVAILABLE < ACKNOWLEDGED < ARCHIVED), which is what
Kafka's pairwise merge arrives at; neighbouring offsets of the same state and count are
one batch again.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from jocko_py.broker.share.persister import StateBatch


def _priority(b: StateBatch) -> tuple[int, int]:
    return b.delivery_count, int(b.delivery_state)


def prune(batches: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    if start_offset == -1:
        return list(batches)
    out = []
    for b in batches:
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
        out.append(b)
    return out


def combine(so_far: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int
            ) -> tuple[StateBatch, ...]:
    batches = [b for b in prune([*so_far, *new], start_offset)
               if b.first_offset <= b.last_offset]
    if len(batches) < 2:
        return tuple(batches)
    batches.sort(key=lambda b: b.first_offset)
    if all(a.last_offset < b.first_offset for a, b in zip(batches, batches[1:], strict=False)):
        return _coalesce(batches)  # no overlap (the usual case): no sweep needed
    points = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    heap: list[tuple[int, int, int, int, StateBatch]] = []  # (-count, -state, seq, last, b)
    out: list[StateBatch] = []
    i = 0
    for seq_p, (lo, nxt) in enumerate(zip(points, points[1:], strict=False)):
        while i < len(batches) and batches[i].first_offset <= lo:
            b = batches[i]
            c, s = _priority(b)
            heapq.heappush(heap, (-c, -s, seq_p * len(batches) + i, b.last_offset, b))
            i += 1
        while heap and heap[0][3] < lo:
            heapq.heappop(heap)
        if not heap:
            continue
        top = heap[0][4]
        hi = nxt - 1
        prev = out[-1] if out else None
        if prev is not None and prev.last_offset + 1 == lo \
                and _priority(prev) == _priority(top):
            out[-1] = StateBatch(prev.first_offset, hi, prev.delivery_state, prev.delivery_count)
        else:
            out.append(StateBatch(lo, hi, top.delivery_state, top.delivery_count))
    return tuple(out)


def _coalesce(batches: list[StateBatch]) -> tuple[StateBatch, ...]:
    out: list[StateBatch] = []
    for b in batches:
        prev = out[-1] if out else None
        if prev is not None and prev.last_offset + 1 == b.first_offset \
                and _priority(prev) == _priority(b):
            out[-1] = StateBatch(prev.first_offset, b.last_offset, prev.delivery_state,
                                 prev.delivery_count)
        else:
            out.append(b)
    return tuple(out)
