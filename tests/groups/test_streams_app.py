"""Kafka Streams 4.4.0 with ``group.protocol=streams`` (KIP-1071) against a jocko-py broker.

A word count with a KTable (a repartition topic and a changelog topic, created by the
broker from the topology the app sends) runs with ``processing.guarantee=exactly_once_v2``
on one broker; its final counts are exact; Kafka 4.4.0's ``kafka-streams-groups
--describe`` shows the group's member and its tasks while it runs; on SIGTERM the app
leaves the group, which ends Empty. Jars: ``make -C tests/java kafka-streams-44`` (Kafka
Streams 4.4.0 and the app) and ``make -C tests/java kafka-44`` (the tools).
"""

from __future__ import annotations

import re
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jocko_py.cli.data import visible_batches
from jocko_py.client import Client
from jocko_py.console import describe_groups
from jocko_py.protocol import records as rb
from tests.groups.harness import BROKER_OVERRIDES, wait_until
from tests.groups.test_cli import cli
from tests.support.broker import REPO, BrokerProcess
from tests.support.prereq import missing

STREAMS_JARS = REPO / ".cache-extra" / "kafka-streams-44-jars"
STREAMS_CLASSES = REPO / ".cache-extra" / "kafka-streams-44-classes"
KAFKA44_JARS = REPO / ".cache-extra" / "kafka-44-jars"
STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"

OVERRIDES = {
    **BROKER_OVERRIDES,
    # Kafka's limits allow shorter intervals than the defaults; a test has no time to wait
    "group.streams.min.heartbeat.interval.ms": "300",
    "group.streams.heartbeat.interval.ms": "300",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.session.timeout.ms": "6000",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}

LINES = [
    "the quick brown fox jumps over the lazy dog",
    "a stream of words is a table of counts",
    "exactly once the broker said and exactly once it was",
]


def _require_jars() -> None:
    if shutil.which("java") is None:
        missing("no java on PATH")
    if not (STREAMS_JARS / ".done").exists() or not (STREAMS_CLASSES / ".done").exists():
        missing("Kafka Streams 4.4.0 not fetched (make -C tests/java kafka-streams-44)")


@pytest.fixture
def sbroker(tmp_path: Path) -> Iterator[BrokerProcess]:
    _require_jars()
    b = BrokerProcess(tmp_path / "data", overrides=dict(OVERRIDES))
    b.start()
    try:
        yield b
    finally:
        b.stop()


class StreamsApp:
    """One WordCount JVM (tests/java/streams/WordCount.java); its output is kept."""

    def __init__(self, bootstrap: str, app_id: str, state_dir: Path, guarantee: str,
                 input_topic: str = "words", output_topic: str = "counts") -> None:
        cp = f"{STREAMS_CLASSES}:{STREAMS_JARS}/*"
        self.proc = subprocess.Popen(
            ["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp,
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "WordCount", bootstrap, app_id, input_topic, output_topic, str(state_dir),
             guarantee],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def states(self) -> list[str]:
        return [ln.split()[1] for ln in self.lines if ln.startswith("STATE ")]

    def output(self) -> str:
        return "\n".join(self.lines[-80:])

    def stop(self, timeout: float = 40) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(5)
        return self.proc.returncode


def produce_lines(bootstrap: str, topic: str, lines: list[str]) -> None:
    with Client(bootstrap) as c:
        for i, line in enumerate(lines):
            c.produce(topic, i % 3, rb.build_batch([rb.NewRecord(None, line.encode())]))


def committed_counts(pr: Any, out: dict[str, int]) -> int:
    """Take the counts (word -> 8-byte count) of one read_committed Fetch partition
    answer into ``out``, skipping what Kafka's consumer skips: markers, and a producer's
    transactional batches from an aborted transaction's first offset to its abort
    marker (only those: one producer id commits and aborts many transactions, its epoch
    bumped each time, and a restarted Streams instance keeps it). The next offset."""
    data = memoryview(pr.records or b"")
    skip = visible_batches(data, list(pr.aborted_transactions or []))
    nxt = -1
    for pos, h in rb.iter_batches(data, validate_crc=True, allow_partial_tail=True):
        nxt = max(nxt, h.next_offset)
        if pos in skip:
            continue
        for rec in rb.decode_records(data[pos:pos + h.size]):
            if rec.key is not None and rec.value is not None:
                out[rec.key.decode()] = struct.unpack(">q", rec.value)[0]
    return nxt


def read_counts(bootstrap: str, topic: str, partitions: int) -> dict[str, int]:
    """The last count of every word in ``topic`` (read_committed)."""
    out: dict[str, int] = {}
    with Client(bootstrap) as c:
        if topic not in {t.name for t in c.metadata([topic]).topics if t.error_code == 0}:
            return out
        offsets = dict.fromkeys(range(partitions), 0)
        while True:
            progressed = False
            for pr in c.fetch_partitions(topic, offsets, max_wait_ms=50, isolation_level=1):
                nxt = committed_counts(pr, out)
                if nxt > offsets[pr.partition_index]:
                    offsets[pr.partition_index] = nxt
                    progressed = True
            if not progressed:
                return out


def streams_groups(*args: str) -> str:
    if not (KAFKA44_JARS / ".done").exists():
        missing("Kafka 4.4.0 tools not fetched (make -C tests/java kafka-44)")
    proc = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", f"{KAFKA44_JARS}/*",
         STREAMS_GROUP_COMMAND, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"kafka-streams-groups {args}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_word_count_exactly_once_with_streams_protocol(sbroker: BrokerProcess,
                                                       tmp_path: Path) -> None:
    b = sbroker.bootstrap
    with Client(b) as c:
        c.create_topic("words", 3, 1)
    produce_lines(b, "words", LINES)
    expected = Counter(w for line in LINES for w in line.split())
    app = StreamsApp(b, "wc", tmp_path / "state", "exactly_once_v2")
    try:
        wait_until(lambda: "RUNNING" in app.states() or app.proc.poll() is not None, 90,
                   "the Streams app to run")
        assert app.proc.poll() is None, app.output()
        wait_until(lambda: read_counts(b, "counts", 3) == dict(expected), 90,
                   "exact word counts")
        # the broker created the internal topics from the topology
        with Client(b) as c:
            names = {t.name: len(t.partitions) for t in c.metadata().topics}
        internal = {n: p for n, p in names.items() if n.startswith("wc-")}
        assert sorted(n.rsplit("-", 1)[1] for n in internal) == ["changelog", "repartition"]
        assert set(internal.values()) == {3}, internal
        # more input while it runs: counted once more, exactly
        produce_lines(b, "words", LINES[:1])
        expected.update(LINES[0].split())
        wait_until(lambda: read_counts(b, "counts", 3) == dict(expected), 60,
                   "exact word counts after more input")
        # Kafka 4.4.0's kafka-streams-groups: the member and its tasks
        listed = streams_groups("--bootstrap-server", b, "--list")
        assert "wc" in listed.split(), listed
        out = streams_groups("--bootstrap-server", b, "--describe", "--group", "wc",
                             "--members", "--verbose")
        [row] = [ln for ln in out.splitlines() if ln.startswith("wc ")]
        assert " streams " in row, out
        assert "ACTIVE: 0:[0,1,2]; 1:[0,1,2]; TARGET-ACTIVE: 0:[0,1,2]; 1:[0,1,2];" in row, out
        state = streams_groups("--bootstrap-server", b, "--describe", "--group", "wc",
                               "--state")
        assert "Stable" in state, state
        # jocko-py's own tool and the console's view
        r = cli(sbroker, "describe", "wc")
        assert r.returncode == 0, r.stderr
        assert "Group wc: streams protocol, state Stable" in r.stdout, r.stdout
        assert re.search(r"\s0:\[0,1,2\] 1:\[0,1,2\]\s", r.stdout), r.stdout
        r = cli(sbroker, "list", "-v")
        assert re.search(r"^wc\s+Stable\s+streams\s+streams$", r.stdout, re.M), r.stdout
        with Client(b) as c:
            [view] = describe_groups(c, ["wc"])
        assert view["type"] == "streams" and view["state"] == "Stable"
        assert view["members"][0][3] == {"active 0": [0, 1, 2], "active 1": [0, 1, 2]}
    finally:
        rc = app.stop()
    # SIGTERM: the JVM exits with 143 once the shutdown hook has closed the app
    assert rc in (0, 143) and app.states()[-1] == "NOT_RUNNING", app.output()
    # the app left the group on close: the group is empty
    deadline = time.monotonic() + 20
    while True:
        state = streams_groups("--bootstrap-server", b, "--describe", "--group", "wc",
                               "--state")
        if "Empty" in state or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "Empty" in state, state
