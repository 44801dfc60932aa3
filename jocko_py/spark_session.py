"""A SparkSession builder that has the Kafka connector on its classpath.

This module owns nothing of the broker: it is a convenience for people who run
Spark Structured Streaming against jocko-py (or any Kafka) from PySpark without
network access to Spark's own `--packages` resolver. `make spark-deps` installs
PySpark (`pip install 'jocko-py[spark]'`) and copies the connector jars
(spark-sql-kafka-0-10, spark-token-provider-kafka-0-10, kafka-clients,
commons-pool2) from Maven Central into `.cache/spark-jars/`; `builder()` puts
them on the driver's and executors' classpath with `spark.jars`.

PySpark is imported lazily so that importing this module never needs it.

    from jocko_py.spark_session import builder
    spark = builder("my-job").getOrCreate()
    df = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "...")
"""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Where `make -C spark jars` puts the connector jars, relative to the repo root.
_REPO_JARS = Path(__file__).resolve().parents[1] / ".cache" / "spark-jars"

#: The jars a Kafka source/sink needs beyond what PySpark ships (prefixes of file names).
REQUIRED_JARS = (
    "spark-sql-kafka-0-10_2.13-",
    "spark-token-provider-kafka-0-10_2.13-",
    "kafka-clients-",
    "commons-pool2-",
)

#: The `--packages` coordinate for people whose Spark can reach Maven Central itself.
PACKAGES_COORDINATE = "org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version}"

# Settings that keep a local session small and quick; callers can override any of them.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.ui.showConsoleProgress": "false",
}


class ConnectorJarsMissing(RuntimeError):
    """The connector jars are not where we looked; `make spark-deps` fetches them."""


def jars_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding the connector jars.

    Order: the argument, `$JOCKO_SPARK_JARS`, `./.cache/spark-jars` under the current
    directory, then the repository's `.cache/spark-jars`.
    """
    if path is not None:
        return Path(path)
    env = os.environ.get("JOCKO_SPARK_JARS")
    if env:
        return Path(env)
    cwd_jars = Path.cwd() / ".cache" / "spark-jars"
    if cwd_jars.is_dir():
        return cwd_jars
    return _REPO_JARS


def connector_jars(path: str | os.PathLike[str] | None = None) -> list[Path]:
    """Absolute paths of the connector jars, one per REQUIRED_JARS prefix.

    Raises ConnectorJarsMissing naming what is absent, so a missing jar fails here
    and not later with a ClassNotFoundException inside a Spark task.
    """
    directory = jars_dir(path)
    found: list[Path] = []
    missing: list[str] = []
    present = sorted(directory.glob("*.jar")) if directory.is_dir() else []
    for prefix in REQUIRED_JARS:
        matches = [p for p in present if p.name.startswith(prefix)]
        if not matches:
            missing.append(prefix + "*.jar")
        else:
            found.append(matches[-1].resolve())
    if missing:
        raise ConnectorJarsMissing(
            f"missing in {directory}: {', '.join(missing)} (run `make spark-deps`)"
        )
    return found


def kafka_debug_log4j2(path: str | os.PathLike[str] | None = None) -> Path:
    """Write a log4j2 configuration that logs the Kafka clients at DEBUG to stderr.

    Pass the result as `builder(kafka_debug=...)`; useful to see every request the
    connector's consumer, admin client and producer send to the broker.
    """
    target = (
        Path(path) if path else Path(tempfile.mkdtemp(prefix="jocko-spark-")) / "log4j2.properties"
    )
    target.write_text(
        "\n".join(
            [
                "rootLogger.level = warn",
                "rootLogger.appenderRef.stderr.ref = console",
                "appender.console.type = Console",
                "appender.console.name = console",
                "appender.console.target = SYSTEM_ERR",
                "appender.console.layout.type = PatternLayout",
                "appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex",
                "logger.kafka.name = org.apache.kafka",
                "logger.kafka.level = debug",
                "logger.sparkkafka.name = org.apache.spark.sql.kafka010",
                "logger.sparkkafka.level = debug",
                "",
            ]
        )
    )
    return target


def builder(
    app_name: str = "jocko-py",
    master: str | None = "local[2]",
    conf: Mapping[str, str] | None = None,
    jars: str | os.PathLike[str] | None = None,
    log4j2_config: str | os.PathLike[str] | None = None,
) -> Any:
    """A `SparkSession.Builder` with the connector jars and small local defaults.

    `master=None` leaves the master to spark-submit / `$MASTER`. `conf` overrides
    LOCAL_DEFAULTS. `log4j2_config` (for instance from `kafka_debug_log4j2()`)
    becomes the driver's log4j2 configuration; in local mode the executors run
    in the driver's JVM, so it covers them too.
    """
    # Lazy, and through importlib so that type-checking this package never needs PySpark.
    spark_sql = importlib.import_module("pyspark.sql")
    b = spark_sql.SparkSession.builder.appName(app_name)
    if master is not None:
        b = b.master(master)
    settings = dict(LOCAL_DEFAULTS)
    if master is not None and master.startswith("local"):
        # A local session talks only to itself: keep it on loopback, whatever the hostname
        # resolves to.
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    settings["spark.jars"] = ",".join(str(p) for p in connector_jars(jars))
    if log4j2_config is not None:
        settings["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile=file:{Path(log4j2_config).resolve()}"
        )
    for key, value in (conf or {}).items():
        if key == "spark.driver.extraJavaOptions" and key in settings:
            value = f"{settings[key]} {value}"
        settings[key] = value
    for key, value in settings.items():
        b = b.config(key, value)
    return b
