"""Batch job: a summary of the events in a range of a topic.

The range is either offsets per partition, as the connector's JSON
(`{"events": {"0": 10, "1": -2}}`, -2 = earliest, -1 = latest; the end is
exclusive), or a time range: the connector asks the broker (ListOffsets by
timestamp) for the first offset of each partition whose record timestamp is at or
after each bound, and reads between the two.

    python examples/spark/batch_job.py --bootstrap HOST:PORT --topic events \\
        --starting-offsets '{"events": {"0": 0, "1": 0, "2": 0}}' --ending-offsets latest
    python examples/spark/batch_job.py --bootstrap HOST:PORT --topic events \\
        --from-time 2026-11-22T01:00:00Z --to-time 2026-11-22T01:30:00Z
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any


def read_offsets(
    spark: Any, bootstrap: str, topic: str, starting: Any = "earliest", ending: Any = "latest"
) -> Any:
    """Records of `topic` in an offset range (dicts become the connector's JSON)."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting if isinstance(starting, str) else json.dumps(starting))
        .option("endingOffsets", ending if isinstance(ending, str) else json.dumps(ending))
        .load()
    )


def read_times(spark: Any, bootstrap: str, topic: str, from_ms: int, to_ms: int) -> Any:
    """Records of `topic` from the first offset at or after `from_ms` to the first
    at or after `to_ms` (exclusive), in every partition."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingTimestamp", str(from_ms))
        .option("endingTimestamp", str(to_ms))
        # A partition with no record at or after from_ms contributes nothing.
        .option("startingOffsetsByTimestampStrategy", "latest")
        .load()
    )


def summarize(records: Any) -> Any:
    """Per event kind: how many well-formed events, and their amount in cents."""
    from pyspark.sql import functions as F

    from_json = F.from_json(
        F.col("value").cast("string"), "event_id LONG, user STRING, kind STRING, amount_cents LONG"
    )
    return (
        records.select(from_json.alias("e"))
        .where(F.col("e.kind").isNotNull() & F.col("e.user").isNotNull())
        .groupBy("e.kind")
        .agg(F.count("*").alias("events"), F.sum("e.amount_cents").alias("total_cents"))
        .orderBy("kind")
    )


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--topic", default="events")
    p.add_argument("--starting-offsets", default="earliest")
    p.add_argument("--ending-offsets", default="latest")
    p.add_argument("--from-time", help="ISO 8601, e.g. 2026-11-22T01:00:00Z")
    p.add_argument("--to-time", help="ISO 8601 (exclusive)")
    args = p.parse_args()

    from jocko_py.spark_session import builder

    spark = builder("jocko-py-batch-example").getOrCreate()
    try:
        if args.from_time and args.to_time:
            df = read_times(
                spark, args.bootstrap, args.topic, _ms(args.from_time), _ms(args.to_time)
            )
        else:
            df = read_offsets(
                spark, args.bootstrap, args.topic, args.starting_offsets, args.ending_offsets
            )
        summarize(df).show(truncate=False)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
