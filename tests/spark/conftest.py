"""Fixtures for Spark Structured Streaming against jocko-py through the stock
Kafka connector (spark-sql-kafka-0-10).

Budget: one broker and one SparkSession (local[2], 2 shuffle partitions, no UI)
for the whole test session; every test uses its own uniquely named topics.
`JOCKO_TEST_BOOTSTRAP=host:port` runs these tests against an external broker
(for instance Apache Kafka, to check the tests themselves), as in tests/clients.

All tests here are marked `spark`; they skip (saying why) when PySpark or the
connector jars are missing: `make spark-deps` installs both.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker import BrokerProcess
from tests.support.e2e import TargetBroker, create_topics, unique_suffix
from tests.support.prereq import requires

_SKIP_REASON: str | None = None
if importlib.util.find_spec("pyspark") is None:
    _SKIP_REASON = "PySpark is not installed (make spark-deps)"
else:
    from jocko_py.spark_session import ConnectorJarsMissing, connector_jars

    try:
        connector_jars()
    except ConnectorJarsMissing as e:
        _SKIP_REASON = str(e)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)
            if _SKIP_REASON:
                item.add_marker(requires(False, _SKIP_REASON))


@pytest.fixture(scope="session")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TargetBroker]:
    """The broker under test, shared by every Spark test."""
    t = TargetBroker(tmp_path_factory.mktemp("spark-broker"))
    if type(t.proc) is BrokerProcess:
        # Time retention is checked every second (the failOnDataLoss test relies on it).
        t.proc.overrides["log.retention.check.interval.ms"] = "1000"
    t.start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture(scope="session")
def bootstrap(target: TargetBroker) -> str:
    return target.bootstrap


@pytest.fixture(autouse=True)
def _broker_still_running(target: TargetBroker) -> Iterator[None]:
    yield
    if not target.alive():
        pytest.fail(f"the broker process died during this test; log tail:\n{target.log_tail()}")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, target: TargetBroker) -> Iterator[Any]:
    """One local SparkSession for the whole run, with the connector jars.

    `JOCKO_SPARK_KAFKA_DEBUG=1` logs the Kafka clients at DEBUG (to stderr) to see
    every request the connector sends. Depends on `target` so that the session stops
    (and its cached Kafka producers close) before the broker does."""
    from jocko_py.spark_session import builder, kafka_debug_log4j2

    work = tmp_path_factory.mktemp("spark")
    log4j2 = None
    if os.environ.get("JOCKO_SPARK_KAFKA_DEBUG", "") not in ("", "0"):
        log4j2 = kafka_debug_log4j2(work / "log4j2.properties")
    session = builder(
        "jocko-py-tests",
        conf={
            "spark.sql.warehouse.dir": str(work / "warehouse"),
            "spark.local.dir": str(work / "local"),
            # Keep streaming tests quick: no waiting between triggers, few state files.
            "spark.sql.streaming.minBatchesToRetain": "5",
            "spark.sql.streaming.pollingDelay": "10ms",
        },
        log4j2_config=log4j2,
    ).getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        # Spark keeps its cached Kafka producers (and their reconnect warnings) until
        # the JVM exits, after the brokers stopped: only errors from here on
        session.sparkContext.setLogLevel("ERROR")
        session.stop()


@pytest.fixture
def new_topic(bootstrap: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """`new_topic(partitions=3, suffix="")` creates a uniquely named topic."""

    def make(partitions: int = 3, suffix: str = "") -> str:
        base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:40]
        name = f"spark-{base}-{unique_suffix()}{suffix}"
        create_topics(bootstrap, [name], partitions=partitions)
        return name

    return make
