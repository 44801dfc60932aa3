"""One fault run: a lab of brokers, a topic, the workload, a schedule of nemeses, the
final read and the checks. `run_once` is what the tests and `make chaos` call."""

from __future__ import annotations

import json
import random
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jocko_py.client import Client
from tests.faults import nemesis
from tests.faults.checker import availability, check
from tests.faults.lab import Lab
from tests.faults.workload import Workload, final_read

TOPIC = "jepsen"
# Set (by `make chaos` on SIGINT/SIGTERM) to end a run after its current fault: the run
# still heals, reads everything back and is checked.
STOP = threading.Event()


def run_once(root: Path, seed: int, schedule: list[str], *, seconds: float = 0.0,
             brokers: int = 3, partitions: int = 10, rate: float = 40.0,
             say: Callable[[str], None] = print, isolate: bool | None = None) -> dict[str, Any]:
    """Run the nemeses of ``schedule`` in order (then, while ``seconds`` of faults are
    not used up, more drawn at random from it), each healed and recovered before the
    next; then stop the workload, read everything and check the history."""
    rng = random.Random(seed)
    result: dict[str, Any] = {"seed": seed, "brokers": brokers, "partitions": partitions,
                              "schedule": schedule, "faults": []}
    lab = Lab(root, brokers, isolate=isolate)
    wl: Workload | None = None
    t_wall = time.monotonic()
    try:
        lab.open()
        result["isolated"] = lab.isolated
        lab.start()
        with Client(lab.bootstrap, timeout=15) as c:
            c.create_topic(TOPIC, partitions, 3, {"min.insync.replicas": "2"})
        wl = Workload(lab.bootstrap, TOPIC, partitions, rate=rate)
        ctx = nemesis.Context(lab, TOPIC, partitions, rng, wl.history.now, say)
        lab.wait_for("topic with full ISR", ctx.whole, 60)
        wl.start()
        time.sleep(3)
        todo = list(schedule)
        t_faults = time.monotonic()
        while (todo or (seconds and time.monotonic() - t_faults < seconds)) \
                and not STOP.is_set():
            name = todo.pop(0) if todo else rng.choice(schedule)
            say(f"[seed {seed}] {wl.history.now():7.1f}s  {name} ...")
            rec = nemesis.get(name)(ctx)
            result["faults"].append(rec)
            say(f"[seed {seed}] {wl.history.now():7.1f}s  {name}: target "
                f"{rec.get('target')} held {rec.get('held_s', '-')}s, whole again after "
                f"{rec.get('isr_full_after_heal_s', 'NEVER')}s")
            time.sleep(rng.uniform(1, 3))
        time.sleep(2)
        wl.stop()
        result["thread_errors"] = wl.thread_errors()
        final_read(lab.bootstrap, TOPIC, partitions, wl.history)
        result["check"] = check(wl.history)
        write_history(wl.history, root / "history.jsonl.gz")
        result["availability"] = availability(wl.history, result["faults"])
        result["replicas_agree"] = replicas_agree(lab, partitions)
    except Exception as e:
        result["crash"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()
        say(f"[seed {seed}] run failed: {result['crash']}")
        result["log_tails"] = lab.log_tails(40)
    finally:
        if wl is not None:  # a failed run: clients must not outlive the lab
            wl.stop_producing.set()
            wl.stop_consuming.set()
        lab.close()
    result["wall_s"] = round(time.monotonic() - t_wall, 1)
    result["valid"] = (not result.get("crash") and not result.get("thread_errors")
                       and result.get("check", {}).get("valid", False)
                       and result.get("replicas_agree") is True
                       and all(f.get("t_recovered") is not None for f in result["faults"]))
    return result


def replicas_agree(lab: Lab, partitions: int, timeout: float = 30) -> bool | str:
    """Every replica's log of every partition holds the same bytes (bounded wait)."""
    deadline = time.monotonic() + timeout
    while True:
        bad = []
        for p in range(partitions):
            logs = set()
            for b in lab.brokers.values():
                d = b.data_dir / f"{TOPIC}-{p}"
                if d.is_dir():  # a replica of it (five brokers, RF 3: not all are)
                    logs.add(b"".join(s.read_bytes() for s in sorted(d.glob("*.log"))))
            if len(logs) > 1:
                bad.append(p)
        if not bad:
            return True
        if time.monotonic() > deadline:
            return f"partitions {bad} differ between replicas"
        time.sleep(1)


def write_history(h: Any, path: Path) -> None:
    """The run's history, one JSON object per line (gzip): every send with its outcome,
    every polled record, producer restarts, commits and the final read."""
    import dataclasses
    import gzip

    with gzip.open(path, "wt") as f:
        for s in h.sends:
            f.write(json.dumps({"f": "send"} | dataclasses.asdict(s)) + "\n")
        for pl in h.polls:
            f.write(json.dumps({"f": "poll"} | dataclasses.asdict(pl)) + "\n")
        for t, proc, err in h.restarts:
            f.write(json.dumps({"f": "restart", "t": t, "proc": proc, "error": err}) + "\n")
        for t, proc, p, o in h.commits:
            f.write(json.dumps({"f": "commit", "t": t, "proc": proc, "partition": p,
                                "offset": o}) + "\n")
        for p, recs in h.final.items():
            for r in recs:
                f.write(json.dumps({"f": "final", "partition": p} | dataclasses.asdict(r))
                        + "\n")


def summary(result: dict[str, Any]) -> str:
    c = result.get("check", {})
    errs = {k: v for k, v in c.get("errors", {}).items() if v}
    return (f"seed {result['seed']}: {'VALID' if result['valid'] else 'INVALID'} "
            f"faults={len(result['faults'])} acked={c.get('acknowledged')} "
            f"indeterminate={c.get('indeterminate')} client-dups={c.get('duplicates_client')} "
            f"restarts={c.get('producer_restarts')} errors={errs or 'none'} "
            f"replicas_agree={result.get('replicas_agree')} crash={result.get('crash')}")


def dump(result: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(result, indent=1, default=str))
