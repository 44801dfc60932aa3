"""Streaming job: per-user totals over 5-minute event-time windows.

    Kafka topic of JSON events
      -> parse (malformed events are dropped)
      -> watermark of 10 minutes on event_time
      -> per (5-minute window, user): events, purchases, total_cents
      -> Parquet files (file sink, exactly once)   } each with its own checkpoint
      -> another Kafka topic as JSON (key = user)   } under --checkpoint

Output mode is append: a window is written once, when the watermark (the newest
event time seen minus 10 minutes) has passed its end, and events older than the
watermark are dropped as late. Restarting with the same checkpoint directory goes
on where the previous run stopped.

Run it (see README.md): `python examples/spark/streaming_job.py --bootstrap HOST:PORT`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

WINDOW = "5 minutes"
WATERMARK = "10 minutes"


def event_schema() -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("event_id", LongType()),
            StructField("user", StringType()),
            StructField("kind", StringType()),
            StructField("amount_cents", LongType()),
            StructField("event_time", StringType()),
        ]
    )


def read_events(spark: Any, bootstrap: str, topic: str, **source_options: str) -> Any:
    """The parsed event stream: one row per well-formed event."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in source_options.items():
        reader = reader.option(k, v)
    parsed = reader.load().select(
        F.from_json(F.col("value").cast("string"), event_schema()).alias("e")
    )
    return (
        parsed.select("e.*")
        .withColumn("event_time", F.to_timestamp("event_time"))
        .where(F.col("event_time").isNotNull() & F.col("user").isNotNull())
    )


def windowed_totals(events: Any) -> Any:
    from pyspark.sql import functions as F

    return (
        events.withWatermark("event_time", WATERMARK)
        .groupBy(F.window("event_time", WINDOW).alias("w"), "user")
        .agg(
            F.count("*").alias("events"),
            F.sum(F.when(F.col("kind") == "purchase", 1).otherwise(0)).alias("purchases"),
            F.sum("amount_cents").alias("total_cents"),
        )
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "user",
            "events",
            "purchases",
            "total_cents",
        )
    )


def start(
    spark: Any,
    bootstrap: str,
    source_topic: str,
    results_topic: str,
    output_dir: Path,
    checkpoint_dir: Path,
    available_now: bool = False,
    **source_options: str,
) -> list[Any]:
    """Start the two queries (Parquet and Kafka sinks); returns them."""
    from pyspark.sql import functions as F

    totals = windowed_totals(read_events(spark, bootstrap, source_topic, **source_options))

    to_parquet = (
        totals.writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(output_dir))
        .option("checkpointLocation", str(checkpoint_dir / "parquet"))
        .queryName("totals_to_parquet")
    )
    to_kafka = (
        totals.select(
            F.col("user").alias("key"),
            F.to_json(F.struct(*totals.columns)).alias("value"),
        )
        .writeStream.format("kafka")
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", results_topic)
        .option("checkpointLocation", str(checkpoint_dir / "kafka"))
        .queryName("totals_to_kafka")
    )
    queries = []
    for writer in (to_parquet, to_kafka):
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime="5 seconds")
        queries.append(writer.start())
    return queries


def run_available_now(spark: Any, timeout: float = 300.0, **kwargs: Any) -> None:
    """Process everything in the topic now, then stop (bounded by `timeout`)."""
    queries = start(spark, available_now=True, **kwargs)
    try:
        for q in queries:
            if not q.awaitTermination(timeout):
                raise TimeoutError(f"query {q.name} still running after {timeout}s")
    finally:
        for q in queries:
            if q.isActive:
                q.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--source-topic", default="events")
    p.add_argument("--results-topic", default="event-totals")
    p.add_argument("--output", type=Path, default=Path("examples/spark/out/totals"))
    p.add_argument("--checkpoint", type=Path, default=Path("examples/spark/out/checkpoint"))
    p.add_argument(
        "--available-now", action="store_true", help="process what is there now, then exit"
    )
    args = p.parse_args()

    from jocko_py.spark_session import builder

    spark = builder("jocko-py-streaming-example").getOrCreate()
    try:
        common = dict(
            bootstrap=args.bootstrap,
            source_topic=args.source_topic,
            results_topic=args.results_topic,
            output_dir=args.output,
            checkpoint_dir=args.checkpoint,
        )
        if args.available_now:
            run_available_now(spark, **common)
        else:
            start(spark, **common)
            spark.streams.awaitAnyTermination()  # until Ctrl-C or a query fails
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
