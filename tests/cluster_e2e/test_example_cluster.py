"""examples/cluster/run.py: one command boots three brokers (consoles and metrics on) and
prints the bootstrap string; the README's first steps work against it; `run.py ctl` kills
and restarts a broker under the supervisor; Ctrl-C stops everything, the restarted broker
too."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.broker import REPO, free_port_block, wait_for_port

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jocko_py.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=REPO)


def test_example_cluster_boots_and_serves(tmp_path: Path) -> None:
    # run.py derives every port from the base: Kafka base+0..2, raft base+100..102,
    # gossip (UDP) base+200..202, consoles base+300..302, metrics base+400..402
    base = free_port_block((0, 1, 2, 100, 101, 102, 300, 301, 302, 400, 401, 402),
                           udp=(200, 201, 202))
    restarted = 0
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "examples/cluster/run.py"), "--base-port", str(base),
         "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        assert proc.stdout is not None
        bootstrap, seen = "", []
        deadline = time.monotonic() + 90  # run.py gives up (and says why) after 60 s
        while time.monotonic() < deadline and not bootstrap:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if line.startswith("bootstrap: "):
                bootstrap = line.split(": ", 1)[1].strip()
        logs = "".join(f"--- {p.name}\n{p.read_text()[-3000:]}"
                       for p in sorted((tmp_path / "data").glob("broker-*.log")))
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3)), \
            "".join(seen) + logs
        first = bootstrap.split(",")[0]
        deadline = time.monotonic() + 60
        while True:  # the brokers register within seconds of starting
            out = _cli("topic", "create", "orders", "--partitions", "3",
                       "--replication-factor", "3", "--config", "min.insync.replicas=2",
                       "--bootstrap-server", bootstrap.split(",")[2])
            if out.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert out.returncode == 0, out.stderr
        desc = _cli("topic", "describe", "orders", "--bootstrap-server", first)
        assert desc.returncode == 0, desc.stderr
        rows = [ln for ln in desc.stdout.splitlines() if "Partition:" in ln]
        assert len(rows) == 3 and all("Replicas: [" in r and r.count(",") >= 4 for r in rows)
        for part in range(3):  # the CLI finds each partition's leader by itself
            prod = subprocess.run(
                [sys.executable, "-m", "jocko_py.cli", "produce", "orders", "--partition",
                 str(part), "--bootstrap-server", bootstrap],
                input="".join(f"p{part}-{i}\n" for i in range(50)), capture_output=True,
                text=True, timeout=60, cwd=REPO)
            assert prod.returncode == 0, prod.stderr
            cons = _cli("consume", "orders", "--partition", str(part), "--bootstrap-server",
                        first, "--timeout", "1")
            assert cons.stdout.split() == [f"p{part}-{i}" for i in range(50)], cons.stderr
        status = _cli("cluster", "status", "--bootstrap-server", first)
        assert status.returncode == 0 and "Quorum:" in status.stdout, status.stderr
        for i in (1, 2, 3):
            assert (tmp_path / "data" / f"broker-{i}.sh").exists()
            # secure by default: the brokers share the secret run.py made
            log = (tmp_path / "data" / f"broker-{i}.log").read_text()
            assert "not authenticated" not in log, log[-3000:]
            assert "jocko.cluster.secret.file=" in \
                (tmp_path / "data" / f"broker-{i}.sh").read_text()
        assert (tmp_path / "data" / "cluster.secret").stat().st_mode & 0o077 == 0
        # consoles and metrics are on
        import urllib.request

        for i in range(3):
            assert b"jocko-py" in urllib.request.urlopen(
                f"http://127.0.0.1:{base + 300 + i}/", timeout=10).read()
            assert b"kafka_server" in urllib.request.urlopen(
                f"http://127.0.0.1:{base + 400 + i}/metrics", timeout=10).read()
        # the supervisor kills and restarts broker 3; it stays its child
        ctl = [sys.executable, str(REPO / "examples/cluster/run.py"), "--data-dir",
               str(tmp_path / "data"), "ctl"]
        r = subprocess.run(ctl + ["kill", "3"], capture_output=True, text=True, timeout=90)
        assert r.returncode == 0 and r.stdout.startswith("broker 3 killed"), r.stderr
        r = subprocess.run(ctl + ["status"], capture_output=True, text=True, timeout=30)
        status = json.loads(r.stdout)
        assert status["3"] is None and status["1"] and status["2"], r.stdout
        r = subprocess.run(ctl + ["start", "3"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout.startswith("broker 3 started"), r.stderr
        restarted = json.loads(subprocess.run(ctl + ["status"], capture_output=True,
                                              text=True, timeout=30).stdout)["3"]
        assert restarted
        r = subprocess.run(ctl + ["start", "3"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "is running" in r.stderr
        wait_for_port("127.0.0.1", base + 2, 60)  # back, with its data
        cons = _cli("consume", "orders", "--partition", "0", "--bootstrap-server",
                    f"127.0.0.1:{base + 2}", "--timeout", "5")
        assert len(cons.stdout.split()) == 50, cons.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rest, _ = proc.communicate()
    assert proc.returncode == 0 and "cluster stopped" in rest, rest
    for pid in (restarted,):  # the broker restarted through ctl was stopped with the rest
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/status").read_text().find("State:\tZ") >= 0
    assert not (tmp_path / "data" / "supervisor.sock").exists()
