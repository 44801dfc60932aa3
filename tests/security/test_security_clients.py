"""Real clients (confluent-kafka / librdkafka, kafka-python) over SSL, SASL_PLAINTEXT and
SASL_SSL with PLAIN and SCRAM-SHA-256/512: produce and read back; refused credentials
reach no data; Metadata answers with the connected listener's addresses."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.clients import (
    confluent_conf,
    confluent_round_trip,
    kafka_python_conf,
    kafka_python_round_trip,
)
from tests.security.conftest import PASSWORDS, SecureBroker
from tests.support.broker import REPO
from tests.support.prereq import requires

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


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), [
    ("SASL_PLAINTEXT", "PLAIN", "alice", "wrong"),
    ("SASL_SSL", "SCRAM-SHA-256", "nobody", "x"),  # unknown user
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "scram512", PASSWORDS["scram512"]),  # not enabled
])
def test_confluent_refused_credentials_reach_no_data(
        secure_broker: SecureBroker, listener: str, mechanism: str, user: str,
        password: str) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    conf = confluent_conf(secure_broker.addr(listener), listener, secure_broker.pki,
                          mechanism, user, password, error_cb=errors.append,
                          **{"message.timeout.ms": 1000})
    p = Producer(conf)
    delivered: list[object] = []
    p.produce("never-created", b"x", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(10)
    assert delivered and delivered[0] is not None  # a delivery error, never a success
    assert any(e.code() in (KafkaError._AUTHENTICATION, KafkaError._ALL_BROKERS_DOWN,
                            KafkaError._TRANSPORT) for e in errors), errors
    admin = confluent_conf(secure_broker.addr("PLAINTEXT"), "PLAINTEXT", secure_broker.pki)
    md = Producer(admin).list_topics(topic="never-created-probe", timeout=10)
    assert "never-created" not in md.topics


@pytest.mark.timeout(60)
def test_kafka_python_wrong_password_is_refused(secure_broker: SecureBroker) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    conf = kafka_python_conf(secure_broker.addr("SASL_SSL"), "SASL_SSL", secure_broker.pki,
                             "SCRAM-SHA-256", "scram256", "wrong")
    with pytest.raises(KafkaError):
        p = KafkaProducer(**dict(conf, request_timeout_ms=3000, max_block_ms=3000,
                                 bootstrap_timeout_ms=1500))
        try:
            p.send("never-created-2", b"x").get(timeout=5)
        finally:
            p.close(timeout=2)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jocko_py.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=REPO)


@pytest.mark.timeout(90)
def test_cli_user_commands_over_sasl_ssl(secure_broker: SecureBroker, tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="scram512" password="{PASSWORDS["scram512"]}";\n'
        f"ssl.truststore.location={secure_broker.pki.ca.cert}\n")
    common = ["--bootstrap-server", secure_broker.addr("SASL_SSL"), "--command-config",
              str(props)]
    r = _cli("user", "add", "carol", "--mechanism", "SCRAM-SHA-256", "--password", "carol-pw",
             *common)
    assert r.returncode == 0, r.stderr
    r = _cli("user", "list", *common)
    assert "carol: SCRAM-SHA-256=[iterations=4096]" in r.stdout, r.stdout + r.stderr
    conf = confluent_conf(secure_broker.addr("SASL_SSL"), "SASL_SSL", secure_broker.pki,
                          "SCRAM-SHA-256", "carol", "carol-pw")
    assert confluent_round_trip(conf, n=2) == EXPECTED[:2]
    r = _cli("topic", "list", *common)  # any client command takes --command-config
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    r = _cli("user", "remove", "carol", "--mechanism", "SCRAM-SHA-256", *common)
    assert r.returncode == 0, r.stderr
    r = _cli("user", "list", "carol", *common)
    assert r.returncode == 1 and "RESOURCE_NOT_FOUND" in r.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    r = _cli("user", "list", "--bootstrap-server", secure_broker.addr("SASL_SSL"),
             "--command-config", str(bad))
    assert r.returncode == 1 and "GSSAPI is not supported" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("listener", "mechanism", "user"), [
    ("SSL", None, None), ("SASL_PLAINTEXT", "SCRAM-SHA-256", "scram256"),
    ("SASL_SSL", "PLAIN", "alice"), ("SASL_SSL", "SCRAM-SHA-512", "scram512")])
def test_aiokafka_round_trip(secure_broker: SecureBroker, listener: str,
                             mechanism: str | None, user: str | None) -> None:
    import asyncio
    import ssl
    import uuid

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        conf: dict[str, object] = {"bootstrap_servers": secure_broker.addr(listener),
                                   "security_protocol": listener, "request_timeout_ms": 15000}
        if "SSL" in listener:
            conf["ssl_context"] = ssl.create_default_context(
                cafile=str(secure_broker.pki.ca.cert))
        if mechanism:
            conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                        sasl_plain_password=PASSWORDS[str(user)])
        topic = f"sec-aio-{uuid.uuid4().hex[:8]}"
        p = AIOKafkaProducer(**conf)
        await p.start()
        try:
            for i in range(5):
                await p.send_and_wait(topic, f"v{i}".encode(), partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(**conf, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got: list[bytes] = []
            async with asyncio.timeout(20):
                while len(got) < 5:
                    for recs in (await c.getmany(timeout_ms=500)).values():
                        got.extend(r.value for r in recs)
            return got
        finally:
            await c.stop()

    assert asyncio.run(run()) == EXPECTED


@pytest.mark.timeout(60)
@requires(shutil.which("kcat") is not None, "kcat not installed")
@pytest.mark.parametrize(("listener", "mechanism", "user"), [
    ("MTLS", None, None), ("SASL_SSL", "SCRAM-SHA-256", "scram256")])
def test_kcat_round_trip(secure_broker: SecureBroker, listener: str, mechanism: str | None,
                         user: str | None) -> None:
    import uuid

    pki = secure_broker.pki
    conf = ["-X", f"security.protocol={'SSL' if listener == 'MTLS' else listener}",
            "-X", f"ssl.ca.location={pki.ca.cert}"]
    if listener == "MTLS":
        conf += ["-X", f"ssl.certificate.location={pki.client.cert}",
                 "-X", f"ssl.key.location={pki.client.key}"]
    if mechanism:
        conf += ["-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
                 "-X", f"sasl.password={PASSWORDS[str(user)]}"]
    topic = f"sec-kcat-{uuid.uuid4().hex[:8]}"
    base = ["kcat", "-b", secure_broker.addr(listener), *conf, "-t", topic]
    p = subprocess.run([*base, "-P", "-p", "0"], input="v0\nv1\nv2\n", text=True,
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    c = subprocess.run([*base, "-C", "-p", "0", "-o", "beginning", "-e", "-q"], text=True,
                       capture_output=True, timeout=30)
    assert c.returncode == 0 and c.stdout.split() == ["v0", "v1", "v2"], c.stderr
