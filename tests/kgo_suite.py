"""franz-go's own kgo integration suite against three jocko-py brokers and against three
Apache Kafka 4.4.0 nodes, with a per-test comparison (`make kgo-suite`).

    python -m tests.kgo_suite [--version v1.22.3] [--run REGEX] [--timeout 20m]
                              [--only jocko|kafka] [--records N]
                              [--out docs/results/<date>-kgo-suite.md]
    python -m tests.kgo_suite --prepare [--version v1.22.3]

The source of franz-go at `--version` comes through the Go module proxy
(`go mod download -json github.com/twmb/franz-go@VERSION`) and is copied, writable, to
build/franz-go-VERSION, where it stays with its tests compiled (`--prepare`, which
`make go-deps` runs, does only that; tests/share/test_kgo_share.py runs the share-group
tests in `make test` from there); its `pkg/kgo` tests run with `go test -json -count=1 -run REGEX -timeout T`
and the environment the suite reads (pkg/kgo/helpers_test.go): `KGO_SEEDS` (the
cluster's brokers), `KGO_TEST_RF=3`, `KGO_TEST_RECORDS` (unset: the suite's default, 500,000; `--records`
sets it, as `make kgo-share` does for TestShareGroupETL on a 2-core machine).
A test that is still running when `go test`'s timeout fires is reported as `timeout`;
the tests that had not started yet are run again in a further round without the ones
that timed out, so one hung test does not hide the rest.

The report lists every top-level test with its outcome on each cluster and the tests
that passed against Kafka but not against jocko-py (the issue's bar: none). Exit status
0 when there are none, 1 otherwise; 2 on a missing prerequisite (go, java, the jars).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

from jocko_py.broker.config import DEFAULTS
from tests.support import kafka44
from tests.support.broker import REPO
from tests.support.cluster import FAST, Cluster

MODULE = "github.com/twmb/franz-go"
VERSION = "v1.22.3"  # the newest release on the Go module proxy (2026-11-28)
# franz-go's share-group tests (issue 24): `make kgo-share`, tests/share/test_kgo_share.py
SHARE_TESTS = ("TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose",
               "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal")


class SuiteError(Exception):
    """A missing prerequisite (go, the module, the jars): exit status 2."""


def fail(msg: str) -> NoReturn:
    raise SuiteError(msg)


def franz_source(version: str, work: Path) -> Path:
    """franz-go's module source at `version`, copied writable under `work`."""
    out = subprocess.run(["go", "mod", "download", "-json", f"{MODULE}@{version}"],
                         capture_output=True, text=True, timeout=600, cwd=work)
    if out.returncode != 0:
        fail(f"go mod download {MODULE}@{version} failed: {out.stdout}{out.stderr}".strip())
    src = Path(json.loads(out.stdout)["Dir"])
    dst = work / f"franz-go-{version}"
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    return dst


def prepared_source(version: str = VERSION) -> Path:
    """franz-go's source at `version` in build/franz-go-<version>, kept between runs, and
    pkg/kgo's tests compiled into Go's build cache: the cache keys a package by its
    directory, so a fresh copy would compile it again (half a minute or more on 2
    cores); with the cache warm this takes a few seconds.
    `python -m tests.kgo_suite --prepare` (make go-deps) does it ahead of `make test`."""
    if shutil.which("go") is None:
        fail("go not found")
    build = REPO / "build"
    dst = build / f"franz-go-{version}"
    done = dst / ".jocko-copied"
    if not done.exists():
        build.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(dst, ignore_errors=True)
        franz_source(version, build)
        done.write_text(version + "\n")
    out = subprocess.run(["go", "test", "-c", "-o", os.devnull, "./pkg/kgo/"], cwd=dst,
                         capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        fail(f"go test -c ./pkg/kgo/ failed: {out.stdout}{out.stderr}".strip())
    return dst


def list_tests(src: Path, run: str) -> list[str]:
    out = subprocess.run(["go", "test", "-list", run, "./pkg/kgo/"], cwd=src,
                         capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        fail(f"go test -list failed: {out.stdout}{out.stderr}")
    return [ln for ln in out.stdout.split() if re.fullmatch(r"(Test|Example)\w*", ln)]


def run_round(src: Path, env: dict[str, str], tests: list[str], timeout: str,
              log: Path) -> dict[str, tuple[str, float]]:
    """One `go test -json` over `tests`: {test: (pass|fail|skip|timeout, seconds)} for
    every top-level test that started."""
    pattern = "^(" + "|".join(re.escape(t) for t in tests) + ")$"
    cmd = ["go", "test", "-json", "-count=1", "-run", pattern, "-timeout", timeout, "./pkg/kgo/"]
    results: dict[str, tuple[str, float]] = {}
    started: dict[str, float] = {}
    hung: set[str] = set()  # named by the timeout panic's "running tests:" list
    in_panic = False
    with open(log, "a") as lf:
        lf.write(f"$ {' '.join(cmd)}\n")
        # its own process group: go test runs the test binary as its child
        proc = subprocess.Popen(cmd, cwd=src, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                lf.write(line)
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                out = str(ev.get("Output") or "")
                if "panic: test timed out" in out:
                    in_panic = True
                elif in_panic and (m := re.match(r"\s+(\w+) \(", out)):
                    hung.add(m.group(1))
                name = ev.get("Test")
                if not name or "/" in name:
                    continue
                action = ev.get("Action")
                if action == "run":
                    started[name] = time.monotonic()
                elif action in ("pass", "fail", "skip"):
                    results[name] = (action, float(ev.get("Elapsed") or 0.0))
        finally:
            if proc.poll() is None:  # interrupted (a pytest timeout): no go test left behind
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for name, t0 in started.items():  # killed by the timeout panic
        if name in hung or not hung:
            results.setdefault(name, ("timeout", time.monotonic() - t0))
    return results  # a started test the panic did not name runs again next round


def run_suite(src: Path, seeds: str, tests: list[str], timeout: str, log: Path,
              rounds: int, records: int | None = None) -> dict[str, tuple[str, float]]:
    env = dict(os.environ, KGO_SEEDS=seeds, KGO_TEST_RF="3")
    env.pop("KGO_TEST_RECORDS", None)
    if records:
        env["KGO_TEST_RECORDS"] = str(records)
    env.pop("KGO_TEST_CHAOS", None)
    results: dict[str, tuple[str, float]] = {}
    todo = list(tests)
    for _ in range(rounds):
        if not todo:
            break
        got = run_round(src, env, todo, timeout, log)
        results.update(got)
        if not any(v[0] == "timeout" for v in got.values()):
            break
        todo = [t for t in todo if t not in results]
    for t in tests:
        results.setdefault(t, ("not run", 0.0))
    return results


@contextmanager
def jocko_cluster(root: Path) -> Iterator[str]:
    # Kafka's (and jocko-py's) default timings, as the Kafka nodes run with, not the
    # loopback tests' fast ones: under a loaded machine a 3 s broker session fences
    # brokers and fails CreateTopics with INVALID_REPLICATION_FACTOR.
    timings = {k: DEFAULTS[k] for k in FAST if k in DEFAULTS}
    c = Cluster(root, 3, overrides=timings | {"group.initial.rebalance.delay.ms": "0"})
    try:
        c.start()
        yield c.bootstrap
    finally:
        c.stop()


@contextmanager
def kafka_cluster(root: Path) -> Iterator[str]:
    with kafka44.kafka44_cluster(root, 3) as nodes:
        yield ",".join(n.bootstrap for n in nodes)


def report(version: str, run: str, tests: list[str],
           res: dict[str, dict[str, tuple[str, float]]], seconds: dict[str, float],
           records: int | None = None) -> str:
    sides = [s for s in ("kafka", "jocko") if s in res]
    title = {"kafka": "Apache Kafka 4.4.0 (3 nodes)", "jocko": "jocko-py (3 brokers)"}
    lines = [
        f"# franz-go {version} kgo integration suite: jocko-py vs Apache Kafka 4.4.0",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `make kgo-suite` (or `make kgo-share`) "
        f"(`python -m tests.kgo_suite`): `go test ./pkg/kgo/ -run '{run}'` with "
        "`KGO_TEST_RF=3`" + (f", `KGO_TEST_RECORDS={records}`" if records else "")
        + " and `KGO_SEEDS` set to each cluster's three brokers, one "
        "cluster at a time, on the same 2-core machine.",
        "",
    ]
    for s in sides:
        counts: dict[str, int] = {}
        for outcome, _ in res[s].values():
            counts[outcome] = counts.get(outcome, 0) + 1
        lines.append(f"- {title[s]}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                     + f" ({seconds[s]:.0f} s)")
    regress: list[str] = []
    if "kafka" in res and "jocko" in res:
        regress = [t for t in tests if res["kafka"][t][0] == "pass" and res["jocko"][t][0] != "pass"]
        lines += ["", "Passed against Kafka but not against jocko-py: "
                  + (", ".join(f"`{t}`" for t in regress) if regress else "none") + "."]
    lines += ["", "| test | " + " | ".join(title[s] for s in sides) + " |",
              "| --- |" + " --- |" * len(sides)]
    for t in tests:
        cells = [f"{res[s][t][0]} ({res[s][t][1]:.1f} s)" for s in sides]
        lines.append(f"| `{t}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except SuiteError as e:
        print(f"kgo-suite: {e}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default=VERSION)
    ap.add_argument("--run", default=".", help="go test -run regular expression")
    ap.add_argument("--timeout", default="20m", help="go test -timeout for one round")
    ap.add_argument("--rounds", type=int, default=3,
                    help="go test runs at most, each over the tests a timeout left unstarted")
    ap.add_argument("--only", choices=("jocko", "kafka"))
    ap.add_argument("--records", type=int, default=None,
                    help="KGO_TEST_RECORDS (default: unset, the suite's own)")
    ap.add_argument("--out", type=Path,
                    default=REPO / "docs" / "results" / f"{datetime.now(UTC):%Y-%m-%d}-kgo-suite.md")
    ap.add_argument("--prepare", action="store_true",
                    help="only download franz-go and build its pkg/kgo tests (make go-deps)")
    args = ap.parse_args(argv)
    if args.prepare:
        print(f"kgo-suite: franz-go {args.version} prepared in {prepared_source(args.version)}")
        return 0
    if shutil.which("go") is None:
        fail("go not found")
    if args.only != "jocko" and (why := kafka44.missing()):
        fail(why)
    with tempfile.TemporaryDirectory(prefix="kgo-suite-") as tmp:
        work = Path(tmp)
        src = prepared_source(args.version)
        tests = list_tests(src, args.run)
        if not tests:
            fail(f"no test matches {args.run!r}")
        print(f"kgo-suite: franz-go {args.version}, {len(tests)} tests", flush=True)
        res: dict[str, dict[str, tuple[str, float]]] = {}
        seconds: dict[str, float] = {}
        logs = REPO / "build" / "kgo-suite"
        logs.mkdir(parents=True, exist_ok=True)
        for side, cluster in (("kafka", kafka_cluster), ("jocko", jocko_cluster)):
            if args.only and side != args.only:
                continue
            log = logs / f"{side}.jsonl"
            log.write_text("")
            t0 = time.monotonic()
            with cluster(work / side) as seeds:
                print(f"kgo-suite: {side} up at {seeds}; go test log in {log}", flush=True)
                res[side] = run_suite(src, seeds, tests, args.timeout, log, args.rounds,
                                      args.records)
            seconds[side] = time.monotonic() - t0
            (logs / f"{side}-results.json").write_text(json.dumps({
                "version": args.version, "run": args.run, "records": args.records,
                "seconds": seconds[side],
                "results": res[side]}))
            bad = sorted(t for t, (o, _) in res[side].items() if o not in ("pass", "skip"))
            print(f"kgo-suite: {side}: {len(tests) - len(bad)} of {len(tests)} passed or "
                  f"skipped; not: {', '.join(bad) or 'none'}", flush=True)
        for side in ("kafka", "jocko"):  # the other side's last run of the same tests
            saved = logs / f"{side}-results.json"
            if side not in res and saved.exists():
                d = json.loads(saved.read_text())
                if (d["version"], d["run"], d.get("records")) == (
                        args.version, args.run, args.records):
                    res[side] = {t: (o, e) for t, (o, e) in d["results"].items()}
                    seconds[side] = d["seconds"]
        text = report(args.version, args.run, tests, res, seconds, args.records)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"kgo-suite: report in {args.out}")
        if "kafka" in res and "jocko" in res:
            regress = [t for t in tests
                       if res["kafka"][t][0] == "pass" and res["jocko"][t][0] != "pass"]
            print(f"{len(tests) - len(regress)} passed, {len(regress)} failed "
                  "(kgo tests passing on Kafka 4.4.0 and on jocko-py / not on jocko-py)")
            return 1 if regress else 0
        return 0


if __name__ == "__main__":
    sys.exit(main())
