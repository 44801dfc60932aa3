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
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode, KafkaError
from tests.groups.test_streams_app import StreamsApp, committed_counts, streams_groups
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
    # the killed instance's open transaction (Kafka Streams' 10 s transaction timeout) is
    # aborted within a second of timing out, not ten
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
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
        # refused before the append (so safe to send again): ISR under min ISR while a
        # loaded broker catches up, or a leader that moved
        deadline = time.monotonic() + 60
        while True:
            lc = leader_client(c, "words", p)
            try:
                lc.produce("words", p, rb.build_batch(recs), acks=-1)
                break
            except KafkaError as e:
                if e.code not in (ErrorCode.NOT_ENOUGH_REPLICAS,
                                  ErrorCode.NOT_LEADER_OR_FOLLOWER) \
                        or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
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
                nxt = committed_counts(pr, out)
                if nxt <= offset:
                    break
                offset = nxt
        finally:
            if lc is not c:
                lc.close()
    return out


def diagnose(cluster: Cluster) -> str:
    """What a miscount needs to be explained: every partition of the app's topics
    (leader, HW, LSO, error, producers with an open transaction) and every transaction
    the coordinators know that is not Empty/CompleteCommit/CompleteAbort."""
    lines: list[str] = []
    with Client(cluster.brokers[1].bootstrap) as c:
        md = c.metadata()
        topics = sorted(t.name for t in md.topics
                        if t.name in ("words", "counts") or t.name.startswith("wc-"))
        for name in topics:
            t = next(t for t in md.topics if t.name == name)
            for part in sorted(t.partitions, key=lambda x: x.partition_index):
                pid = part.partition_index
                lc = leader_client(c, name, pid)
                try:
                    [pr] = lc.fetch_partitions(name, {pid: 0}, max_wait_ms=0,
                                               max_bytes=1, isolation_level=1)
                    dp = lc.request(61, 0, {"topics": [
                        {"name": name, "partition_indexes": [pid]}]})
                    prods = [(a.producer_id, a.producer_epoch, a.current_txn_start_offset)
                             for a in dp.topics[0].partitions[0].active_producers
                             if a.current_txn_start_offset >= 0]
                    lines.append(f"{name}-{pid}: leader {part.leader_id} isr "
                                 f"{list(part.isr_nodes)} hw {pr.high_watermark} lso "
                                 f"{pr.last_stable_offset} err {pr.error_code} "
                                 f"open txns (pid, epoch, start) {prods}")
                finally:
                    if lc is not c:
                        lc.close()
    for bid, broker in sorted(cluster.brokers.items()):
        try:
            with Client(broker.bootstrap) as bc:
                lt = bc.request(66, 1, {"state_filters": [], "producer_id_filters": [],
                                        "duration_filter": -1})
                ids = [x.transactional_id for x in lt.transaction_states
                       if x.transaction_state not in ("Empty", "CompleteCommit",
                                                      "CompleteAbort")]
                if ids:
                    dt = bc.request(65, 0, {"transactional_ids": ids})
                    for ts in dt.transaction_states:
                        parts = {tp.topic: list(tp.partitions) for tp in ts.topics}
                        lines.append(f"broker {bid} coordinates {ts.transactional_id}: "
                                     f"{ts.transaction_state} pid {ts.producer_id} epoch "
                                     f"{ts.producer_epoch} since {ts.transaction_start_time_ms}"
                                     f" partitions {parts}")
        except Exception as e:  # a diagnosis reports what it cannot read
            lines.append(f"broker {bid}: {e!r}")
    return "\n".join(lines)


def active_tasks(rows: list[str]) -> set[tuple[str, int]]:
    """(subtopology, partition) of every task in the ACTIVE column of member rows."""
    owned: set[tuple[str, int]] = set()
    for row in rows:
        for col in re.findall(r"(?<![-\w])ACTIVE:((?:\s*\d+:\[[\d,]*\];?)*)", row):
            for sub, ps in re.findall(r"(\d+):\[([\d,]*)\]", col):
                owned.update((sub, int(x)) for x in ps.split(",") if x)
    return owned


def count_diff(got: dict[str, int], expected: Counter[str]) -> dict[str, tuple[int | None, int | None]]:
    """Every word whose count differs: word -> (got, expected)."""
    words = set(got) | set(expected)
    return {w: (got.get(w), expected.get(w)) for w in sorted(words)
            if got.get(w) != expected.get(w)}


def run(seed: int, rounds: int, lines: int, root: Path, settle: float = 240,
        keep: Path | None = None) -> list[str]:
    """One run; the problems found (empty when the counts are exact and the tool shows
    both members). A miscount names every word that differs, (got, expected)."""
    rnd = random.Random(seed)
    t0 = time.monotonic()
    cluster = Cluster(root, 3, OVERRIDES)
    apps: list[StreamsApp] = []
    problems: list[str] = []
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
        kill_at = max(1, rounds // 3)
        with Client(cluster.brokers[1].bootstrap) as c:
            for i in range(rounds):
                produce_round(c, rnd, lines, expected)
                time.sleep(rnd.uniform(0.2, 0.8))
                if i == kill_at:
                    # mid-stream: both instances run and counts are being written
                    deadline = time.monotonic() + 120
                    while time.monotonic() < deadline and not (
                            all("RUNNING" in a.states() for a in apps)
                            and read_counts(c, "counts")):
                        time.sleep(0.5)
                    victim = apps[1]
                    victim.proc.kill()
                    victim.proc.wait(10)
                    print(f"{time.monotonic() - t0:.0f}s round {i}: SIGKILLed instance b "
                          f"(states {victim.states()}); "
                          "starting it again", flush=True)
                    apps[1] = start("b")
            print(f"{time.monotonic() - t0:.0f}s: {sum(expected.values())} words produced; "
                  "waiting for the counts",
                  flush=True)
            deadline = time.monotonic() + settle
            got: dict[str, int] = {}
            while time.monotonic() < deadline:
                got = read_counts(c, "counts")
                if got == dict(expected):
                    break
                time.sleep(1)
        if got != dict(expected):
            diff = count_diff(got, expected)
            problems.append(f"counts differ in {len(diff)} of {len(expected)} words "
                            f"(word: (got, expected)): {diff}")
            print(problems[-1], flush=True)
            print(diagnose(cluster), flush=True)
        out = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = streams_groups("--bootstrap-server", b, "--describe", "--group", "wc",
                                 "--members")
            rows = [ln for ln in out.splitlines() if ln.startswith("wc ")]
            if len(rows) == 2 and all("ACTIVE:" in r for r in rows):
                break
            time.sleep(1)
        print(f"{time.monotonic() - t0:.0f}s: counts {'exact' if not problems else 'wrong'}"
              f"; kafka-streams-groups --describe --members:\n{out}")
        rows = [ln for ln in out.splitlines() if ln.startswith("wc ")]
        if len(rows) != 2:
            problems.append(f"kafka-streams-groups does not show two members:\n{out}")
        else:
            owned = active_tasks(rows)
            want = {(str(sub), p) for sub in (0, 1) for p in range(PARTITIONS)}
            if owned != want:
                problems.append(f"active tasks {sorted(owned)} are not every task:\n{out}")
        return problems
    finally:
        for a in apps:
            a.stop()
        for i, a in enumerate(apps):
            print(f"instance {'ab'[i]}: exit {a.proc.returncode}, states {a.states()}")
            if a.proc.returncode not in (0, 143):
                print(a.output())
        cluster.stop()
        if problems and keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for log in root.glob("broker-*.log"):
                shutil.copy(log, keep / log.name)
            for i, a in enumerate(apps):
                (keep / f"instance-{'ab'[i]}.log").write_text("\n".join(a.lines))
            print(f"broker and instance logs kept in {keep}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--lines", type=int, default=40)
    ap.add_argument("--keep", default=None,
                    help="on a failure, copy the broker and instance logs under this dir")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed={seed}", flush=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streams-cluster-") as d:
        keep = Path(args.keep) / f"seed-{seed}" if args.keep else None
        problems = run(seed, args.rounds, args.lines, Path(d), keep=keep)
    ok = not problems
    for problem in problems:
        print(f"FAIL: {problem}")
    print(f"{'PASS' if ok else 'FAIL'} seed={seed} in {time.monotonic() - t0:.0f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
