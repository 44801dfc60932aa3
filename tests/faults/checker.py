"""Check a fault run's history (Jepsen's queue checks, for Kafka).

Errors (each must be zero):
- lost: acknowledged, never in the final read, and the final read has a higher offset in
  that partition (the log moved on without it);
- unseen: acknowledged, never in the final read, nothing after it either;
- inconsistent_offsets: one (partition, offset) seen with two values (acks, polls and
  the final read together), or an acknowledged offset holding another value;
- duplicates_broker: a value at two offsets whose batches carry the same producer id,
  epoch and sequence: the broker failed to deduplicate a retry;
- failed_visible: a definitely failed send that is in the log;
- poll_skips: within one consumer's assignment session, a poll jumped over offsets that
  hold records;
- nonmonotonic_polls: within one session, an offset at or below the previous one;
- unexpected: a value in the log that no producer sent.
Reported apart, not errors: duplicates_client (same value, different producer epoch or
id: the client re-sent after bumping its epoch on a timeout, which librdkafka does even
against Apache Kafka), indeterminate sends and whether they landed, producer restarts.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tests.faults.workload import History

ERRORS = ("lost", "unseen", "inconsistent_offsets", "duplicates_broker", "failed_visible",
          "poll_skips", "nonmonotonic_polls", "unexpected")


def check(h: History, examples: int = 5) -> dict[str, Any]:
    found: dict[str, list[Any]] = {k: [] for k in ERRORS}
    dup_client: list[Any] = []
    by_value: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    at: dict[tuple[int, int], set[str]] = defaultdict(set)
    max_offset: dict[int, int] = {}
    for p, recs in h.final.items():
        for r in recs:
            by_value[r.value].append((p, r))
            at[(p, r.offset)].add(r.value)
        if recs:
            max_offset[p] = recs[-1].offset
    sent = {s.value: s for s in h.sends}

    # duplicates, by the batch identity of each copy
    for v, copies in by_value.items():
        if len(copies) < 2:
            continue
        ids = {(r.producer_id, r.producer_epoch, r.sequence) for _, r in copies}
        entry = (v, [(p, r.offset, r.producer_id, r.producer_epoch, r.sequence)
                     for p, r in copies])
        (found["duplicates_broker"] if len(ids) < len(copies) else dup_client).append(entry)
    for v in by_value:
        if v not in sent:
            found["unexpected"].append(v)

    ok = [s for s in h.sends if s.outcome == "ok"]
    for s in ok:
        if s.offset >= 0:
            at[(s.partition, s.offset)].add(s.value)
        if s.value not in by_value:
            key = "lost" if max_offset.get(s.partition, -1) > s.offset else "unseen"
            found[key].append((s.value, s.partition, s.offset))
    for s in h.sends:
        if s.outcome == "fail" and s.value in by_value:
            found["failed_visible"].append((s.value, s.error))
    for pl in h.polls:
        at[(pl.partition, pl.offset)].add(pl.value)
    for (p, o), vs in at.items():
        if len(vs) > 1:
            found["inconsistent_offsets"].append((p, o, sorted(vs)))

    # polls: per consumer, session and partition, in poll order
    present = {(p, r.offset) for p, recs in h.final.items() for r in recs}
    last: dict[tuple[str, int, int], int] = {}
    for pl in h.polls:
        key = (pl.proc, pl.session, pl.partition)
        prev = last.get(key)
        if prev is not None:
            if pl.offset <= prev:
                found["nonmonotonic_polls"].append((pl.proc, pl.partition, prev, pl.offset))
            elif pl.offset > prev + 1:
                skipped = [o for o in range(prev + 1, pl.offset) if (pl.partition, o) in present]
                if skipped:
                    found["poll_skips"].append((pl.proc, pl.partition, prev, pl.offset,
                                                len(skipped)))
        last[key] = pl.offset

    info = [s for s in h.sends if s.outcome == "info"]
    result: dict[str, Any] = {
        "sends": len(h.sends),
        "acknowledged": len(ok),
        "failed": sum(1 for s in h.sends if s.outcome == "fail"),
        "indeterminate": len(info),
        "indeterminate_in_log": sum(1 for s in info if s.value in by_value),
        "pending": sum(1 for s in h.sends if s.outcome == "pending"),
        "polled": len(h.polls),
        "final_records": sum(len(r) for r in h.final.values()),
        "producer_restarts": len(h.restarts),
        "acknowledged_without_offset": sum(1 for s in ok if s.offset < 0),
        "acknowledged_without_offset_examples": [
            (s.proc, s.value, s.partition, round(s.t_invoke, 3), round(s.t_done or -1, 3))
            for s in ok if s.offset < 0][:examples],
        "duplicates_client": len(dup_client),
        "errors": {k: len(v) for k, v in found.items()},
        "examples": {k: [repr(x) for x in v[:examples]] for k, v in found.items() if v},
        "duplicates_client_examples": [repr(x) for x in dup_client[:examples]],
    }
    result["valid"] = not any(result["errors"].values()) and result["pending"] == 0
    return result


def availability(h: History, faults: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each fault: seconds from its start to the first acknowledged write, invoked
    after the fault, on each affected partition (worst and median over partitions)."""
    acks: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for s in h.sends:
        if s.outcome == "ok" and s.t_done is not None:
            acks[s.partition].append((s.t_invoke, s.t_done))
    out = []
    for f in faults:
        t = f["t_start"]
        per = []
        for p in f.get("affected", []):
            after = [done for inv, done in acks.get(p, []) if inv >= t]
            per.append(min(after) - t if after else None)
        got = sorted(x for x in per if x is not None)
        out.append(f | {
            "first_ack_worst_s": round(got[-1], 3) if got and len(got) == len(per) else None,
            "first_ack_median_s": round(got[len(got) // 2], 3) if got else None,
            "partitions_without_ack": sum(1 for x in per if x is None),
            "producer_restarts": sum(1 for r in h.restarts
                                     if t <= r[0] <= f.get("t_recovered", f["t_start"] + 1e9)),
        })
    return out
