"""Structured Streaming through the Kafka connector: a checkpointed source into a
file sink (exactly once across a stop and restart), the Kafka sink (its idempotent
producer) read back by another client, and failOnDataLoss when DeleteRecords has
removed records a query has not read yet.

Every wait is bounded: queries run with `availableNow` and `awaitTermination(t)`,
or are polled with a deadline and then stopped.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.spark.kafka_io import Record, consume_all, delete_records, now_ms, produce
from tests.spark.records import diff, rows_to_records, sample_records
from tests.support.e2e import unique_suffix
from tests.support.prereq import not_applicable

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
    # The restart takes bigger steps (3 micro-batches); where it starts is the checkpoint's.
    source["maxOffsetsPerTrigger"] = "30"
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
        # The kafka-clients defaults, spelled out: the sink's producer is idempotent
        # (InitProducerId, then sequence numbers in every batch) and waits for acks=all.
        .option("kafka.enable.idempotence", "true")
        .option("kafka.acks", "all")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    run_available_now(writer)

    got = consume_all(bootstrap, dst, [0, 1, 2])
    for p in range(3):
        want = [(r.key, r.value, r.headers) for r in produced if r.partition == p]
        have = [(r.key, r.value, r.headers) for r in got[p]]
        assert have == want, f"partition {p}: {len(have)} records, expected {len(want)}"
    _assert_idempotent_batches(bootstrap, dst, 3)


def _assert_idempotent_batches(bootstrap: str, topic: str, partitions: int) -> None:
    """On the broker side: every stored batch carries a producer id and epoch, and each
    producer's sequence numbers run on from 0 without gaps, per partition (Spark may
    use more than one cached producer, each with its own id)."""
    from jocko_py.client import Client
    from jocko_py.protocol import records as rb

    with Client(bootstrap) as c:
        for p in range(partitions):
            offset, next_seq, hw = 0, {}, -1
            while True:
                resp = c.fetch(topic, p, offset, max_wait_ms=0)
                hw = int(resp.high_watermark)
                buf = bytes(resp.records or b"")
                batches = list(rb.iter_batches(buf, validate_crc=True, allow_partial_tail=True))
                if not batches:
                    break
                for _, h in batches:
                    assert h.producer_id >= 0 and h.producer_epoch >= 0, h
                    want = next_seq.get(h.producer_id, 0)
                    assert h.base_sequence == want, f"partition {p}: {h}, expected seq {want}"
                    next_seq[h.producer_id] = want + h.last_offset_delta + 1
                    offset = h.base_offset + h.last_offset_delta + 1
            assert offset == hw > 0, (p, offset, hw)
            assert sum(next_seq.values()) == offset


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


def _create_topic_with_configs(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics(
            [NewTopic(name, num_partitions=1, replication_factor=1, topic_configs=configs)],
            timeout_ms=30_000,
        )
    finally:
        admin.close()


def _alter_topic_configs(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=configs)])
    finally:
        admin.close()


def _wait_log_start(bootstrap: str, topic: str, at_least: int, timeout: float = 30.0) -> int:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        deadline = time.monotonic() + timeout
        while True:
            start = consumer.beginning_offsets([tp])[tp]
            if start >= at_least:
                return int(start)
            assert time.monotonic() < deadline, f"log start offset still {start} after {timeout}s"
            time.sleep(0.5)
    finally:
        consumer.close()


DAY_MS = 86_400_000


@pytest.mark.parametrize("removed_by", ["delete_records", "retention"])
def test_streaming_fail_on_data_loss(
    spark: Any,
    bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    target: Any,
    removed_by: str,
) -> None:
    """A query has read offsets 0-9; 10-24 are produced, then records the query has
    not read are removed before it runs again: DeleteRecords up to 20, or time
    retention, which removes the segments holding only records two days old (10-19
    are, 20-24 are new; segments are small, so the new log start offset L is in
    (10, 20]). failOnDataLoss=false: the query goes on from the new log start
    offset. failOnDataLoss=true (the default): it fails, saying data was lost."""
    old = now_ms() - 2 * DAY_MS
    if removed_by == "delete_records":
        topic = new_topic(partitions=1)
    else:
        if target.kind == "external" and not os.environ.get("JOCKO_TEST_FAST_RETENTION"):
            not_applicable("an external broker; set JOCKO_TEST_FAST_RETENTION=1 if the broker checks retention often")
        topic = f"spark-retention-{unique_suffix()}"
        # Segments of a few records each, and nothing old enough to go yet.
        segment = {"segment.bytes": "1024", "retention.ms": str(7 * DAY_MS)}
        _create_topic_with_configs(bootstrap, topic, segment)
    first = produce(bootstrap, topic, sample_records(old, partitions=1, count=10))
    out, ckpt = tmp_path / "out", tmp_path / "checkpoint"
    source = dict(subscribe=topic, startingOffsets="earliest", includeHeaders="true")
    run_available_now(to_file_sink(kafka_stream(spark, bootstrap, **source), out, ckpt))
    assert [r.offset for r in file_sink_records(spark, out)] == list(range(10))

    one_each = removed_by == "retention"
    second = produce(
        bootstrap,
        topic,
        sample_records(old, partitions=1, count=10, start=10),
        batch_per_record=one_each,
    )
    third = produce(
        bootstrap,
        topic,
        sample_records(now_ms(), partitions=1, count=5, start=20),
        batch_per_record=one_each,
    )
    if removed_by == "delete_records":
        delete_records(bootstrap, topic, {0: 20})
        log_start = _wait_log_start(bootstrap, topic, 20)
        assert log_start == 20
    else:
        _alter_topic_configs(bootstrap, topic, dict(segment, **{"retention.ms": str(DAY_MS)}))
        log_start = _wait_log_start(bootstrap, topic, 11)
        assert log_start <= 20, f"retention removed a segment with new records ({log_start})"

    strict_out, strict_ckpt = tmp_path / "strict-out", tmp_path / "strict-checkpoint"
    shutil.copytree(out, strict_out)
    shutil.copytree(ckpt, strict_ckpt)

    lenient = dict(source, failOnDataLoss="false")
    run_available_now(to_file_sink(kafka_stream(spark, bootstrap, **lenient), out, ckpt))
    actual = file_sink_records(spark, out)
    expected = first + [r for r in second + third if r.offset >= log_start]
    assert actual == expected, diff(expected, actual)

    strict = dict(source, failOnDataLoss="true")
    with pytest.raises(Exception) as err:
        run_available_now(
            to_file_sink(kafka_stream(spark, bootstrap, **strict), strict_out, strict_ckpt)
        )
    assert "lost" in str(err.value).lower(), str(err.value)[:2000]


def _create_partitions(bootstrap: str, topic: str, total: int) -> None:
    from kafka.admin import KafkaAdminClient, NewPartitions

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_partitions({topic: NewPartitions(total_count=total)}, timeout_ms=30_000)
    finally:
        admin.close()


def test_running_query_picks_up_new_topics_and_partitions(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A running subscribePattern query sees a topic created later that matches the
    pattern, and a partition added to a topic it reads (CreatePartitions), and reads
    both from offset 0: every record lands once, and no data loss is reported."""
    a = new_topic(partitions=2, suffix="-a")
    prefix = a[: -len("-a")]
    base = now_ms() - 60_000
    produced = produce(bootstrap, a, sample_records(base, partitions=2, count=10))
    out, ckpt = tmp_path / "out", tmp_path / "checkpoint"
    source = dict(
        subscribePattern=prefix + "-.*", startingOffsets="earliest", includeHeaders="true"
    )
    query = (
        kafka_stream(spark, bootstrap, **source)
        .selectExpr("topic", "partition", "offset", "key", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="1 second")
        .start()
    )

    def landed() -> list[tuple[str, int, int]]:
        if not (out / "_spark_metadata").exists():
            return []
        schema = "topic STRING, partition INT, offset LONG, key BINARY, value BINARY"
        rows = spark.read.schema(schema).parquet(str(out)).collect()
        return sorted((r["topic"], r["partition"], r["offset"]) for r in rows)

    def wait_for(want: list[tuple[str, int, int]]) -> None:
        deadline = time.monotonic() + QUERY_TIMEOUT
        while True:
            if query.exception() is not None:
                raise AssertionError(f"query failed: {query.exception()}")
            got = landed()
            if len(got) >= len(want):
                assert got == want
                return
            assert time.monotonic() < deadline, f"{len(got)} of {len(want)} records landed"
            time.sleep(0.5)

    try:
        want = sorted((a, r.partition, r.offset) for r in produced)
        wait_for(want)

        b = prefix + "-b"
        _create_topic_with_configs(bootstrap, b, {})
        _create_partitions(bootstrap, a, 3)
        more_a = produce(
            bootstrap, a, [r for r in sample_records(base, partitions=3, count=9, start=30)]
        )
        more_b = produce(bootstrap, b, sample_records(base, partitions=1, count=4, start=50))
        assert any(r.partition == 2 for r in more_a)
        want = sorted(want + [(a, r.partition, r.offset) for r in more_a])
        want = sorted(want + [(b, r.partition, r.offset) for r in more_b])
        wait_for(want)
    finally:
        query.stop()


def test_running_query_survives_broker_restart(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, target: Any
) -> None:
    """The broker is stopped gracefully and started again (same port and data) while a
    query reads: the connector's consumers reconnect, and every record, produced
    before or after the restart, lands in the file sink once."""
    if not target.can_restart:
        not_applicable("external broker (JOCKO_TEST_BOOTSTRAP): the test cannot restart it")
    topic = new_topic(partitions=3)
    base = now_ms() - 60_000
    before = produce(bootstrap, topic, sample_records(base, count=300))
    out, ckpt = tmp_path / "out", tmp_path / "checkpoint"
    query = (
        kafka_stream(
            spark,
            bootstrap,
            subscribe=topic,
            startingOffsets="earliest",
            maxOffsetsPerTrigger="100",
        )
        .selectExpr("partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    schema = "partition INT, offset LONG"

    def landed() -> list[tuple[int, int]]:
        if not (out / "_spark_metadata").exists():
            return []
        rows = spark.read.schema(schema).parquet(str(out)).collect()
        return sorted((r["partition"], r["offset"]) for r in rows)

    try:
        deadline = time.monotonic() + QUERY_TIMEOUT
        while (query.lastProgress or {}).get("batchId", -1) < 1:
            assert query.exception() is None, str(query.exception())
            assert time.monotonic() < deadline, f"no progress: {query.status}"
            time.sleep(0.2)
        target.restart()
        after = produce(bootstrap, topic, sample_records(now_ms(), count=30, start=300))
        want = sorted((r.partition, r.offset) for r in before + after)
        deadline = time.monotonic() + QUERY_TIMEOUT
        while len(got := landed()) < len(want):
            assert query.exception() is None, str(query.exception())
            assert time.monotonic() < deadline, f"{len(got)} of {len(want)} records landed"
            time.sleep(0.5)
        assert got == want
    finally:
        query.stop()
