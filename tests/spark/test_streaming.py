"""Structured Streaming through the Kafka connector: a checkpointed source into a
file sink (exactly once across a stop and restart), the Kafka sink (its idempotent
producer) read back by another client, and failOnDataLoss when DeleteRecords has
removed records a query has not read yet.

Every wait is bounded: queries run with `availableNow` and `awaitTermination(t)`,
or are polled with a deadline and then stopped.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.spark.kafka_io import Record, consume_all, delete_records, now_ms, produce
from tests.spark.records import diff, rows_to_records, sample_records

QUERY_TIMEOUT = 120.0


def kafka_stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(writer: Any, timeout: float = QUERY_TIMEOUT) -> Any:
    """Start a query that processes what is available now, and wait (bounded) for it
    to finish. Raises the query's own exception if it failed."""
    query = writer.trigger(availableNow=True).start()
    try:
        if not query.awaitTermination(timeout):
            raise TimeoutError(f"query did not finish in {timeout}s: {query.status}")
    finally:
        if query.isActive:
            query.stop()
    return query


def file_sink_records(spark: Any, path: Path) -> list[Record]:
    # Reading the sink's directory goes through its _spark_metadata log: the files of
    # committed batches only, which is the file sink's exactly-once contract.
    return rows_to_records(spark.read.parquet(str(path)))


def to_file_sink(df: Any, out: Path, checkpoint: Path) -> Any:
    return (
        df.selectExpr(
            "key", "value", "partition", "offset", "timestamp", "timestampType", "headers"
        )
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
    )


def test_checkpointed_read_lands_in_file_sink_exactly_once(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=3)
    base = now_ms() - 600_000
    first = produce(bootstrap, topic, sample_records(base, count=60))
    out, ckpt = tmp_path / "out", tmp_path / "checkpoint"

    # 5 offsets per micro-batch, one trigger a second: stop after two batches have
    # been committed, well before the 60 records are all read.
    source = dict(
        subscribe=topic,
        startingOffsets="earliest",
        includeHeaders="true",
        maxOffsetsPerTrigger="5",
    )
    query = (
        to_file_sink(kafka_stream(spark, bootstrap, **source), out, ckpt)
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        deadline = time.monotonic() + QUERY_TIMEOUT
        while True:
            if query.exception() is not None:
                raise AssertionError(f"query failed: {query.exception()}")
            progress = query.lastProgress
            if progress is not None and progress["batchId"] >= 1:
                break
            assert time.monotonic() < deadline, f"no progress in time: {query.status}"
            time.sleep(0.2)
    finally:
        query.stop()
    midway = file_sink_records(spark, out)
    assert 0 < len(midway) < len(first), f"stopped at {len(midway)} of {len(first)} records"

    second = produce(bootstrap, topic, sample_records(base, count=30, start=60))
    run_available_now(to_file_sink(kafka_stream(spark, bootstrap, **source), out, ckpt))

    actual = file_sink_records(spark, out)
    expected = sorted(first + second, key=lambda r: (r.partition, r.offset))
    assert actual == expected, diff(expected, actual)


def test_stream_written_to_topic_is_read_in_partition_order(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Kafka source -> Kafka sink keeping each record's partition: the sink's producer
    (idempotent, acks=all: the kafka-clients defaults) must land every row, in order
    within each partition, for a consumer that is not Spark."""
    src = new_topic(partitions=3, suffix="-src")
    dst = new_topic(partitions=3, suffix="-dst")
    produced = produce(bootstrap, src, sample_records(now_ms() - 60_000, count=90))

    df = kafka_stream(
        spark,
        bootstrap,
        subscribe=src,
        startingOffsets="earliest",
        includeHeaders="true",
        maxOffsetsPerTrigger="40",
    ).selectExpr("key", "value", "headers", "partition")
    writer = (
        df.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    run_available_now(writer)

    got = consume_all(bootstrap, dst, [0, 1, 2])
    for p in range(3):
        want = [(r.key, r.value, r.headers) for r in produced if r.partition == p]
        have = [(r.key, r.value, r.headers) for r in got[p]]
        assert have == want, f"partition {p}: {len(have)} records, expected {len(want)}"


def test_batch_fail_on_data_loss_after_delete_records(
    spark: Any, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    produce(bootstrap, topic, sample_records(now_ms() - 60_000, partitions=1, count=10))
    delete_records(bootstrap, topic, {0: 4})

    def offsets(**options: str) -> list[int]:
        reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        for k, v in dict(subscribe=topic, **options).items():
            reader = reader.option(k, v)
        return sorted(r["offset"] for r in reader.load().select("offset").collect())

    # "earliest" is the new log start offset: nothing is lost.
    assert offsets() == list(range(4, 10))
    from_zero = json.dumps({topic: {"0": 0}})
    assert offsets(startingOffsets=from_zero, failOnDataLoss="false") == list(range(4, 10))
    with pytest.raises(Exception) as err:
        offsets(startingOffsets=from_zero, failOnDataLoss="true")
    assert "data" in str(err.value).lower() or "offset" in str(err.value).lower(), str(err.value)


def test_streaming_fail_on_data_loss_after_delete_records(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A query has read offsets 0-9; 10-19 are produced, then DeleteRecords moves the
    log start to 15 before the query runs again. failOnDataLoss=false: it goes on
    from 15. failOnDataLoss=true (the default): the query fails, saying data was lost."""
    topic = new_topic(partitions=1)
    base = now_ms() - 60_000
    first = produce(bootstrap, topic, sample_records(base, partitions=1, count=10))
    out, ckpt = tmp_path / "out", tmp_path / "checkpoint"
    source = dict(subscribe=topic, startingOffsets="earliest", includeHeaders="true")
    run_available_now(to_file_sink(kafka_stream(spark, bootstrap, **source), out, ckpt))
    assert [r.offset for r in file_sink_records(spark, out)] == list(range(10))

    second = produce(bootstrap, topic, sample_records(base, partitions=1, count=10, start=10))
    delete_records(bootstrap, topic, {0: 15})

    strict_out, strict_ckpt = tmp_path / "strict-out", tmp_path / "strict-checkpoint"
    shutil.copytree(out, strict_out)
    shutil.copytree(ckpt, strict_ckpt)

    lenient = dict(source, failOnDataLoss="false")
    run_available_now(to_file_sink(kafka_stream(spark, bootstrap, **lenient), out, ckpt))
    actual = file_sink_records(spark, out)
    expected = first + [r for r in second if r.offset >= 15]
    assert actual == expected, diff(expected, actual)

    strict = dict(source, failOnDataLoss="true")
    with pytest.raises(Exception) as err:
        run_available_now(
            to_file_sink(kafka_stream(spark, bootstrap, **strict), strict_out, strict_ckpt)
        )
    assert "lost" in str(err.value).lower(), str(err.value)[:2000]
