"""confluent-kafka's `ShareConsumer` (librdkafka's KIP-932 share consumer) against Apache
Kafka 4.4.0 and jocko-py (issue 24): two consumers of one share group in explicit
acknowledgement mode, polled in turn, accept, release ("r1-": the first delivery) or
reject ("rj-") each record by its value; every record ends acknowledged exactly as chosen.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Any

import pytest

from tests.share.harness import ShareBroker, create_topic, produce_values, set_group_config

ck = pytest.importorskip("confluent_kafka")
pytestmark = [pytest.mark.clients, pytest.mark.timeout(300)]
N = 200


def _action(value: str, count: int) -> Any:
    if value.startswith("rj-"):
        return ck.AcknowledgeType.REJECT
    if value.startswith("r1-") and count <= 1:
        return ck.AcknowledgeType.RELEASE
    return ck.AcknowledgeType.ACCEPT


def test_confluent_share_consumers_accept_release_reject(share_broker: ShareBroker) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"ck-share-{tag}", f"ck-sg-{tag}"
    values = [("r1" if i % 10 == 3 else "rj" if i % 10 == 7 else "a") + f"-{i}"
              for i in range(N)]
    create_topic(share_broker.bootstrap, topic)
    set_group_config(share_broker.bootstrap, group, {
        "share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "3000"})
    produce_values(share_broker.bootstrap, topic, values)
    conf = {"bootstrap.servers": share_broker.bootstrap, "group.id": group,
            "share.acknowledgement.mode": "explicit"}
    consumers = [ck.ShareConsumer(dict(conf, **{"client.id": f"ck{i}"})) for i in range(2)]
    seen: dict[int, list[tuple[int, str, str]]] = defaultdict(list)  # offset -> deliveries
    done: set[int] = set()  # offsets acknowledged to the end (accept/reject) and committed
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 120
        while len(done) < N and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                batch = c.poll(0.5)
                final: list[int] = []
                for m in batch:
                    assert m.error() is None, m.error()
                    v = m.value().decode()
                    a = _action(v, m.delivery_count())
                    c.acknowledge(m, a)
                    seen[m.offset()].append((m.delivery_count(), a.name, f"ck{i}"))
                    if a != ck.AcknowledgeType.RELEASE:
                        final.append(m.offset())
                if len(batch):
                    res = c.commit_sync(30)
                    assert all(e is None for e in res.values()), res
                    done.update(final)
        time.sleep(4.0)  # past the lock duration: nothing acknowledged may come back
        for c in consumers:
            for m in c.poll(0.5):
                seen[m.offset()].append((m.delivery_count(), "late", "?"))
                c.acknowledge(m, ck.AcknowledgeType.RELEASE)
    finally:
        for c in consumers:
            c.close()
    assert done == set(range(N)), f"not acknowledged: {sorted(set(range(N)) - done)[:20]}"
    for off, v in enumerate(values):
        got = [(cnt, act) for cnt, act, _ in seen[off]]
        if v.startswith("r1-"):
            assert got == [(1, "RELEASE"), (2, "ACCEPT")], (v, seen[off])
        elif v.startswith("rj-"):
            assert got == [(1, "REJECT")], (v, seen[off])
        else:
            assert got == [(1, "ACCEPT")], (v, seen[off])
    per = {f"ck{i}": sum(1 for d in seen.values() for x in d if x[2] == f"ck{i}")
           for i in range(2)}
    print(f"deliveries per consumer: {per}")
