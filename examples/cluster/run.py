"""Boot a jocko-py cluster on loopback (three brokers by default), supervise it until
Ctrl-C, and control its brokers from another terminal.

    python examples/cluster/run.py            # brokers on 127.0.0.1:9092, 9093, 9094
    python examples/cluster/run.py --base-port 19092 --data-dir /tmp/jocko-cluster
    python examples/cluster/run.py ctl kill 3     # SIGKILL broker 3 (a crash)
    python examples/cluster/run.py ctl stop 3     # SIGTERM: a controlled shutdown
    python examples/cluster/run.py ctl start 3    # start it again, with its data
    python examples/cluster/run.py ctl status     # which brokers run, with their pids

Every broker is a raft voter (`--controller-quorum-voters`), joins the others by gossip,
and keeps its data in its own directory (`<data-dir>/broker-N`); its log goes to
`<data-dir>/broker-N.log`. The brokers share a cluster secret, `<data-dir>/cluster.secret`
(made on the first run, as `jocko-py cluster gen-secret` does): their raft and gossip
ports refuse whoever does not hold it. Each broker serves the web console on
base+300+N-1 and Prometheus metrics on base+400+N-1 (`--no-console`, `--no-metrics`).

The supervisor owns every broker process: `ctl` talks to it over a Unix socket in the
data directory (`<data-dir>/supervisor.sock`), so a broker started again with `ctl start`
is its child too, and Ctrl-C (or SIGTERM) stops every broker, including restarted ones.
Each broker's command line is also written to `<data-dir>/broker-N.sh` for reference.
`--stop-after N` exits after N seconds (used by the tests).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOCKET = "supervisor.sock"


def _wait_port(port: int, proc: subprocess.Popen[bytes], deadline: float) -> bool:
    """Whether the broker's Kafka port accepts connections before the deadline (False at
    once when the broker exits, a port of its being taken, say)."""
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


class Supervisor:
    """The brokers of one cluster, as child processes; `handle` serves `ctl` commands."""

    def __init__(self, root: Path, commands: dict[int, list[str]]) -> None:
        self.root = root
        self.commands = commands
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.reported: set[int] = set()

    def start(self, i: int) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        log = open(self.root / f"broker-{i}.log", "ab")  # noqa: SIM115 - handed to the child
        p = subprocess.Popen(self.commands[i], stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        self.procs[i] = p
        self.reported.discard(i)
        return p

    def running(self, i: int) -> bool:
        p = self.procs.get(i)
        return p is not None and p.poll() is None

    def handle(self, line: str) -> str:
        words = line.split()
        if words == ["status"]:
            return json.dumps({str(i): (self.procs[i].pid if self.running(i) else None)
                               for i in self.commands})
        if len(words) != 2 or words[0] not in ("start", "stop", "kill") \
                or not words[1].isdigit() or int(words[1]) not in self.commands:
            return (f"error: expected start|stop|kill N (N in {sorted(self.commands)}) "
                    f"or status, got {line.strip()!r}")
        what, i = words[0], int(words[1])
        if what == "start":
            if self.running(i):
                return f"error: broker {i} is running (pid {self.procs[i].pid})"
            return f"broker {i} started (pid {self.start(i).pid})"
        if not self.running(i):
            return f"error: broker {i} is not running"
        p = self.procs[i]
        if what == "kill":
            p.kill()
        else:
            p.terminate()
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        self.reported.add(i)
        return f"broker {i} {'killed' if what == 'kill' else 'stopped'} (exit {p.returncode})"

    def watch(self) -> None:
        for i, p in self.procs.items():
            if p.poll() is not None and i not in self.reported:
                self.reported.add(i)
                print(f"broker {i} exited with {p.returncode} (see broker-{i}.log)",
                      file=sys.stderr, flush=True)

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def ctl(root: Path, command: list[str]) -> int:
    path = root / SOCKET
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(90)
            s.connect(str(path))
            s.sendall((" ".join(command) + "\n").encode())
            answer = s.makefile().readline().strip()
    except OSError as e:
        print(f"error: no cluster supervisor at {path} ({e.strerror or e}): is "
              "`make cluster` (examples/cluster/run.py) running with this --data-dir?",
              file=sys.stderr)
        return 1
    print(answer, file=sys.stderr if answer.startswith("error:") else sys.stdout)
    return 1 if answer.startswith("error:") else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--base-port", type=int, default=9092,
                    help="Kafka port of broker 1; broker N listens on base+N-1, its raft "
                    "port is base+100+N-1, its gossip port base+200+N-1, its console "
                    "base+300+N-1 and its metrics base+400+N-1")
    ap.add_argument("--data-dir", default=str(HERE / "data"))
    ap.add_argument("--no-console", action="store_true", help="no web consoles")
    ap.add_argument("--no-metrics", action="store_true", help="no Prometheus endpoints")
    ap.add_argument("--stop-after", type=float, default=0, help=argparse.SUPPRESS)
    ap.add_argument("ctl", nargs="*", metavar="ctl start|stop|kill N | ctl status",
                    help="control the running cluster's brokers")
    args = ap.parse_args()
    n, base = args.brokers, args.base_port
    root = Path(args.data_dir)
    if args.ctl:
        if args.ctl[0] != "ctl" or len(args.ctl) < 2:
            ap.error("expected: ctl start|stop|kill N, or ctl status")
        return ctl(root, args.ctl[1:])
    if n < 1:
        raise SystemExit("run.py: --brokers must be at least 1")
    root.mkdir(parents=True, exist_ok=True)
    voters = ",".join(f"{i}@127.0.0.1:{base + 100 + i - 1}" for i in range(1, n + 1))
    gossip = {i: f"127.0.0.1:{base + 200 + i - 1}" for i in range(1, n + 1)}
    # the cluster links' shared secret (jocko.cluster.secret.file), kept across runs
    secret = root / "cluster.secret"
    if not secret.exists():
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    exe = [sys.executable, "-m", "jocko_py.cli"]
    commands: dict[int, list[str]] = {}
    for i in range(1, n + 1):
        cmd = exe + [
            "broker", "--broker-id", str(i), "--broker-addr", f"127.0.0.1:{base + i - 1}",
            "--data-dir", str(root / f"broker-{i}"),
            "--controller-quorum-voters", voters, "--gossip-addr", gossip[i],
            "--join", ",".join(a for j, a in gossip.items() if j != i),
            "--override", f"jocko.cluster.secret.file={secret}",
            "--override", "jocko.gossip.encrypt=true",
        ]
        if not args.no_console:
            cmd += ["--console-addr", f"127.0.0.1:{base + 300 + i - 1}"]
        if not args.no_metrics:
            cmd += ["--metrics-addr", f"127.0.0.1:{base + 400 + i - 1}"]
        commands[i] = cmd
        (root / f"broker-{i}.sh").write_text(
            "#!/bin/sh\n# for reference: `run.py ctl start N` starts it under the supervisor\n"
            "exec " + " ".join(shlex.quote(c) for c in cmd)
            + f" >> {shlex.quote(str(root / f'broker-{i}.log'))} 2>&1\n")
    sup = Supervisor(root, commands)
    stop = False

    def on_signal(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    sock_path = root / SOCKET
    control = socket.socket(socket.AF_UNIX)
    try:
        if sock_path.exists():
            try:  # another supervisor on this data directory?
                with socket.socket(socket.AF_UNIX) as probe:
                    probe.connect(str(sock_path))
                print(f"error: a cluster supervisor already runs on {root} "
                      f"({sock_path} answers)", file=sys.stderr)
                return 1
            except OSError:
                sock_path.unlink()  # left by a supervisor that was killed
        control.bind(str(sock_path))
        control.listen()
        control.settimeout(0.5)
        for i in commands:
            sup.start(i)
        deadline = time.monotonic() + 60
        for i, p in sup.procs.items():
            if not _wait_port(base + i - 1, p, deadline):
                log_path = root / f"broker-{i}.log"
                tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
                how = "exited" if p.poll() is not None else "did not open its port in 60 s"
                print(f"broker {i} {how}; the end of {log_path}:", *tail, sep="\n  ",
                      file=sys.stderr)
                return 1
        bootstrap = ",".join(f"127.0.0.1:{base + i - 1}" for i in commands)
        print(f"cluster of {n} brokers is up; data and logs in {root}")
        if not args.no_console:
            print("consoles: " + ", ".join(f"http://127.0.0.1:{base + 300 + i - 1}/"
                                           for i in commands))
        if not args.no_metrics:
            print("metrics: " + ", ".join(f"http://127.0.0.1:{base + 400 + i - 1}/metrics"
                                          for i in commands))
        print(f"control: {sys.executable} {Path(__file__)} --data-dir {root} "
              "ctl start|stop|kill N | ctl status")
        print(f"bootstrap: {bootstrap}", flush=True)
        t_end = time.monotonic() + args.stop_after if args.stop_after else None
        while not stop and (t_end is None or time.monotonic() < t_end):
            sup.watch()
            try:
                conn, _ = control.accept()
            except (TimeoutError, InterruptedError):
                continue
            with conn:
                conn.settimeout(5)
                try:
                    line = conn.makefile().readline()
                    conn.sendall((sup.handle(line) + "\n").encode())
                except OSError:
                    pass
        return 0
    finally:
        control.close()
        sock_path.unlink(missing_ok=True)
        sup.stop_all()
        print("cluster stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
