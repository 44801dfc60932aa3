"""Run cluster-brain nodes (``python -m jocko_py.cluster.node``) as real subprocesses on
loopback, with a small client for their JSON control port."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.broker import free_port

# Loopback timings: fast enough for a test, same shape as the defaults.
TIMINGS = {
    "election-timeout-ms": 300,
    "fetch-timeout-ms": 600,
    "fetch-max-wait-ms": 200,
    "request-timeout-ms": 150,
    "probe-interval-ms": 200,
    "suspicion-mult": 4,
    "snapshot-every": 50,  # small, so snapshots, log truncation and FetchSnapshot run
}


class NodeProc:
    def __init__(
        self,
        node_id: int,
        data_dir: Path,
        raft: int,
        gossip: int,
        control: int,
        voters: str,
        seeds: str,
    ) -> None:
        self.node_id = node_id
        self.data_dir = data_dir
        self.raft_port, self.gossip_port, self.control_port = raft, gossip, control
        self.voters, self.seeds = voters, seeds
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"node-{node_id}.log"

    def start(self) -> None:
        args = [
            sys.executable,
            "-m",
            "jocko_py.cluster.node",
            "--node-id",
            str(self.node_id),
            "--data-dir",
            str(self.data_dir),
            "--raft",
            f"127.0.0.1:{self.raft_port}",
            "--voters",
            self.voters,
            "--gossip",
            f"127.0.0.1:{self.gossip_port}",
            "--seeds",
            self.seeds,
            "--advertised",
            f"127.0.0.1:{9000 + self.node_id}",
            "--rack",
            f"rack{self.node_id % 2}",
            "--control",
            f"127.0.0.1:{self.control_port}",
        ]
        for k, v in TIMINGS.items():
            args += [f"--{k}", str(v)]
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        root = Path(__file__).resolve().parents[2]
        env = dict(os.environ, PYTHONPATH=str(root))
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, cwd=root, env=env)
        log.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                self.request({"op": "status"}, timeout=1)
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"node {self.node_id} exited: {self.log_path.read_text()}"
                    ) from None
                time.sleep(0.05)
        raise RuntimeError(f"node {self.node_id} did not start")

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def request(self, req: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        with socket.create_connection(("127.0.0.1", self.control_port), timeout=timeout) as s:
            s.sendall(json.dumps(req).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise ConnectionError("control connection closed")
                buf += chunk
        out: dict[str, Any] = json.loads(buf)
        return out

    def status(self) -> dict[str, Any] | None:
        if not self.alive:
            return None
        try:
            return self.request({"op": "status"}, timeout=2)
        except OSError:
            return None


class LoopbackCluster:
    def __init__(self, root: Path, n: int, observers: int = 0) -> None:
        self._root, self._n, self._observers = root, n, observers
        self._assign_ports()

    def _assign_ports(self) -> None:
        root, n, observers = self._root, self._n, self._observers
        ids = list(range(1, n + observers + 1))
        raft = {i: free_port() for i in ids}
        gossip = {i: free_port(socket.SOCK_DGRAM) for i in ids}
        control = {i: free_port() for i in ids}
        # Nodes after the first n are observers: they are not in the voter set.
        voters = ",".join(f"{i}=127.0.0.1:{raft[i]}" for i in ids[:n])
        self.nodes = {
            i: NodeProc(
                i,
                root / f"node-{i}",
                raft[i],
                gossip[i],
                control[i],
                voters,
                ",".join(f"127.0.0.1:{gossip[j]}" for j in ids if j != i),
            )
            for i in ids
        }

    def start(self) -> None:
        # A free port is only free when picked: another process (tests run beside other
        # suites) may bind it before the node does. Then start over on new ports.
        for attempt in range(3):
            try:
                for n in self.nodes.values():
                    n.start()
                return
            except RuntimeError as e:
                self.stop()
                if attempt == 2 or "in use" not in str(e):
                    raise
                for node in self.nodes.values():
                    shutil.rmtree(node.data_dir, ignore_errors=True)
                self._assign_ports()

    def stop(self) -> None:
        for n in self.nodes.values():
            n.stop()

    def statuses(self) -> dict[int, dict[str, Any]]:
        out = {}
        for i, n in self.nodes.items():
            st = n.status()
            if st is not None:
                out[i] = st
        return out

    def wait_leader(self, timeout: float, min_epoch: int = 0) -> tuple[int, float]:
        """Node id of an agreed leader with epoch >= min_epoch, and when it was seen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sts = self.statuses()
            leaders = [
                i for i, s in sts.items() if s["role"] == "leader" and s["epoch"] >= min_epoch
            ]
            if len(leaders) == 1:
                return leaders[0], time.monotonic()
            time.sleep(0.01)
        raise AssertionError(f"no leader within {timeout}s: {self.statuses()}")

    def wait_converged(self, timeout: float) -> dict[int, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        sts: dict[int, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            sts = self.statuses()
            live = [n for n in self.nodes.values() if n.alive]
            if len(sts) == len(live) and sts:
                fps = {s["fingerprint"] for s in sts.values()}
                applied = {s["applied"] for s in sts.values()}
                if len(fps) == 1 and len(applied) == 1:
                    return sts
            time.sleep(0.05)
        raise AssertionError(f"images did not converge: {sts}")
