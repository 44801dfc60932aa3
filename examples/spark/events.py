"""Sample events for the Spark example: what a small web shop might send to Kafka.

Each event is a JSON object keyed by user:

    {"event_id": 17, "user": "bob", "kind": "purchase", "amount_cents": 2599,
     "event_time": "2026-11-22T01:05:07.250Z"}

Events arrive a little out of order (up to `max_disorder_ms` behind the newest),
as they do when many clients send them. The Kafka record timestamp of each event
is its event time, so a batch job can select a time range by timestamp.

Producing uses confluent-kafka, as an application outside Spark would.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

USERS = ("ada", "bob", "cy", "dee", "eve")
KINDS = ("view", "click", "purchase")


@dataclass(frozen=True)
class Event:
    event_id: int
    user: str
    kind: str
    amount_cents: int
    event_time_ms: int

    def to_json(self) -> bytes:
        t = datetime.fromtimestamp(self.event_time_ms / 1000, tz=UTC)
        return json.dumps(
            {
                "event_id": self.event_id,
                "user": self.user,
                "kind": self.kind,
                "amount_cents": self.amount_cents,
                "event_time": t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z",
            }
        ).encode()


def generate(
    count: int,
    start_ms: int,
    seed: int = 7,
    first_id: int = 0,
    step_ms: int = 6_000,
    max_disorder_ms: int = 90_000,
) -> list[Event]:
    """`count` events about `step_ms` apart from `start_ms`, each up to
    `max_disorder_ms` earlier than its place in the sequence."""
    rng = random.Random(seed * 1_000_003 + first_id)
    events = []
    for i in range(count):
        kind = rng.choices(KINDS, weights=(6, 3, 1))[0]
        events.append(
            Event(
                event_id=first_id + i,
                user=rng.choice(USERS),
                kind=kind,
                amount_cents=rng.randrange(100, 10_000) if kind == "purchase" else 0,
                event_time_ms=start_ms + (first_id + i) * step_ms - rng.randrange(max_disorder_ms),
            )
        )
    return events


def ensure_topics(bootstrap: str, names: Iterable[str], partitions: int = 3) -> None:
    """Create the topics if they do not exist yet (CreateTopics through the Admin API)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names],
        operation_timeout=30,
        request_timeout=30,
    )
    for name, fut in futures.items():
        try:
            fut.result(timeout=60)
        except KafkaException as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise RuntimeError(f"create topic {name}: {e}") from e


def produce(
    bootstrap: str,
    topic: str,
    events: Sequence[Event],
    raw: Sequence[bytes] = (),
    timeout: float = 60,
) -> dict[int, tuple[int, int]]:
    """Produce events (key = user, timestamp = event time) and then `raw` values
    as they are (for instance a malformed one), waiting for every acknowledgement.
    Returns where each record landed: event_id -> (partition, offset), and for
    the i-th raw value -1 - i -> (partition, offset)."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    )
    failures: list[str] = []
    placed: dict[int, tuple[int, int]] = {}

    def on_delivery(err: Any, msg: Any, event_id: int) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            placed[event_id] = (msg.partition(), msg.offset())

    for e in events:
        producer.produce(
            topic,
            key=e.user.encode(),
            value=e.to_json(),
            timestamp=e.event_time_ms,
            on_delivery=lambda err, msg, i=e.event_id: on_delivery(err, msg, i),
        )
        producer.poll(0)
    for n, value in enumerate(raw):
        producer.produce(
            topic, value=value, on_delivery=lambda err, msg, i=-1 - n: on_delivery(err, msg, i)
        )
    left = producer.flush(timeout)
    if left or failures:
        raise RuntimeError(f"produce to {topic}: {left} undelivered, failures {failures[:3]}")
    return placed
