"""Kafka Streams 4.4.0 word count, ``group.protocol=streams`` and exactly_once_v2, two
instances on three jocko-py brokers, one instance SIGKILLed mid-stream and restarted
(``make streams-cluster``; about a minute and a half).

Lines of random words are produced in rounds while both instances count them (a KTable;
a repartition and a changelog topic the brokers create, replication factor 3). After a
third of the rounds one instance is killed with SIGKILL and started again on its state
directory. At the end the counts read with read_committed must equal the words produced,
exactly: no lost or doubled update across the kill, the rebalances and the aborted
transaction of the killed instance. Kafka 4.4.0's ``kafka-streams-groups --describe``
must show both members and every task. Prints PASS or FAIL with the seed (``--seed``
replays a run).
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from tests.groups.test_streams_app import StreamsApp, streams_groups
from tests.support.cluster import Cluster

OVERRIDES = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.streams.min.heartbeat.interval.ms": "300",
    "group.streams.heartbeat.interval.ms": "300",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.session.timeout.ms": "6000",
}
WORDS = [f"w{i}" for i in range(40)]
PARTITIONS = 6


def leader_client(c: Client, topic: str, partition: int) -> Client:
    return c.for_leader(topic, partition)


def produce_round(c: Client, rnd: random.Random, lines: int, expected: Counter[str]) -> None:
    per: dict[int, list[rb.NewRecord]] = {}
    for i in range(lines):
        words = [rnd.choice(WORDS) for _ in range(rnd.randint(1, 8))]
        expected.update(words)
        per.setdefault(i % PARTITIONS, []).append(rb.NewRecord(None, " ".join(words).encode()))
    for p, recs in per.items():
        lc = leader_client(c, "words", p)
        try:
            lc.produce("words", p, rb.build_batch(recs), acks=-1)
        finally:
            if lc is not c:
                lc.close()


def read_counts(c: Client, topic: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in range(PARTITIONS):
        lc = leader_client(c, topic, p)
        try:
            offset = 0
            while True:
                [pr] = lc.fetch_partitions(topic, {p: offset}, max_wait_ms=50,
                                           isolation_level=1)
                data = memoryview(pr.records or b"")
                aborted = {a.producer_id for a in (pr.aborted_transactions or [])}
                moved = False
                for pos, h in rb.iter_batches(data, validate_crc=True, allow_partial_tail=True):
                    offset = max(offset, h.next_offset)
                    moved = True
                    if h.is_control or (h.is_transactional and h.producer_id in aborted):
                        continue
                    for rec in rb.decode_records(data[pos:pos + h.size]):
                        if rec.key is not None and rec.value is not None:
                            out[rec.key.decode()] = struct.unpack(">q", rec.value)[0]
                if not moved:
                    break
        finally:
            if lc is not c:
                lc.close()
    return out


def run(seed: int, rounds: int, lines: int, root: Path) -> bool:
    rnd = random.Random(seed)
    cluster = Cluster(root, 3, OVERRIDES)
    apps: list[StreamsApp] = []
    try:
        cluster.start()
        b = cluster.bootstrap
        with Client(cluster.brokers[1].bootstrap) as c:
            c.create_topic("words", PARTITIONS, 3)
            c.create_topic("counts", PARTITIONS, 3)
        expected: Counter[str] = Counter()

        def start(name: str) -> StreamsApp:
            return StreamsApp(b, "wc", root / f"state-{name}", "exactly_once_v2")

        apps = [start("a"), start("b")]
        with Client(cluster.brokers[1].bootstrap) as c:
            for i in range(rounds):
                produce_round(c, rnd, lines, expected)
                time.sleep(rnd.uniform(0.2, 0.8))
                if i == rounds // 3:
                    victim = apps[1]
                    victim.proc.kill()
                    victim.proc.wait(10)
                    print(f"round {i}: SIGKILLed instance b; starting it again", flush=True)
                    apps[1] = start("b")
            print(f"{sum(expected.values())} words produced; waiting for the counts",
                  flush=True)
            deadline = time.monotonic() + 240
            got: dict[str, int] = {}
            while time.monotonic() < deadline:
                got = read_counts(c, "counts")
                if got == dict(expected):
                    break
                time.sleep(1)
        ok = got == dict(expected)
        if not ok:
            diff = {w: (got.get(w), n) for w, n in expected.items() if got.get(w) != n}
            print(f"counts differ (got, expected): {diff}")
        out = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = streams_groups("--bootstrap-server", b, "--describe", "--group", "wc",
                                 "--members")
            rows = [ln for ln in out.splitlines() if ln.startswith("wc ")]
            if len(rows) == 2 and all("ACTIVE:" in r for r in rows):
                break
            time.sleep(1)
        print(out)
        rows = [ln for ln in out.splitlines() if ln.startswith("wc ")]
        if len(rows) != 2:
            print("kafka-streams-groups does not show two members")
            ok = False
        return ok
    finally:
        for a in apps:
            a.stop()
        for i, a in enumerate(apps):
            print(f"instance {'ab'[i]}: exit {a.proc.returncode}, states {a.states()}")
            if a.proc.returncode not in (0, 143):
                print(a.output())
        cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--lines", type=int, default=40)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed={seed}", flush=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streams-cluster-") as d:
        ok = run(seed, args.rounds, args.lines, Path(d))
    print(f"{'PASS' if ok else 'FAIL'} seed={seed} in {time.monotonic() - t0:.0f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
