"""Batch reads (`spark.read.format("kafka")`) of records produced by another client.

What the connector asks of the broker here: Metadata (topic and partition
discovery, through both the consumer and the Admin client), ListOffsets by
earliest/latest, by timestamp and with isolation level read_committed, Fetch
from arbitrary offsets, and record batches with headers and timestamps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.spark.kafka_io import Record, consume_all, now_ms, produce
from tests.spark.records import diff, rows_to_records, sample_records


def kafka_read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_every_field_as_produced(spark: Any, bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=3)
    produced = produce(bootstrap, topic, sample_records(now_ms() - 3_600_000, count=30))

    df = kafka_read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert df.schema.fieldNames() == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert {r["topic"] for r in df.select("topic").collect()} == {topic}
    actual = rows_to_records(df)
    expected = sorted(produced, key=lambda r: (r.partition, r.offset))
    assert actual == expected, diff(expected, actual)


def test_offset_ranges_as_json(spark: Any, bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=3)
    produced = produce(bootstrap, topic, sample_records(now_ms() - 3_600_000, count=30))
    per_p = {p: [r for r in produced if r.partition == p] for p in range(3)}
    # -2 is earliest and -1 latest, as in the connector's documentation.
    starting = {topic: {"0": 2, "1": -2, "2": 5}}
    ending = {topic: {"0": 6, "1": 3, "2": -1}}
    df = kafka_read(
        spark,
        bootstrap,
        subscribe=topic,
        includeHeaders="true",
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    )
    actual = rows_to_records(df)
    expected = (
        [r for r in per_p[0] if 2 <= r.offset < 6]
        + [r for r in per_p[1] if r.offset < 3]
        + [r for r in per_p[2] if r.offset >= 5]
    )
    assert actual == expected, diff(expected, actual)


def _first_at_or_after(records: list[Record], ts: int) -> int | None:
    """Kafka's ListOffsets by timestamp: the earliest offset whose timestamp >= ts."""
    offsets = [r.offset for r in records if r.timestamp_ms >= ts]
    return min(offsets) if offsets else None


def test_offset_ranges_by_timestamp(
    spark: Any, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=3)
    base = now_ms() - 3_600_000
    produced = produce(bootstrap, topic, sample_records(base, count=30))
    per_p = {p: [r for r in produced if r.partition == p] for p in range(3)}

    # Per partition: a timestamp between two records, one equal to a record's, and
    # for ending, one after every record (the connector then reads to the end).
    start_ts = {0: base + 4_500, 1: base + 7_000, 2: base - 10_000}
    end_ts = {0: base + 20_000, 1: base + 22_500, 2: base + 10_000_000}
    df = kafka_read(
        spark,
        bootstrap,
        subscribe=topic,
        includeHeaders="true",
        startingOffsetsByTimestamp=json.dumps({topic: {str(p): t for p, t in start_ts.items()}}),
        endingOffsetsByTimestamp=json.dumps({topic: {str(p): t for p, t in end_ts.items()}}),
    )
    actual = rows_to_records(df)
    expected: list[Record] = []
    for p in range(3):
        lo = _first_at_or_after(per_p[p], start_ts[p])
        hi = _first_at_or_after(per_p[p], end_ts[p])
        assert lo is not None
        expected += [r for r in per_p[p] if r.offset >= lo and (hi is None or r.offset < hi)]
    assert actual == expected, diff(expected, actual)

    # The global form: one starting timestamp for every partition.
    t = base + 15_000
    df = kafka_read(spark, bootstrap, subscribe=topic, startingTimestamp=str(t))
    got = {(r.partition, r.offset) for r in rows_to_records(df, with_headers=False)}
    assert got == {(r.partition, r.offset) for r in produced if r.timestamp_ms >= t}

    # A starting timestamp after every record matches no offset (ListOffsets answers
    # offset -1): an error by default, the latest offset with the "latest" strategy.
    after_all = str(base + 10_000_000)
    df = kafka_read(
        spark,
        bootstrap,
        subscribe=topic,
        startingTimestamp=after_all,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert df.count() == 0
    with pytest.raises(Exception) as err:
        kafka_read(spark, bootstrap, subscribe=topic, startingTimestamp=after_all).count()
    assert "timestamp" in str(err.value).lower(), str(err.value)[:2000]


def test_read_committed_sees_every_non_transactional_record(
    spark: Any, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """ListOffsets with isolation level read_committed (the last stable offset) and
    Fetch with isolation level 1: without transactions, that is everything."""
    topic = new_topic(partitions=2)
    produced = produce(bootstrap, topic, sample_records(now_ms() - 60_000, partitions=2, count=12))
    df = kafka_read(
        spark,
        bootstrap,
        subscribe=topic,
        includeHeaders="true",
        **{"kafka.isolation.level": "read_committed"},
    )
    actual = rows_to_records(df)
    expected = sorted(produced, key=lambda r: (r.partition, r.offset))
    assert actual == expected, diff(expected, actual)


def test_subscribe_pattern_and_assign(
    spark: Any, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    a = new_topic(partitions=2, suffix="-pa")
    b = new_topic(partitions=1, suffix="-pb")
    other = new_topic(partitions=1, suffix="-other")
    base = now_ms() - 60_000
    pa = produce(bootstrap, a, sample_records(base, partitions=2, count=6))
    pb = produce(bootstrap, b, sample_records(base, partitions=1, count=4))
    produce(bootstrap, other, sample_records(base, partitions=1, count=3))

    pattern = f"({a}|{b})"
    df = kafka_read(spark, bootstrap, subscribePattern=pattern)
    got = sorted((r["topic"], r["partition"], r["offset"]) for r in df.collect())
    want = sorted(
        [(a, r.partition, r.offset) for r in pa] + [(b, r.partition, r.offset) for r in pb]
    )
    assert got == want

    # A regex that matches by prefix, as people use subscribePattern.
    df = kafka_read(spark, bootstrap, subscribePattern=a.rsplit("-", 1)[0] + "-p.*")
    assert {r["topic"] for r in df.select("topic").collect()} == {a}

    df = kafka_read(spark, bootstrap, assign=json.dumps({a: [1], b: [0]}))
    got = sorted((r["topic"], r["partition"], r["offset"]) for r in df.collect())
    want = sorted(
        [(a, r.partition, r.offset) for r in pa if r.partition == 1]
        + [(b, r.partition, r.offset) for r in pb]
    )
    assert got == want


def test_min_partitions_splits_offset_ranges(
    spark: Any, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    produced = produce(bootstrap, topic, sample_records(now_ms() - 60_000, partitions=2, count=40))
    df = kafka_read(spark, bootstrap, subscribe=topic, minPartitions="6", includeHeaders="true")
    assert df.rdd.getNumPartitions() >= 6
    actual = rows_to_records(df)
    expected = sorted(produced, key=lambda r: (r.partition, r.offset))
    assert actual == expected, diff(expected, actual)


def test_consumer_based_offset_fetching(
    spark: Any, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """`spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true`: the driver finds
    offsets with a KafkaConsumer that subscribes (so joins a consumer group) instead of
    the Admin client. Still supported by Spark, and some deployments set it."""
    topic = new_topic(partitions=2)
    produced = produce(bootstrap, topic, sample_records(now_ms() - 60_000, partitions=2, count=16))
    key = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
    spark.conf.set(key, "true")
    try:
        df = kafka_read(spark, bootstrap, subscribe=topic, includeHeaders="true")
        actual = rows_to_records(df)
        later = kafka_read(
            spark, bootstrap, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 3, "1": 5}})
        )
        later_positions = sorted((r["partition"], r["offset"]) for r in later.collect())
    finally:
        spark.conf.unset(key)
    expected = sorted(produced, key=lambda r: (r.partition, r.offset))
    assert actual == expected, diff(expected, actual)
    assert later_positions == sorted(
        (r.partition, r.offset) for r in produced if r.offset >= (3, 5)[r.partition]
    )


CODECS = ("gzip", "snappy", "lz4", "zstd")


def test_compressed_batches_both_ways(
    spark: Any, bootstrap: str, new_topic: Callable[..., str], tmp_path: Any
) -> None:
    """Spark reads batches compressed by librdkafka with each codec (one per
    partition), and writes with each codec for kafka-python to read back."""
    topic = new_topic(partitions=len(CODECS))
    base = now_ms() - 60_000
    produced: list[Record] = []
    for p, codec in enumerate(CODECS):
        records = [
            Record(p, r.key, r.value, r.headers, r.timestamp_ms)
            for r in sample_records(base, partitions=1, count=12, start=12 * p)
        ]
        produced += produce(bootstrap, topic, records, compression=codec)
    actual = rows_to_records(kafka_read(spark, bootstrap, subscribe=topic, includeHeaders="true"))
    expected = sorted(produced, key=lambda r: (r.partition, r.offset))
    assert actual == expected, diff(expected, actual)

    out = new_topic(partitions=len(CODECS), suffix="-out")
    source = kafka_read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    for p, codec in enumerate(CODECS):
        (
            source.where(f"partition = {p}")
            .selectExpr("key", "value", "headers", "partition")
            .coalesce(1)
            .sortWithinPartitions("offset")
            .write.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.compression.type", codec)
            .option("topic", out)
            .save()
        )
    got = consume_all(bootstrap, out, list(range(len(CODECS))))
    for p in range(len(CODECS)):
        want = [(r.key, r.value, r.headers) for r in expected if r.partition == p]
        assert [(r.key, r.value, r.headers) for r in got[p]] == want, f"partition {p}"
