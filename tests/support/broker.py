"""Start real jocko-py broker processes for end-to-end tests.

Every test that talks to a broker over a socket uses `BrokerProcess`: it picks a
free loopback port, starts `jocko-py broker` as a subprocess with its own data
directory, waits (bounded) until the port accepts connections, and on exit stops
the process (SIGTERM, then SIGKILL after a bounded wait).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from jocko_py.embedded import free_port as embedded_free_port

REPO = Path(__file__).resolve().parents[2]


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A loopback port free for TCP (or UDP: ``kind=socket.SOCK_DGRAM``) when asked: the
    one helper of the tests (the library's, which the pytest plugin uses). Free only when
    picked: `BrokerProcess.start` picks again when its broker finds the port taken."""
    return embedded_free_port(kind=kind)


def free_port_block(offsets: tuple[int, ...], udp: tuple[int, ...] = (),
                    lo: int = 20000, hi: int = 32000) -> int:
    """A base port B such that B+o is free for TCP for every o in ``offsets`` and for UDP
    for every o in ``udp``, for a program that derives its ports from one base (as
    examples/cluster/run.py does). Drawn below the kernel's ephemeral range (32768+), so
    no outgoing connection of another test takes one of the ports between this check
    and the program's bind."""
    for _ in range(200):
        base = random.randrange(lo, hi - max((*offsets, *udp)))
        socks: list[socket.socket] = []
        try:
            for o, kind in [(o, socket.SOCK_STREAM) for o in offsets] + \
                    [(o, socket.SOCK_DGRAM) for o in udp]:
                s = socket.socket(socket.AF_INET, kind)
                socks.append(s)
                s.bind(("127.0.0.1", base + o))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no free block of ports for offsets {offsets} in {lo}-{hi}")


def terminate(
    proc: subprocess.Popen[bytes], timeout: float, sig: int = signal.SIGTERM
) -> tuple[int, bool]:
    """Send `sig`, wait up to `timeout` s, SIGKILL if still running.
    Returns (exit code, whether the SIGKILL fallback fired)."""
    forced = False
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            forced = True
            proc.kill()
            proc.wait(5)
    return proc.returncode, forced


def wait_for_port(host: str, port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


class BrokerProcess:
    """One `jocko-py broker` subprocess. Restartable with the same data dir and port."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        broker_id: int = 0,
        overrides: dict[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        # a port picked here may be taken by another process before the broker binds it
        # (tests run in parallel, beside other suites): the first start picks again
        self._port_picked = not port
        self.port = port or free_port()
        self.broker_id = broker_id
        self.overrides = dict(overrides or {})
        self.log_path = log_path or (self.data_dir.parent / f"broker-{self.broker_id}.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.last_stop_forced = False
        self.host = "127.0.0.1"  # where it listens (a fault-lab broker has its own address)
        # run in the child before exec (e.g. resource.setrlimit for a low open-file limit)
        self.preexec_fn: Callable[[], None] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "jocko_py.cli", "broker",
            "--broker-id", str(self.broker_id),
            "--broker-addr", self.bootstrap,
            "--data-dir", str(self.data_dir),
        ]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    # the broker's one line when its Kafka port is taken (jocko_py/cli.py)
    PORT_TAKEN = "address already in use"

    def start(self, timeout: float = 60.0) -> BrokerProcess:
        """Start and wait (bounded) until the Kafka port accepts connections. On the
        first start of a broker whose port was picked here, a port taken meanwhile by
        another process is picked again (up to three times)."""
        for attempt in range(3):
            try:
                return self._start(timeout)
            except RuntimeError as e:
                taken = self.PORT_TAKEN in str(e) and f":{self.port} " in str(e)
                if not (taken and self._port_picked) or attempt == 2:
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env,
            preexec_fn=self.preexec_fn,
        )
        log.close()
        try:
            deadline = time.monotonic() + timeout
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"broker exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                try:
                    wait_for_port(self.host, self.port, timeout=0.5)
                    self._port_picked = False  # from now on the port is the broker's
                    return self
                except TimeoutError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"the broker on {self.host}:{self.port} was not listening "
                            f"{timeout:.0f}s after its start:\n{self.log_tail()}") from None
        except BaseException:
            self.kill()
            raise

    def stop(self, timeout: float = 15.0, sig: int = signal.SIGTERM) -> int | None:
        """Graceful stop (SIGTERM by default); SIGKILL if it does not exit in time.

        Returns the exit code; `last_stop_forced` says whether the SIGKILL
        fallback had to fire (a graceful stop that hung).
        """
        self.last_stop_forced = False
        if self.proc is None:
            return None
        rc, self.last_stop_forced = terminate(self.proc, timeout, sig)
        self.proc = None
        return rc

    def stop_gracefully(self, timeout: float = 15.0, sig: int = signal.SIGTERM) -> None:
        """Stop and assert it was graceful: exit code 0, no SIGKILL needed."""
        rc = self.stop(timeout, sig)
        assert not self.last_stop_forced, (
            f"broker did not exit within {timeout}s of signal {sig}:\n{self.log_tail()}"
        )
        assert rc == 0, f"broker exited with {rc} on signal {sig}:\n{self.log_tail()}"

    def kill(self) -> None:
        """Hard kill (SIGKILL), as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None

    def restart(self) -> BrokerProcess:
        self.stop_gracefully()
        return self.start()

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "<no log>"


@contextmanager
def running_broker(tmp_path: Path, **kwargs: object) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", **kwargs)  # type: ignore[arg-type]
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
