"""Group consumer workers as subprocesses, and the scenario every client must pass.

A worker (tests/groups/workers/*, or the Java GroupClient) consumes one topic
in a group and reports assignments and processed records in its output file
(format in workers/common.py). A clean stop is SIGTERM (commit, close: the
member leaves the group); a crash is SIGKILL.
"""

from __future__ import annotations

import itertools
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from tests.support.broker import REPO, BrokerProcess, terminate
from tests.support.prereq import requires

WORKERS = Path(__file__).parent / "workers"
JAVA_JARS = REPO / ".cache" / "java-test-jars-4"  # kafka-clients 4.4.0, the newest release
JAVA_CLASSES = REPO / ".cache" / "java-test-classes"

# broker settings for every group test: fast first rebalance, short sessions allowed
BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "300",
    "group.min.session.timeout.ms": "1000",
    "log.cleaner.backoff.ms": "300",
}
SESSION_MS = 6000
# How long after a kill -9 the survivors may take to own the dead member's
# partitions: the broker notices the silence at most SESSION_MS after the kill
# (the last heartbeat was before it) plus its 100 ms timer tick; the survivor
# learns of the rebalance at its next heartbeat (the workers use 500 ms), then
# revokes and commits, rejoins, syncs and reports: measured 0.5 s on top of the
# session (6.5 s in all) for kafka-python. The rest of the margin absorbs a
# loaded 2-core machine. A coordinator that needed about twice the session
# timeout, or only noticed at the next rebalance timeout, fails this.
KILL_TAKEOVER_MARGIN_S = 4.0
_ids = itertools.count()


def java_available() -> bool:
    return shutil.which("java") is not None and (JAVA_CLASSES / ".done").exists() and any(
        JAVA_JARS.glob("kafka-clients-*.jar"))


# the Java worker as a parametrize value, skipped (saying why) when it is not built
JAVA = pytest.param("java", marks=requires(
    java_available(), "Java client not built (make -C tests/java jars)"))


def wait_until(pred: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Worker:
    def __init__(self, kind: str, bootstrap: str, topic: str, group: str, workdir: Path,
                 instance_id: str | None = None, assignor: str = "range",
                 session_timeout_ms: int = SESSION_MS, name: str | None = None,
                 java_jars: Path = JAVA_JARS, extra: list[str] | None = None) -> None:
        self.kind = kind
        self.name = name or f"{kind}-{next(_ids)}"
        self.out = workdir / f"{self.name}.out"
        self.err = workdir / f"{self.name}.err"
        args = ["--bootstrap", bootstrap, "--topic", topic, "--group", group,
                "--out", str(self.out), "--assignor", assignor,
                "--session-timeout-ms", str(session_timeout_ms)]
        if instance_id:
            args += ["--instance-id", instance_id]
        args += extra or []
        if kind == "java":
            cmd = ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp",
                   f"{JAVA_CLASSES}:{java_jars}/*", "jockopy.groups.GroupClient", *args]
        else:
            cmd = [sys.executable, str(WORKERS / f"{kind}_worker.py"), *args]
        self.cmd = cmd
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        with open(self.err, "ab") as err:
            self.proc = subprocess.Popen(self.cmd, stdout=err, stderr=subprocess.STDOUT,
                                         cwd=REPO)
        return self

    def lines(self) -> list[str]:
        try:
            return self.out.read_text().splitlines()
        except FileNotFoundError:
            return []

    def assignment(self) -> set[int] | None:
        last = None
        for line in self.lines():
            if line.startswith("A"):
                last = {int(p) for p in line[1:].strip().split(",") if p}
        return last

    def records(self) -> list[tuple[int, int, str]]:
        out = []
        for line in self.lines():
            if line.startswith("R "):
                _, p, o, v = line.split(" ", 3)
                out.append((int(p), int(o), v))
        return out

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        return terminate(self.proc, timeout)[0]

    def stop_cleanly(self) -> bool:
        """SIGTERM, then True if the worker committed, closed and exited (Java: 143)."""
        rc = self.stop()
        return rc in (0, 128 + signal.SIGTERM) and "CLOSED" in self.lines()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def diag(self) -> str:
        try:
            err = self.err.read_text(errors="replace")[-3000:]
        except OSError:
            err = ""
        return f"--- {self.name} out tail:\n" + "\n".join(self.lines()[-15:]) + \
            f"\n--- {self.name} stderr tail:\n{err}"


class Producer:
    """Writes numbered records round-robin over the partitions with the project client."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.client = Client(bootstrap)
        self.topic = topic
        self.partitions = partitions
        self.next = 0
        self.values: list[str] = []

    def produce(self, n: int) -> None:
        per: dict[int, list[rb.NewRecord]] = {}
        for _ in range(n):
            v = f"v{self.next}"
            per.setdefault(self.next % self.partitions, []).append(
                rb.NewRecord(f"k{self.next}".encode(), v.encode()))
            self.values.append(v)
            self.next += 1
        for p, recs in per.items():
            self.client.produce(self.topic, p, rb.build_batch(recs), acks=-1)

    def close(self) -> None:
        self.client.close()


def create_topic(bootstrap: str, topic: str, partitions: int,
                 configs: dict[str, str] | None = None) -> None:
    with Client(bootstrap) as c:
        c.create_topic(topic, partitions, 1, configs)


def processed(workers: list[Worker]) -> Counter[str]:
    return Counter(v for w in workers for _, _, v in w.records())


def coverage_ok(workers: list[Worker], n: int) -> bool:
    seen: list[int] = []
    for w in workers:
        a = w.assignment()
        if a is None:
            return False
        seen += a
    return sorted(seen) == list(range(n))


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int
                      ) -> dict[int, int]:
    with Client(bootstrap) as c:
        r = c.request(9, 8, {"groups": [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": list(range(partitions))}]}]})
    g = r.groups[0]
    assert g.error_code == 0, g
    return {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    with Client(bootstrap) as c:
        return {p: c.list_offset(topic, p, -1)[0] for p in range(partitions)}


def run_group_scenario(kind: str, broker: BrokerProcess, workdir: Path) -> None:
    """The end-to-end group behaviour every client must show (see test_group_clients.py)."""
    topic, group, parts = f"orders-{kind}", f"g-{kind}", 6
    workdir.mkdir(parents=True, exist_ok=True)
    create_topic(broker.bootstrap, topic, parts)
    prod = Producer(broker.bootstrap, topic, parts)
    workers: list[Worker] = []

    def fail_diag() -> str:
        return "\n".join(w.diag() for w in workers) + "\n--- broker:\n" + broker.log_tail(40)

    try:
        prod.produce(120)
        a, b, c = (Worker(kind, broker.bootstrap, topic, group, workdir).start()
                   for _ in range(3))
        workers += [a, b, c]
        try:
            # three members share the six partitions
            wait_until(lambda: coverage_ok([a, b, c], parts)
                       and all(w.assignment() for w in (a, b, c)), 60,
                       "3 consumers to share 6 partitions")
            wait_until(lambda: set(processed(workers)) == set(prod.values), 30,
                       "first 120 records")
            # no failure so far: exactly once
            counts = processed(workers)
            assert all(n == 1 for n in counts.values()), counts.most_common(3)

            # a clean leave: the other two take over at once (well within the session timeout)
            t0 = time.monotonic()
            assert a.stop_cleanly(), f"{a.name} did not stop cleanly"
            wait_until(lambda: coverage_ok([b, c], parts), SESSION_MS / 1000,
                       "b and c to take over a's partitions after a clean leave")
            leave_s = time.monotonic() - t0
            prod.produce(120)
            wait_until(lambda: set(processed(workers)) == set(prod.values), 30,
                       "records after the clean leave")
            counts = processed(workers)
            assert all(n == 1 for n in counts.values()), \
                f"duplicates with no failure: {counts.most_common(3)}"

            # a crash: c takes over once b's session expires
            t0 = time.monotonic()
            b.kill()
            prod.produce(120)
            # the wait is longer than the bound only so that a slow takeover is
            # measured and reported with its diagnostics
            wait_until(lambda: coverage_ok([c], parts), SESSION_MS / 1000 + 12,
                       "c to take over b's partitions after b was killed", interval=0.05)
            kill_s = time.monotonic() - t0
            assert kill_s <= SESSION_MS / 1000 + KILL_TAKEOVER_MARGIN_S, \
                f"crash takeover took {kill_s:.1f}s, more than the {SESSION_MS} ms session " \
                f"timeout + {KILL_TAKEOVER_MARGIN_S}s"
            wait_until(lambda: set(processed(workers)) >= set(prod.values), 30,
                       "every record processed at least once after the crash")
            assert c.stop_cleanly(), f"{c.name} did not stop cleanly"

            # everything committed: offsets equal the log end offsets
            assert committed_offsets(broker.bootstrap, group, topic, parts) == \
                end_offsets(broker.bootstrap, topic, parts)

            # a restarted consumer resumes from the committed offsets
            prod.produce(60)
            before = set(processed(workers))
            d = Worker(kind, broker.bootstrap, topic, group, workdir).start()
            workers.append(d)
            wait_until(lambda: set(v for _, _, v in d.records()) >= set(prod.values) - before,
                       40, "the restarted consumer to read the new records")
            assert sorted(v for _, _, v in d.records()) == sorted(set(prod.values) - before), \
                "restarted consumer did not resume from the committed offsets"
            assert d.stop_cleanly(), f"{d.name} did not stop cleanly"

            # broker restart: offsets survive
            committed = committed_offsets(broker.bootstrap, group, topic, parts)
            broker.restart()
            assert committed_offsets(broker.bootstrap, group, topic, parts) == committed
            prod.client.close()
            prod.client = Client(broker.bootstrap)
            prod.produce(30)
            e = Worker(kind, broker.bootstrap, topic, group, workdir).start()
            workers.append(e)
            new = set(prod.values[-30:])
            wait_until(lambda: set(v for _, _, v in e.records()) >= new, 40,
                       "a consumer after the broker restart to read the new records")
            assert len(e.records()) == 30, "offsets were lost across the broker restart"
            assert e.stop_cleanly(), f"{e.name} did not stop cleanly"
            print(f"[{kind}] clean leave takeover {leave_s:.1f}s, crash takeover {kill_s:.1f}s")
        except AssertionError as ex:
            raise AssertionError(f"{ex}\n{fail_diag()}") from None
    finally:
        for w in workers:
            w.kill()
        prod.close()
