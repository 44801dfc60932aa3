"""The scale section of `make bench`: one broker's life at 1,000 / 5,000 / 20,000
partitions, jocko-py beside Apache Kafka 4.4.0 on the same machine, back to back.

For each size N and each system, on a fresh data dir:

- create: CreateTopics of N/100 topics of 100 partitions (10 topics a request), timed
  until every partition has a leader in Metadata;
- one 1 KiB record produced to every partition (every partition gets an active segment);
- full Metadata: median (and p90) of `--reps` Metadata v12 requests for all topics, timed
  from the send to the response's last byte, after as many unrecorded ones (JIT warm-up);
- open descriptors (/proc/PID/fd) and resident memory while serving;
- stop: SIGTERM to exit; restart: process start until every partition has a leader and
  a ListOffsets of every partition answers (the broker serves all its data);
- recovery: SIGKILL while serving, then the same as restart.

Kafka runs with its stock JVM settings apart from a 2 GiB heap (`-Xmx2g`), its
defaults apart from the ports and replication factor 1 (tests/support/kafka44.py); both
get the shell's hard open-file limit. Results: one JSON line per (system, size), a
Markdown table with ratios, and growth curves (PNG, matplotlib) under `--out-dir`.

    .venv/bin/python bench/scale.py [--sizes 1000,5000,20000] [--systems jocko,kafka]
        [--reps 20] [--out-dir bench/results]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# the timing and /proc readings of the Metadata scale bench (run as a script: bench/ is
# on sys.path)
from metadata_scale import fd_count, rss_mib, timed_metadata  # noqa: E402

from jocko_py.client import Client  # noqa: E402
from jocko_py.protocol.records import NewRecord, build_batch  # noqa: E402
from tests.support.broker import free_port  # noqa: E402
from tests.support.kafka44 import JARS, ApacheKafka44, missing  # noqa: E402

RETRIABLE = {3, 5, 6}  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER
NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


class System:
    """One broker process of either kind, restartable on the same data dir and port."""

    name = ""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.data = work / "data"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Anything before the first start (Kafka: format the storage)."""

    def start(self) -> float:
        """Start the process; returns its start time (monotonic)."""
        t0 = time.monotonic()
        log = open(self.work / f"{self.name}.log", "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(self.command(), cwd=REPO, env=env, stdout=log,
                                     stderr=subprocess.STDOUT, preexec_fn=_limits)
        log.close()
        return t0

    def stop(self) -> float:
        assert self.proc is not None
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(600)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            raise RuntimeError(f"{self.name} did not stop within 600 s") from None
        self.proc = None
        return time.monotonic() - t0

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(30)
            self.proc = None


class Jocko(System):
    name = "jocko-py"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "jocko_py.cli", "broker", "--broker-id", "0",
                "--broker-addr", self.bootstrap, "--data-dir", str(self.data)]


class Kafka(System):
    name = "kafka-4.4.0"

    def __init__(self, work: Path) -> None:
        super().__init__(work)
        self.node = ApacheKafka44(self.data)
        self.node.port = self.port

    def prepare(self) -> None:
        self.node.format()

    def command(self) -> list[str]:
        return ["java", "-Xms512m", "-Xmx2g", "-cp", f"{JARS}/*", "kafka.Kafka",
                str(self.node.config)]


# --- the client side -------------------------------------------------------------------

def _wait(cond: Callable[[], bool], deadline: float, what: str) -> None:
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except (OSError, ConnectionError, TimeoutError, RuntimeError) as e:
            last = e
        time.sleep(0.05)
    raise TimeoutError(f"{what} not reached ({last!r})")


def _port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), 0.5):
        return True


def _all_led(boot: str, names: list[str], n: int) -> bool:
    with Client(boot, timeout=60) as c:
        md = c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
        led = sum(1 for t in md.topics if t.name in set(names)
                  for p in t.partitions if p.error_code == 0 and p.leader_id >= 0)
        return led == n


def _all_served(boot: str, names: list[str]) -> bool:
    """Every partition answers ListOffsets (latest) with no error and offset 1."""
    with Client(boot, timeout=60) as c:
        for i in range(0, len(names), 10):
            r = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                            "timestamp": -1} for p in range(100)]}
                for t in names[i:i + 10]]})
            for t in r.topics:
                for p in t.partitions:
                    if p.error_code or p.offset != 1:
                        return False
        return True


def _ready(sys_: System, names: list[str], n: int, t0: float, timeout: float) -> float:
    deadline = t0 + timeout
    _wait(lambda: _port_open(sys_.port), deadline, f"{sys_.name} port")
    _wait(lambda: _all_led(sys_.bootstrap, names, n), deadline, f"{sys_.name} leaders")
    _wait(lambda: _all_served(sys_.bootstrap, names), deadline, f"{sys_.name} data")
    return time.monotonic() - t0


def run_one(kind: type[System], n: int, reps: int, tmp: Path) -> dict[str, Any]:
    work = tmp / f"{kind.name}-{n}"
    work.mkdir()
    s = kind(work)
    s.prepare()
    names = [f"t{i:05d}" for i in range(n // 100)]
    try:
        t0 = s.start()
        _wait(lambda: _port_open(s.port), t0 + 120, f"{s.name} port")
        _wait(lambda: _all_led(s.bootstrap, [], 0), t0 + 120, f"{s.name} metadata")
        t0 = time.monotonic()
        with Client(s.bootstrap, timeout=900) as c:
            for i in range(0, len(names), 10):
                r = c.request(19, 7, {"topics": [
                    {"name": t, "num_partitions": 100, "replication_factor": 1,
                     "assignments": [], "configs": []} for t in names[i:i + 10]],
                    "timeout_ms": 600000, "validate_only": False})
                bad = [t.error_code for t in r.topics if t.error_code]
                if bad:
                    raise RuntimeError(f"{s.name}: CreateTopics failed {bad[:3]}")
        _wait(lambda: _all_led(s.bootstrap, names, n), t0 + 900, f"{s.name} leaders")
        create_s = time.monotonic() - t0
        batch = build_batch([NewRecord(None, b"x" * 1024)])
        with Client(s.bootstrap, timeout=300) as c:
            for name in names:
                todo = list(range(100))
                deadline = time.monotonic() + 120
                while todo:  # a new leader may not serve yet (NOT_LEADER_OR_FOLLOWER)
                    r = c.request(0, 9, {"transactional_id": None, "acks": 1,
                                         "timeout_ms": 30000, "topic_data": [
                        {"name": name, "partition_data": [
                            {"index": p, "records": batch} for p in todo]}]})
                    bad = [(p.index, p.error_code) for t in r.responses
                           for p in t.partition_responses if p.error_code]
                    if any(e not in RETRIABLE for _, e in bad) or \
                            (bad and time.monotonic() > deadline):
                        raise RuntimeError(f"{s.name}: produce to {name} failed: {bad[:3]}")
                    todo = [p for p, _ in bad]
                    if todo:
                        time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", s.port), timeout=600) as sock:
            for i in range(max(reps, 5)):  # the JVM's JIT warms up too
                timed_metadata(sock, i)
            times = []
            size = 0
            for i in range(reps):
                dt, size = timed_metadata(sock, 100 + i)
                times.append(dt * 1000)
        times.sort()
        assert s.proc is not None
        fds, rss = fd_count(s.proc.pid), rss_mib(s.proc.pid)
        stop_s = s.stop()
        t0 = s.start()
        restart_s = _ready(s, names, n, t0, 900)
        s.kill()
        t0 = s.start()
        recovery_s = _ready(s, names, n, t0, 1800)
        return {
            "system": s.name, "partitions": n, "create_s": round(create_s, 2),
            "metadata_median_ms": round(statistics.median(times), 2),
            "metadata_p90_ms": round(times[max(int(len(times) * 0.9) - 1, 0)], 2),
            "metadata_bytes": size, "open_fds": fds, "rss_mib": round(rss, 1),
            "stop_s": round(stop_s, 2), "restart_s": round(restart_s, 2),
            "recovery_s": round(recovery_s, 2), "load1": round(os.getloadavg()[0], 2),
        }
    finally:
        s.kill()


FIGURES = [("create_s", "create (s)"), ("metadata_median_ms", "full Metadata (ms)"),
           ("open_fds", "open descriptors"), ("rss_mib", "resident memory (MiB)"),
           ("stop_s", "clean stop (s)"), ("restart_s", "restart to all served (s)"),
           ("recovery_s", "recovery after SIGKILL (s)")]


def table(results: list[dict[str, Any]]) -> str:
    by = {(r["system"], r["partitions"]): r for r in results}
    sizes = sorted({r["partitions"] for r in results})
    lines = ["| figure | partitions | jocko-py | Kafka 4.4.0 | ratio |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for key, label in FIGURES:
        for n in sizes:
            j, k = by.get((Jocko.name, n)), by.get((Kafka.name, n))
            jv = j[key] if j else None
            kv = k[key] if k else None
            ratio = f"{jv / kv:.2f}" if jv is not None and kv else "-"
            lines.append(f"| {label} | {n:,} | {'-' if jv is None else jv} | "
                         f"{'-' if kv is None else kv} | {ratio} |")
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(2, 4, figsize=(16, 7))
    for ax, (key, label) in zip(axes.flat, FIGURES, strict=False):
        for system in (Jocko.name, Kafka.name):
            pts = sorted((r["partitions"], r[key]) for r in results if r["system"] == system)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=system)
        ax.set_title(label)
        ax.set_xlabel("partitions")
        ax.legend()
    axes.flat[-1].axis("off")
    fig.tight_layout()
    fig.savefig(path)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--systems", default="jocko,kafka")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    args = ap.parse_args()
    kinds: list[type[System]] = []
    for name in args.systems.split(","):
        if name == "jocko":
            kinds.append(Jocko)
        elif name == "kafka":
            why = missing()
            if why:
                print(f"error: Apache Kafka 4.4.0 cannot run: {why}", file=sys.stderr)
                return 2
            kinds.append(Kafka)
        else:
            print(f"error: unknown system {name!r} (jocko, kafka)", file=sys.stderr)
            return 2
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="jocko-scale-") as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            for kind in kinds:  # back to back at each size
                r = run_one(kind, n, args.reps, Path(tmp))
                print(json.dumps(r), flush=True)
                results.append(r)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%M")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    base = args.out_dir / f"{stamp}-scale"
    base.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    md = (f"# Scale: one broker, jocko-py beside Apache Kafka 4.4.0 ({stamp} UTC)\n\n"
          f"`bench/scale.py --sizes {args.sizes} --reps {args.reps}`, {os.cpu_count()} "
          "cores; topics of 100 partitions, one 1 KiB record per partition; ratio = "
          "jocko-py / Kafka (under 1 is jocko-py ahead).\n\n" + table(results))
    if plot(results, base.with_suffix(".png")):
        md += f"\n![growth curves]({base.with_suffix('.png').name})\n"
    base.with_suffix(".md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
