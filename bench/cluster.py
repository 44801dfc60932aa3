"""Replicated benchmark: three jocko-py brokers against three Apache Kafka brokers (KRaft)
on this machine, same clients, RF=3, acks=all, min.insync.replicas=2.

    make -C bench replicated                   # quick: 3 alternating runs per cluster, ~10 min
    make -C bench replicated RUN_ARGS=--full   # 5 runs per cluster, 30-s phases, ~25 min
    .venv/bin/python bench/cluster.py [--quick|--full] [--reps N] [--keep]

(`make -C bench cluster` is the same target.) Each run starts a fresh cluster with empty
data dirs (Kafka: three combined broker+controller nodes, `process.roles=broker,controller`,
the same three nodes are the KRaft voters, no separate controllers; jocko-py: three brokers
that are all raft voters) and runs, in order:
- warm-up: ProducerPerformance, the same --warmup-records x 1 KiB acks=all on both, to a
  separate RF=3 topic (JIT of Kafka's three fresh JVMs and of the client); its rate is kept
  as the "cold" figure and sizes the measured run;
- produce: ProducerPerformance, 1 KiB records, acks=all, to a 6-partition RF=3 topic with
  min.insync.replicas=2; the record count aims at 2.5 x the target phase (15 s quick, 30 s
  full) at the warm-up's rate. MB/s as the tool reports it, and the three brokers' CPU
  seconds (from /proc) per MB produced;
- consume: ConsumerPerformance over those records (fetch MB/s);
- end to end: `BenchTool e2e` (bench/java), open loop at --e2e-rate records/s of 1 KiB,
  acks=all, after the same warm-up on both, p50/p99 from each record's scheduled send to
  its receipt (no coordinated omission);
- failover: an idempotent acks=all confluent-kafka producer sends ~200 records/s to
  partition 0; its leader is killed (SIGKILL); the figure is the time from the kill to
  the first acknowledgement of a record sent after it; then the node is started again
  and the time until every ISR is full again is recorded.
Both clusters get the same failure-detection settings (Kafka's own property names:
broker.session.timeout.ms 3000, broker.heartbeat.interval.ms 250,
controller.quorum.election.timeout.ms 1000, replica.lag.time.max.ms 6000), so failover
compares like with like. Runs alternate (Kafka, jocko-py, jocko-py, Kafka, ...); figures
are medians, ratios jocko-py / Kafka; the 1-min loadavg is recorded at the start of each
run and around its produce phase. Results: bench/results/<UTC stamp>-replicated.md and
.json; tool output and broker logs stay in bench/work/cluster/ (data dirs are removed after
each run unless --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run import (  # noqa: E402
    CLUSTER_ID,
    JAVA,
    KAFKA_HEAP,
    KAFKA_JVM,
    LIBS,
    RESULTS,
    TOOL_HEAP,
    WORK,
    _terminate,
    cpu_s,
    free_port,
    hardware,
    hw_line,
    java_tool,
    loadavg,
    parse_consumer,
    parse_e2e,
    parse_producer,
    run_tool,
    spawn,
)
from jocko_py.client import Client  # noqa: E402

OUT = WORK / "cluster"
TOPIC = "bench-rf3"
WARM_TOPIC = "bench-rf3-warm"
PARTITIONS = 6
RECORD = 1024
TIMINGS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "250",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "replica.lag.time.max.ms": "6000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "3",
}


def say(msg: str) -> None:
    print(f"[cluster-bench {time.strftime('%H:%M:%S')} load {loadavg():.1f}] {msg}",
          file=sys.stderr, flush=True)


class KafkaCluster:
    name = "kafka"

    def __init__(self, d: Path) -> None:
        self.d = d
        self.ports = {i: free_port() for i in (1, 2, 3)}
        self.cports = {i: free_port() for i in (1, 2, 3)}
        self.procs: dict[int, Any] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def addr(self, i: int) -> str:
        return f"127.0.0.1:{self.ports[i]}"

    def _props(self, i: int) -> Path:
        nd = self.d / f"node-{i}"
        nd.mkdir(parents=True, exist_ok=True)
        voters = ",".join(f"{j}@127.0.0.1:{p}" for j, p in self.cports.items())
        props = {
            "process.roles": "broker,controller", "node.id": str(i),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.ports[i]},"
                         f"CONTROLLER://127.0.0.1:{self.cports[i]}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.ports[i]}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(nd / "data"), "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2", **TIMINGS,
        }
        path = nd / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (nd / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, f\nlog4j.appender.f=org.apache.log4j.FileAppender\n"
            f"log4j.appender.f.File={nd / 'server.log'}\n"
            "log4j.appender.f.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.f.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
        return path

    def start(self) -> None:
        for i in (1, 2, 3):
            props = self._props(i)
            rc, out, _ = run_tool([JAVA, *TOOL_HEAP, "-cp", f"{LIBS}/*",
                                   "kafka.tools.StorageTool", "format", "-t", CLUSTER_ID,
                                   "-c", str(props)], timeout=120, log=self.d / "tools.log")
            if rc != 0:
                raise RuntimeError(f"kafka storage format failed: {out[-1500:]}")
        for i in (1, 2, 3):
            self.start_node(i)

    def start_node(self, i: int) -> None:
        nd = self.d / f"node-{i}"
        self.procs[i] = spawn([JAVA, *KAFKA_HEAP, *KAFKA_JVM,
                               f"-Dlog4j.configuration=file:{nd / 'log4j.properties'}",
                               "-cp", f"{LIBS}/*", "kafka.Kafka", str(nd / "server.properties")],
                              log=nd / "stdout.log")

    def kill(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait(10)

    def stop(self) -> None:
        for p in self.procs.values():
            _terminate(p)


class JockoCluster(KafkaCluster):
    name = "jocko-py"

    def __init__(self, d: Path) -> None:
        super().__init__(d)
        self.gports = {i: free_port() for i in (1, 2, 3)}

    def _cmd(self, i: int) -> list[str]:
        voters = ",".join(f"{j}@127.0.0.1:{p}" for j, p in self.cports.items())
        join = ",".join(f"127.0.0.1:{p}" for j, p in self.gports.items() if j != i)
        cmd = [str(ROOT / ".venv/bin/python"), "-m", "jocko_py.cli", "broker",
               "--broker-id", str(i), "--broker-addr", self.addr(i),
               "--data-dir", str(self.d / f"node-{i}" / "data"),
               "--controller-quorum-voters", voters,
               "--gossip-addr", f"127.0.0.1:{self.gports[i]}", "--join", join]
        for k, v in (TIMINGS | {"jocko.gossip.probe.interval.ms": "250"}).items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start(self) -> None:
        for i in (1, 2, 3):
            self.start_node(i)

    def start_node(self, i: int) -> None:
        nd = self.d / f"node-{i}"
        nd.mkdir(parents=True, exist_ok=True)
        self.procs[i] = spawn(self._cmd(i), log=nd / "broker.log")


def partitions(c: KafkaCluster, topic: str = TOPIC) -> dict[int, tuple[int, list[int]]]:
    last: Exception | None = None
    for i in c.ports:
        if c.procs.get(i) is None or c.procs[i].poll() is not None:
            continue
        try:
            with Client(c.addr(i), timeout=5) as cl:
                md = cl.metadata([topic])
            return {p.partition_index: (p.leader_id, sorted(p.isr_nodes))
                    for t in md.topics for p in t.partitions}
        except Exception as e:  # noqa: BLE001 - a broker still starting
            last = e
    raise ConnectionError(f"no metadata: {last}")


def wait(what: str, pred: Any, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if pred():
                return time.monotonic() - t0
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout}s")


def full_isr(c: KafkaCluster) -> bool:
    st = partitions(c)
    return len(st) == PARTITIONS and all(len(isr) == 3 and ld >= 0 for ld, isr in st.values())


def create_topic(c: KafkaCluster, log: Path, extra: tuple[str, int] | None = None) -> None:
    """The measured topic (RF=3, min.insync.replicas=2, PARTITIONS partitions), the warm-up
    topic, the one-partition e2e topic, and `extra` (name, partitions) if given."""
    topics = [(TOPIC, PARTITIONS), (WARM_TOPIC, PARTITIONS), (TOPIC + "-e2e", 1)]
    for name, n in topics + ([extra] if extra else []):
        wait(f"{name} created", lambda name=name, n=n: run_tool(java_tool(
            "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", c.bootstrap,
            "--create", "--if-not-exists", "--topic", name, "--partitions", str(n),
            "--replication-factor", "3", "--config", "min.insync.replicas=2"),
            timeout=60, log=log)[0] == 0, 180)
    wait("full ISR", lambda: full_isr(c), 120)
    rc, out, _ = run_tool(java_tool("BenchTool", "ready", c.bootstrap, TOPIC, str(PARTITIONS),
                                    "120000"), timeout=150, log=log)
    if rc != 0:
        raise RuntimeError(f"topic not writable: {out[-800:]}")


def failover(c: KafkaCluster) -> dict[str, float]:
    """Kill partition 0's leader under a paced acks=all producer: seconds from the kill to
    the first ack of a record sent after it; then restart it and time the full ISR."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 0, "request.timeout.ms": 5000,
                  "topic.metadata.refresh.interval.ms": 1000, "log_level": 0})
    acks: list[tuple[float, float]] = []
    stop = threading.Event()

    def send() -> None:
        while not stop.is_set():
            t = time.monotonic()
            p.produce(TOPIC, b"x" * 100, partition=0, on_delivery=lambda e, m, t=t: e is None
                      and acks.append((t, time.monotonic())))
            p.poll(0.005)
    th = threading.Thread(target=send, daemon=True)
    th.start()
    time.sleep(3)
    leader = partitions(c)[0][0]
    t_kill = time.monotonic()
    c.kill(leader)
    try:
        wait("an ack after the kill", lambda: any(inv > t_kill for inv, _ in acks), 60)
        first = min(done for inv, done in acks if inv > t_kill) - t_kill
    finally:
        c.start_node(leader)
    t_restart = time.monotonic()
    isr_s = wait("full ISR after restart", lambda: full_isr(c), 120)
    stop.set()
    th.join(10)
    p.flush(20)
    return {"first_ack_after_kill_s": round(first, 3), "killed": leader,
            "isr_full_after_restart_s": round(isr_s, 3),
            "restart_wait_s": round(time.monotonic() - t_restart, 3)}


def cluster_cpu(c: KafkaCluster) -> float:
    """User+system CPU seconds used so far by the cluster's live broker processes."""
    return sum(cpu_s(p.pid) for p in c.procs.values() if p.poll() is None)


def produce(c: KafkaCluster, topic: str, records: int, log: Path) -> dict[str, Any]:
    """ProducerPerformance, acks=all, default batching; with the three brokers' CPU."""
    cpu0, la0 = cluster_cpu(c), loadavg()
    rc, out, wall = run_tool(java_tool(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records",
        str(records), "--record-size", str(RECORD), "--throughput", "-1", "--producer-props",
        f"bootstrap.servers={c.bootstrap}", "acks=all"), timeout=900, log=log)
    res: dict[str, Any] = dict(parse_producer(out, timed_out=rc is None))
    cpu = cluster_cpu(c) - cpu0
    mb = res.get("records", 0) * RECORD / 1048576
    res |= {"wall_s": round(wall, 2), "cluster_cpu_s": round(cpu, 2),
            "cluster_cpu_ms_per_mb": round(1000 * cpu / mb, 2) if mb else None,
            "loadavg_1m_before": round(la0, 2), "loadavg_1m_after": round(loadavg(), 2)}
    if not res.get("mb_per_s"):
        raise RuntimeError(f"ProducerPerformance gave no result (rc={rc}): {out[-800:]}")
    return res


def one_run(kind: type[KafkaCluster], rep: int, sc: Scale, keep: bool) -> dict[str, Any]:
    d = OUT / f"{kind.name}.{rep}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    log = d / "tools.log"
    res: dict[str, Any] = {"cluster": kind.name, "rep": rep, "loadavg_1m": loadavg(),
                           "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    t0 = time.monotonic()
    c = kind(d)
    try:
        say(f"{kind.name} run {rep}: starting three brokers")
        c.start()
        create_topic(c, log)
        res["ready_s"] = round(time.monotonic() - t0, 1)
        say(f"{kind.name} run {rep}: warm-up {sc.warmup_records} x 1 KiB acks=all")
        warm = produce(c, WARM_TOPIC, sc.warmup_records, log)
        res["warmup"] = warm
        records = int(min(sc.max_records, max(sc.min_records, sc.aim * sc.produce_s
                                                * warm["records_per_s"])))
        say(f"{kind.name} run {rep}: warm-up {warm['mb_per_s']} MB/s; produce {records} x "
            f"1 KiB acks=all (aim {sc.aim * sc.produce_s:g} s)")
        res["produce"] = produce(c, TOPIC, records, log)
        if res["produce"].get("duration_s", 0) < sc.produce_s:
            res.setdefault("flags", []).append(
                f"short produce phase {res['produce'].get('duration_s', 0):.1f} s")
        say(f"{kind.name} run {rep}: consume")
        cpu0 = cluster_cpu(c)
        rc, out, _ = run_tool(java_tool(
            "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", c.bootstrap,
            "--topic", TOPIC, "--messages", str(records), "--timeout", "30000", "--group",
            f"bench-{time.time_ns()}"), timeout=900, log=log)
        res["consume"] = dict(parse_consumer(out))
        cpu = cluster_cpu(c) - cpu0
        mb = res["consume"].get("mb", 0)
        res["consume"]["cluster_cpu_ms_per_mb"] = round(1000 * cpu / mb, 2) if mb else None
        say(f"{kind.name} run {rep}: end to end at {sc.e2e_rate}/s for {sc.e2e_s}s")
        rc, out, _ = run_tool(java_tool(
            "BenchTool", "e2e", c.bootstrap, TOPIC + "-e2e", str(sc.e2e_rate), str(sc.e2e_s),
            str(RECORD), "all", "2", str(sc.e2e_warmup)), timeout=sc.e2e_s + 300, log=log)
        res["e2e"] = parse_e2e(out)
        say(f"{kind.name} run {rep}: failover")
        res["failover"] = failover(c)
        say(f"{kind.name} run {rep}: {summary_line(res)}")
    except Exception as e:  # noqa: BLE001 - recorded; the run counts as failed
        res["error"] = f"{type(e).__name__}: {e}"
        say(f"{kind.name} run {rep} failed: {res['error']}")
    finally:
        c.stop()
        res["wall_s"] = round(time.monotonic() - t0, 1)
        res["loadavg_1m_end"] = loadavg()
        if not keep:
            for i in (1, 2, 3):
                shutil.rmtree(d / f"node-{i}" / "data", ignore_errors=True)
    return res


def summary_line(r: dict[str, Any]) -> str:
    return (f"produce {r.get('produce', {}).get('mb_per_s')} MB/s "
            f"({r.get('produce', {}).get('cluster_cpu_ms_per_mb')} CPU ms/MB), consume "
            f"{r.get('consume', {}).get('fetch_mb_per_s')} MB/s, e2e p50/p99 "
            f"{r.get('e2e', {}).get('p50_ms')}/{r.get('e2e', {}).get('p99_ms')} ms, failover "
            f"{r.get('failover', {}).get('first_ack_after_kill_s')} s, ISR full after restart "
            f"{r.get('failover', {}).get('isr_full_after_restart_s')} s")


# (label, section, key, higher is better, target on jocko-py / Kafka)
FIGS = [("produce MB/s (acks=all, 1 KiB)", "produce", "mb_per_s", True, ">= 0.5"),
        ("consume MB/s (fetch)", "consume", "fetch_mb_per_s", True, ">= 0.5"),
        ("end-to-end p50 ms", "e2e", "p50_ms", False, ""),
        ("end-to-end p99 ms", "e2e", "p99_ms", False, "<= 2"),
        ("failover: kill to first ack, s", "failover", "first_ack_after_kill_s", False, ""),
        ("ISR full after restart, s", "failover", "isr_full_after_restart_s", False, ""),
        ("cold produce MB/s (warm-up run)", "warmup", "mb_per_s", True, ""),
        ("brokers' CPU ms per MB produced", "produce", "cluster_cpu_ms_per_mb", False, ""),
        ("brokers' CPU ms per MB consumed", "consume", "cluster_cpu_ms_per_mb", False, ""),
        ("produce phase, s", "produce", "duration_s", True, "")]


class Scale:
    def __init__(self, full: bool) -> None:
        self.mode = "full" if full else "quick"
        self.reps = 5 if full else 3
        self.produce_s = 30.0 if full else 15.0  # target produce phase
        self.aim = 2.5  # records = aim x target x the warm-up rate (a warm JVM is ~2x faster)
        self.min_records, self.max_records = 100_000, 3_000_000
        self.warmup_records = 200_000 if full else 100_000
        self.e2e_rate = 500
        self.e2e_s = 30 if full else 15
        self.e2e_warmup = 50_000 if full else 20_000


def git_rev() -> str:
    if os.environ.get("BENCH_JOCKO_REV"):  # a run from a snapshot of the tree names it
        return os.environ["BENCH_JOCKO_REV"]
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "jocko_py"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + (" (jocko_py/ modified)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "?"


def medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    med: dict[str, dict[str, float | None]] = {}
    for label, part, key, _, _ in FIGS:
        med[label] = {}
        for name in ("kafka", "jocko-py"):
            xs = [r[part][key] for r in runs if r["cluster"] == name and not r.get("error")
                  and r.get(part, {}).get(key) is not None]
            med[label][name] = statistics.median(xs) if xs else None
    return med


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def render(doc: dict[str, Any]) -> str:
    runs, med, sc = doc["runs"], doc["medians"], doc["scale"]
    loads = [r["loadavg_1m"] for r in runs]
    lines = [
        f"# Replicated benchmark {doc['stamp']} ({sc['mode']})", "",
        f"Three brokers each on loopback, RF=3, min.insync.replicas=2, {PARTITIONS} "
        "partitions, the same clients against both (Kafka 3.9.2's ProducerPerformance / "
        f"ConsumerPerformance, BenchTool e2e at {sc['e2e_rate']} records/s acks=all for "
        f"{sc['e2e_s']} s, confluent-kafka for failover). Kafka: three combined "
        "broker+controller KRaft nodes; jocko-py: three brokers, all raft voters. "
        f"{sc['reps']} alternating runs per cluster, each with fresh brokers and empty data "
        f"dirs; a warm-up of {sc['warmup_records']:,} records (acks=all, separate topic) "
        f"precedes the measured produce, which aims at a {sc['produce_s']:g}-s phase. "
        f"Medians; jocko-py at `{doc['jocko_rev']}`; wall time {doc['wall_s'] // 60} min.", "",
        f"Hardware: {doc['hardware_line']}.", "",
        "1-min loadavg at the start of each run: "
        + ", ".join(f"{r['cluster']} {r['loadavg_1m']:.1f}" for r in runs)
        + f" (median {statistics.median(loads):.1f}); around each measured produce phase: "
        + ", ".join(f"{r['cluster']} {r.get('produce', {}).get('loadavg_1m_before', 0):.1f}"
                    f"->{r.get('produce', {}).get('loadavg_1m_after', 0):.1f}" for r in runs)
        + ". The machine is shared: the three brokers of either system, the Java client and "
        "other jobs share 2 cores.", "",
        "| figure | Kafka 3.9 x3 | jocko-py x3 | jocko-py / Kafka | target | met |",
        "|---|---:|---:|---:|---|---|"]
    for label, _, _, higher, target in FIGS:
        k, j = med[label]["kafka"], med[label]["jocko-py"]
        ratio = j / k if k and j is not None else None
        met = ""
        if target and ratio is not None:
            bound = float(target.split()[1])
            met = "yes" if (ratio >= bound if higher else ratio <= bound) else "no"
        lines.append(f"| {label} | {fmt(k)} | {fmt(j)} | "
                     f"{'-' if ratio is None else f'{ratio:.2f}'} | {target} | {met} |")
    lines += ["", "Per run:", "",
              "| cluster | run | loadavg | cold MB/s | produce MB/s (phase s) | CPU ms/MB "
              "| consume MB/s | e2e p50 / p99 ms | kill to ack s | ISR full s |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        pr, fo, e = r.get("produce", {}), r.get("failover", {}), r.get("e2e", {})
        lines.append(
            f"| {r['cluster']} | {r['rep']} | {r['loadavg_1m']:.1f} | "
            f"{fmt(r.get('warmup', {}).get('mb_per_s'))} | {fmt(pr.get('mb_per_s'))} "
            f"({fmt(pr.get('duration_s'))}) | {fmt(pr.get('cluster_cpu_ms_per_mb'))} | "
            f"{fmt(r.get('consume', {}).get('fetch_mb_per_s'))} | {fmt(e.get('p50_ms'))} / "
            f"{fmt(e.get('p99_ms'))} | {fmt(fo.get('first_ack_after_kill_s'))} | "
            f"{fmt(fo.get('isr_full_after_restart_s'))} |")
    failed = [f"{r['cluster']} run {r['rep']}: {r['error']}" for r in runs if r.get("error")]
    flagged = [f"{r['cluster']} run {r['rep']}: {', '.join(r['flags'])}" for r in runs
               if r.get("flags")]
    if failed:
        lines += ["", "Failed runs (not in the medians):"] + [f"- {f}" for f in failed]
    if flagged:
        lines += ["", "Flagged (kept in the medians):"] + [f"- {f}" for f in flagged]
    lines += ["", "Ratios are jocko-py / Kafka: higher is better for throughput, lower for "
              "latency, failover times and CPU per MB. *Brokers' CPU per MB* is the user+system "
              "CPU time of the three broker processes (from /proc) during the tool's run divided "
              "by the MB moved: it stays meaningful when the shared machine, not the broker, "
              "limits throughput. Raw runs: the .json next to this file."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 runs per cluster (the default)")
    ap.add_argument("--full", action="store_true", help="5 runs per cluster, 30-s phases")
    ap.add_argument("--reps", type=int, help="runs per cluster")
    ap.add_argument("--only", choices=["kafka", "jocko-py"], help="one cluster only")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data dirs")
    ap.add_argument("--out", default="", help="result stem (default "
                    "bench/results/<UTC stamp>-replicated)")
    ap.add_argument("--render", metavar="JSON", help="only rewrite the .md of a results .json")
    a = ap.parse_args()
    if a.render:
        doc = json.loads(Path(a.render).read_text())
        Path(a.render).with_suffix(".md").write_text(render(doc))
        return 0
    sc = Scale(a.full)
    if a.reps:
        sc.reps = a.reps
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H%M", time.gmtime())
    stem = Path(a.out) if a.out else RESULTS / f"{stamp}-replicated"
    runs: list[dict[str, Any]] = []
    t0 = time.monotonic()
    hw = hardware()
    doc: dict[str, Any] = {"stamp": stamp, "args": vars(a), "scale": vars(sc), "hardware": hw,
                           "hardware_line": hw_line(hw), "jocko_rev": git_rev(), "runs": runs}
    kinds = [KafkaCluster, JockoCluster]
    if a.only:
        kinds = [k for k in kinds if k.name == a.only]
    RESULTS.mkdir(exist_ok=True)
    for rep in range(sc.reps):
        for kind in (kinds if rep % 2 == 0 else kinds[::-1]):
            runs.append(one_run(kind, rep, sc, a.keep))
            doc |= {"medians": medians(runs), "wall_s": round(time.monotonic() - t0)}
            stem.with_suffix(".json").write_text(json.dumps(doc, indent=1, default=str))
            stem.with_suffix(".md").write_text(render(doc))
    text = render(doc)
    print(text)
    say(f"wrote {stem}.md / .json")
    return 1 if any(r.get("error") for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
