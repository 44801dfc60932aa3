"""A user's mistake on the broker command line gets one clear line, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.broker import REPO


def _broker(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jocko_py.cli", "broker", "--data-dir", str(tmp_path / "d"),
         *args], capture_output=True, text=True, timeout=30, cwd=REPO)


@pytest.mark.parametrize("args, expected", [
    (["--controller-quorum-voters", "1@nohostport"], "is not of the form id@host:port"),
    (["--controller-quorum-voters", "x@h:1"], "is not of the form id@host:port"),
    (["--broker-id", "1", "--controller-quorum-voters", "1@127.0.0.1:9", "--raft-addr",
      "127.0.0.1:8"], "differs from this broker's entry"),
    (["--config", "/nonexistent/server.properties"], "not found"),
])
def test_bad_flags_give_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    out = _broker(tmp_path, *args)
    assert out.returncode != 0
    assert expected in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_port_in_use_gives_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = _broker(tmp_path, "--broker-addr", f"127.0.0.1:{port}")
    assert out.returncode != 0
    assert "address already in use" in out.stderr and "Traceback" not in out.stderr
