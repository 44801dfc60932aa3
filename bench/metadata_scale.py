"""Full-Metadata latency and open descriptors of one `jocko-py broker` at scale.

For each size N: a fresh broker process with an empty data dir, N partitions in topics
of 100 (created with CreateTopics, 10 topics a request), one 1 KiB record produced to
every partition (so every partition has an active segment open), then on one
connection: 5 unrecorded Metadata v12 requests for all topics, then `--reps` recorded
ones, each timed from the request's send to the last byte of its response (nothing is
decoded inside the timing). Reported: median, p90 and max, the response size, the
broker's open descriptors (/proc/<pid>/fd) and resident memory.

    .venv/bin/python bench/metadata_scale.py [--sizes 1000,5000,20000] [--reps 30]
        [--repo DIR] [--out FILE.json]

`--repo` runs the broker from another checkout (e.g. a worktree of main, for a
before/after comparison run back to back); the client side is always this checkout's.
The broker's open-file limit is set to this shell's hard limit (`--nofile N` sets
another; a broker without a descriptor bound needs about 3 per partition).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jocko_py.client import Client  # noqa: E402
from jocko_py.protocol import codec  # noqa: E402
from jocko_py.protocol.records import NewRecord, build_batch  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def timed(sock: socket.socket, req: bytes) -> tuple[float, int]:
    t0 = time.perf_counter()
    sock.sendall(req)
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    recv_exact(sock, size)
    return time.perf_counter() - t0, size


def timed_metadata(sock: socket.socket, corr: int, topics: list[str] | None = None,
                   ) -> tuple[float, int]:
    return timed(sock, codec.encode_request(3, 12, corr, "bench", {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False}))


def timed_list_offsets(sock: socket.socket, corr: int, topic: str) -> tuple[float, int]:
    return timed(sock, codec.encode_request(2, 9, corr, "bench", {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}))


def median_ms(fn: Callable[[int], tuple[float, int]], reps: int) -> tuple[list[float], int]:
    for i in range(5):
        fn(i)
    times = []
    size = 0
    for i in range(reps):
        dt, size = fn(100 + i)
        times.append(dt * 1000)
    times.sort()
    return times, size


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_size(n: int, reps: int, repo: Path, nofile: int, workdir: Path,
             overrides: list[str]) -> dict[str, object]:
    port = free_port()
    data = workdir / f"data-{n}"
    cmd = [sys.executable, "-m", "jocko_py.cli", "broker", "--broker-id", "0",
           "--broker-addr", f"127.0.0.1:{port}", "--data-dir", str(data)]
    for o in overrides:
        cmd += ["--override", o]

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    env = dict(os.environ, PYTHONPATH=str(repo), PYTHONUNBUFFERED="1")
    log = open(workdir / f"broker-{n}.log", "wb")
    proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=limits)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"broker did not start (see {log.name})") from None
                time.sleep(0.1)
        boot = f"127.0.0.1:{port}"
        t0 = time.monotonic()
        with Client(boot, timeout=600) as c:
            names = [f"t{i:05d}" for i in range(n // 100)]
            for i in range(0, len(names), 10):
                c.request(19, 7, {"topics": [
                    {"name": name, "num_partitions": 100, "replication_factor": 1,
                     "configs": []} for name in names[i:i + 10]], "timeout_ms": 600000})
            create_s = time.monotonic() - t0
            batch = build_batch([NewRecord(None, b"x" * 1024)])
            for name in names:
                todo = list(range(100))
                until = time.monotonic() + 120
                while todo:
                    r = c.request(0, 9, {"acks": 1, "timeout_ms": 30000, "topic_data": [
                        {"name": name, "partition_data": [
                            {"index": p, "records": batch} for p in todo]}]})
                    codes = {p.index: p.error_code for t in r.responses
                             for p in t.partition_responses}
                    # NOT_LEADER_OR_FOLLOWER: logs not made yet (big deltas are applied
                    # in slices after the answer, as Kafka's are): retried, as clients do
                    bad = [e for e in codes.values() if e not in (0, 6)]
                    if bad or (codes and time.monotonic() > until):
                        raise RuntimeError(f"produce to {name} failed: {bad[:3] or [6]}")
                    todo = [p for p in todo if codes.get(p)]
                    if todo:
                        time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
            times, size = median_ms(lambda i: timed_metadata(s, i), reps)
            one, _ = median_ms(lambda i: timed_metadata(s, i, ["t00000"]), reps)
            lo, _ = median_ms(lambda i: timed_list_offsets(s, i, "t00000"), reps)
        return {
            "partitions": n, "reps": reps,
            "median_ms": round(statistics.median(times), 2),
            "p90_ms": round(times[int(len(times) * 0.9) - 1], 2),
            "min_ms": round(times[0], 2), "max_ms": round(times[-1], 2),
            "response_bytes": size, "create_s": round(create_s, 2),
            "one_topic_median_ms": round(statistics.median(one), 3),
            "list_offsets_median_ms": round(statistics.median(lo), 3),
            "open_fds": fd_count(proc.pid), "rss_mib": round(rss_mib(proc.pid), 1),
            "loadavg": os.getloadavg()[0],
        }
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--repo", type=Path, default=REPO)
    ap.add_argument("--nofile", type=int,
                    default=resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    ap.add_argument("--override", action="append", default=[])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="jocko-mdscale-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            r = run_size(n, args.reps, args.repo.resolve(), args.nofile, Path(tmp),
                         args.override)
            r["repo"] = str(args.repo)
            print(json.dumps(r), flush=True)
            results.append(r)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
