"""Brokers started from Python code: one in this process, or a cluster of processes.

This module owns running jocko-py under another program (a test suite, a notebook, an
application's integration tests), as the pytest plugin (`pytest_plugin.py`) does:

- `EmbeddedBroker`: a real single-node broker in this process, on its own thread with
  its own event loop, so it neither needs nor disturbs the caller's loop or threads
  (sync code, async tests, a process that already runs a loop). It listens on a free
  loopback port, keeps its data in a temporary directory unless given one, and stops
  through an event (no signals: their handlers belong to the main thread). While it
  runs it holds its directory's `.lock`: another broker on that directory, in this
  process or another, fails to start (DirectoryInUseError); a stopped one starts again.
- `BrokerCluster`: brokers as `jocko-py broker` subprocesses forming one cluster on
  loopback (raft voters, gossip), ready once every broker sees all of them registered.

Both are context managers and expose `bootstrap_servers` (`host:port[,host:port]`).
Test-friendly defaults follow what Kafka's test containers set: no initial rebalance
delay, a one-partition `__consumer_offsets`; `overrides` change any property.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

log = logging.getLogger("jocko_py.embedded")

TEST_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
}

# loopback timings for a cluster: a failure is noticed in seconds, not tens of seconds
CLUSTER_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "jocko.gossip.probe.interval.ms": "250",
    "broker.heartbeat.interval.ms": "250",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "6000",
    # a test stops the whole cluster at once: nobody to hand leaderships to
    "controlled.shutdown.enable": "false",
}


def free_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


class EmbeddedBroker:
    """A single-node jocko-py broker on a thread of this process."""

    def __init__(self, data_dir: str | Path | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, broker_id: int = 0, overrides: dict[str, str] | None = None,
                 startup_timeout: float = 30.0) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(
            tempfile.mkdtemp(prefix="jocko-py-"))
        self.host = host
        self.port = port
        self.broker_id = broker_id
        self.overrides = TEST_DEFAULTS | dict(overrides or {})
        self.startup_timeout = startup_timeout
        self.startup_seconds = 0.0
        self.broker: Any = None  # the running jocko_py.broker.core.Broker
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.exit_code: int | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return self.bootstrap_servers

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> EmbeddedBroker:
        """Start and wait (bounded) until the broker serves; raise if it cannot."""
        if self.running:
            return self
        t0 = time.monotonic()
        chosen = self.port
        for attempt in range(5):
            self.port = chosen or free_port(self.host)
            try:
                self._start_once()
                break
            except OSError as e:
                # a free port taken between the probe and the bind: try another one
                if chosen or e.errno != errno.EADDRINUSE or attempt == 4:
                    raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _start_once(self) -> None:
        from jocko_py.broker.config import build_config

        config = build_config(
            overrides=self.overrides, broker_id=self.broker_id,
            broker_addr=f"{self.host}:{self.port}", data_dir=str(self.data_dir))
        self._ready.clear()
        self._error = None
        self.exit_code = None
        self._thread = threading.Thread(target=self._run, args=(config,), daemon=True,
                                        name=f"jocko-py-broker-{self.port}")
        self._thread.start()
        if not self._ready.wait(self.startup_timeout):
            self.stop()
            raise TimeoutError(f"jocko-py broker on {self.bootstrap_servers} did not start "
                               f"within {self.startup_timeout}s")
        if self._error is not None:
            self._thread.join(10)
            err, self._error = self._error, None
            raise err

    def _run(self, config: Any) -> None:
        from jocko_py.app import run_broker

        loop = _new_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)

        async def main() -> int:
            self._stop = asyncio.Event()

            def ready(broker: Any) -> None:
                self.broker = broker
                self._ready.set()
            return await run_broker(config, self._stop, ready)

        try:
            self.exit_code = loop.run_until_complete(main())
        except BaseException as e:  # reported to start(), or logged if it comes later
            if self._ready.is_set():
                log.exception("embedded broker on %s failed", self.bootstrap_servers)
            self._error = e
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._loop = None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop (flush and close every log), wait for the thread; remove a temporary
        data directory."""
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and thread is not None and thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"jocko-py broker on {self.bootstrap_servers} did not stop "
                                   f"within {timeout}s")
        self._thread = None
        self.broker = None

    def close(self) -> None:
        """Stop and remove the data directory if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


class BrokerCluster:
    """``size`` `jocko-py broker` processes forming one cluster on loopback."""

    def __init__(self, size: int = 3, data_dir: str | Path | None = None, *,
                 overrides: dict[str, str] | None = None, startup_timeout: float = 60.0,
                 host: str = "127.0.0.1", metrics: bool = False,
                 console: bool = False) -> None:
        self._own_dir = data_dir is None
        self.root = Path(data_dir) if data_dir is not None else Path(
            tempfile.mkdtemp(prefix="jocko-py-cluster-"))
        self.size = size
        self.host = host
        self.overrides = CLUSTER_DEFAULTS | dict(overrides or {})
        self.startup_timeout = startup_timeout
        self.startup_seconds = 0.0
        ids = range(1, size + 1)
        self.ports = {i: free_port(host) for i in ids}
        self.raft_ports = {i: free_port(host) for i in ids}
        self.gossip_ports = {i: free_port(host, socket.SOCK_DGRAM) for i in ids}
        # Prometheus endpoints (http://host:port/metrics), when asked for
        self.metrics_ports = {i: free_port(host) for i in ids} if metrics else {}
        self.console_ports = {i: free_port(host) for i in ids} if console else {}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{p}" for p in self.ports.values())

    def __str__(self) -> str:
        return self.bootstrap_servers

    def __enter__(self) -> BrokerCluster:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def log_path(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}.log"

    def command(self, broker_id: int) -> list[str]:
        voters = ",".join(f"{i}@{self.host}:{p}" for i, p in self.raft_ports.items())
        cmd = [sys.executable, "-m", "jocko_py.cli", "broker", "--broker-id", str(broker_id),
               "--broker-addr", f"{self.host}:{self.ports[broker_id]}",
               "--data-dir", str(self.root / f"broker-{broker_id}"),
               "--controller-quorum-voters", voters,
               "--gossip-addr", f"{self.host}:{self.gossip_ports[broker_id]}",
               "--join", ",".join(f"{self.host}:{p}" for i, p in self.gossip_ports.items()
                                  if i != broker_id)]
        if broker_id in self.console_ports:
            cmd += ["--console-addr", f"{self.host}:{self.console_ports[broker_id]}"]
        if broker_id in self.metrics_ports:
            cmd += ["--metrics-addr", f"{self.host}:{self.metrics_ports[broker_id]}"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start_broker(self, broker_id: int) -> None:
        with open(self.log_path(broker_id), "ab") as out:
            self.procs[broker_id] = subprocess.Popen(
                self.command(broker_id), stdout=out, stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def start(self) -> BrokerCluster:
        t0 = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        for i in self.ports:
            self.start_broker(i)
        try:
            self.wait_ready(self.startup_timeout)
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def wait_ready(self, timeout: float) -> None:
        """Until every broker answers Metadata listing all the live brokers."""
        from jocko_py.client import Client

        deadline = time.monotonic() + timeout
        pending = set(self.ports)
        while pending:
            for i in sorted(pending):
                proc = self.procs.get(i)
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"broker {i} exited with {proc.returncode}:\n"
                                       + self.log_tail(i))
                try:
                    with Client(f"{self.host}:{self.ports[i]}", timeout=2.0) as c:
                        if len(c.metadata([]).brokers) == len(self.procs):
                            pending.discard(i)
                except (OSError, ConnectionError):
                    pass
            if pending and time.monotonic() > deadline:
                raise TimeoutError(f"brokers {sorted(pending)} not ready after {timeout}s:\n"
                                   + "\n".join(self.log_tail(i) for i in sorted(pending)))
            if pending:
                time.sleep(0.1)

    def stop_broker(self, broker_id: int, timeout: float = 20.0,
                    sig: int = signal.SIGTERM) -> int | None:
        proc = self.procs.pop(broker_id, None)
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return proc.returncode

    def stop(self, timeout: float = 20.0) -> None:
        for p in self.procs.values():  # all at once: each shuts down while the others do
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for i in list(self.procs):
            self.stop_broker(i, timeout)

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, broker_id: int, n: int = 30) -> str:
        try:
            lines = self.log_path(broker_id).read_text(errors="replace").splitlines()
        except OSError:
            return f"<no log for broker {broker_id}>"
        return "\n".join(f"[broker {broker_id}] {line}" for line in lines[-n:])
