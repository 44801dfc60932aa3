"""The CLI reaching a TLS or SASL listener without settings says so in one line (it
printed "broker closed the connection", or failed to decode a TLS alert)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.security.conftest import SecureBroker
from tests.support.broker import REPO


@pytest.mark.parametrize("listener, said", [
    ("SSL", "closed the connection at the first request"),  # or "answered with TLS"
    ("SASL_PLAINTEXT", "closed the connection at the first request"),
])
def test_cli_without_security_settings_on_a_secured_listener_says_so(
        secure_broker: SecureBroker, listener: str, said: str) -> None:
    r = subprocess.run([sys.executable, "-m", "jocko_py.cli", "topic", "list",
                        "--bootstrap-server", secure_broker.addr(listener)],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"error: {secure_broker.addr(listener)} {said}: it may be an "
                               "SSL or SASL listener")
    assert "security.protocol" in lines[0] and "--command-config" in lines[0]


@pytest.mark.parametrize("mechanism, user", [("PLAIN", "alice"), ("SCRAM-SHA-256", "scram256")])
def test_failed_authentication_is_logged_by_the_broker_as_kafka_does(
        secure_broker: SecureBroker, tmp_path: Path, mechanism: str, user: str) -> None:
    """Kafka logs `Failed authentication with /<ip> (<reason>)` at INFO; so does the broker,
    naming the user the client gave (a wrong password is visible to the operator)."""
    cfg = tmp_path / "client.properties"
    cfg.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                   f"sasl.username={user}\nsasl.password=wrong-{user}\n")
    log = secure_broker.proc.log_path
    before = log.read_text(errors="replace").count("Failed authentication with /127.0.0.1")
    r = subprocess.run([sys.executable, "-m", "jocko_py.cli", "topic", "list",
                        "--bootstrap-server", secure_broker.addr("SASL_PLAINTEXT"),
                        "--command-config", str(cfg)],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    deadline = time.monotonic() + 10
    while True:
        lines = [ln for ln in log.read_text(errors="replace").splitlines()
                 if "Failed authentication with /127.0.0.1" in ln]
        if len(lines) > before:
            break
        assert time.monotonic() < deadline, "no failed-authentication line in the broker log"
        time.sleep(0.1)
    assert " INFO " in lines[-1] and "[listener=SASL_PLAINTEXT]" in lines[-1]
    assert f"; user '{user}')" in lines[-1] and "Authentication failed" in lines[-1]
