"""The example in examples/spark, run end to end against the broker, checked against
the same results computed here in plain Python from the same input events.

The reference follows the documented semantics, not Spark's code: tumbling 5-minute
windows; a watermark of (newest event time seen) - 10 minutes, carried across the
restart in the checkpoint; in the second run, events older than the watermark left
by the first run are dropped; append mode writes exactly the windows whose end the
final watermark has reached. For the batch job: ListOffsets by timestamp is "the
first offset whose timestamp is at or after T", and offset ranges end exclusive.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.broker import REPO

EXAMPLE = REPO / "examples" / "spark"
WINDOW_MS = 5 * 60_000
WATERMARK_MS = 10 * 60_000


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "jocko_spark_run_example", EXAMPLE / "run_example.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


Key = tuple[int, int, str]  # window start, window end, user


def reference_totals(first: list[Any], second: list[Any]) -> dict[Key, tuple[int, int, int]]:
    wm_after_first = max(e.event_time_ms for e in first) - WATERMARK_MS
    accepted = list(first) + [e for e in second if e.event_time_ms > wm_after_first]
    final_wm = max(e.event_time_ms for e in first + second) - WATERMARK_MS
    totals: dict[Key, list[int]] = defaultdict(lambda: [0, 0, 0])
    for e in accepted:
        start = e.event_time_ms // WINDOW_MS * WINDOW_MS
        t = totals[(start, start + WINDOW_MS, e.user)]
        t[0] += 1
        t[1] += e.kind == "purchase"
        t[2] += e.amount_cents
    return {k: (v[0], v[1], v[2]) for k, v in totals.items() if k[1] <= final_wm}


def reference_summary(events: list[Any]) -> list[dict[str, Any]]:
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        by_kind[e.kind][0] += 1
        by_kind[e.kind][1] += e.amount_cents
    return [{"kind": k, "events": n, "total_cents": c} for k, (n, c) in sorted(by_kind.items())]


def _iso_ms(s: str) -> int:
    return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000)


def test_example_pipeline_matches_plain_python(
    spark: Any, bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example()
    res = example.run(spark, bootstrap, tmp_path / "example")

    # what the script prints: one line per window total, the counts, both batch summaries
    example.print_result(res)
    out = capsys.readouterr().out
    assert f"{len(res.parquet_totals)} window totals in Parquet, {len(res.kafka_totals)} in topic" in out
    summary_lines = [ln for ln in out.splitlines() if ln.startswith("  ") and " events " in ln]
    assert len(summary_lines) == len(res.by_offsets) + len(res.by_time)
    window_lines = [ln for ln in out.splitlines() if re.match(r"\d\d:\d\d-\d\d:\d\d ", ln)]
    assert len(window_lines) == len(res.parquet_totals)

    late = res.second[-1]
    assert late.event_time_ms < max(e.event_time_ms for e in res.first) - WATERMARK_MS

    want = reference_totals(res.first, res.second)
    assert len(want) > 10, "the sample should close a good number of windows"
    parquet = {
        (t["window_start"], t["window_end"], t["user"]): (
            t["events"],
            t["purchases"],
            t["total_cents"],
        )
        for t in res.parquet_totals
    }
    assert len(parquet) == len(res.parquet_totals), "a window was written twice to Parquet"
    assert parquet == want
    kafka = {
        (_iso_ms(t["window_start"]), _iso_ms(t["window_end"]), t["user"]): (
            t["events"],
            t["purchases"],
            t["total_cents"],
        )
        for t in res.kafka_totals
    }
    assert len(kafka) == len(res.kafka_totals), "a window was written twice to the topic"
    assert kafka == want

    # Batch job by offsets: the first half of every partition.
    all_events = res.first + res.second
    place = res.placed
    (ends,) = res.first_offsets.values()
    first_half = [e for e in all_events if place[e.event_id][1] < ends[str(place[e.event_id][0])]]
    assert res.by_offsets == reference_summary(first_half)

    # Batch job by timestamp. Malformed values were produced without a timestamp,
    # so theirs is the time they were produced: after any bound used here.
    t_from, t_to = res.time_range
    ts = {e.event_id: e.event_time_ms for e in all_events}
    ts |= {i: 2**62 for i in place if i < 0}
    in_range = []
    for p in range(3):
        offsets = sorted((off, i) for i, (part, off) in place.items() if part == p)

        def first_at_or_after(t: int, offsets: list[tuple[int, int]] = offsets) -> float:
            return next((off for off, i in offsets if ts[i] >= t), float("inf"))

        lo, hi = first_at_or_after(t_from), first_at_or_after(t_to)
        in_range += [ev for ev in all_events if place[ev.event_id][0] == p]
        in_range = [
            ev for ev in in_range if place[ev.event_id][0] != p or lo <= place[ev.event_id][1] < hi
        ]
    assert res.by_time == reference_summary(in_range)
