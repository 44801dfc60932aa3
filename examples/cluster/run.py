"""Boot a three-broker jocko-py cluster on loopback and keep it running until Ctrl-C.

    python examples/cluster/run.py            # brokers on 127.0.0.1:9092, 9093, 9094
    python examples/cluster/run.py --base-port 19092 --data-dir /tmp/jocko-cluster

Every broker is a raft voter (`--controller-quorum-voters`), joins the others by
gossip, and keeps its data in its own directory (`<data-dir>/broker-N`); its log goes
to `<data-dir>/broker-N.log`. The brokers share a cluster secret,
`<data-dir>/cluster.secret` (made on the first run, as `jocko-py cluster gen-secret`
does): their raft and gossip ports refuse whoever does not hold it. The script prints
the bootstrap string once every broker is up, then watches the processes; Ctrl-C (or SIGTERM) stops them all. Each broker's
command line is also written to `<data-dir>/broker-N.sh`, to start a killed broker
again by hand (`sh <data-dir>/broker-3.sh &`).
`--stop-after N` exits after N seconds (used by the tests).
"""

from __future__ import annotations

import argparse
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--base-port", type=int, default=9092,
                    help="Kafka port of broker 1; broker N listens on base+N-1, its raft "
                    "port is base+100+N-1 and its gossip port base+200+N-1")
    ap.add_argument("--data-dir", default=str(HERE / "data"))
    ap.add_argument("--stop-after", type=float, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    n, base = args.brokers, args.base_port
    if n < 1:
        raise SystemExit("run.py: --brokers must be at least 1")
    root = Path(args.data_dir)
    root.mkdir(parents=True, exist_ok=True)
    voters = ",".join(f"{i}@127.0.0.1:{base + 100 + i - 1}" for i in range(1, n + 1))
    gossip = {i: f"127.0.0.1:{base + 200 + i - 1}" for i in range(1, n + 1)}
    # the cluster links' shared secret (jocko.cluster.secret.file), kept across runs
    secret = root / "cluster.secret"
    if not secret.exists():
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    procs: dict[int, subprocess.Popen[bytes]] = {}
    exe = [sys.executable, "-m", "jocko_py.cli"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    stop = False

    def on_signal(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for i in range(1, n + 1):
            cmd = exe + [
                "broker", "--broker-id", str(i), "--broker-addr", f"127.0.0.1:{base + i - 1}",
                "--data-dir", str(root / f"broker-{i}"),
                "--controller-quorum-voters", voters, "--gossip-addr", gossip[i],
                "--join", ",".join(a for j, a in gossip.items() if j != i),
                "--override", f"jocko.cluster.secret.file={secret}",
                "--override", "jocko.gossip.encrypt=true",
            ]
            # the same command, to bring a killed broker back by hand
            (root / f"broker-{i}.sh").write_text(
                "#!/bin/sh\nexec " + " ".join(shlex.quote(c) for c in cmd)
                + f" >> {shlex.quote(str(root / f'broker-{i}.log'))} 2>&1\n")
            log = open(root / f"broker-{i}.log", "ab")  # noqa: SIM115 - handed to the child
            procs[i] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            log.close()
        deadline = time.monotonic() + 60
        for i, p in procs.items():
            if not _wait_port(base + i - 1, p, deadline):
                log_path = root / f"broker-{i}.log"
                tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
                how = "exited" if p.poll() is not None else "did not open its port in 60 s"
                print(f"broker {i} {how}; the end of {log_path}:", *tail, sep="\n  ",
                      file=sys.stderr)
                return 1
        bootstrap = ",".join(f"127.0.0.1:{base + i - 1}" for i in procs)
        print(f"cluster of {n} brokers is up; data and logs in {root}")
        print(f"bootstrap: {bootstrap}", flush=True)
        t_end = time.monotonic() + args.stop_after if args.stop_after else None
        reported: set[int] = set()
        while not stop and (t_end is None or time.monotonic() < t_end):
            for i, p in procs.items():
                if p.poll() is not None and i not in reported:
                    reported.add(i)
                    print(f"broker {i} exited with {p.returncode} (see broker-{i}.log)",
                          file=sys.stderr)
            time.sleep(0.5)
        return 0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        print("cluster stopped")


if __name__ == "__main__":
    sys.exit(main())
