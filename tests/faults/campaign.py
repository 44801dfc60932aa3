"""A fault campaign: fault runs back to back for a wall-clock duration, each with a fresh
lab and its own seed, every history checked; a report in Markdown and JSON.

    python -m tests.faults.campaign --duration 3600 --nemeses all --out DIR
    python -m tests.faults.campaign --seed 12345 --nemeses partition-halves   # replay

(`make chaos` runs it; CHAOS_DURATION, CHAOS_NEMESES, CHAOS_SEED, CHAOS_BROKERS,
CHAOS_RUN_SECONDS pass through.) Each run draws its seed from the campaign's base seed
(printed; a new one per campaign unless --seed is given): a failing run is replayed with
--seed <its seed> --runs 1 and the same nemeses. Progress goes to stdout; broker logs
and librdkafka's lines go to <out>/runs/<seed>/.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.faults import nemesis
from tests.faults.checker import ERRORS
from tests.faults.runner import STOP, run_once, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make chaos", description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=1800,
                    help="wall-clock seconds of runs (default 1800); a run started is finished")
    ap.add_argument("--runs", type=int, default=0, help="stop after this many runs (0: no limit)")
    ap.add_argument("--run-seconds", type=float, default=240,
                    help="seconds of faults per run (default 240)")
    ap.add_argument("--nemeses", default="all",
                    help="comma-separated: all, matrix, kill, pause, partition, power-loss, "
                         "disk-full, or single nemesis names")
    ap.add_argument("--seed", type=int, default=None, help="base seed (default: random)")
    ap.add_argument("--brokers", type=int, default=3, choices=(3, 5))
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--rate", type=float, default=40.0, help="records/s per producer (3)")
    ap.add_argument("--out", default=None, help="report directory (default chaos/<UTC stamp>)")
    a = ap.parse_args(argv)
    try:
        names = nemesis.resolve(a.nemeses)
    except ValueError as e:
        print(f"make chaos: {e}", file=sys.stderr)
        return 2
    base = a.seed if a.seed is not None else random.randrange(1 << 31)
    stamp = time.strftime("%Y-%m-%dT%H%M", time.gmtime())
    out = Path(a.out or f"chaos/{stamp}")
    (out / "runs").mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=out / "clients.log", level=logging.INFO,
                        format="%(asctime)s %(name)s %(message)s")
    # librdkafka's idempotence debug lines (why a producer bumps its epoch) included
    logging.getLogger("tests.faults.rdkafka").setLevel(logging.DEBUG)
    print(f"chaos: base seed {base} (replay: --seed {base}), nemeses {','.join(names)}, "
          f"{a.duration:.0f}s, {a.brokers} brokers, report in {out}", flush=True)
    def stop(signum: int, _frame: object) -> None:
        if STOP.is_set():
            raise KeyboardInterrupt
        print(f"chaos: signal {signum}: finishing the current fault, then checking the run "
              "(again to abort)", flush=True)
        STOP.set()
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    rng = random.Random(base)
    results: list[dict[str, Any]] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.duration and (not a.runs or len(results) < a.runs) \
            and not STOP.is_set():
        seed = base if a.runs == 1 and a.seed is not None else rng.randrange(1 << 31)
        order = list(names)
        random.Random(seed).shuffle(order)
        r = run_once(out / "runs" / str(seed), seed, order, seconds=a.run_seconds,
                     brokers=a.brokers, partitions=a.partitions, rate=a.rate,
                     say=lambda s: print(s, flush=True))
        results.append(r)
        (out / "runs" / str(seed) / "result.json").write_text(json.dumps(r, indent=1,
                                                                          default=str))
        print(f"chaos: run {len(results)} ({time.monotonic() - t0:.0f}s): {summary(r)}",
              flush=True)
        write_report(out, base, names, a, results, time.monotonic() - t0)
    rep = write_report(out, base, names, a, results, time.monotonic() - t0)
    print(f"chaos: {rep['runs']} runs, {rep['faults']} faults, "
          f"{rep['invalid_runs']} invalid; report {out}/report.md", flush=True)
    return 1 if rep["invalid_runs"] else 0


def code_version() -> str:
    """The commit the campaign runs (``+dirty`` when jocko_py/ has uncommitted changes)."""
    here = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, text=True,
                              capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "jocko_py"], cwd=here,
                               text=True, capture_output=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def write_report(out: Path, base: int, names: list[str], a: argparse.Namespace,
                 results: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    errors = {k: sum(r.get("check", {}).get("errors", {}).get(k, 0) for r in results)
              for k in ERRORS}
    per: dict[str, dict[str, Any]] = {}
    for r in results:
        for f in r.get("availability", r.get("faults", [])):
            n = f["nemesis"]
            d = per.setdefault(n, {"count": 0, "fault_s": 0.0, "first_ack": [], "isr_full": [],
                                   "not_recovered": 0, "without_ack": 0, "restarts": 0})
            d["count"] += 1
            if f.get("t_recovered") is not None:
                d["fault_s"] += f["t_recovered"] - f["t_start"]
            else:
                d["not_recovered"] += 1
            if f.get("first_ack_worst_s") is not None:
                d["first_ack"].append(f["first_ack_worst_s"])
            if f.get("isr_full_after_heal_s") is not None:
                d["isr_full"].append(f["isr_full_after_heal_s"])
            d["without_ack"] += f.get("partitions_without_ack", 0)
            d["restarts"] += f.get("producer_restarts", 0)
    rep: dict[str, Any] = {
        "base_seed": base, "commit": code_version(), "nemeses": names, "brokers": a.brokers,
        "partitions": a.partitions,
        "wall_s": round(wall, 1), "runs": len(results),
        "invalid_runs": sum(1 for r in results if not r["valid"]),
        "faults": sum(len(r["faults"]) for r in results),
        "acknowledged": sum(r.get("check", {}).get("acknowledged", 0) for r in results),
        "indeterminate": sum(r.get("check", {}).get("indeterminate", 0) for r in results),
        "duplicates_client": sum(r.get("check", {}).get("duplicates_client", 0)
                                 for r in results),
        "producer_restarts": sum(r.get("check", {}).get("producer_restarts", 0)
                                 for r in results),
        "errors": errors, "per_nemesis": per,
        "run_summaries": [summary(r) for r in results],
    }
    (out / "report.json").write_text(json.dumps(rep, indent=1, default=str))
    lines = [f"# Fault campaign {out.name}", "",
             f"Code {rep['commit']}; base seed {base}; {len(results)} runs, "
             f"{rep['faults']} faults in "
             f"{wall / 60:.1f} min of wall time; {a.brokers} brokers, {a.partitions} "
             f"partitions (RF 3, min.insync.replicas 2), 3 idempotent acks=all producers, "
             f"1 assign + 2 subscribe consumers. Replay one run: "
             f"`python -m tests.faults.campaign --runs 1 --seed <run seed> --nemeses "
             f"{','.join(names)}`.", "",
             f"**Runs valid: {len(results) - rep['invalid_runs']}/{len(results)}**; "
             f"acknowledged writes checked: {rep['acknowledged']}; indeterminate sends: "
             f"{rep['indeterminate']}; client re-send duplicates (newer epoch, reported "
             f"apart): {rep['duplicates_client']}; producer restarts: "
             f"{rep['producer_restarts']}.", "",
             "| error | count |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in errors.items()]
    lines += ["", "| nemesis | faults | time under fault + recovery (min) | first ack after "
              "fault, median / worst (s) | ISR full after heal, median / worst (s) | "
              "not recovered | partitions without an ack | producer restarts |",
              "|---|---:|---:|---|---|---:|---:|---:|"]

    def mw(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} / {max(xs):.2f}" if xs else "-"
    for n, d in sorted(per.items()):
        lines.append(f"| {n} | {d['count']} | {d['fault_s'] / 60:.1f} | {mw(d['first_ack'])} "
                     f"| {mw(d['isr_full'])} | {d['not_recovered']} | {d['without_ack']} | "
                     f"{d['restarts']} |")
    lines += ["", "## Runs", ""] + [f"- {s}" for s in rep["run_summaries"]]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return rep


if __name__ == "__main__":
    sys.exit(main())
