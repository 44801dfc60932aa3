"""The CLI reaching a TLS or SASL listener without settings says so in one line (it
printed "broker closed the connection", or failed to decode a TLS alert)."""

from __future__ import annotations

import subprocess
import sys

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
