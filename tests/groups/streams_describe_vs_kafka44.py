"""Kafka 4.4.0's ``kafka-streams-groups`` against a running Kafka Streams 4.4.0 word count
(``group.protocol=streams``, exactly_once_v2) on Apache Kafka 4.4.0 (one KRaft node) and
on one jocko-py broker: ``--describe`` (offset lags), ``--members --verbose``,
``--state --verbose``, ``--offsets --verbose`` and ``--list --state`` must give the same
answer in kind (tests/parity/test_tools_vs_kafka44.py's ``shape``: ids, addresses and
numbers taken out; process ids too, lines in any order). Run by ``make streams-cluster`` after the SIGKILL run (about two
minutes: two brokers, two Streams JVMs, ten tool runs); prints PASS or FAIL with each
difference.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

from jocko_py.client import Client
from jocko_py.protocol.errors import KafkaError
from tests.groups.test_streams_app import (
    LINES,
    OVERRIDES,
    StreamsApp,
    produce_lines,
    streams_groups,
)
from tests.parity.test_tools_vs_kafka44 import shape
from tests.support.broker import BrokerProcess
from tests.support.kafka44 import ApacheKafka44

QUERIES = (
    ("--describe", "--group", "wc"),
    ("--describe", "--group", "wc", "--members", "--verbose"),
    ("--describe", "--group", "wc", "--state", "--verbose"),
    ("--describe", "--group", "wc", "--offsets", "--verbose"),
    ("--list", "--state"),
)


def answers(bootstrap: str, state_dir: Path) -> dict[tuple[str, ...], str]:
    """The tool's answers while the app runs (all its tasks caught up)."""
    with Client(bootstrap) as c:
        c.create_topic("words", 3, 1)
    deadline = time.monotonic() + 60
    while True:  # a new topic's leader may not be known yet (NOT_LEADER_OR_FOLLOWER)
        try:
            produce_lines(bootstrap, "words", LINES)
            break
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    app = StreamsApp(bootstrap, "wc", state_dir, "exactly_once_v2")
    try:
        deadline = time.monotonic() + 180
        while "RUNNING" not in app.states():
            if app.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Streams app did not run:\n{app.output()}")
            time.sleep(0.5)
        out: dict[tuple[str, ...], str] = {}
        deadline = time.monotonic() + 120
        while True:  # until every lag is 0: the same state on both
            lags = streams_groups("--bootstrap-server", bootstrap, *QUERIES[0])
            rows = [ln.split() for ln in lags.splitlines() if ln.startswith("wc ")]
            if len(rows) == 6 and all(r[-1] == "0" for r in rows) \
                    or time.monotonic() > deadline:
                break
            time.sleep(1)
        for q in QUERIES:
            out[q] = streams_groups("--bootstrap-server", bootstrap, *q)
        return out
    finally:
        app.stop()


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def kind(text: str) -> list[str]:
    """An answer in kind: shape() with process ids (UUIDs) taken out too, lines sorted
    (the tool prints a partition's rows in the order of a hash map)."""
    return sorted(shape(UUID.sub("UUID", text)))


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="streams-describe-") as d:
        root = Path(d)
        (root / "kafka").mkdir()
        kafka = ApacheKafka44(root / "kafka" / "data")
        kafka.start()
        try:
            theirs = answers(kafka.bootstrap, root / "kafka" / "state")
        finally:
            kafka.stop()
        ours_broker = BrokerProcess(root / "jocko" / "data", overrides=dict(OVERRIDES))
        ours_broker.start()
        try:
            ours = answers(ours_broker.bootstrap, root / "jocko" / "state")
        finally:
            ours_broker.stop()
    ok = True
    for q in QUERIES:
        same = kind(theirs[q]) == kind(ours[q])
        ok &= same
        print(f"{'same' if same else 'DIFFERENT'}: kafka-streams-groups {' '.join(q)}")
        if not same:
            print(f"--- Apache Kafka 4.4.0\n{theirs[q]}--- jocko-py\n{ours[q]}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
