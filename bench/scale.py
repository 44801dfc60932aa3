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
import shutil
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
    """The broker processes of either kind (one, or a cluster of `nodes`), restartable
    on the same data dirs and ports."""

    name = ""
    first_id = 0

    def __init__(self, work: Path, nodes: int = 1) -> None:
        self.work = work
        self.nodes = nodes
        self.ids = [self.first_id] if nodes == 1 else list(range(1, nodes + 1))
        self.ports = {i: free_port() for i in self.ids}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports[self.ids[0]]}"

    @property
    def port(self) -> int:
        return self.ports[self.ids[0]]

    def data(self, i: int) -> Path:
        return self.work / f"node-{i}" / "data"

    def command(self, i: int) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Anything before the first start (Kafka: format the storage)."""

    def start(self) -> float:
        """Start every process; returns the start time (monotonic)."""
        t0 = time.monotonic()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for i in self.ids:
            self.data(i).parent.mkdir(parents=True, exist_ok=True)
            with open(self.work / f"{self.name}-{i}.log", "ab") as log:
                self.procs[i] = subprocess.Popen(
                    self.command(i), cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                    preexec_fn=_limits)
        return t0

    def check(self) -> None:
        """Raise if a process has exited (e.g. out of descriptors)."""
        for i, p in self.procs.items():
            if p.poll() is not None:
                tail = (self.work / f"{self.name}-{i}.log").read_bytes()[-600:]
                raise RuntimeError(f"{self.name} node {i} exited ({p.returncode}): "
                                   f"{tail.decode(errors='replace')}")

    def stop(self) -> float:
        """SIGTERM to every process at once; seconds until the last has exited."""
        t0 = time.monotonic()
        for p in self.procs.values():
            p.send_signal(signal.SIGTERM)
        try:
            for p in self.procs.values():
                p.wait(max(1.0, t0 + 600 - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"{self.name} did not stop within 600 s") from None
        self.procs = {}
        return time.monotonic() - t0

    def kill(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(30)
        self.procs = {}

    def readings(self) -> tuple[int, float]:
        """Open descriptors and resident memory (MiB), summed over the processes."""
        pids = [p.pid for p in self.procs.values()]
        return sum(fd_count(p) for p in pids), sum(rss_mib(p) for p in pids)


class Jocko(System):
    name = "jocko-py"

    def __init__(self, work: Path, nodes: int = 1) -> None:
        super().__init__(work, nodes)
        self.raft = {i: free_port() for i in self.ids}
        self.gossip = {i: free_port(socket.SOCK_DGRAM) for i in self.ids}

    def command(self, i: int) -> list[str]:
        cmd = [sys.executable, "-m", "jocko_py.cli", "broker", "--broker-id", str(i),
               "--broker-addr", f"127.0.0.1:{self.ports[i]}", "--data-dir", str(self.data(i))]
        if self.nodes > 1:  # every broker a raft voter, joined by gossip (Kafka's defaults)
            cmd += ["--controller-quorum-voters",
                    ",".join(f"{j}@127.0.0.1:{p}" for j, p in self.raft.items()),
                    "--gossip-addr", f"127.0.0.1:{self.gossip[i]}",
                    "--join", ",".join(f"127.0.0.1:{p}" for j, p in self.gossip.items()
                                       if j != i)]
        return cmd


class Kafka(System):
    name = "kafka-4.4.0"
    first_id = 1

    def __init__(self, work: Path, nodes: int = 1) -> None:
        super().__init__(work, nodes)
        self.node = {i: ApacheKafka44(self.data(i), node_id=i) for i in self.ids}
        for i, k in self.node.items():
            k.port = self.ports[i]
        if nodes > 1:  # broker and controller each, a static quorum of all of them
            voters = ",".join(f"{i}@127.0.0.1:{k.controller_port}" for i, k in self.node.items())
            for k in self.node.values():
                k.voters, k.cluster_id = voters, self.node[1].cluster_id

    def prepare(self) -> None:
        for k in self.node.values():
            k.format()

    # a directory holding an SLF4J 1.7 binding for Log4j 2 (log4j-slf4j-impl, as in
    # Kafka's distribution): Kafka then logs WARN and above to its log file, which a
    # failure's report quotes (without one, Kafka's jars log to SLF4J's no-op logger)
    log_jars: Path | None = None

    def command(self, i: int) -> list[str]:
        cp = f"{JARS}/*"
        extra = []
        if self.log_jars is not None:
            cfg = self.work / "log4j2.properties"
            cfg.write_text("rootLogger.level = WARN\nrootLogger.appenderRef.out.ref = OUT\n"
                           "appender.out.type = Console\nappender.out.name = OUT\n"
                           "appender.out.layout.type = PatternLayout\n"
                           "appender.out.layout.pattern = [%d] %p %m (%c)%n\n")
            cp += f":{self.log_jars}/*"
            extra = [f"-Dlog4j2.configurationFile={cfg}"]
        return ["java", "-Xms512m", "-Xmx2g", *extra, "-cp", cp, "kafka.Kafka",
                str(self.node[i].config)]


# --- the client side -------------------------------------------------------------------

def _wait(cond: Callable[[], bool], deadline: float, what: str,
          alive: Callable[[], None] | None = None) -> None:
    last: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None:
            alive()
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


def _leaders(boot: str, names: list[str]) -> tuple[dict[int, str], dict[tuple[str, int], int]]:
    """The brokers (id: address) and the leader of every partition of `names` (-1: none)."""
    want = set(names)
    with Client(boot, timeout=120) as c:
        md = c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
    leaders = {(t.name, p.partition_index): (p.leader_id if p.error_code == 0 else -1)
               for t in md.topics if t.name in want for p in t.partitions}
    return brokers, leaders


def _all_led(boot: str, names: list[str], n: int) -> bool:
    _, leaders = _leaders(boot, names)
    return sum(1 for v in leaders.values() if v >= 0) == n


def _by_leader(boot: str, names: list[str], todo: set[tuple[str, int]],
               ) -> dict[str, dict[str, list[int]]]:
    """`todo` partitions grouped by their leader's address, then topic."""
    brokers, leaders = _leaders(boot, names)
    out: dict[str, dict[str, list[int]]] = {}
    for (t, p) in sorted(todo):
        addr = brokers.get(leaders.get((t, p), -1))
        if addr is not None:
            out.setdefault(addr, {}).setdefault(t, []).append(p)
    return out


def _produce(s: System, names: list[str]) -> None:
    """One 1 KiB record to every partition, each sent to its leader."""
    batch = build_batch([NewRecord(None, b"x" * 1024)])
    todo = {(t, p) for t in names for p in range(100)}
    deadline = time.monotonic() + 600
    while todo:
        s.check()
        for addr, topics in _by_leader(s.bootstrap, names, todo).items():
            items = sorted(topics.items())
            with Client(addr, timeout=300) as c:
                for i in range(0, len(items), 10):
                    r = c.request(0, 9, {"transactional_id": None, "acks": 1,
                                         "timeout_ms": 30000, "topic_data": [
                        {"name": t, "partition_data": [{"index": p, "records": batch}
                                                       for p in ps]}
                        for t, ps in items[i:i + 10]]})
                    for tr in r.responses:
                        for pr in tr.partition_responses:
                            if pr.error_code == 0:
                                todo.discard((tr.name, pr.index))
                            elif pr.error_code not in RETRIABLE:
                                raise RuntimeError(f"{s.name}: produce to {tr.name} failed: "
                                                   f"{pr.error_code}")
        if todo:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{s.name}: {len(todo)} partitions refused produce")
            time.sleep(0.2)


def _all_served(boot: str, names: list[str]) -> bool:
    """Every partition answers ListOffsets (latest) at its leader with no error and
    offset 1."""
    todo = {(t, p) for t in names for p in range(100)}
    groups = _by_leader(boot, names, todo)
    ok = 0
    for addr, topics in groups.items():
        items = sorted(topics.items())
        with Client(addr, timeout=120) as c:
            for i in range(0, len(items), 10):
                r = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                "timestamp": -1} for p in ps]}
                    for t, ps in items[i:i + 10]]})
                for tr in r.topics:
                    for pr in tr.partitions:
                        if pr.error_code or pr.offset != 1:
                            return False
                        ok += 1
    return ok == len(todo)


def _ready(s: System, names: list[str], n: int, t0: float, timeout: float) -> float:
    deadline = t0 + timeout
    _wait(lambda: all(_port_open(p) for p in s.ports.values()), deadline,
          f"{s.name} ports", s.check)
    _wait(lambda: _all_led(s.bootstrap, names, n), deadline, f"{s.name} leaders", s.check)
    _wait(lambda: _all_served(s.bootstrap, names), deadline, f"{s.name} data", s.check)
    return time.monotonic() - t0


def _load() -> float:
    return round(os.getloadavg()[0], 2)


class _Progress(dict):  # type: ignore[type-arg]
    """The figures of one run; each one also printed (stderr) as it is measured, so
    an interrupted run still shows what it measured."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if key != "system" and not key.endswith("_load"):
            print(f"# {self.get('system')} {self.get('partitions')}x{self.get('brokers')}: "
                  f"{key}={value} (load {_load()})", file=sys.stderr, flush=True)

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        for k, v in dict(*args, **kwargs).items():
            self[k] = v


CURRENT: list[dict[str, Any]] = []
# where a failed run's broker logs are kept (their last 400 KB), if anywhere
LOG_KEEP: Path | None = None


def run_one(kind: type[System], n: int, reps: int, tmp: Path, nodes: int = 1,
            create_only: bool = False) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"{kind.name}-{n}-{nodes}-", dir=tmp))
    s = kind(work, nodes)
    out: dict[str, Any] = _Progress(system=s.name, partitions=n, brokers=nodes)
    CURRENT[:] = [out]  # what an interrupted run had measured (main writes it)
    names = [f"t{i:05d}" for i in range(n // 100)]
    try:
        s.prepare()
        t0 = s.start()
        _wait(lambda: all(_port_open(p) for p in s.ports.values()), t0 + 300,
              f"{s.name} ports", s.check)
        _wait(lambda: len(_leaders(s.bootstrap, [])[0]) == nodes, t0 + 300,
              f"{s.name} brokers", s.check)
        out["load_start"] = _load()
        t0 = time.monotonic()
        with Client(s.bootstrap, timeout=900) as c:
            for i in range(0, len(names), 10):
                todo = names[i:i + 10]
                deadline = time.monotonic() + 600
                while todo:
                    s.check()
                    r = c.request(19, 7, {"topics": [
                        {"name": t, "num_partitions": 100, "replication_factor": 1,
                         "assignments": [], "configs": []} for t in todo],
                        "timeout_ms": 600000, "validate_only": False})
                    # TOPIC_ALREADY_EXISTS: a broker's forward to the controller retried
                    # after a leader change and its first attempt had been committed;
                    # NOT_CONTROLLER, REQUEST_TIMED_OUT: retried, as an admin client does
                    bad = [t.error_code for t in r.topics if t.error_code not in (0, 36, 7, 41)]
                    if bad:
                        raise RuntimeError(f"{s.name}: CreateTopics failed {bad[:3]}")
                    todo = [t.name for t in r.topics if t.error_code in (7, 41)]
                    if todo and time.monotonic() > deadline:
                        raise RuntimeError(f"{s.name}: CreateTopics kept failing over")
                    if todo:
                        time.sleep(0.5)
        _wait(lambda: _all_led(s.bootstrap, names, n), t0 + 1800, f"{s.name} leaders",
              s.check)
        out["create_s"] = round(time.monotonic() - t0, 2)
        out["create_load"] = _load()
        if create_only:
            return dict(out)
        _produce(s, names)
        with socket.create_connection(("127.0.0.1", s.port), timeout=600) as sock:
            for i in range(max(reps, 5)):  # the JVM's JIT warms up too
                timed_metadata(sock, i)
            times = []
            size = 0
            for i in range(reps):
                dt, size = timed_metadata(sock, 100 + i)
                times.append(dt * 1000)
        times.sort()
        out.update(metadata_median_ms=round(statistics.median(times), 2),
                   metadata_p90_ms=round(times[max(int(len(times) * 0.9) - 1, 0)], 2),
                   metadata_bytes=size, metadata_median_ms_load=_load())
        s.check()
        fds, rss = s.readings()
        out.update(open_fds=fds, open_fds_load=_load(), rss_mib=round(rss, 1),
                   rss_mib_load=_load())
        out["stop_s"] = round(s.stop(), 2)
        out["stop_s_load"] = _load()
        t0 = s.start()
        out["restart_s"] = round(_ready(s, names, n, t0, 1800), 2)
        out["restart_s_load"] = _load()
        s.kill()
        t0 = s.start()
        out["recovery_s"] = round(_ready(s, names, n, t0, 1800), 2)
        out["recovery_s_load"] = _load()
    except Exception as e:  # noqa: BLE001 - a system failing at a size is a result too
        out["error"] = f"{type(e).__name__}: {e}"[:400]
        out["error_load"] = _load()
        if s.procs:  # what the processes still hold, and what they last logged
            try:
                out["error_fds"], _ = s.readings()
            except OSError:
                pass
        tails = []
        for i in s.ids:
            f = work / f"{s.name}-{i}.log"
            if f.exists():
                text = f.read_text(errors="replace")
                lines = [ln for ln in text.splitlines()
                         if ln[:1] not in ("\t", " ") and (
                             " ERROR " in ln or " FATAL " in ln or "Caused by" in ln
                             or "Too many open files" in ln)]
                tails += [f"node {i}: {ln[:400]}" for ln in lines[:3] + lines[-3:]]
                if LOG_KEEP is not None:  # the whole log, beside the results
                    LOG_KEEP.mkdir(parents=True, exist_ok=True)
                    (LOG_KEEP / f"{work.name}-{f.name}").write_text(text[-400_000:])
        if tails:
            out["error_log"] = tails
    finally:
        s.kill()
        for i in s.ids:  # the logs stay (beside --out-dir's tables when asked for)
            shutil.rmtree(s.data(i), ignore_errors=True)
    return dict(out)


FIGURES = [("create_s", "create (s)"), ("metadata_median_ms", "full Metadata (ms)"),
           ("open_fds", "open descriptors"), ("rss_mib", "resident memory (MiB)"),
           ("stop_s", "clean stop (s)"), ("restart_s", "restart to all served (s)"),
           ("recovery_s", "recovery after SIGKILL (s)")]


def _cell(r: dict[str, Any] | None, key: str) -> tuple[str, str]:
    if r is None:
        return "-", ""
    if key not in r:
        return ("failed" if "error" in r else "-"), str(r.get("error_load", ""))
    return f"{r[key]:,}", str(r.get(f"{key}_load", r.get("create_load", "")))


def merged(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result per (system, partitions, brokers): the median of each figure (and of
    its load) over the runs that measured it, `runs` the number of runs, `error` the
    last failure when no run measured anything after it."""
    groups: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["system"], r["partitions"], r.get("brokers", 1)), []).append(r)
    out = []
    for (system, n, nodes), rs in groups.items():
        m: dict[str, Any] = {"system": system, "partitions": n, "brokers": nodes,
                             "runs": len(rs)}
        keys = {k for r in rs for k, v in r.items()
                if isinstance(v, int | float) and k not in m and k != "run"}
        for k in sorted(keys):
            vals = [r[k] for r in rs if k in r]
            med = statistics.median(vals)
            m[k] = round(med, 2) if isinstance(med, float) else med
        errors = [r for r in rs if "error" in r]
        if errors:
            m["error"] = errors[-1]["error"]
            m["error_load"] = errors[-1].get("error_load", "")
        out.append(m)
    return out


def table(results: list[dict[str, Any]]) -> str:
    runs = results
    results = merged(results)
    by = {(r["system"], r["partitions"], r.get("brokers", 1)): r for r in results}
    sizes = sorted({(r.get("brokers", 1), r["partitions"]) for r in results})
    lines = ["| figure | partitions | brokers | jocko-py | load | Kafka 4.4.0 | load | ratio |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, label in FIGURES:
        for nodes, n in sizes:
            j, k = by.get((Jocko.name, n, nodes)), by.get((Kafka.name, n, nodes))
            jv = j.get(key) if j else None
            kv = k.get(key) if k else None
            if jv is None and kv is None and not any(r and "error" in r for r in (j, k)):
                continue  # not measured by this run (--create-only)
            ratio = f"{jv / kv:.3g}" if jv is not None and kv else "-"
            (jc, jl), (kc, kl) = _cell(j, key), _cell(k, key)
            lines.append(f"| {label} | {n:,} | {nodes} | {jc} | {jl} | {kc} | {kl} | {ratio} |")
    errors = [f"- {r['system']} at {r['partitions']:,} partitions on {r.get('brokers', 1)} "
              f"broker(s): {r['error']}" for r in runs if "error" in r]
    many = [f"- {r['system']} at {r['partitions']:,} partitions on {r['brokers']} broker(s): "
            f"median of {r['runs']} runs" for r in results if r["runs"] > 1]
    if many:
        lines.append("\nRepeated runs (each figure and its load the median over the runs that "
                     "measured it; every run is in the JSON):\n\n" + "\n".join(many))
    return "\n".join(lines) + "\n" + ("\nFailures:\n\n" + "\n".join(errors) + "\n"
                                      if errors else "")


def plot(results: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    results = merged(results)
    fig, axes = plt.subplots(2, 4, figsize=(17, 7.5))
    colours = {Jocko.name: "tab:blue", Kafka.name: "tab:orange"}
    for ax, (key, label) in zip(axes.flat, FIGURES, strict=False):
        for system in (Jocko.name, Kafka.name):
            for nodes in sorted({r.get("brokers", 1) for r in results}):
                pts = sorted((r["partitions"], r[key]) for r in results
                             if r["system"] == system and r.get("brokers", 1) == nodes
                             and key in r)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts],
                            marker="o" if nodes == 1 else "s", color=colours[system],
                            linestyle="-" if nodes == 1 else "none",
                            label=f"{system}, {nodes} broker{'s' if nodes > 1 else ''}")
        ax.set_title(label)
        ax.set_xlabel("partitions")
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    axes.flat[-1].axis("off")
    fig.tight_layout()
    fig.savefig(path)
    return True


def write(results: list[dict[str, Any]], out_dir: Path, command: str) -> Path:
    """The JSON, the Markdown table and the growth curves of `results` under `out_dir`."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%M")
    out_dir.mkdir(parents=True, exist_ok=True)
    base = out_dir / f"{stamp}-scale"
    base.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    md = (f"# Scale: jocko-py beside Apache Kafka 4.4.0 ({stamp} UTC)\n\n"
          f"`{command}`, {os.cpu_count()} cores shared with other work (the 1-minute load "
          "average beside each figure, taken as it was measured); topics of 100 partitions "
          "of replication factor 1 (on three brokers the controller spreads them), one 1 KiB "
          "record per partition; descriptors and memory summed over the brokers; ratio = "
          "jocko-py / Kafka (under 1 is jocko-py ahead).\n\n" + table(results))
    if plot(results, base.with_suffix(".png")):
        md += f"\n![growth curves]({base.with_suffix('.png').name})\n"
    base.with_suffix(".md").write_text(md)
    print(md)
    return base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,5000,20000",
                    help="partitions on one broker (empty: none)")
    ap.add_argument("--cluster-sizes", default="50000",
                    help="partitions on --brokers brokers (empty: none)")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--systems", default="jocko,kafka")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--runs", type=int, default=1,
                    help="runs of each system at each size, alternating (the table shows "
                         "medians)")
    ap.add_argument("--kafka-log-jars", type=Path, default=None,
                    help="a directory with log4j-slf4j-impl (Kafka's SLF4J binding): Kafka "
                         "logs WARN and above, quoted when it fails")
    ap.add_argument("--create-only", action="store_true",
                    help="measure topic creation only (each run stops after it)")
    ap.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--tables-from", default="",
                    help="comma-separated JSON files of earlier runs: only write their "
                         "joint table and curves")
    args = ap.parse_args()
    # SIGTERM ends the run through the `finally`s: the brokers it started are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.tables_from:
        results: list[dict[str, Any]] = []
        for f in args.tables_from.split(","):
            try:
                results += json.loads(Path(f).read_text())
            except (OSError, ValueError) as e:
                print(f"error: cannot read results {f}: {e}", file=sys.stderr)
                return 2
        write(results, args.out_dir, "bench/scale.py " + " ".join(sys.argv[1:]))
        return 0
    try:
        runs = [(int(x), 1) for x in args.sizes.split(",") if x] + \
            [(int(x), args.brokers) for x in args.cluster_sizes.split(",") if x]
    except ValueError:
        print("error: --sizes and --cluster-sizes are comma-separated partition counts",
              file=sys.stderr)
        return 2
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
    Kafka.log_jars = args.kafka_log_jars
    global LOG_KEEP
    LOG_KEEP = args.out_dir / "scale-logs"
    results = []
    partial = args.out_dir / "scale-partial.json"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix="jocko-scale-") as tmp:
            for n, nodes in runs:
                for k in range(args.runs):
                    for kind in kinds:  # back to back at each size, alternating
                        r = run_one(kind, n, args.reps, Path(tmp), nodes, args.create_only)
                        CURRENT.clear()
                        if args.runs > 1:
                            r["run"] = k + 1
                        print(json.dumps(r), flush=True)
                        results.append(r)
                        partial.write_text(json.dumps(results, indent=1) + "\n")
    except (KeyboardInterrupt, SystemExit):
        # stopped (SIGTERM, Ctrl-C): the figures measured so far, the run under way
        # marked as interrupted, are written like a finished run's
        if CURRENT:
            r = dict(CURRENT[0])
            r.setdefault("error", "interrupted (the bench was stopped) after the figures "
                                  "shown")
            r.setdefault("error_load", _load())
            results.append(r)
        if not results:
            raise
        print("# interrupted: writing what was measured", file=sys.stderr)
    write(results, args.out_dir, "bench/scale.py " + " ".join(sys.argv[1:]))
    partial.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
