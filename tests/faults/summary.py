"""Add up fault campaign reports and check them against the fault issue's bar.

    python -m tests.faults.summary tests/faults/results/2026-11-27-c1*.json
    python -m tests.faults.summary --min-total 180 --min-family 30 REPORT.json ...

Prints the campaigns' totals (runs, faults, acknowledged writes, every error count),
the minutes under fault or recovering per family of nemesis (the kinds of fault the
issue names: crash, pause, network partition, power loss, disk full, and Kafka's
replication_test matrix) and per nemesis, and the code each report ran on. Exits 1
when a run was invalid, an error was counted, or the minutes fall short of the bar
(default: 180 in all, 30 for every family present in the reports).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from tests.faults.nemesis import FAMILIES as PREFIXES
from tests.faults.nemesis import MATRIX

FAMILIES = (*PREFIXES, "matrix")


def family(nemesis: str) -> str:
    """The family of a nemesis name: nemesis.py's families, and its replication_test
    matrix."""
    if nemesis in MATRIX:
        return "matrix"
    return next((f for f, prefix in PREFIXES.items() if nemesis.startswith(prefix)), nemesis)


def add_up(reports: list[dict[str, Any]]) -> dict[str, Any]:
    errors: Counter[str] = Counter()
    per_nemesis: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    tot: dict[str, Any] = {"reports": len(reports), "runs": 0, "invalid_runs": 0,
                           "faults": 0, "acknowledged": 0, "wall_min": 0.0,
                           "duplicates_client": 0, "producer_restarts": 0, "commits": []}
    for r in reports:
        for k in ("runs", "invalid_runs", "faults", "acknowledged", "duplicates_client",
                  "producer_restarts"):
            tot[k] += r.get(k, 0)
        tot["wall_min"] += r.get("wall_s", 0) / 60
        commit = r.get("commit", "unrecorded")
        if commit not in tot["commits"]:
            tot["commits"].append(commit)
        errors.update(r.get("errors", {}))
        for n, d in r.get("per_nemesis", {}).items():
            per_nemesis[n] += d["fault_s"] / 60
            counts[n] += d["count"]
            errors["not_recovered"] += d.get("not_recovered", 0)
    per_family: Counter[str] = Counter()
    for n, m in per_nemesis.items():
        per_family[family(n)] += m
    tot.update(errors=dict(errors), per_nemesis=dict(per_nemesis), counts=dict(counts),
               per_family=dict(per_family), fault_min=sum(per_nemesis.values()))
    return tot


def shortfalls(tot: dict[str, Any], min_total: float, min_family: float) -> list[str]:
    out = []
    if tot["invalid_runs"]:
        out.append(f"{tot['invalid_runs']} invalid run(s)")
    out += [f"{k}: {v}" for k, v in tot["errors"].items() if v]
    if tot["fault_min"] < min_total:
        out.append(f"{tot['fault_min']:.1f} min under fault in all, under {min_total:g}")
    out += [f"{f}: {m:.1f} min under fault, under {min_family:g}"
            for f, m in sorted(tot["per_family"].items()) if m < min_family]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.faults.summary",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", help="report.json files of `make chaos`")
    ap.add_argument("--min-total", type=float, default=180.0,
                    help="minutes under fault in all (default 180)")
    ap.add_argument("--min-family", type=float, default=30.0,
                    help="minutes under fault per family present (default 30)")
    a = ap.parse_args(argv)
    reports = []
    for f in a.reports:
        try:
            reports.append(json.loads(Path(f).read_text()))
        except (OSError, ValueError) as e:
            print(f"summary: {f}: {e}", file=sys.stderr)
            return 2
    tot = add_up(reports)
    print(f"{tot['reports']} reports (code: {', '.join(tot['commits'])}): {tot['runs']} runs "
          f"({tot['invalid_runs']} invalid), {tot['faults']} faults, "
          f"{tot['acknowledged']:,} acknowledged writes checked, "
          f"{tot['wall_min']:.1f} min of campaigns, {tot['fault_min']:.1f} min under fault "
          f"or recovering")
    print("errors: " + ", ".join(f"{k} {v}" for k, v in sorted(tot["errors"].items())))
    print(f"client re-send duplicates (newer epoch, reported apart): "
          f"{tot['duplicates_client']}; producer restarts: {tot['producer_restarts']}")
    print("\n| family / nemesis | faults | min under fault |\n|---|---:|---:|")
    for f in sorted(tot["per_family"]):
        names = sorted(n for n in tot["per_nemesis"] if family(n) == f)
        print(f"| **{f}** | {sum(tot['counts'][n] for n in names)} | "
              f"**{tot['per_family'][f]:.1f}** |")
        for n in names:
            print(f"| {n} | {tot['counts'][n]} | {tot['per_nemesis'][n]:.1f} |")
    short = shortfalls(tot, a.min_total, a.min_family)
    print("\nbar (" + f"{a.min_total:g} min in all, {a.min_family:g} per family): "
          + ("met" if not short else "NOT met: " + "; ".join(short)))
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
