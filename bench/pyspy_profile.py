"""Profile a jocko-py broker under the benchmark's Java load with py-spy.

Starts one jocko-py broker (same settings as bench/run.py), creates a topic, then records
py-spy samples of the broker while ProducerPerformance runs (produce path) and while
ConsumerPerformance reads the data back (fetch path). Writes, per phase, into bench/work/profile/:
  <phase>.collapsed  folded stacks (py-spy --format raw), input for any flamegraph tool
  <phase>.svg        flamegraph
  <phase>.txt        top functions by self time and by inclusive time
and prints the text summaries. Run from the repo root after `make -C bench fetch`:

  .venv/bin/python bench/pyspy_profile.py [--records 300000] [--size 1024] [--acks 1] [--partitions 1]
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402

PYSPY = str(bench.REPO / ".venv" / "bin" / "py-spy")
OUT = bench.WORK / "profile"


def summarize(collapsed: Path, top: int = 40) -> str:
    self_t: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    idle = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n_s = line.rpartition(" ")
        if not n_s.isdigit():
            continue
        n = int(n_s)
        frames = stack.split(";")
        total += n
        leaf = frames[-1]
        # An event loop parked in select/epoll is idle time, not work.
        if "select (selectors.py" in leaf or "_run_once" in leaf and len(frames) < 6:
            idle += n
        self_t[_short(leaf)] += n
        for f in set(_short(x) for x in frames):
            incl[f] += n
    lines = [
        f"{collapsed.name}: {total} samples, {idle} ({100 * idle / max(total, 1):.0f}%) "
        "idle in the event loop's select",
        "",
        "top self time:",
    ]
    for f, n in self_t.most_common(top):
        lines.append(f"  {100 * n / total:5.1f}%  {f}")
    lines += ["", "top inclusive time:"]
    for f, n in incl.most_common(top):
        lines.append(f"  {100 * n / total:5.1f}%  {f}")
    return "\n".join(lines) + "\n"


def _short(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/file.py:123)"; drop the line number so a
    # function's samples add up, and shorten site-packages paths.
    name, _, loc = frame.partition(" (")
    loc = loc.rstrip(")")
    path = loc.rsplit(":", 1)[0]
    for marker in ("site-packages/", "lib/python3.11/", "/work/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{name} ({path})"


EXTRA: list[str] = []


def record(pid: int, phase: str, seconds: int, rate: int) -> subprocess.Popen[bytes]:
    OUT.mkdir(parents=True, exist_ok=True)
    return bench.spawn(
        [
            PYSPY,
            "record",
            *EXTRA,
            "--pid",
            str(pid),
            "--duration",
            str(seconds),
            "--rate",
            str(rate),
            "--format",
            "raw",
            *([] if "--native" in EXTRA else ["--nonblocking"]),
            "-o",
            str(OUT / f"{phase}.collapsed"),
        ],
        log=OUT / f"{phase}.pyspy.log",
    )


def flamegraph(pid: int, phase: str, seconds: int, rate: int) -> subprocess.Popen[bytes]:
    return bench.spawn(
        [
            PYSPY,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(seconds),
            "--rate",
            str(rate),
            "--format",
            "flamegraph",
            "--nonblocking",
            "-o",
            str(OUT / f"{phase}.svg"),
        ],
        log=OUT / f"{phase}.svg.log",
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=300000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--acks", default="1")
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--seconds", type=int, default=15, help="py-spy duration per phase")
    p.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    p.add_argument("--svg", action="store_true", help="also write flamegraph SVGs (2nd py-spy)")
    p.add_argument("--idle", action="store_true", help="py-spy --idle (wall time, not CPU)")
    p.add_argument("--native", action="store_true", help="py-spy --native (C frames too)")
    args = p.parse_args()
    EXTRA.extend((["--idle"] if args.idle else []) + (["--native"] if args.native else []))
    bench.WORK.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    (bench.WORK / "log4j-tools.properties").write_text(
        "log4j.rootLogger=WARN, e\nlog4j.appender.e=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.e.Target=System.err\n"
        "log4j.appender.e.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.e.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
    )
    b = bench.JockoBroker(
        "jocko-py",
        {"log.segment.bytes": str(bench.SEGMENT_BYTES), "group.initial.rebalance.delay.ms": "0"},
    )
    case = OUT / "broker"
    case.mkdir()
    tlog = OUT / "tools.log"
    with bench.cleanup_guard():
        try:
            b.prepare(case)
            ms = bench.wait_first_produce(b, tlog)
            bench.progress(f"broker up, first produce after {ms:.0f} ms")
            assert b.proc is not None
            pid = b.proc.pid
            topic = "profile"
            bench.create_topic(b, topic, args.partitions, tlog)
            for phase in ("produce", "fetch"):
                spies = [record(pid, phase, args.seconds, args.rate)]
                if args.svg:
                    spies.append(flamegraph(pid, phase, args.seconds, args.rate))
                time.sleep(0.5)
                t0 = time.monotonic()
                if phase == "produce":
                    cmd = bench.java_tool(
                        "org.apache.kafka.tools.ProducerPerformance",
                        "--topic",
                        topic,
                        "--num-records",
                        str(args.records),
                        "--record-size",
                        str(args.size),
                        "--throughput",
                        "-1",
                        "--producer-props",
                        f"bootstrap.servers={b.bootstrap}",
                        f"acks={args.acks}",
                    )
                else:
                    cmd = bench.java_tool(
                        "org.apache.kafka.tools.ConsumerPerformance",
                        "--bootstrap-server",
                        b.bootstrap,
                        "--topic",
                        topic,
                        "--messages",
                        str(args.records),
                        "--timeout",
                        "30000",
                        "--group",
                        f"profile-{time.time_ns()}",
                    )
                rc, out, secs = bench.run_tool(cmd, timeout=600, log=tlog)
                tail = [ln for ln in out.splitlines() if ln.strip()][-2:]
                bench.progress(f"{phase}: rc={rc} {secs:.1f}s {' | '.join(tail)}")
                for s in spies:
                    left = args.seconds + 10 - (time.monotonic() - t0)
                    try:
                        s.wait(timeout=max(left, 5))
                    except subprocess.TimeoutExpired:
                        bench._terminate(s, grace=5)
                col = OUT / f"{phase}.collapsed"
                if col.exists():
                    text = summarize(col)
                    (OUT / f"{phase}.txt").write_text(text)
                    print(f"==== {phase} ====\n{text}")
        finally:
            b.stop()
            shutil.rmtree(case / "data", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
