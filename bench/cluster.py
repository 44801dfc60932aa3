"""Replicated benchmark: three jocko-py brokers against three Apache Kafka brokers (KRaft)
on this machine, same clients, RF=3, acks=all, min.insync.replicas=2.

    make -C bench cluster                      # quick: 2 alternating runs per cluster
    .venv/bin/python bench/cluster.py --reps 3 --records 400000

Each run starts a fresh cluster with empty data dirs (Kafka: three combined
broker+controller nodes, `process.roles=broker,controller`, the same three nodes as raft
voters; jocko-py: three brokers that are all raft voters) and runs, in order:
- produce: Kafka's ProducerPerformance, 1 KiB records, acks=all, to a 6-partition RF=3
  topic with min.insync.replicas=2 (MB/s as the tool reports it);
- consume: ConsumerPerformance over those records (fetch MB/s);
- end to end: `BenchTool e2e` (bench/java), open loop at --e2e-rate records/s of 1 KiB,
  acks=all, p50/p99 from each record's scheduled send to its receipt;
- failover: an idempotent acks=all confluent-kafka producer sends 200 records/s to
  partition 0; its leader is killed (SIGKILL); the figure is the time from the kill to
  the first acknowledgement of a record sent after it; then the node is started again
  and the time until every ISR is full is recorded.
Both clusters get the same failure-detection settings (Kafka's own property names:
broker.session.timeout.ms 3000, broker.heartbeat.interval.ms 250,
controller.quorum.election.timeout.ms 1000, replica.lag.time.max.ms 6000), so failover
compares like with like. Runs alternate (Kafka, jocko-py, jocko-py, Kafka, ...); figures
are medians, ratios jocko-py / Kafka; the 1-min loadavg is recorded per run. Results:
bench/results/<UTC stamp>-replicated.md and .json; tool output and broker logs stay in
bench/work/cluster/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
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
PARTITIONS = 6
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


def partitions(c: KafkaCluster) -> dict[int, tuple[int, list[int]]]:
    last: Exception | None = None
    for i in c.ports:
        if c.procs.get(i) is None or c.procs[i].poll() is not None:
            continue
        try:
            with Client(c.addr(i), timeout=5) as cl:
                md = cl.metadata([TOPIC])
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


def create_topic(c: KafkaCluster, log: Path) -> None:
    for name, n in ((TOPIC, PARTITIONS), (TOPIC + "-e2e", 1)):
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


def one_run(kind: type[KafkaCluster], rep: int, records: int, e2e_rate: int,
            e2e_s: int) -> dict[str, Any]:
    d = OUT / f"{kind.name}.{rep}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    log = d / "tools.log"
    res: dict[str, Any] = {"cluster": kind.name, "rep": rep, "loadavg_1m": loadavg()}
    c = kind(d)
    try:
        say(f"{kind.name} run {rep}: starting three brokers")
        c.start()
        create_topic(c, log)
        say(f"{kind.name} run {rep}: produce {records} x 1 KiB acks=all")
        rc, out, _ = run_tool(java_tool(
            "org.apache.kafka.tools.ProducerPerformance", "--topic", TOPIC, "--num-records",
            str(records), "--record-size", "1024", "--throughput", "-1", "--producer-props",
            f"bootstrap.servers={c.bootstrap}", "acks=all"), timeout=900, log=log)
        res["produce"] = parse_producer(out, timed_out=rc is None)
        say(f"{kind.name} run {rep}: consume")
        rc, out, _ = run_tool(java_tool(
            "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", c.bootstrap,
            "--topic", TOPIC, "--messages", str(records), "--timeout", "30000", "--group",
            f"bench-{time.time_ns()}"), timeout=900, log=log)
        res["consume"] = parse_consumer(out)
        say(f"{kind.name} run {rep}: end to end at {e2e_rate}/s for {e2e_s}s")
        rc, out, _ = run_tool(java_tool(
            "BenchTool", "e2e", c.bootstrap, TOPIC + "-e2e", str(e2e_rate), str(e2e_s), "1024",
            "all", "2", "20000"), timeout=e2e_s + 240, log=log)
        res["e2e"] = parse_e2e(out)
        say(f"{kind.name} run {rep}: failover")
        res["failover"] = failover(c)
        say(f"{kind.name} run {rep}: {summary_line(res)}")
    except Exception as e:  # noqa: BLE001 - recorded; the run counts as failed
        res["error"] = f"{type(e).__name__}: {e}"
        say(f"{kind.name} run {rep} failed: {res['error']}")
    finally:
        c.stop()
    return res


def summary_line(r: dict[str, Any]) -> str:
    return (f"produce {r.get('produce', {}).get('mb_per_s')} MB/s, consume "
            f"{r.get('consume', {}).get('fetch_mb_per_s')} MB/s, e2e p50/p99 "
            f"{r.get('e2e', {}).get('p50_ms')}/{r.get('e2e', {}).get('p99_ms')} ms, failover "
            f"{r.get('failover', {}).get('first_ack_after_kill_s')} s")


FIGS = [("produce MB/s (acks=all, 1 KiB)", "produce", "mb_per_s", True),
        ("consume MB/s (fetch)", "consume", "fetch_mb_per_s", True),
        ("end-to-end p50 ms", "e2e", "p50_ms", False),
        ("end-to-end p99 ms", "e2e", "p99_ms", False),
        ("failover: kill to first ack, s", "failover", "first_ack_after_kill_s", False),
        ("ISR full after restart, s", "failover", "isr_full_after_restart_s", False)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--e2e-rate", type=int, default=500)
    ap.add_argument("--e2e-seconds", type=int, default=15)
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for rep in range(a.reps):
        order = [KafkaCluster, JockoCluster] if rep % 2 == 0 else [JockoCluster, KafkaCluster]
        for kind in order:
            runs.append(one_run(kind, rep, a.records, a.e2e_rate, a.e2e_seconds))
    med: dict[str, dict[str, float | None]] = {}
    for label, part, key, _ in FIGS:
        med[label] = {}
        for name in ("kafka", "jocko-py"):
            xs = [r[part][key] for r in runs if r["cluster"] == name and not r.get("error")
                  and r.get(part, {}).get(key) is not None]
            med[label][name] = statistics.median(xs) if xs else None
    stamp = time.strftime("%Y-%m-%dT%H%M", time.gmtime())
    RESULTS.mkdir(exist_ok=True)
    out = {"stamp": stamp, "args": vars(a), "hardware": hardware(), "runs": runs,
           "medians": med, "wall_s": round(time.monotonic() - t0)}
    (RESULTS / f"{stamp}-replicated.json").write_text(json.dumps(out, indent=1, default=str))
    lines = [f"# Replicated benchmark {stamp}", "",
             f"Three brokers each, RF=3, min.insync.replicas=2, {PARTITIONS} partitions, "
             f"same clients (Kafka's ProducerPerformance / ConsumerPerformance, BenchTool e2e "
             f"at {a.e2e_rate}/s acks=all, confluent-kafka for failover); {a.reps} alternating "
             f"runs per cluster, {a.records} records of 1 KiB; medians. {hw_line(hardware())}. "
             f"Loadavg per run: " + ", ".join(f"{r['cluster']} {r['loadavg_1m']:.1f}"
                                             for r in runs) + ".", "",
             "| figure | Kafka 3.9 x3 | jocko-py x3 | jocko-py / Kafka |", "|---|---:|---:|---:|"]
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.3g}" if v < 100 else f"{v:.0f}"
    for label, _, _, _higher in FIGS:
        k, j = med[label]["kafka"], med[label]["jocko-py"]
        ratio = f"{j / k:.2f}" if k and j is not None else "-"
        lines.append(f"| {label} | {fmt(k)} | {fmt(j)} | {ratio} |")
    failed = [f"{r['cluster']} run {r['rep']}: {r['error']}" for r in runs if r.get("error")]
    if failed:
        lines += ["", "Failed runs (not in the medians):"] + [f"- {f}" for f in failed]
    (RESULTS / f"{stamp}-replicated.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
