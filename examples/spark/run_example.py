"""The whole example, end to end, against a running broker:

1. create two topics (events, totals) with a fresh run id in their names;
2. produce the first part of the sample events (plus two malformed values);
3. run the streaming job until it has processed them (availableNow), and stop it;
4. produce the rest, including one event older than the watermark by then;
5. run the streaming job again from its checkpoint;
6. print the per-user window totals from Parquet and from the totals topic, and a
   summary of two ranges of the events topic read by the batch job (by offsets
   and by timestamp).

    make run                                   # a jocko-py broker on localhost:9092
    .venv/bin/python examples/spark/run_example.py --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import batch_job  # noqa: E402
import events as ev  # noqa: E402
import streaming_job  # noqa: E402

MALFORMED = (b"this is not json", b'{"event_id": -1, "kind": "view"}')
FIRST_PART, SECOND_PART = 80, 40
STEP_MS = 20_000
MINUTE = 60_000


@dataclass
class Result:
    source_topic: str
    results_topic: str
    start_ms: int
    first: list[ev.Event]
    second: list[ev.Event]  # includes the late event, last
    placed: dict[int, tuple[int, int]]  # event_id -> (partition, offset)
    parquet_totals: list[dict[str, Any]] = field(default_factory=list)
    kafka_totals: list[dict[str, Any]] = field(default_factory=list)
    first_offsets: dict[str, Any] = field(default_factory=dict)  # the batch job's ranges
    time_range: tuple[int, int] = (0, 0)
    by_offsets: list[dict[str, Any]] = field(default_factory=list)
    by_time: list[dict[str, Any]] = field(default_factory=list)


def _ms(ts: Any) -> int:
    return int(ts.timestamp() * 1000)


def run(spark: Any, bootstrap: str, workdir: Path, run_id: str | None = None) -> Result:
    run_id = run_id or uuid.uuid4().hex[:8]
    source, results = f"events-{run_id}", f"event-totals-{run_id}"
    ev.ensure_topics(bootstrap, [source, results], partitions=3)
    # Whole hours back, so the windows are the same whenever it runs.
    start_ms = (int(time.time() * 1000) // (60 * MINUTE) - 2) * 60 * MINUTE

    first = ev.generate(FIRST_PART, start_ms, step_ms=STEP_MS)
    placed = ev.produce(bootstrap, source, first, raw=MALFORMED)
    job = dict(
        bootstrap=bootstrap,
        source_topic=source,
        results_topic=results,
        output_dir=workdir / "totals",
        checkpoint_dir=workdir / "checkpoint",
    )
    streaming_job.run_available_now(spark, **job)

    second = ev.generate(SECOND_PART, start_ms, step_ms=STEP_MS, first_id=FIRST_PART)
    # 15 minutes older than anything in the first part: by now, older than the watermark.
    late_ms = min(e.event_time_ms for e in first[-5:]) - 15 * MINUTE
    second.append(ev.Event(10_000, "ada", "purchase", 777, late_ms))
    placed |= ev.produce(bootstrap, source, second)
    streaming_job.run_available_now(spark, **job)

    res = Result(source, results, start_ms, first, second, placed)
    for row in spark.read.parquet(str(workdir / "totals")).collect():
        d = row.asDict()
        d["window_start"], d["window_end"] = _ms(d["window_start"]), _ms(d["window_end"])
        res.parquet_totals.append(d)
    for row in batch_job.read_offsets(spark, bootstrap, results).select("key", "value").collect():
        d = json.loads(bytes(row["value"]))
        assert bytes(row["key"]).decode() == d["user"]
        res.kafka_totals.append(d)

    # The first half of every partition (an ending offset past the end of a partition
    # is data loss to the connector, so this uses the offsets the producer was given).
    counts = [sum(1 for part, _ in placed.values() if part == p) for p in range(3)]
    res.first_offsets = {source: {str(p): n // 2 for p, n in enumerate(counts)}}
    res.by_offsets = [
        r.asDict()
        for r in batch_job.summarize(
            batch_job.read_offsets(spark, bootstrap, source, "earliest", res.first_offsets)
        ).collect()
    ]
    res.time_range = (start_ms + 10 * MINUTE, start_ms + 25 * MINUTE)
    res.by_time = [
        r.asDict()
        for r in batch_job.summarize(
            batch_job.read_times(spark, bootstrap, source, *res.time_range)
        ).collect()
    ]
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--workdir", type=Path, default=Path("examples/spark/out"))
    p.add_argument("--run-id", help="suffix of the topic names (default: random)")
    args = p.parse_args()

    from jocko_py.spark_session import builder

    spark = builder("jocko-py-example").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        run_id = args.run_id or uuid.uuid4().hex[:8]
        res = run(spark, args.bootstrap, args.workdir / run_id, run_id)
    finally:
        spark.stop()
    print_result(res)


def print_result(res: Result) -> None:
    def hm(ms: int) -> str:
        return time.strftime("%H:%M", time.gmtime(ms / 1000))

    print(f"\nper-user totals of 5-minute windows, topic {res.source_topic} -> Parquet:")
    print(f"{'window (UTC)':<14}{'user':<6}{'events':>7}{'purchases':>10}{'total':>10}")
    for t in sorted(res.parquet_totals, key=lambda t: (t["window_start"], t["user"])):
        print(
            f"{hm(t['window_start'])}-{hm(t['window_end']):<8}{t['user']:<6}{t['events']:>7}"
            f"{t['purchases']:>10}{t['total_cents'] / 100:>10.2f}"
        )
    print(
        f"{len(res.parquet_totals)} window totals in Parquet, {len(res.kafka_totals)} in topic"
        f" {res.results_topic}; windows that end within 10 minutes of the newest event wait"
        " for the watermark."
    )
    print(f"\nbatch job, from the earliest offsets to {json.dumps(res.first_offsets)} (exclusive):")
    for r in res.by_offsets:
        print(f"  {r['kind']:<9}{r['events']:>4} events {r['total_cents'] / 100:>10.2f}")
    print(f"\nbatch job, record timestamps {hm(res.time_range[0])}-{hm(res.time_range[1])} UTC:")
    for r in res.by_time:
        print(f"  {r['kind']:<9}{r['events']:>4} events {r['total_cents'] / 100:>10.2f}")


if __name__ == "__main__":
    main()
