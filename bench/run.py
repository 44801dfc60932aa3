"""Benchmark driver: jocko-py against Apache Kafka on this machine, same Java tools.

What it owns: starting and stopping both brokers (never at the same time), running Kafka's
ProducerPerformance / ConsumerPerformance / TopicCommand and bench/java/BenchTool against each,
alternating brokers run by run so machine drift hits both equally, sampling broker RSS, and
writing bench/results/<date>.{md,json,png}.

Every case (scenario x repetition x broker) gets a fresh broker process and a fresh data dir:
that isolates the runs (no broker idles in the background of the other's run, no log left over)
and gives one "process start -> first acknowledged produce" sample per case.

Run from the repo root: `make -C bench all` (or `quick`, `smoke`, `kafka-vs-kafka`).
Needs `make -C bench fetch` first (Kafka jars in .cache/kafka/libs, helper class compiled).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime as dt
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
CACHE = REPO / ".cache" / "kafka"
LIBS = CACHE / "libs"
CLASSES = CACHE / "classes"
WORK = BENCH / "work"
RESULTS = BENCH / "results"
JAVA = shutil.which("java") or "java"

KAFKA_HEAP = ["-Xmx1G", "-Xms1G"]
# What bin/kafka-run-class.sh uses for the broker (KAFKA_JVM_PERFORMANCE_OPTS).
KAFKA_JVM = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
]
# What bin/kafka-producer-perf-test.sh and friends use for the tools.
TOOL_HEAP = ["-Xmx512M"]
SEGMENT_BYTES = 1073741824  # Kafka's default log.segment.bytes, set explicitly on both.
CLUSTER_ID = "amNrb3B5YmVuY2gwMDAwMA"  # any 22-char base64 UUID; the cluster is thrown away.

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0

# --------------------------------------------------------------------------- processes

_LIVE: set[subprocess.Popen[bytes]] = set()
_T0 = time.monotonic()


def _kill_all() -> None:
    for proc in list(_LIVE):
        _terminate(proc, grace=3.0)


def _terminate(proc: subprocess.Popen[bytes], grace: float = STOP_TIMEOUT_S) -> int | None:
    """SIGTERM the process group, SIGKILL after `grace` seconds. Bounded."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    else:
        # The leader is gone; children in its group may not be.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    _LIVE.discard(proc)
    return proc.returncode


def _on_signal(signum: int, _frame: Any) -> None:
    _kill_all()
    raise SystemExit(128 + signum)


def spawn(
    cmd: list[str],
    log: Path | None = None,
    stdin: bool = False,
    pipe_out: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    out: Any = subprocess.PIPE if pipe_out else (open(log, "ab") if log else subprocess.DEVNULL)
    proc = subprocess.Popen(
        cmd,
        stdout=out,
        stderr=subprocess.STDOUT if (log or pipe_out) else subprocess.DEVNULL,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        cwd=REPO,
        start_new_session=True,
        env=env,
    )
    if log and not pipe_out:
        out.close()
    _LIVE.add(proc)
    return proc


def run_tool(cmd: list[str], timeout: float, log: Path) -> tuple[int | None, str, float]:
    """Run a tool to completion or `timeout`; returns (rc or None if killed, output, seconds)."""
    t0 = time.monotonic()
    proc = spawn(cmd, pipe_out=True)
    chunks: list[bytes] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            chunks.append(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    rc: int | None
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _terminate(proc, grace=5.0)
        rc = None
    reader.join(timeout=10)
    _LIVE.discard(proc)
    text = b"".join(chunks).decode(errors="replace")
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{text}\n# rc={rc} after {time.monotonic() - t0:.1f}s\n")
    return rc, text, time.monotonic() - t0


def java_tool(main: str, *args: str, heap: list[str] = TOOL_HEAP) -> list[str]:
    cp = f"{LIBS}/*:{CLASSES}"
    return [
        JAVA,
        *heap,
        f"-Dlog4j.configuration=file:{WORK / 'log4j-tools.properties'}",
        "-cp",
        cp,
        main,
        *args,
    ]


RESERVED_PORTS = {9092, 19092}  # other jobs on this machine use these: never take them


def free_port() -> int:
    """A free ephemeral loopback port (the kernel picks it), never one of RESERVED_PORTS."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in RESERVED_PORTS:
            return port


def progress(msg: str) -> None:
    el = int(time.monotonic() - _T0)
    now = dt.datetime.now(dt.UTC).strftime("%H:%M:%S")
    print(f"[{now} +{el // 60:02d}:{el % 60:02d}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- RSS


def tree_pids(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
    return pids


def rss_kib(pid: int) -> int:
    total = 0
    for p in tree_pids(pid):
        with contextlib.suppress(OSError), open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def cpu_s(pid: int) -> float:
    """User+system CPU seconds used so far by the process tree (live processes only)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in tree_pids(pid):
        with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def _cpu_figures(cpu: float, wall: float, mb: float) -> dict[str, float]:
    return {
        "broker_cpu_s": cpu,
        "broker_cpu_util": cpu / wall if wall else 0.0,
        "broker_cpu_ms_per_mb": 1000 * cpu / mb if mb else 0.0,
    }


class RssSampler:
    """Samples the broker's process-tree VmRSS every `period` s, tagged with the current phase."""

    def __init__(self, pid: int, period: float = 0.25) -> None:
        self.pid, self.period = pid, period
        self.phase = "start"
        self.samples: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            kib = rss_kib(self.pid)
            if kib:
                self.samples.append((self.phase, kib))

    def stats(self, phase: str) -> dict[str, float]:
        xs = [k for p, k in self.samples if p == phase]
        if not xs:
            return {}
        return {"peak_mb": max(xs) / 1024, "median_mb": statistics.median(xs) / 1024}


# --------------------------------------------------------------------------- brokers


class Broker:
    """One broker kind. `start` only spawns; readiness is the first-produce probe's job."""

    name = "broker"

    def __init__(self, label: str) -> None:
        self.label = label
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.dir = WORK
        self.setup_s = 0.0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def prepare(self, case_dir: Path) -> None:
        self.dir = case_dir
        self.port = free_port()

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        self.proc = spawn(self.command(), log=self.dir / "broker.log")

    def stop(self) -> None:
        if self.proc is not None:
            _terminate(self.proc)
            self.proc = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class KafkaBroker(Broker):
    name = "kafka"
    _template: Path | None = None

    def prepare(self, case_dir: Path) -> None:
        super().prepare(case_dir)
        cport = free_port()
        data = case_dir / "data"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{cport}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{cport}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.segment.bytes": str(SEGMENT_BYTES),
            "auto.create.topics.enable": "true",
        }
        (case_dir / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (case_dir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, f\n"
            "log4j.appender.f=org.apache.log4j.FileAppender\n"
            f"log4j.appender.f.File={case_dir / 'server.log'}\n"
            "log4j.appender.f.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.f.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.request.logger=WARN\n"
        )
        # `StorageTool format` writes only meta.properties and bootstrap.checkpoint (cluster id,
        # node id, metadata version), nothing port-specific: format once per driver run and
        # copy the result, which saves a JVM start per case.
        if self._template is None:
            t0 = time.monotonic()
            rc, out, _ = run_tool(
                [
                    JAVA,
                    *TOOL_HEAP,
                    "-cp",
                    f"{LIBS}/*",
                    f"-Dlog4j.configuration=file:{WORK / 'log4j-tools.properties'}",
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    CLUSTER_ID,
                    "-c",
                    str(case_dir / "server.properties"),
                ],
                timeout=120,
                log=case_dir / "tools.log",
            )
            if rc != 0:
                raise RuntimeError(f"kafka storage format failed: {out[-2000:]}")
            self.setup_s = time.monotonic() - t0
            template = WORK / f"kafka-formatted.{self.label}"
            shutil.rmtree(template, ignore_errors=True)
            shutil.copytree(data, template)
            self._template = template
        else:
            shutil.copytree(self._template, data)

    def command(self) -> list[str]:
        return [
            JAVA,
            *KAFKA_HEAP,
            *KAFKA_JVM,
            f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}",
            "-Dkafka.logs.dir=" + str(self.dir),
            "-cp",
            f"{LIBS}/*",
            "kafka.Kafka",
            str(self.dir / "server.properties"),
        ]


class JockoBroker(Broker):
    name = "jocko-py"

    def __init__(self, label: str, overrides: dict[str, str]) -> None:
        super().__init__(label)
        self.overrides = overrides

    def command(self) -> list[str]:
        cmd = [
            str(REPO / ".venv" / "bin" / "python"),
            "-m",
            "jocko_py.cli",
            "broker",
            "--broker-id",
            "0",
            "--broker-addr",
            self.bootstrap,
            "--data-dir",
            str(self.dir / "data"),
        ]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd


# --------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    key: str
    kind: str  # "produce" | "e2e"
    size: int = 1024
    partitions: int = 1
    acks: str = "1"
    consume: bool = False
    seconds: float = 20.0
    group: str = "main"  # "main" | "sweep" | "latency"
    rate: int = 0
    warmup_records: int = 0  # e2e: unrecorded load sent and read back before the clock starts
    discard_s: int = 2  # e2e: first seconds of the measured phase not counted


@dataclass
class Scale:
    reps: int
    produce_s: float
    sweep_s: float
    e2e_s: int
    e2e_rate: int
    sizes: tuple[int, ...] = (100, 1024, 10240)
    partitions: tuple[int, ...] = (1, 10, 100, 1000)
    main: bool = True
    sweep_reps: int = 0  # 0: same as reps
    calib_s: float = 5.0  # unrecorded calibration run per broker and main produce shape
    aim: float = 1.3  # record count = aim x seconds x the rate known for that broker and shape
    # A repeat of a short run aims higher: a fresh JVM's rate grows with the run's length (JIT
    # amortised), so the short run's own rate underestimates the longer run's.
    repeat_aim: float = 2.0
    e2e_warmup_records: int = 100_000  # same warm-up load on both brokers before e2e
    e2e_discard_s: int = 2


FULL = Scale(sweep_reps=2, reps=3, produce_s=20, sweep_s=10, e2e_s=20, e2e_rate=1000)
QUICK = Scale(
    reps=1, produce_s=6, sweep_s=4, e2e_s=8, e2e_rate=1000, calib_s=3, e2e_warmup_records=50_000
)
SMOKE = Scale(
    reps=1,
    produce_s=2,
    sweep_s=2,
    e2e_s=4,
    e2e_rate=500,
    sizes=(1024,),
    partitions=(1,),
    main=False,
    calib_s=2,
    e2e_warmup_records=5_000,
    e2e_discard_s=1,
)


def size_label(size: int) -> str:
    return f"{size // 1024}KiB" if size % 1024 == 0 else f"{size}B"


def scenarios(scale: Scale) -> list[Scenario]:
    out: list[Scenario] = []
    combos = [("1", 1), ("1", 8), ("all", 1), ("all", 8)] if scale.main else [("1", 1)]
    for acks, parts in combos:
        out.append(
            Scenario(
                f"produce-1KiB-acks{acks}-p{parts}",
                "produce",
                1024,
                parts,
                acks,
                consume=True,
                seconds=scale.produce_s,
            )
        )
    out.append(
        Scenario(
            f"e2e-1KiB-{scale.e2e_rate}rps",
            "e2e",
            1024,
            1,
            "1",
            seconds=scale.e2e_s,
            group="latency",
            rate=scale.e2e_rate,
            warmup_records=scale.e2e_warmup_records,
            discard_s=scale.e2e_discard_s,
        )
    )
    # The sweep is the full grid, every point its own case (acks=1, produce only). 1 KiB first:
    # its rates seed the record counts of the other sizes.
    for size in sorted(scale.sizes, key=lambda z: (z != 1024, z)):
        for parts in scale.partitions:
            out.append(
                Scenario(
                    f"sweep-{size_label(size)}-p{parts}",
                    "produce",
                    size,
                    parts,
                    "1",
                    seconds=scale.sweep_s,
                    group="sweep",
                )
            )
    return out


# --------------------------------------------------------------------------- tool output

PP_FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)
PP_WINDOW = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency\.$",
    re.M,
)


def parse_producer(out: str, timed_out: bool) -> dict[str, float]:
    m = PP_FINAL.search(out)
    if m and not timed_out:
        return {
            "records": float(m[1]),
            "records_per_s": float(m[2]),
            "mb_per_s": float(m[3]),
            "avg_latency_ms": float(m[4]),
            "max_latency_ms": float(m[5]),
            "p50_latency_ms": float(m[6]),
            "p99_latency_ms": float(m[8]),
            # The produce phase's own duration (first send to last ack), without JVM start.
            "duration_s": float(m[1]) / float(m[2]) if float(m[2]) else 0.0,
        }
    # Killed at the time limit: the 5-s windows it printed still give a throughput.
    wins = PP_WINDOW.findall(out)
    if not wins:
        return {}
    n = sum(float(w[0]) for w in wins)
    secs = sum(float(w[0]) / float(w[1]) for w in wins if float(w[1]) > 0)
    mb = sum(float(w[0]) / float(w[1]) * float(w[2]) for w in wins if float(w[1]) > 0)
    return {
        "records": n,
        "records_per_s": n / secs if secs else 0.0,
        "mb_per_s": mb / secs if secs else 0.0,
        "duration_s": secs,
        "partial": 1.0,
    }


def parse_consumer(out: str) -> dict[str, float]:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("start.time") and i + 1 < len(lines):
            keys = [k.strip() for k in ln.split(",")]
            vals = [v.strip() for v in lines[i + 1].split(",")]
            row = dict(zip(keys, vals, strict=False))
            with contextlib.suppress(KeyError, ValueError):
                return {
                    "mb": float(row["data.consumed.in.MB"]),
                    "mb_per_s": float(row["MB.sec"]),
                    "records": float(row["data.consumed.in.nMsg"]),
                    "records_per_s": float(row["nMsg.sec"]),
                    "rebalance_ms": float(row["rebalance.time.ms"]),
                    "fetch_mb_per_s": float(row["fetch.MB.sec"]),
                    "duration_s": float(row["fetch.time.ms"]) / 1000,
                    "fetch_records_per_s": float(row["fetch.nMsg.sec"]),
                }
    return {}


E2E = re.compile(
    r"E2E sent=(\d+) received=(\d+) measured=(\d+) start_offset=\d+ "
    r"p50_ms=([\d.NaN]+) p99_ms=([\d.NaN]+) p999_ms=([\d.NaN]+) "
    r"max_ms=([\d.NaN]+) avg_ms=([\d.NaN]+)"
)
E2E_EXTRA = re.compile(
    r"\b(send_p50_ms|send_p99_ms|send_p999_ms|send_max_ms|warmup_records|"
    r"warmup_received|warmup_ms)=([\d.NaN]+)"
)


def parse_e2e(out: str) -> dict[str, float]:
    m = E2E.search(out)
    if not m:
        return {}
    return {
        "sent": float(m[1]),
        "received": float(m[2]),
        "measured": float(m[3]),
        "p50_ms": float(m[4]),
        "p99_ms": float(m[5]),
        "p999_ms": float(m[6]),
        "max_ms": float(m[7]),
        "avg_ms": float(m[8]),
        **{k: float(v) for k, v in E2E_EXTRA.findall(out)},
    }


# --------------------------------------------------------------------------- one case


@dataclass
class CaseResult:
    scenario: str
    broker: str
    label: str
    rep: int
    ok: bool
    loadavg_1m: float
    startup_ms: float | None = None
    setup_s: float = 0.0
    produce: dict[str, float] = field(default_factory=dict)
    consume: dict[str, float] = field(default_factory=dict)
    e2e: dict[str, float] = field(default_factory=dict)
    rss_idle: dict[str, float] = field(default_factory=dict)
    rss_load: dict[str, float] = field(default_factory=dict)
    topic_create_s: float | None = None
    topic_ready_s: float | None = None  # after create: until every partition took a write
    error: str = ""
    workdir: str = ""
    flags: list[str] = field(default_factory=list)  # e.g. "short": produce phase under target


class RateBook:
    """Remembers each broker's produce rate per shape so the next run's record count fills its
    target time. Unknown shapes borrow the nearest known shape of the same broker (same record
    size and closest partition count, else 1 KiB scaled gently by record size)."""

    GUESS_MB_S = {"kafka": 15.0, "jocko-py": 15.0}

    def __init__(self) -> None:
        self.rates: dict[tuple[str, int, str, int], float] = {}

    def known(self, label: str, sc: Scenario) -> bool:
        return (label, sc.size, sc.acks, sc.partitions) in self.rates

    def estimate_rps(self, label: str, broker: str, sc: Scenario) -> float:
        rps = self.rates.get((label, sc.size, sc.acks, sc.partitions))
        if rps is not None:
            return rps

        def dist(k: tuple[str, int, str, int]) -> tuple[int, float, int]:
            return (
                int(k[1] != sc.size),
                abs(math.log(k[3]) - math.log(sc.partitions)),
                int(k[2] != sc.acks),
            )

        mine = [k for k in self.rates if k[0] == label]
        if mine:
            k = min(mine, key=dist)
            if k[1] == sc.size:
                return self.rates[k]
            mb = self.rates[k] * k[1] / 1048576
            mb /= {100: 0.25, 10240: 1.5}.get(k[1], 1.0)
        else:
            mb = self.GUESS_MB_S.get(broker, 10.0)
        # Small records cost per record, big ones per byte: scale the 1 KiB rate gently.
        factor = {100: 0.25, 10240: 1.5}.get(sc.size, 1.0)
        return mb * factor * 1048576 / sc.size

    def count(self, label: str, broker: str, sc: Scenario, seconds: float) -> int:
        return max(2000, int(self.estimate_rps(label, broker, sc) * seconds))

    def learn(self, label: str, sc: Scenario, res: dict[str, float]) -> None:
        if res.get("records_per_s"):
            self.rates[(label, sc.size, sc.acks, sc.partitions)] = res["records_per_s"]


def loadavg() -> float:
    return os.getloadavg()[0]


def create_topic(b: Broker, topic: str, parts: int, log: Path) -> float:
    t0 = time.monotonic()
    rc, out, _ = run_tool(
        java_tool(
            "org.apache.kafka.tools.TopicCommand",
            "--bootstrap-server",
            b.bootstrap,
            "--create",
            "--topic",
            topic,
            "--partitions",
            str(parts),
            "--replication-factor",
            "1",
            "--config",
            f"segment.bytes={SEGMENT_BYTES}",
        ),
        timeout=180,
        log=log,
    )
    if rc != 0:
        raise RuntimeError(f"TopicCommand --create {topic} failed rc={rc}: {out[-1500:]}")
    return time.monotonic() - t0


def wait_topic_ready(b: Broker, topic: str, parts: int, log: Path) -> float:
    """Seconds until every partition of a new topic has acknowledged a write.

    Kafka answers CreateTopics when the controller has committed the records; the broker
    creates the partitions' logs afterwards (1000 partitions: tens of seconds on a loaded
    machine). Without this wait a produce run would time the log creation, not produce.
    """
    rc, out, secs = run_tool(
        java_tool("BenchTool", "ready", b.bootstrap, topic, str(parts), "300000"),
        timeout=330,
        log=log,
    )
    m = re.search(r"TOPIC_READY (\d+)", out)
    if rc != 0 or not m:
        raise RuntimeError(f"topic {topic} not writable rc={rc}: {out[-1500:]}")
    return int(m[1]) / 1000


def wait_first_produce(b: Broker, log: Path, timeout_s: float = START_TIMEOUT_S) -> float:
    """Spawn the broker and return ms from spawn to the first acknowledged produce."""
    probe = spawn(
        java_tool(
            "BenchTool", "first-produce", b.bootstrap, "bench-probe", str(int(timeout_s * 1000))
        ),
        stdin=True,
        pipe_out=True,
    )
    try:
        assert probe.stdout is not None and probe.stdin is not None
        ready = _readline(probe, 60.0)
        if ready.strip() != "READY":
            raise RuntimeError(f"probe did not get ready: {ready!r}")
        t0 = time.monotonic()
        b.start()
        probe.stdin.write(b"GO\n")
        probe.stdin.flush()
        line = _readline(probe, timeout_s + 5)
        t1 = time.monotonic()
        with open(log, "a") as f:
            f.write(f"probe: {line}")
        if not line.startswith("ACKED"):
            rest = _readline(probe, 2.0)
            raise RuntimeError(f"first produce failed: {line.strip()} {rest.strip()}")
        return (t1 - t0) * 1000
    finally:
        _terminate(probe, grace=5.0)


def _readline(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """Next stdout line that is not a log line, within `timeout` seconds (else "")."""
    box: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            s = raw.decode(errors="replace")
            if s.startswith(("READY", "ACKED", "FAILED")):
                box.append(s)
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout)
    return box[0] if box else ""


def run_case(
    b: Broker,
    sc: Scenario,
    rep: int,
    book: RateBook,
    keep: bool,
    aim: float = 1.0,
    tag: str = "",
) -> CaseResult:
    """One fresh broker, one scenario. Produce runs send aim x sc.seconds worth of records at
    the rate `book` knows for this broker and shape."""
    case_dir = WORK / f"{sc.key}.{b.label}.{tag or rep}"
    shutil.rmtree(case_dir, ignore_errors=True)
    case_dir.mkdir(parents=True)
    res = CaseResult(
        sc.key,
        b.name,
        b.label,
        rep,
        ok=False,
        loadavg_1m=loadavg(),
        workdir=str(case_dir.relative_to(REPO)),
    )
    tlog = case_dir / "tools.log"
    try:
        b.prepare(case_dir)
        res.setup_s = b.setup_s
        res.startup_ms = wait_first_produce(b, tlog)
        assert b.proc is not None
        with RssSampler(b.proc.pid) as rss:
            time.sleep(1.0)
            rss.phase = "idle"
            time.sleep(1.0)
            rss.phase = "setup"
            topic = f"bench-{sc.partitions}p"
            res.topic_create_s = create_topic(b, topic, sc.partitions, tlog)
            res.topic_ready_s = wait_topic_ready(b, topic, sc.partitions, tlog)
            rss.phase = "load"
            if sc.kind == "produce":
                _produce_and_consume(b, sc, topic, book, res, tlog, aim)
            else:
                rc, out, _ = run_tool(
                    java_tool(
                        "BenchTool",
                        "e2e",
                        b.bootstrap,
                        topic,
                        str(sc.rate),
                        str(int(sc.seconds)),
                        str(sc.size),
                        sc.acks,
                        str(sc.discard_s),
                        str(sc.warmup_records),
                    ),
                    timeout=sc.seconds + 180,
                    log=tlog,
                )
                res.e2e = parse_e2e(out)
                if res.e2e and sc.rate:
                    res.e2e["duration_s"] = res.e2e["measured"] / sc.rate
                if rc != 0 or not res.e2e:
                    raise RuntimeError(f"e2e tool failed rc={rc}: {out[-1500:]}")
            rss.phase = "done"
        res.rss_idle = rss.stats("idle")
        res.rss_load = rss.stats("load")
        if not b.alive():
            raise RuntimeError("broker exited during the run")
        res.ok = True
    except Exception as e:  # noqa: BLE001 - one failed case must not end the benchmark
        res.error = f"{type(e).__name__}: {e}"[:3000]
        progress(f"  FAILED: {res.error.splitlines()[0][:300]} (see {case_dir})")
    finally:
        b.stop()
        if res.ok and not keep:
            shutil.rmtree(case_dir / "data", ignore_errors=True)
    return res


def _produce_and_consume(
    b: Broker,
    sc: Scenario,
    topic: str,
    book: RateBook,
    res: CaseResult,
    tlog: Path,
    aim: float = 1.0,
) -> None:
    n = book.count(b.label, b.name, sc, aim * sc.seconds)
    limit = max(3 * aim * sc.seconds, 30.0)
    assert b.proc is not None
    pid = b.proc.pid
    c0 = cpu_s(pid)
    rc, out, secs = run_tool(
        java_tool(
            "org.apache.kafka.tools.ProducerPerformance",
            "--topic",
            topic,
            "--num-records",
            str(n),
            "--record-size",
            str(sc.size),
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={b.bootstrap}",
            f"acks={sc.acks}",
        ),
        timeout=limit + 60,
        log=tlog,
    )
    res.produce = parse_producer(out, timed_out=rc is None)
    res.produce["wall_s"] = secs
    mb = res.produce.get("records", 0.0) * sc.size / 1048576
    res.produce.update(_cpu_figures(cpu_s(pid) - c0, secs, mb))
    if not res.produce.get("records_per_s"):
        raise RuntimeError(f"ProducerPerformance failed rc={rc}: {out[-1500:]}")
    if rc not in (0, None):
        raise RuntimeError(f"ProducerPerformance rc={rc}: {out[-1500:]}")
    book.learn(b.label, sc, res.produce)
    if sc.consume and rc == 0:
        c0 = cpu_s(pid)
        rc, out, secs = run_tool(
            java_tool(
                "org.apache.kafka.tools.ConsumerPerformance",
                "--bootstrap-server",
                b.bootstrap,
                "--topic",
                topic,
                "--messages",
                str(n),
                "--timeout",
                "30000",
                "--group",
                f"bench-{time.time_ns()}",
            ),
            timeout=limit * 3 + 60,
            log=tlog,
        )
        res.consume = parse_consumer(out)
        if rc != 0 or not res.consume:
            raise RuntimeError(f"ConsumerPerformance failed rc={rc}: {out[-1500:]}")
        res.consume["wall_s"] = secs
        res.consume.update(_cpu_figures(cpu_s(pid) - c0, secs, res.consume["mb"]))
        if res.consume["records"] < n:
            raise RuntimeError(f"ConsumerPerformance read {res.consume['records']} of {n}")


# --------------------------------------------------------------------------- summary


def hardware() -> dict[str, str]:
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        kib = int(f.readline().split()[1])
        mem = f"{kib / 1024 / 1024:.1f} GiB"
    jv = subprocess.run([JAVA, "-version"], capture_output=True, text=True, timeout=30)
    java = (jv.stderr.splitlines() or ["?"])[0]
    kafka = next((p.name for p in LIBS.glob("kafka_2.13-*.jar")), "?")
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "ram": mem,
        "kernel": platform.release(),
        "java": java,
        "python": platform.python_version(),
        "kafka": kafka.removesuffix(".jar"),
        "kafka_jvm": " ".join(KAFKA_HEAP + KAFKA_JVM[1:3]),
    }


def hw_line(h: dict[str, str]) -> str:
    return (
        f"{h['cpu']}, {h['cores']} cores, {h['ram']} RAM, Linux {h['kernel']}, {h['java']}, "
        f"Python {h['python']}, {h['kafka']} (broker {h['kafka_jvm']})"
    )


@dataclass
class Figure:
    key: str
    title: str
    unit: str
    higher_better: bool
    get: Callable[[CaseResult], float | None]
    scenarios: tuple[str, ...] = ()  # empty: every scenario
    target: str = ""
    duration: Callable[[CaseResult], float | None] | None = None  # the measured phase, s


def _g(part: str, key: str) -> Callable[[CaseResult], float | None]:
    def get(r: CaseResult) -> float | None:
        v = getattr(r, part).get(key)
        return float(v) if v is not None else None

    return get


def _topic_total(r: CaseResult) -> float | None:
    if r.topic_create_s is None or r.topic_ready_s is None:
        return None
    return r.topic_create_s + r.topic_ready_s


def figures(scs: list[Scenario]) -> list[Figure]:
    figs: list[Figure] = []
    p_dur, c_dur, e_dur = (
        _g("produce", "duration_s"),
        _g("consume", "duration_s"),
        _g("e2e", "duration_s"),
    )
    main = [sc for sc in scs if sc.group == "main"]
    sweep = [sc for sc in scs if sc.group == "sweep"]
    for sc in main:
        figs.append(
            Figure(
                f"{sc.key}.produce_mb_s",
                f"produce {sc.key[8:]}",
                "MB/s",
                True,
                _g("produce", "mb_per_s"),
                (sc.key,),
                ">= 0.5",
                p_dur,
            )
        )
    for sc in main:
        if sc.consume:
            figs.append(
                Figure(
                    f"{sc.key}.consume_mb_s",
                    f"consume {sc.key[8:]} (fetch)",
                    "MB/s",
                    True,
                    _g("consume", "fetch_mb_per_s"),
                    (sc.key,),
                    ">= 0.5",
                    c_dur,
                )
            )
    for sc in main:
        figs.append(
            Figure(
                f"{sc.key}.produce_cpu",
                f"broker CPU per MB produced {sc.key[8:]}",
                "ms/MB",
                False,
                _g("produce", "broker_cpu_ms_per_mb"),
                (sc.key,),
                duration=p_dur,
            )
        )
    for sc in main:
        if sc.consume:
            figs.append(
                Figure(
                    f"{sc.key}.consume_cpu",
                    f"broker CPU per MB consumed {sc.key[8:]}",
                    "ms/MB",
                    False,
                    _g("consume", "broker_cpu_ms_per_mb"),
                    (sc.key,),
                    duration=c_dur,
                )
            )
    for sc in scs:
        if sc.group == "latency":
            for k, t, what in (
                ("p50_ms", "", ""),
                ("p99_ms", "<= 2", ""),
                ("p999_ms", "", ""),
                ("send_p99_ms", "", ", from actual send"),
            ):
                name = k.removeprefix("send_")[:-3]
                figs.append(
                    Figure(
                        f"{sc.key}.{k}",
                        f"e2e latency {name} ({sc.rate}/s, 1 KiB{what})",
                        "ms",
                        False,
                        _g("e2e", k),
                        (sc.key,),
                        t,
                        e_dur,
                    )
                )
    for sc in sweep:
        figs.append(
            Figure(
                f"{sc.key}.produce_mb_s",
                f"produce {sc.key}",
                "MB/s",
                True,
                _g("produce", "mb_per_s"),
                (sc.key,),
                duration=p_dur,
            )
        )
    for sc in sweep:
        figs.append(
            Figure(
                f"{sc.key}.produce_cpu",
                f"broker CPU per MB produced {sc.key}",
                "ms/MB",
                False,
                _g("produce", "broker_cpu_ms_per_mb"),
                (sc.key,),
                duration=p_dur,
            )
        )
    for parts in sorted({sc.partitions for sc in sweep}):
        if parts >= 100:
            figs.append(
                Figure(
                    f"topic_create_p{parts}_s",
                    f"{parts}-partition topic: TopicCommand + until all writable",
                    "s",
                    False,
                    _topic_total,
                    tuple(sc.key for sc in sweep if sc.partitions == parts),
                )
            )
    main_keys = tuple(sc.key for sc in scs if sc.group == "main")
    figs.append(
        Figure(
            "rss_load_peak_mb",
            "broker RSS peak under produce+consume load",
            "MB",
            False,
            _g("rss_load", "peak_mb"),
            main_keys,
            "<= 0.3",
        )
    )
    figs.append(
        Figure(
            "rss_load_median_mb",
            "broker RSS median under load",
            "MB",
            False,
            _g("rss_load", "median_mb"),
            main_keys,
        )
    )
    figs.append(
        Figure(
            "rss_idle_mb", "broker RSS idle after start", "MB", False, _g("rss_idle", "median_mb")
        )
    )
    figs.append(
        Figure(
            "startup_ms",
            "process start -> first acked produce",
            "ms",
            False,
            lambda r: r.startup_ms,
            (),
            "< 1",
        )
    )
    return figs


def summarize(
    results: list[CaseResult], scs: list[Scenario], base: str, cont: str
) -> list[dict[str, Any]]:
    rows = []
    for f in figures(scs):
        vals: dict[str, list[float]] = {base: [], cont: []}
        durs: list[float] = []
        short = 0
        for r in results:
            if r.ok and r.label in vals and (not f.scenarios or r.scenario in f.scenarios):
                v = f.get(r)
                if v is not None:
                    vals[r.label].append(v)
                    d = f.duration(r) if f.duration else None
                    if d is not None:
                        durs.append(d)
                    short += f.duration is not None and "short" in r.flags
        med = {k: (statistics.median(v) if v else None) for k, v in vals.items()}
        b, c = med[base], med[cont]
        ratio = (c / b) if (b and c is not None) else None
        met = None
        if ratio is not None and f.target:
            op, num = f.target.split()
            met = {">=": ratio >= float(num), "<=": ratio <= float(num), "<": ratio < float(num)}[
                op
            ]
        rows.append(
            {
                "key": f.key,
                "title": f.title,
                "unit": f.unit,
                "base": b,
                "contender": c,
                "ratio": ratio,
                "n_base": len(vals[base]),
                "n_contender": len(vals[cont]),
                "target": f.target,
                "met": met,
                "higher_better": f.higher_better,
                "min_duration_s": min(durs) if durs else None,
                "short_runs": short,
            }
        )
    return rows


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "—"
    if unit == "ms" and v < 10:
        return f"{v:.2f}"
    return f"{v:,.1f}" if v < 1000 else f"{v:,.0f}"


def write_results(
    results: list[CaseResult],
    scs: list[Scenario],
    scale: Scale,
    base: str,
    cont: str,
    hw: dict[str, str],
    started: dt.datetime,
    mode: str,
    out_stem: Path,
    finished: str | None = None,
    extra: dict[str, list[Any]] | None = None,
) -> list[dict[str, Any]]:
    rows = summarize(results, scs, base, cont)
    extra = extra or {}
    loads = [r.loadavg_1m for r in results]
    doc = {
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": finished or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "mode": mode,
        "base": base,
        "contender": cont,
        "hardware": hw,
        "hardware_line": hw_line(hw),
        "scale": asdict(scale),
        "loadavg_1m_before_runs": {
            "min": min(loads, default=0),
            "median": statistics.median(loads) if loads else 0,
            "max": max(loads, default=0),
        },
        "settings": {
            "log.segment.bytes": SEGMENT_BYTES,
            "kafka_heap": KAFKA_HEAP,
            "kafka_jvm": KAFKA_JVM,
            "tool_heap": TOOL_HEAP,
            "flush": "defaults on both (no fsync per message)",
        },
        "figures": rows,
        "scenarios": [asdict(s) for s in scs],
        "runs": [asdict(r) for r in results],
        # Unrecorded: calibration runs (rate per broker and main shape) and runs repeated
        # because their produce phase was shorter than the target.
        "calibration_runs": [
            r if isinstance(r, dict) else asdict(r) for r in extra.get("calibration", [])
        ],
        "discarded_runs": [
            r if isinstance(r, dict) else asdict(r) for r in extra.get("discarded", [])
        ],
    }
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    out_stem.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    out_stem.with_suffix(".md").write_text(render_md(doc, rows, out_stem))
    with contextlib.suppress(Exception):
        chart(results, scs, base, cont, out_stem.with_suffix(".png"))
    return rows


def table_md(rows: list[dict[str, Any]], base: str, cont: str) -> str:
    lines = [
        f"| figure | unit | {base} | {cont} | {cont} / {base} | target | met | shortest run, s |",
        "|---|---|---:|---:|---:|---|---|---:|",
    ]
    for r in rows:
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}"
        met = {True: "yes", False: "**no**", None: ""}[r["met"]]
        n = f" (n={r['n_base']}/{r['n_contender']})"
        d = r.get("min_duration_s")
        dur = "" if d is None else f"{d:.1f}"
        if r.get("short_runs"):
            dur += f" ({r['short_runs']} short)"
        lines.append(
            f"| {r['title']}{n} | {r['unit']} | {_fmt(r['base'], r['unit'])} | "
            f"{_fmt(r['contender'], r['unit'])} | {ratio} | {r['target']} | {met} | {dur} |"
        )
    return "\n".join(lines) + "\n"


def render_md(doc: dict[str, Any], rows: list[dict[str, Any]], stem: Path) -> str:
    base, cont = doc["base"], doc["contender"]
    la = doc["loadavg_1m_before_runs"]
    sc = doc["scale"]
    failed = [r for r in doc["runs"] if not r["ok"]]
    out = [
        f"# jocko-py vs Apache Kafka — {doc['started_utc']} ({doc['mode']})\n",
        f"Hardware: {doc['hardware_line']}\n",
        f"1-min loadavg before each run: min {la['min']:.2f}, median {la['median']:.2f}, "
        f"max {la['max']:.2f} (the machine is shared; high values mean noisy numbers).\n",
        f"Medians of {sc['reps']} alternating run(s) per broker "
        f"({sc['sweep_reps'] or sc['reps']} for the sweep grid); every run is a fresh broker "
        f"process and data dir. Produce runs must last at least {sc['produce_s']:g} s (main) / "
        f"{sc['sweep_s']:g} s (sweep) of produce phase (records / rate, without JVM start): "
        f"record counts aim at {sc.get('aim', 1.3):g}x that from the broker's rate for the shape "
        f"(main shapes: an unrecorded {sc.get('calib_s', 5):g}-s calibration run per broker "
        "first), a shorter run is repeated once (aiming at "
        f"{sc.get('repeat_aim', 2.0):g}x) and, if still short, flagged "
        f"({len(doc.get('discarded_runs', []))} run(s) repeated). The last column is the "
        "shortest measured phase among the runs behind a figure. E2e latency is open-loop at "
        f"a fixed rate for {sc['e2e_s']} s after the same warm-up on both brokers "
        f"({sc.get('e2e_warmup_records', 0):,} records produced and read back, unrecorded; "
        f"then the first {sc.get('e2e_discard_s', 2)} s discarded), measured from each record's "
        "*scheduled* send time (no coordinated omission); the `from actual send` row is the "
        "same records measured from the moment `send()` was called.\n",
        table_md(rows, base, cont),
        "Ratios are contender / base: for throughput higher is better, for latency, memory, "
        "CPU and start-up time lower is better. *Broker CPU per MB* is the broker process "
        "tree's user+system CPU time (from /proc) during the tool run divided by the MB moved: "
        "it measures the broker's own cost even when the shared machine, not the broker, limits "
        "throughput (the JSON has `broker_cpu_util`, CPU seconds per wall second, per run).\n",
        f"Chart of the sweep grid (throughput and broker CPU per MB against partitions, one "
        f"line per record size and broker): `{stem.with_suffix('.png').name}`. Raw runs: "
        f"`{stem.with_suffix('.json').name}`.\n",
        "## Settings\n",
        f"- Both: one broker on loopback, `log.segment.bytes={SEGMENT_BYTES}`, default flush "
        "settings (no fsync per message), topics created with `TopicCommand`, "
        "replication factor 1; the Java tools of the same Kafka version against both.",
        f"- Kafka: KRaft combined broker+controller, JVM `{' '.join(KAFKA_HEAP + KAFKA_JVM)}`, "
        "`group.initial.rebalance.delay.ms=0` (as Kafka's shipped server.properties).",
        "- Tools: `ProducerPerformance --throughput -1` (default batching), "
        "`ConsumerPerformance` over the records just produced (figure is fetch MB/s, which "
        "excludes the group join), `BenchTool e2e` (bench/java) for latency, "
        "`BenchTool first-produce` for start-up time (JVM warm before the broker is spawned).",
        "",
    ]
    if failed:
        out.append("## Failed runs\n")
        for r in failed:
            out.append(
                f"- {r['scenario']} / {r['label']} run {r['rep']}: "
                f"{r['error'].splitlines()[0][:300]}"
            )
        out.append("")
    return "\n".join(out)


def chart(results: list[CaseResult], scs: list[Scenario], base: str, cont: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    def med(label: str, key: str, field_: str) -> float | None:
        xs = [
            r.produce.get(field_, 0.0)
            for r in results
            if r.ok and r.label == label and r.scenario == key and r.produce.get(field_)
        ]
        return statistics.median(xs) if xs else None

    sweep = [s for s in scs if s.group == "sweep"]
    sizes = sorted({s.size for s in sweep})
    colors = {
        size: c
        for size, c in zip(sizes, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False)
    }
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for ax, field_, ylabel in (
        (axes[0], "mb_per_s", "produce MB/s (acks=1, median)"),
        (axes[1], "broker_cpu_ms_per_mb", "broker CPU ms per MB produced (median)"),
    ):
        for size in sizes:
            pts = sorted((s.partitions, s.key) for s in sweep if s.size == size)
            for label, style in ((base, "o--"), (cont, "s-")):
                xy = [(x, med(label, k, field_)) for x, k in pts]
                xy = [(x, y) for x, y in xy if y is not None]
                if xy:
                    ax.plot(
                        [x for x, _ in xy],
                        [y for _, y in xy],
                        style,
                        color=colors.get(size),
                        label=f"{label}, {size_label(size)}",
                    )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FormatStrFormatter("%g"))
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("partitions")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, ncol=2)
    loads = [r.loadavg_1m for r in results]
    la = statistics.median(loads) if loads else 0.0
    fig.suptitle(
        f"ProducerPerformance sweep: record size x partitions ({base} dashed, {cont} solid; "
        f"{os.cpu_count()} cores, median 1-min loadavg {la:.1f})"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny run that checks the harness")
    p.add_argument("--quick", action="store_true", help="same as BENCH_QUICK=1")
    p.add_argument(
        "--contender",
        choices=["jocko", "kafka"],
        default="jocko",
        help="what runs against Kafka (kafka: a second Kafka, proves the harness)",
    )
    p.add_argument("--reps", type=int, help="repetitions per scenario and broker")
    p.add_argument("--only", default="", help="comma-separated substrings of scenario keys")
    p.add_argument(
        "--out", default="", help="result file stem (default bench/results/<UTC date>T<HHMM>)"
    )
    p.add_argument("--keep", action="store_true", help="keep broker data dirs of good runs")
    p.add_argument(
        "--jocko-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra --override for the jocko-py broker",
    )
    p.add_argument(
        "--render",
        metavar="JSON",
        help="only rewrite the .md and .png next to an existing results .json",
    )
    return p.parse_args(argv)


README_MARK = "<!-- latest-results: written by bench/run.py, do not edit by hand -->"


def update_readme(json_path: Path) -> None:
    """Replace bench/README.md's "Latest results" section with the table of `json_path`."""
    doc = json.loads(json_path.read_text())
    readme = BENCH / "README.md"
    text = readme.read_text()
    head = text.split("## Latest results", 1)[0]
    la = doc["loadavg_1m_before_runs"]
    rel = json_path.relative_to(REPO) if json_path.is_relative_to(REPO) else json_path
    section = (
        f"## Latest results\n\n{README_MARK}\n\n"
        f"From `{rel.with_suffix('.md')}` ({doc['mode']} run, {doc['started_utc']}; chart "
        f"`{rel.with_suffix('.png')}`). Hardware: {doc['hardware_line']}. 1-min loadavg "
        f"before the runs: median {la['median']:.1f} (min {la['min']:.1f}, max {la['max']:.1f}) "
        "- the machine was shared with other jobs, so absolute numbers are low and noisy.\n\n"
        + table_md(doc["figures"], doc["base"], doc["contender"])
        + "\nReproduce: `make bench` (or `make -C bench all`; `make -C bench quick` for a short "
        "run). Ratios are jocko-py / Kafka: higher is better for throughput, lower for latency, "
        "memory, CPU per MB and start-up time.\n"
    )
    readme.write_text(head + section)


def render_only(path: Path) -> int:
    doc = json.loads(path.read_text())
    results = []
    for r in doc["runs"]:
        r.setdefault("topic_ready_s", None)
        results.append(CaseResult(**r))
    if any(s["group"] in ("size", "partitions") for s in doc["scenarios"]):
        print("results file predates the sweep grid; not re-rendered", file=sys.stderr)
        return 2
    scs = [Scenario(**s) for s in doc["scenarios"]]
    scale = Scale(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc["scale"].items()})
    started = dt.datetime.fromisoformat(doc["started_utc"])
    stem = path.with_suffix("")
    rows = write_results(
        results,
        scs,
        scale,
        doc["base"],
        doc["contender"],
        doc["hardware"],
        started,
        doc["mode"],
        stem,
        finished=doc.get("finished_utc"),
        extra={
            "calibration": doc.get("calibration_runs", []),
            "discarded": doc.get("discarded_runs", []),
        },
    )
    print(table_md(rows, doc["base"], doc["contender"]))
    if doc["mode"] == "full" and doc["contender"] == "jocko-py":
        update_readme(stem.with_suffix(".json"))
    return 0


def write_tool_log4j() -> None:
    """The log4j settings `java_tool` points the Java tools at (warnings, to stderr)."""
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "log4j-tools.properties").write_text(
        "log4j.rootLogger=WARN, e\nlog4j.appender.e=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.e.Target=System.err\n"
        "log4j.appender.e.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.e.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
    )


@contextlib.contextmanager
def cleanup_guard() -> Iterator[None]:
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    atexit.register(_kill_all)
    try:
        yield
    finally:
        _kill_all()
        for s, h in old.items():
            signal.signal(s, h)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        return render_only(Path(args.render))
    quick = args.quick or os.environ.get("BENCH_QUICK", "") not in ("", "0")
    scale, mode = (SMOKE, "smoke") if args.smoke else (QUICK, "quick") if quick else (FULL, "full")
    if args.reps:
        scale.reps = scale.sweep_reps = args.reps
    if not (LIBS / ".fetched").exists() or not (CLASSES / "BenchTool.class").exists():
        print("run `make -C bench fetch` first", file=sys.stderr)
        return 2
    write_tool_log4j()
    scs = scenarios(scale)
    if args.only:
        subs = args.only.split(",")
        scs = [s for s in scs if any(x in s.key for x in subs)]
    base_b: Broker = KafkaBroker("kafka")
    if args.contender == "kafka":
        cont_b: Broker = KafkaBroker("kafka-b")
    else:
        ov = {"log.segment.bytes": str(SEGMENT_BYTES), "group.initial.rebalance.delay.ms": "0"}
        for kv in args.jocko_override:
            k, _, v = kv.partition("=")
            ov[k] = v
        cont_b = JockoBroker("jocko-py", ov)
    started = dt.datetime.now(dt.UTC)
    stem = Path(args.out) if args.out else RESULTS / started.strftime("%Y-%m-%dT%H%M")
    if not stem.is_absolute():
        stem = REPO / stem
    hw = hardware()
    progress(f"hardware: {hw_line(hw)}")
    progress(
        f"mode={mode} reps={scale.reps} scenarios={len(scs)} ({', '.join(s.key for s in scs)})"
    )
    book = RateBook()
    results: list[CaseResult] = []
    extra: dict[str, list[CaseResult]] = {"calibration": [], "discarded": []}

    def reps_of(sc: Scenario) -> int:
        sweep = sc.group == "sweep" and scale.sweep_reps
        return scale.sweep_reps if sweep else scale.reps

    def target_s(sc: Scenario) -> float:
        return scale.produce_s if sc.group == "main" else sc.seconds

    total = sum(reps_of(sc) for sc in scs) * 2
    with cleanup_guard():
        for i, sc in enumerate(scs):
            if sc.kind == "produce" and sc.group == "main":
                # Unrecorded calibration run per broker and shape: the measured runs' record
                # counts then aim at `aim` x the target time from this broker's own rate.
                calib = replace(sc, seconds=scale.calib_s, consume=False)
                for b in (base_b, cont_b):
                    if book.known(b.label, sc):
                        continue
                    progress(f"[calibrate] {sc.key} | {b.label} | {scale.calib_s:g} s")
                    r = run_case(b, calib, -1, book, args.keep, tag="calib")
                    extra["calibration"].append(r)
                    progress("  " + _brief(r))
            for rep in range(reps_of(sc)):
                order = [base_b, cont_b] if (i + rep) % 2 == 0 else [cont_b, base_b]
                for b in order:
                    progress(
                        f"[{len(results) + 1}/{total}] {sc.key} | {b.label} | "
                        f"run {rep + 1}/{reps_of(sc)} | loadavg {loadavg():.2f}"
                    )
                    r = run_case(b, sc, rep, book, args.keep, aim=scale.aim)
                    dur = r.produce.get("duration_s", 0.0)
                    if r.ok and sc.kind == "produce" and dur < target_s(sc):
                        # Too short (the rate estimate was low): once more, now that the book
                        # has this run's rate, aiming at repeat_aim x the target; a run still
                        # short is flagged in the results.
                        progress(
                            f"  {_brief(r)}\n  produce phase {dur:.1f} s < "
                            f"{target_s(sc):g} s: repeating the run"
                        )
                        r.flags.append(f"short:{dur:.1f}s")
                        extra["discarded"].append(r)
                        r = run_case(b, sc, rep, book, args.keep, aim=scale.repeat_aim)
                        dur = r.produce.get("duration_s", 0.0)
                        if r.ok and dur < target_s(sc):
                            r.flags.append("short")
                    results.append(r)
                    progress("  " + _brief(r))
            write_results(
                results,
                scs,
                scale,
                base_b.label,
                cont_b.label,
                hw,
                started,
                mode,
                stem,
                extra=extra,
            )
    rows = write_results(
        results, scs, scale, base_b.label, cont_b.label, hw, started, mode, stem, extra=extra
    )
    print(table_md(rows, base_b.label, cont_b.label))
    if mode == "full" and cont_b.name == "jocko-py" and not args.only:
        update_readme(stem.with_suffix(".json"))
    progress(f"wrote {stem.with_suffix('.md')} (.json, .png)")
    return 0 if all(r.ok for r in results) else 1


def _brief(r: CaseResult) -> str:
    parts = [f"start {r.startup_ms:.0f} ms" if r.startup_ms else "start —"]
    if r.produce:
        parts.append(
            f"produce {r.produce.get('mb_per_s', 0):.1f} MB/s "
            f"({r.produce.get('records_per_s', 0):,.0f} rec/s, "
            f"{r.produce.get('duration_s', 0):.1f} s produce phase, "
            f"{r.produce.get('wall_s', 0):.0f} s wall)"
        )
    if r.produce.get("broker_cpu_s") is not None:
        parts.append(
            f"broker CPU {100 * r.produce['broker_cpu_util']:.0f}% "
            f"({r.produce['broker_cpu_ms_per_mb']:.1f} ms/MB)"
        )
    if r.consume:
        parts.append(f"consume {r.consume.get('fetch_mb_per_s', 0):.1f} MB/s")
    if r.e2e:
        parts.append(
            f"e2e p50 {r.e2e['p50_ms']:.2f} p99 {r.e2e['p99_ms']:.2f} "
            f"p99.9 {r.e2e['p999_ms']:.2f} ms (from actual send: p99 "
            f"{r.e2e.get('send_p99_ms', float('nan')):.2f} ms)"
        )
    if r.rss_load:
        parts.append(f"RSS peak {r.rss_load['peak_mb']:.0f} MB")
    if not r.ok:
        parts.append("FAILED")
    return ", ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
