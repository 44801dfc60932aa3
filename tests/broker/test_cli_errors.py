"""A user's mistake on the broker command line gets one clear line, never a traceback."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.broker import REPO, free_port


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
    (["--config", "/"], "cannot read config file /: Is a directory"),
    (["--override", "num.partitions=many"],
     "invalid value 'many' for num.partitions: expected an integer"),
    (["--override", "auto.create.topics.enable=yes"],
     "invalid value 'yes' for auto.create.topics.enable: expected true or false"),
    (["--override", "log.segment.bytes=1GB"],
     "invalid value '1GB' for segment.bytes: not an integer"),
    (["--override", "no-equals-sign"], "--override expects KEY=VALUE, got 'no-equals-sign'"),
    (["--broker-addr", "localhost"], "--broker-addr: 'localhost' is not host:port"),
    (["--broker-addr", "localhost:http"], "--broker-addr: 'localhost:http' is not host:port"),
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
    assert f"jocko-py broker: cannot listen on 127.0.0.1:{port} (Kafka listener PLAINTEXT): " \
        "address already in use" in out.stderr and "Traceback" not in out.stderr


def test_a_host_that_does_not_resolve_is_named(tmp_path: Path) -> None:
    out = _broker(tmp_path, "--broker-addr", "no-such-host.invalid:9092")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "jocko-py broker: cannot listen on no-such-host.invalid:9092 (Kafka listener " \
        "PLAINTEXT): host 'no-such-host.invalid' does not resolve" in out.stderr


def test_unknown_property_warns_and_startup_shows_non_default_config(tmp_path: Path) -> None:
    """As Kafka: an unknown name is a warning, not an error; a stock Kafka property the
    broker does not use (num.network.threads) is neither. JSON log lines carry fields."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jocko_py.cli", "broker", "--broker-id", "7",
         "--data-dir", str(tmp_path / "d"), "--broker-addr", f"127.0.0.1:{port}",
         "--override", "num.partitons=3", "--override", "num.network.threads=8",
         "--override", "log.retention.hours=24", "--log-format", "json"],
        stderr=subprocess.PIPE, text=True, cwd=REPO)
    lines: list[dict[str, object]] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(json.loads(line))  # every line is one JSON object
            if "effective non-default configuration" in str(lines[-1]["message"]):
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    warnings = [x["message"] for x in lines if x["level"] == "WARNING"]
    assert warnings == ["The configuration 'num.partitons' was supplied but isn't a known "
                        "config."]
    started = next(x for x in lines if "listening on" in str(x["message"]))
    assert started["broker"] == 7 and started["logger"] == "jocko_py.app"
    cfg = lines[-1]
    assert cfg["broker"] == 7
    assert cfg["config"] == {"broker.id": "7", "log.dirs": str(tmp_path / "d"),
                             "log.retention.hours": "24", "num.network.threads": "8",
                             "num.partitons": "3"}
    assert proc.returncode == 0


def test_metrics_or_console_port_in_use_gives_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        for flag in ("--metrics-addr", "--console-addr"):
            out = _broker(tmp_path, "--broker-addr", f"127.0.0.1:{free_port()}", flag,
                          f"127.0.0.1:{port}")
            assert out.returncode != 0
            assert "address already in use" in out.stderr and "Traceback" not in out.stderr
            errors = [ln for ln in out.stderr.splitlines() if " INFO " not in ln]
            what = "metrics" if flag == "--metrics-addr" else "console"
            assert errors == [f"jocko-py broker: cannot listen on 127.0.0.1:{port} ({what}): "
                              "address already in use"], out.stderr
            assert len(errors) == 1, out.stderr


def test_every_documented_broker_property_is_known() -> None:
    """Every property set in a `properties` example of the docs is one the broker's
    config checker knows (it warns about unknown names, so a documented one must not)."""
    import re

    from jocko_py.broker.config import known_property

    unknown = []
    for page in sorted((REPO / "docs").glob("*.md")):
        for block in re.findall(r"```properties\n(.*?)```", page.read_text(), re.S):
            for line in re.sub(r"\\\n[^\n]*", "", block).splitlines():  # continuations
                m = re.match(r"\s*([A-Za-z][\w.\-]*)\s*=", line)
                if m and not known_property(m.group(1)):
                    unknown.append(f"{page.name}: {m.group(1)}")
    assert not unknown, unknown


@pytest.mark.parametrize("where", ["before", "after"])
def test_unknown_log_level_is_a_usage_error(tmp_path: Path, where: str) -> None:
    """`--log-level verbose` was accepted silently (and meant INFO)."""
    args = ["--log-level", "verbose"]
    argv = [*args, "broker"] if where == "before" else ["broker", *args]
    out = subprocess.run([sys.executable, "-m", "jocko_py.cli", *argv, "--data-dir",
                          str(tmp_path / "d")], capture_output=True, text=True, timeout=30,
                         cwd=REPO)
    assert out.returncode == 2
    assert "invalid level 'verbose' (choose from DEBUG, INFO, WARNING, ERROR)" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "d").exists()
