"""The Go clients (tests/security/go, the same modules as tests/clients/go, built once per
module into a temporary directory from the module cache `make go-deps` fills): franz-go
over mTLS and SASL_SSL / SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256/512, Sarama and
kafka-go over TLS, SASL_SSL with PLAIN and SCRAM-SHA-256/512, and SASL_PLAINTEXT with
SCRAM-SHA-256: produce and read back; a wrong password is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.security.conftest import PASSWORDS, SecureBroker
from tests.support.broker import REPO
from tests.support.prereq import requires

SRC = REPO / "tests" / "security" / "go"
pytestmark = [pytest.mark.timeout(120),
              requires(shutil.which("go") is not None, "no go on PATH")]


@pytest.fixture(scope="module")
def gosec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gosec") / "gosec"
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY=os.environ.get("GOPROXY", "off"))
    r = subprocess.run(["go", "build", "-o", str(out), "."], cwd=SRC, env=env,
                       capture_output=True, text=True, timeout=100)
    if r.returncode != 0:
        pytest.fail(f"go build failed (run `make go-deps`):\n{r.stderr[-2000:]}")
    return out


def run(gosec: Path, secure_broker: SecureBroker, listener: str, *args: str
        ) -> subprocess.CompletedProcess[str]:
    pki = secure_broker.pki
    tls = ["-ca", str(pki.ca.cert)] if "SSL" in listener or listener == "MTLS" else []
    if listener == "MTLS":
        tls += ["-cert", str(pki.client.cert), "-key", str(pki.client.key)]
    return subprocess.run([str(gosec), "-brokers", secure_broker.addr(listener), "-topic",
                           f"go-{uuid.uuid4().hex[:8]}", *tls, *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("listener", "mechanism", "user"), [
    ("MTLS", "", ""), ("SASL_SSL", "PLAIN", "alice"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "scram256"), ("SASL_SSL", "SCRAM-SHA-512", "scram512")])
def test_franz_go_round_trip(gosec: Path, secure_broker: SecureBroker, listener: str,
                             mechanism: str, user: str) -> None:
    sasl = ["-mechanism", mechanism, "-user", user, "-password", PASSWORDS[user]] \
        if mechanism else []
    r = run(gosec, secure_broker, listener, *sasl)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [f"v{i}" for i in range(5)]


@pytest.mark.parametrize("lib", ["sarama", "kafkago"])
@pytest.mark.parametrize(("listener", "mechanism", "user"), [
    ("SSL", "", ""), ("SASL_SSL", "PLAIN", "alice"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "scram256"), ("SASL_SSL", "SCRAM-SHA-512", "scram512")])
def test_sarama_and_kafka_go_round_trip(gosec: Path, secure_broker: SecureBroker, lib: str,
                                        listener: str, mechanism: str, user: str) -> None:
    sasl = ["-mechanism", mechanism, "-user", user, "-password", PASSWORDS[user]] \
        if mechanism else []
    r = run(gosec, secure_broker, listener, "-lib", lib, *sasl)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [f"v{i}" for i in range(5)]


def test_franz_go_wrong_password_is_refused(gosec: Path, secure_broker: SecureBroker) -> None:
    log = secure_broker.proc.log_path
    before = log.read_text().count("Failed authentication with /127.0.0.1")
    r = run(gosec, secure_broker, "SASL_SSL", "-mechanism", "SCRAM-SHA-256", "-user",
            "scram256", "-password", "wrong", "-timeout", "3s")
    assert r.returncode == 1 and not r.stdout.strip(), r.stdout  # franz-go retries until
    assert log.read_text().count("Failed authentication with /127.0.0.1") > before  # deadline
