"""Incremental fetch sessions (KIP-227): a Java consumer over 1,000 partitions with and
without sessions, on jocko-py and on Apache Kafka, same machine, same tools.

    make -C bench fetch-sessions                       # 3 alternating rounds, ~15 min
    .venv/bin/python bench/fetch_sessions.py [--reps N] [--partitions 1000] [--idle 20]

Every case is a fresh single-node broker (jocko-py, or Kafka 3.9 in KRaft mode) with
`max.incremental.fetch.session.cache.slots` at 1000 (the default of both: sessions on)
or 0 (the broker opens no session, so every fetch names all the consumer's partitions
and every response answers all of them). In each case, on a topic of --partitions
partitions:
- fill: ProducerPerformance writes --records records of --size bytes (acks=1);
- consume: ConsumerPerformance reads them all back: fetch MB/s as the tool reports it,
  and the broker's CPU milliseconds per MB consumed (from /proc);
- idle: ConsumerPerformance --from-latest on the same topic with nothing new for --idle
  seconds: the consumer sits on every partition, caught up, and fetches every
  fetch.max.wait.ms. The figure is the broker's CPU use (share of one core) over that
  run, which is what sessions save: without them each of those fetches carries and
  answers every partition.
Rounds alternate the order of the four cases (jocko-py on, off, Kafka on, off, then the
reverse), so drift hits each alike. Figures are medians; ratios are on / off for each
broker. Results: bench/results/<UTC stamp>-fetch-sessions.md and .json; tool output and
broker logs in bench/work/fetch-sessions/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run import (  # noqa: E402
    RESULTS,
    SEGMENT_BYTES,
    WORK,
    Broker,
    JockoBroker,
    KafkaBroker,
    cleanup_guard,
    cpu_s,
    create_topic,
    hardware,
    hw_line,
    java_tool,
    loadavg,
    parse_consumer,
    progress,
    run_tool,
    wait_first_produce,
    wait_topic_ready,
    write_tool_log4j,
)

OUT = WORK / "fetch-sessions"
TOPIC = "sessions"
SLOTS = "max.incremental.fetch.session.cache.slots"
ON, OFF = "1000", "0"


class KafkaWithProps(KafkaBroker):
    """Kafka with extra server.properties lines."""

    def __init__(self, label: str, extra: dict[str, str]) -> None:
        super().__init__(label)
        self.extra = extra

    def prepare(self, case_dir: Path) -> None:
        super().prepare(case_dir)
        props = case_dir / "server.properties"
        props.write_text(props.read_text() + "".join(f"{k}={v}\n" for k, v in self.extra.items()))


def make_broker(kind: str, slots: str) -> Broker:
    label = f"{kind}-slots{slots}"
    if kind == "kafka":
        return KafkaWithProps(label, {SLOTS: slots})
    return JockoBroker(label, {SLOTS: slots, "log.segment.bytes": str(SEGMENT_BYTES)})


def consumer_perf(b: Broker, n: int, timeout_ms: int, log: Path, *extra: str
                  ) -> tuple[int | None, str, float]:
    return run_tool(java_tool(
        "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", b.bootstrap,
        "--topic", TOPIC, "--messages", str(n), "--timeout", str(timeout_ms),
        "--group", f"bench-{time.time_ns()}", *extra), timeout=timeout_ms / 1000 + 300, log=log)


def run_case(kind: str, slots: str, rnd: int, args: argparse.Namespace) -> dict[str, Any]:
    b = make_broker(kind, slots)
    case_dir = OUT / f"r{rnd}-{b.label}"
    shutil.rmtree(case_dir, ignore_errors=True)
    case_dir.mkdir(parents=True)
    log = case_dir / "tools.log"
    res: dict[str, Any] = {"broker": kind, "sessions": slots != OFF, "slots": int(slots),
                           "round": rnd, "loadavg_start": loadavg()}
    b.prepare(case_dir)
    try:
        res["start_ms"] = wait_first_produce(b, log)
        assert b.proc is not None
        pid = b.proc.pid
        res["create_s"] = create_topic(b, TOPIC, args.partitions, log)
        res["ready_s"] = wait_topic_ready(b, TOPIC, args.partitions, log)
        rc, out, secs = run_tool(java_tool(
            "org.apache.kafka.tools.ProducerPerformance", "--topic", TOPIC,
            "--num-records", str(args.records), "--record-size", str(args.size),
            "--throughput", "-1", "--producer-props", f"bootstrap.servers={b.bootstrap}",
            "acks=1"), timeout=600, log=log)
        if rc != 0:
            raise RuntimeError(f"ProducerPerformance rc={rc}: {out[-1500:]}")
        res["fill_s"] = secs
        c0 = cpu_s(pid)
        rc, out, secs = consumer_perf(b, args.records, 30000, log)
        consume = parse_consumer(out)
        if rc != 0 or consume.get("records", 0) < args.records:
            raise RuntimeError(f"ConsumerPerformance rc={rc}: {out[-1500:]}")
        cpu = cpu_s(pid) - c0
        consume.update(wall_s=secs, broker_cpu_s=cpu,
                       broker_cpu_ms_per_mb=1000 * cpu / consume["mb"] if consume["mb"] else 0)
        res["consume"] = consume
        c0 = cpu_s(pid)
        rc, out, secs = consumer_perf(b, 1, args.idle * 1000, log, "--from-latest")
        cpu = cpu_s(pid) - c0
        if rc != 0:
            raise RuntimeError(f"idle ConsumerPerformance rc={rc}: {out[-1500:]}")
        res["idle"] = {"wall_s": secs, "broker_cpu_s": cpu, "broker_cpu_util": cpu / secs}
    finally:
        b.stop()
        if not args.keep:
            shutil.rmtree(case_dir / "data", ignore_errors=True)
    return res


FIGURES = [
    ("consume fetch MB/s", ("consume", "fetch_mb_per_s"), "{:.1f}"),
    ("consume records/s", ("consume", "fetch_records_per_s"), "{:,.0f}"),
    ("broker CPU ms per MB consumed", ("consume", "broker_cpu_ms_per_mb"), "{:.1f}"),
    ("idle consumer: broker CPU (share of one core)", ("idle", "broker_cpu_util"), "{:.3f}"),
]


def med(rows: list[dict[str, Any]], kind: str, on: bool, path: tuple[str, str]) -> float | None:
    xs = [r[path[0]][path[1]] for r in rows
          if r["broker"] == kind and r["sessions"] == on and path[0] in r]
    return statistics.median(xs) if xs else None


def render(doc: dict[str, Any]) -> str:
    rows = doc["cases"]
    a = doc["args"]
    lines = [
        f"# Fetch sessions (KIP-227): {a['partitions']} partitions, {doc['stamp']}", "",
        f"- Machine: {hw_line(doc['hardware'])}",
        f"- {a['reps']} alternating rounds; each case a fresh single-node broker; "
        f"{a['records']:,} records of {a['size']} B filled with ProducerPerformance (acks=1), "
        f"read back with ConsumerPerformance; idle: ConsumerPerformance --from-latest for "
        f"{a['idle']} s with nothing new.",
        f"- Sessions on: `{SLOTS}={ON}` (default); off: `{SLOTS}={OFF}`.",
        f"- jocko-py at {doc['jocko_rev']}; Kafka from .cache/kafka/libs.", "",
        "| figure (median) | jocko-py on | jocko-py off | on / off | Kafka on | Kafka off "
        "| on / off | jocko-py / Kafka (on) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def fmt(v: float | None, f: str) -> str:
        return "-" if v is None else f.format(v)

    def ratio(x: float | None, y: float | None) -> str:
        return "-" if x is None or not y else f"{x / y:.2f}"

    for name, path, f in FIGURES:
        jon, joff = med(rows, "jocko-py", True, path), med(rows, "jocko-py", False, path)
        kon, koff = med(rows, "kafka", True, path), med(rows, "kafka", False, path)
        lines.append(f"| {name} | {fmt(jon, f)} | {fmt(joff, f)} | {ratio(jon, joff)} | "
                     f"{fmt(kon, f)} | {fmt(koff, f)} | {ratio(kon, koff)} | {ratio(jon, kon)} |")
    lines += ["", "Every case:", "",
              "| round | broker | sessions | fetch MB/s | CPU ms/MB | idle CPU | loadavg |",
              "|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        c, i = r.get("consume", {}), r.get("idle", {})
        lines.append(f"| {r['round']} | {r['broker']} | {'on' if r['sessions'] else 'off'} | "
                     f"{c.get('fetch_mb_per_s', float('nan')):.1f} | "
                     f"{c.get('broker_cpu_ms_per_mb', float('nan')):.1f} | "
                     f"{i.get('broker_cpu_util', float('nan')):.3f} | "
                     f"{r['loadavg_start']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=200, help="record size in bytes")
    ap.add_argument("--idle", type=int, default=20, help="seconds of the idle phase")
    ap.add_argument("--only", choices=["jocko-py", "kafka"], help="one broker kind only")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs")
    args = ap.parse_args(argv)
    write_tool_log4j()
    OUT.mkdir(parents=True, exist_ok=True)
    kinds = [args.only] if args.only else ["jocko-py", "kafka"]
    order = [(k, s) for k in kinds for s in (ON, OFF)]
    cases: list[dict[str, Any]] = []
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H%M")
    rev = "?"
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        pass
    with cleanup_guard():
        total = args.reps * len(order)
        for rnd in range(args.reps):
            for kind, slots in (order if rnd % 2 == 0 else order[::-1]):
                progress(f"[{len(cases) + 1}/{total}] round {rnd + 1}: {kind}, "
                         f"sessions {'on' if slots == ON else 'off'}")
                res = run_case(kind, slots, rnd, args)
                c, i = res["consume"], res["idle"]
                progress(f"  consume {c['fetch_mb_per_s']:.1f} MB/s, "
                         f"{c['broker_cpu_ms_per_mb']:.1f} broker CPU ms/MB; idle broker CPU "
                         f"{i['broker_cpu_util']:.3f} of a core")
                cases.append(res)
    doc = {"stamp": stamp, "hardware": hardware(), "jocko_rev": rev, "args": vars(args),
           "cases": cases}
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"{stamp}-fetch-sessions"
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    md = render(doc)
    stem.with_suffix(".md").write_text(md)
    print(md)
    progress(f"wrote {stem}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
