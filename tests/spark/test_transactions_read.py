"""Spark's Kafka source reading transactional data (issue 15).

A confluent-kafka transactional producer writes a committed transaction, an aborted
one (flushed, so its records are in the log) and another committed one. A batch read
with `kafka.isolation.level=read_committed` must return exactly the committed
records (the connector's consumer drops aborted ones using the aborted-transaction
list of each Fetch and skips the markers); the default read_uncommitted read returns
the aborted ones too.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer


def test_read_committed_skips_aborted_transactions(
    spark: Any, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    p = Producer({"bootstrap.servers": bootstrap,
                  "transactional.id": f"spark-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    for tag, commit in (("c1", True), ("ab", False), ("c2", True)):
        p.begin_transaction()
        for i in range(6):
            p.produce(topic, value=f"{tag}-{i}".encode(), partition=i % 2)
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)

    def values(**options: str) -> list[str]:
        reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
            .option("subscribe", topic)
        for k, v in options.items():
            reader = reader.option(k, v)
        return sorted(bytes(r["value"]).decode() for r in reader.load().collect())

    committed = sorted(f"{t}-{i}" for t in ("c1", "c2") for i in range(6))
    assert values(**{"kafka.isolation.level": "read_committed"}) == committed
    assert values() == sorted(committed + [f"ab-{i}" for i in range(6)])
