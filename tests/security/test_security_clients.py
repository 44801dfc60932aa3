"""Real clients (confluent-kafka / librdkafka, kafka-python) over SSL, SASL_PLAINTEXT and
SASL_SSL with PLAIN and SCRAM-SHA-256/512: produce and read back; refused credentials
reach no data; Metadata answers with the connected listener's addresses."""

from __future__ import annotations

import pytest

from tests.security.clients import (
    confluent_conf,
    confluent_round_trip,
    kafka_python_conf,
    kafka_python_round_trip,
)
from tests.security.conftest import PASSWORDS, SecureBroker

EXPECTED = [f"v{i}".encode() for i in range(5)]

SASL_CASES = [
    ("SASL_PLAINTEXT", "PLAIN", "alice"),
    ("SASL_PLAINTEXT", "PLAIN", "admin"),  # a JAAS user_admin user
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "scram256"),
    ("SASL_SSL", "PLAIN", "alice"),
    ("SASL_SSL", "SCRAM-SHA-256", "scram256"),
    ("SASL_SSL", "SCRAM-SHA-512", "scram512"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_confluent_ssl_round_trip(secure_broker: SecureBroker, listener: str) -> None:
    conf = confluent_conf(secure_broker.addr(listener), listener, secure_broker.pki,
                          client_cert=listener == "MTLS")
    assert confluent_round_trip(conf) == EXPECTED


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("listener", "mechanism", "user"), SASL_CASES)
def test_confluent_sasl_round_trip(secure_broker: SecureBroker, listener: str, mechanism: str,
                                   user: str) -> None:
    conf = confluent_conf(secure_broker.addr(listener), listener, secure_broker.pki,
                          mechanism, user, PASSWORDS[user])
    assert confluent_round_trip(conf) == EXPECTED


@pytest.mark.timeout(60)
@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_kafka_python_ssl_round_trip(secure_broker: SecureBroker, listener: str) -> None:
    conf = kafka_python_conf(secure_broker.addr(listener), listener, secure_broker.pki,
                             client_cert=listener == "MTLS")
    assert kafka_python_round_trip(conf) == EXPECTED


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("listener", "mechanism", "user"), SASL_CASES)
def test_kafka_python_sasl_round_trip(secure_broker: SecureBroker, listener: str,
                                      mechanism: str, user: str) -> None:
    conf = kafka_python_conf(secure_broker.addr(listener), listener, secure_broker.pki,
                             mechanism, user, PASSWORDS[user])
    assert kafka_python_round_trip(conf) == EXPECTED


@pytest.mark.timeout(60)
@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL", "SASL_SSL"])
def test_metadata_answers_the_connected_listeners_address(secure_broker: SecureBroker,
                                                          listener: str) -> None:
    from confluent_kafka import Producer

    sasl = ("PLAIN", "alice", PASSWORDS["alice"]) if "SASL" in listener else (None, None, None)
    client = Producer(confluent_conf(secure_broker.addr(listener), listener,
                                     secure_broker.pki, *sasl))
    md = client.list_topics(topic="md-check", timeout=15)
    assert [(b.host, b.port) for b in md.brokers.values()] == [
        ("127.0.0.1", secure_broker.ports[listener])]
