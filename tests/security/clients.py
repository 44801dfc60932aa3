"""Client configurations for the security tests (confluent-kafka and kafka-python),
and one produce-then-read round trip per client."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.security.certs import TestPki

LISTENER_PROTOCOL = {"SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
                     "SASL_SSL": "SASL_SSL", "PLAINTEXT": "PLAINTEXT"}


def confluent_conf(addr: str, listener: str, pki: TestPki, mechanism: str | None = None,
                   user: str | None = None, password: str | None = None,
                   client_cert: bool = False, **extra: Any) -> dict[str, Any]:
    proto = LISTENER_PROTOCOL[listener]
    c: dict[str, Any] = {"bootstrap.servers": addr, "security.protocol": proto,
                         "socket.timeout.ms": 10000, "message.timeout.ms": 15000,
                         "reconnect.backoff.max.ms": 1000}
    if "SSL" in proto:
        c["ssl.ca.location"] = str(pki.ca.cert)
        if client_cert:
            c["ssl.certificate.location"] = str(pki.client.cert)
            c["ssl.key.location"] = str(pki.client.key)
    if mechanism:
        c.update({"sasl.mechanism": mechanism, "sasl.username": user,
                  "sasl.password": password})
    c.update(extra)
    return c


def kafka_python_conf(addr: str, listener: str, pki: TestPki, mechanism: str | None = None,
                      user: str | None = None, password: str | None = None,
                      client_cert: bool = False) -> dict[str, Any]:
    proto = LISTENER_PROTOCOL[listener]
    c: dict[str, Any] = {"bootstrap_servers": addr, "security_protocol": proto,
                         "request_timeout_ms": 15000}
    if "SSL" in proto:
        c["ssl_cafile"] = str(pki.ca.cert)
        if client_cert:
            c["ssl_certfile"] = str(pki.client.cert)
            c["ssl_keyfile"] = str(pki.client.key)
    if mechanism:
        c.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                  "sasl_plain_password": password})
    return c


def confluent_round_trip(conf: dict[str, Any], n: int = 5) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic = f"sec-{uuid.uuid4().hex[:10]}"
    p = Producer(conf)
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), key=b"k")
    left = p.flush(20)
    assert left == 0, f"{left} records not delivered"
    c = Consumer(dict(conf, **{"group.id": "g-" + topic, "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        c.close()


def kafka_python_round_trip(conf: dict[str, Any], n: int = 5) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"sec-{uuid.uuid4().hex[:10]}"
    p = KafkaProducer(**conf)
    try:
        futs = [p.send(topic, value=f"v{i}".encode(), key=b"k", partition=0) for i in range(n)]
        for f in futs:
            f.get(timeout=20)
    finally:
        p.close(timeout=5)
    c = KafkaConsumer(**conf, enable_auto_commit=False, consumer_timeout_ms=500)
    try:
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=500).values():
                got.extend(r.value for r in batch)
        return got
    finally:
        c.close()
