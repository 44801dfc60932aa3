"""The sample files in config/ work as shipped: `server.properties` starts a broker with no
warning, `cluster.properties` forms a replicated cluster, the systemd unit's command runs
the broker and its stop signal stops it cleanly within its stop timeout, and
`prometheus.yml`'s job scrapes the broker's metrics. Only what must differ on this
machine (ports, directories, host names) is overridden."""

from __future__ import annotations

import configparser
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

from jocko_py.broker.config import DEFAULTS, parse_properties
from tests.support.broker import REPO, free_port, wait_for_port
from tests.support.cluster import FAST, Cluster

CONFIG = REPO / "config"


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as f:
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=REPO)


def _cli(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    r = subprocess.run([sys.executable, "-m", "jocko_py.cli", *args, "--bootstrap-server",
                        bootstrap], input=stdin, capture_output=True, text=True, timeout=60,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _local(tmp_path: Path, port: int, mport: int) -> list[str]:
    return ["--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={tmp_path / 'data'}",
            "--override", f"jocko.metrics.addr=127.0.0.1:{mport}"]


def test_server_properties_starts_a_broker_without_warnings_and_prometheus_scrapes_it(
        tmp_path: Path) -> None:
    port, mport = free_port(), free_port()
    log = tmp_path / "broker.log"
    proc = _start([sys.executable, "-m", "jocko_py.cli", "broker", "--config",
                   str(CONFIG / "server.properties"), *_local(tmp_path, port, mport)], log)
    try:
        wait_for_port("127.0.0.1", port, 30)
        boot = f"127.0.0.1:{port}"
        _cli(boot, "topic", "create", "sample")
        _cli(boot, "produce", "sample", "--key-separator", "=", stdin="k=v\n")
        assert _cli(boot, "consume", "sample", "--print-key", "--key-separator", "=") == "k=v\n"
        # prometheus.yml's job, pointed at this broker's metrics port
        prom = yaml.safe_load((CONFIG / "prometheus.yml").read_text())
        job = prom["scrape_configs"][0]
        target = job["static_configs"][0]["targets"][0]
        assert target.rsplit(":", 1)[1] == "9308"  # the metrics port docs/running.md gives
        host = target.rsplit(":", 1)[0].replace("localhost", "127.0.0.1")
        body = urllib.request.urlopen(f"http://{host}:{mport}{job['metrics_path']}",
                                      timeout=10).read().decode()
        assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="sample"} 1.0' in body
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    text = log.read_text()
    assert rc == 0, text
    assert " WARNING " not in text and "Traceback" not in text, text


def test_systemd_unit_runs_the_broker_and_its_stop_signal_stops_it_cleanly(
        tmp_path: Path) -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(CONFIG / "jocko-py.service")
    svc = unit["Service"]
    argv = shlex.split(svc["ExecStart"])
    assert argv[0] == "/opt/jocko-py/bin/jocko-py" and argv[1] == "broker"
    cfg = argv[argv.index("--config") + 1]
    assert cfg == "/etc/jocko-py/server.properties"
    stop_s = int(svc["TimeoutStopSec"])
    assert stop_s > int(DEFAULTS["controlled.shutdown.timeout.ms"]) / 1000
    sig = getattr(signal, svc["KillSignal"])
    # the unit's command, with the binary and the config file of this machine
    props = parse_properties((CONFIG / "server.properties").read_text())
    port, mport = free_port(), free_port()
    props |= {"listeners": f"PLAINTEXT://127.0.0.1:{port}",
              "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
              "log.dirs": str(tmp_path / "state"), "jocko.metrics.addr": f"127.0.0.1:{mport}"}
    local_cfg = tmp_path / "server.properties"
    local_cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cmd = [sys.executable, "-m", "jocko_py.cli"] + [
        str(local_cfg) if a == cfg else a for a in argv[1:]]
    proc = _start(cmd, tmp_path / "broker.log")
    try:
        wait_for_port("127.0.0.1", port, 30)
        _cli(f"127.0.0.1:{port}", "produce", "unit", stdin="x\n")
    finally:
        t0 = time.monotonic()
        proc.send_signal(sig)
        rc = proc.wait(stop_s)
    assert rc == 0 and time.monotonic() - t0 < stop_s
    assert "stopped cleanly" in (tmp_path / "broker.log").read_text()


def test_cluster_properties_forms_a_replicated_cluster(tmp_path: Path) -> None:
    """Three brokers from config/cluster.properties: what it sets (replication factor 3,
    min ISR 2, leader rebalance) holds; only ids, addresses and directories differ."""
    sample = parse_properties((CONFIG / "cluster.properties").read_text())
    assert sample["default.replication.factor"] == "3" and sample["min.insync.replicas"] == "2"
    assert sample["jocko.cluster.secret.file"] and sample["jocko.gossip.encrypt"] == "true"
    secret = tmp_path / "cluster.secret"
    secret.write_text(subprocess.run([sys.executable, "-m", "jocko_py.cli", "cluster",
                                      "gen-secret"], capture_output=True, text=True,
                                     check=True, timeout=30).stdout)
    secret.chmod(0o600)
    cluster = Cluster(tmp_path, 3, dict(FAST))
    for b in cluster.brokers.values():
        b.overrides |= {"node.id": str(b.broker_id),
                        "jocko.cluster.secret.file": str(secret),
                        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b.port}",
                        "jocko.raft.addr": dict(v.split("@") for v in
                                                b.voters.split(","))[str(b.broker_id)],
                        "jocko.metrics.addr": ""}
        base = b.command

        def command(base=base) -> list[str]:  # type: ignore[no-untyped-def]
            cmd: list[str] = base()
            return cmd[:4] + ["--config", str(CONFIG / "cluster.properties")] + cmd[4:]
        b.command = command  # type: ignore[method-assign]
    try:
        cluster.start()
        _cli(cluster.bootstrap, "topic", "create", "replicated")
        desc = _cli(cluster.bootstrap, "topic", "describe", "replicated", "--format", "json")
        import json

        d = json.loads(desc)
        d = d[0] if isinstance(d, list) else d
        assert len(d["partitions"]) == int(sample["num.partitions"])
        assert all(len(p["replicas"]) == 3 for p in d["partitions"]), d
        _cli(cluster.bootstrap, "produce", "replicated", "--acks", "-1", stdin="a\nb\n")
        assert sorted(_cli(cluster.bootstrap, "consume", "replicated").split()) == ["a", "b"]
    finally:
        cluster.stop()
