"""The Java client (kafka-clients 4.4.0, the jars `make java-deps` fetches) over SSL with a
PEM truststore and client keystore, and SASL_SSL / SASL_PLAINTEXT with PLAIN and
SCRAM-SHA-256 through its JAAS login modules: produce and read back; a wrong SCRAM
password is refused. (SCRAM-SHA-512 is the same code path in the client; librdkafka,
kafka-python and aiokafka cover it.)"""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from tests.security.conftest import PASSWORDS, SecureBroker
from tests.support.broker import REPO
from tests.support.prereq import requires

JARS = REPO / ".cache" / "java-test-jars-4"
SOURCE = REPO / "tests" / "security" / "java" / "SecRoundTrip.java"
pytestmark = [
    pytest.mark.java, pytest.mark.timeout(120),
    requires(shutil.which("java") is not None and JARS.is_dir(),
             "no java on PATH or kafka-clients jars missing (make java-deps)"),
]
MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
           "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
           "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def run_java(secure_broker: SecureBroker, listener: str, props: dict[str, str]
             ) -> subprocess.CompletedProcess[str]:
    proto = "SSL" if listener == "MTLS" else listener
    props = {"security.protocol": proto, **props}
    if "SSL" in proto:
        props.update({"ssl.truststore.type": "PEM",
                      "ssl.truststore.location": str(secure_broker.pki.ca.cert)})
    return subprocess.run(
        ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
         "-cp", f"{JARS}/*", str(SOURCE), secure_broker.addr(listener),
         f"java-{uuid.uuid4().hex[:8]}", *(f"{k}={v}" for k, v in props.items())],
        capture_output=True, text=True, timeout=100)


def sasl(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {"sasl.mechanism": mechanism, "sasl.jaas.config":
            f'{MODULES[mechanism]} required username="{user}" password="{password}";'}


CASES = [
    ("MTLS", {"ssl.keystore.type": "PEM"}),
    ("SASL_SSL", sasl("PLAIN", "alice", PASSWORDS["alice"])),
    ("SASL_PLAINTEXT", sasl("SCRAM-SHA-256", "scram256", PASSWORDS["scram256"])),
]


@pytest.mark.parametrize(("listener", "props"), CASES,
                         ids=["mtls", "sasl_ssl-plain", "sasl_plaintext-scram256"])
def test_java_round_trip(secure_broker: SecureBroker, listener: str,
                         props: dict[str, str]) -> None:
    if listener == "MTLS":
        props = dict(props, **{"ssl.keystore.location": str(secure_broker.pki.client.both)})
    r = run_java(secure_broker, listener, props)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == [f"v{i}" for i in range(5)]


def test_java_wrong_password_is_refused(secure_broker: SecureBroker) -> None:
    r = run_java(secure_broker, "SASL_SSL", sasl("SCRAM-SHA-256", "scram256", "wrong"))
    assert r.returncode == 1
    assert "SaslAuthenticationException" in r.stderr, r.stderr[-3000:]
