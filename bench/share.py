"""Share groups (KIP-932): records/s delivered to and acknowledged by 4 share consumers,
1 KiB values, jocko-py beside Apache Kafka 4.4.0 on this machine (issue 24).

Each run starts the broker fresh (its own data directory; Kafka 4.4.0 with its defaults,
jocko-py with its own), creates one topic of ``--partitions`` partitions, loads
``--records`` records of 1 KiB (confluent-kafka producer, acks=all; not timed), sets the
group's `share.auto.offset.reset=earliest` (IncrementalAlterConfigs on the GROUP
resource) and starts 4 Java kafka-clients 4.4.0 `KafkaShareConsumer`s
(tests/java/share/ShareClient.java, explicit acknowledgement: every record accepted,
commitSync after each poll of up to 500 records). The figure is all records over the span
from the first successful commitSync to the one that completes the last record (each
consumer prints the wall-clock time of each commit); the group's lag
(DescribeShareGroupOffsets) must be 0 at the end. Runs alternate between the brokers.

  .venv/bin/python bench/share.py [--reps 2] [--records 100000] [--partitions 4]
                                  [--only kafka|jocko]

Results: bench/results/share.json and a Markdown table on stdout. A broker that does not
serve share groups yet gets a row that says which piece is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jocko_py.client import KafkaError  # noqa: E402
from tests.share.harness import (  # noqa: E402
    ShareBroker,
    ShareWorker,
    create_topic,
    java_missing,
    jocko_missing,
    set_group_config,
)

CONSUMERS = 4
SIZE = 1024
TOPIC = "share-bench"
GROUP = "share-bench-group"


def load(bootstrap: str, records: int, partitions: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "queue.buffering.max.messages": 1000000,
                  "queue.buffering.max.kbytes": 1048576})
    value = os.urandom(SIZE)
    t0 = time.monotonic()
    for i in range(records):
        while True:
            try:
                p.produce(TOPIC, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(300)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return records / (time.monotonic() - t0)


def commits(w: ShareWorker) -> list[tuple[int, int]]:
    out = []
    for ln in w.lines():
        parts = ln.split()
        if parts and parts[0] == "C" and len(parts) >= 3:
            out.append((int(parts[2]), int(parts[1])))
    return out


def lag(bootstrap: str) -> int:
    from jocko_py.admin import GroupAdmin
    from jocko_py.client import Client

    with Client(bootstrap, timeout=30) as c:
        adm = GroupAdmin(c)
        try:
            return sum(max(v[1], 0) for v in adm.share_offsets(GROUP).values())
        finally:
            adm.close()


def one_run(kind: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    b = ShareBroker(kind, work / kind, defaults=True)
    b.start()
    ws: list[ShareWorker] = []
    try:
        if kind == "jocko" and (why := jocko_missing(b.bootstrap, configs=False)):
            return {"broker": kind, "missing": why}
        create_topic(b.bootstrap, TOPIC, args.partitions)
        produce_rate = load(b.bootstrap, args.records, args.partitions)
        set_group_config(b.bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})
        for i in range(CONSUMERS):  # quiet: no R lines, the figure counts commits
            w = ShareWorker(f"{kind}-q{i}", b.bootstrap, TOPIC, GROUP, work, max_poll=500,
                            quiet=True)
            ws.append(w)
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            if sum(n for w in ws for _, n in commits(w)) >= args.records:
                break
            time.sleep(0.2)
        cs = sorted(c for w in ws for c in commits(w))
        total = sum(n for _, n in cs)
        if total < args.records:
            return {"broker": kind, "error": f"{total} of {args.records} acknowledged in "
                    f"{args.timeout}s"}
        first, last = cs[0][0], cs[-1][0]
        for w in ws:
            w.stop()
        try:
            remaining: int | str = lag(b.bootstrap)
        except (OSError, KafkaError) as e:
            remaining = f"unknown ({e})"
        span = max(last - first, 1) / 1000
        per = {w.name: sum(n for _, n in commits(w)) for w in ws}
        return {"broker": kind, "records": args.records, "acknowledged": total,
                "seconds": span, "records_per_s": args.records / span,
                "mib_per_s": args.records * SIZE / span / 2**20, "lag_after": remaining,
                "per_consumer": per, "load_records_per_s": produce_rate}
    finally:
        for w in ws:
            w.stop()
        b.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", choices=("kafka", "jocko"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "share.json")
    args = ap.parse_args()
    if why := java_missing():
        print(f"share bench: {why}", file=sys.stderr)
        return 2
    kinds = [k for k in ("kafka44", "jocko") if args.only in (None, k.rstrip("4"))]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="share-bench-") as tmp:
        for rep in range(args.reps):
            for kind in kinds:
                work = Path(tmp) / f"{rep}"
                work.mkdir(exist_ok=True)
                r = one_run(kind, work, args)
                r["rep"] = rep
                r["loadavg_1m"] = os.getloadavg()[0]
                print(json.dumps(r), flush=True)
                runs.append(r)
                if "missing" in r:
                    kinds.remove(kind)
    title = {"kafka44": "Apache Kafka 4.4.0", "jocko": "jocko-py"}
    lines = [f"Share group, {CONSUMERS} Java share consumers, 1 KiB, {args.records} records, "
             f"{args.partitions} partitions ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)",
             "", "| broker | records/s delivered+acknowledged (median) | MiB/s | runs |",
             "| --- | --- | --- | --- |"]
    for kind in ("kafka44", "jocko"):
        ok = [r for r in runs if r["broker"] == kind and "records_per_s" in r]
        bad = [r for r in runs if r["broker"] == kind and "records_per_s" not in r]
        if ok:
            med = statistics.median(r["records_per_s"] for r in ok)
            each = ", ".join(f"{r['records_per_s']:,.0f}" for r in ok)
            lines.append(f"| {title[kind]} | {med:,.0f} | {med * SIZE / 2**20:.1f} | {each} |")
        elif bad:
            why = bad[0].get("missing") or bad[0].get("error")
            lines.append(f"| {title[kind]} | - | - | {why} |")
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"records": args.records, "partitions": args.partitions,
                                    "consumers": CONSUMERS, "size": SIZE, "runs": runs,
                                    "table": lines}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
