"""Spark Structured Streaming (the stock Kafka connector) against a three-broker cluster
across a partition leader kill: the file sink's result equals the input.

An RF=3 topic (min.insync.replicas=2) holds the first half of the records; a query
(Kafka source, small micro-batches, parquet file sink with a checkpoint) is running
when the leader of partition 0 is killed with SIGKILL; the second half is produced
during the failover (confluent-kafka, idempotent, acks=all); then the killed broker
is restarted. The query must read on through the new leaders and finish with exactly the
records produced, at the offsets their producer was given, with keys, values,
headers and timestamps. Own SparkSession (local[2]) for this module; skipped like
tests/spark when PySpark or the connector jars are missing (`make spark-deps`).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster_e2e.scenarios import create_topic, wait_back_in_isr
from tests.support.cluster import Cluster
from tests.support.prereq import requires

SKIP_REASON: str | None = None
if importlib.util.find_spec("pyspark") is None:
    SKIP_REASON = "PySpark is not installed (make spark-deps)"
else:
    from jocko_py.spark_session import ConnectorJarsMissing, connector_jars

    try:
        connector_jars()
    except ConnectorJarsMissing as e:
        SKIP_REASON = str(e)

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.spark,
    pytest.mark.timeout(400),
    requires(SKIP_REASON is None, SKIP_REASON or ""),
]

QUERY_TIMEOUT = 180.0
HALF = 300


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory, module_cluster: Cluster) -> Iterator[Any]:
    """A local SparkSession, stopped before the cluster (it depends on it)."""
    from pyspark.sql import SparkSession

    from jocko_py.spark_session import builder

    active = SparkSession.getActiveSession()
    if active is not None:  # another module's session: share it, leave it running
        yield active
        return
    work = tmp_path_factory.mktemp("spark")
    session = builder("jocko-py-cluster-tests", conf={
        "spark.sql.warehouse.dir": str(work / "warehouse"),
        "spark.local.dir": str(work / "local"),
        "spark.sql.streaming.minBatchesToRetain": "5",
        "spark.sql.streaming.pollingDelay": "10ms",
    }).getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        # Spark keeps its cached Kafka producers (and their reconnect warnings) until
        # the JVM exits, after the brokers stopped: only errors from here on
        session.sparkContext.setLogLevel("ERROR")
        session.stop()


def test_file_sink_equals_input_across_a_leader_kill(shared_cluster: Cluster, spark: Any,
                                                      tmp_path: Path) -> None:
    from tests.spark.kafka_io import now_ms, produce
    from tests.spark.records import diff, rows_to_records, sample_records

    c = shared_cluster
    topic = "spark-stream"
    create_topic(c, topic)
    base = now_ms() - 3_600_000
    first = produce(c.bootstrap, topic, sample_records(base, count=HALF), timeout=90)
    out, ckpt = tmp_path / "out", tmp_path / "checkpoint"
    df = (spark.readStream.format("kafka")
          .option("kafka.bootstrap.servers", c.bootstrap)
          .option("subscribe", topic)
          .option("startingOffsets", "earliest")
          .option("includeHeaders", "true")
          .option("maxOffsetsPerTrigger", "60")
          # The driver lists offsets with an AdminClient. A ListOffsets it addressed to
          # the leader just before the leader died, and the broker vanished from the
          # metadata (fenced), waits for that node until the call times out (default
          # 60 s, as against Kafka) before Spark retries: keep that wait short.
          .option("kafka.request.timeout.ms", "5000")
          .option("kafka.default.api.timeout.ms", "10000")
          .load())
    query = (df.selectExpr("key", "value", "partition", "offset", "timestamp",
                           "timestampType", "headers")
             .writeStream.format("parquet")
             .option("path", str(out))
             .option("checkpointLocation", str(ckpt))
             .trigger(processingTime="500 milliseconds")
             .start())

    def sink() -> list[Any]:
        # through the sink's _spark_metadata log: committed batches only
        return rows_to_records(spark.read.parquet(str(out))) if (out / "_spark_metadata").exists() \
            else []

    def wait(what: str, pred: Any) -> None:
        deadline = time.monotonic() + QUERY_TIMEOUT
        while True:
            if query.exception() is not None:
                raise AssertionError(f"query failed ({what}): {query.exception()}")
            if pred():
                return
            assert time.monotonic() < deadline, f"{what}: not in {QUERY_TIMEOUT}s: {query.status}"
            time.sleep(0.3)

    killed = c.partition_state(topic, 0)[0]
    try:
        # a few micro-batches committed, the first half not all read yet
        wait("two micro-batches", lambda: (query.lastProgress or {}).get("batchId", -1) >= 1)
        c.brokers[killed].kill()
        t_kill = time.monotonic()
        second = produce(c.bootstrap, topic, sample_records(base, count=HALF, start=HALF),
                         timeout=90)
        c.brokers[killed].start()
        expected = sorted(first + second, key=lambda r: (r.partition, r.offset))
        wait("every record in the sink", lambda: len(sink()) >= len(expected))
        t_all = time.monotonic()
        wait_back_in_isr(c, killed, {topic: 3})
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    actual = sink()
    assert actual == expected, diff(expected, actual)
    print(f"spark: every record in the sink {t_all - t_kill:.1f}s after the leader kill")
