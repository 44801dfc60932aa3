"""Kafka's `transactions_test` (tests/kafkatest/tests/core/transactions_test.py), on
three jocko-py brokers: `make txn-soak` (not part of `make test`: minutes, not seconds).

Input: RECORDS numbered records (values "000000", "000001", ...) in 2 partitions of an
RF=3, min.insync.replicas=2 topic. Two copier processes (tests/transactions/copier.py,
one consumer group, fixed transactional ids) copy them to a 3-partition output topic
in transactions of BATCH records that also commit the consumed offsets, while a
nemesis bounces brokers (hard: SIGKILL; clean: SIGTERM), and separately kills copier
processes (SIGKILL; a new copier with the same transactional id fences the zombie and
aborts its transaction). A concurrent read_committed consumer reads the output all
along. Checked, as Kafka checks: the output read afterwards (read_committed) is
exactly the input, no record twice; the concurrent consumer saw exactly the input;
with one output partition (`--one-partition`) the order of each input partition is
kept in the output.

    python -m tests.transactions.soak [--records N] [--batch B] [--bounce hard|clean|copier]
                                      [--one-partition] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from jocko_py.client import Client
from tests.support.broker import REPO
from tests.support.cluster import Cluster

INPUT, OUTPUT, GROUP = "txn-soak-in", "txn-soak-out", "txn-soak-copiers"
WATCHDOG_S = 45.0


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


class Copiers:
    def __init__(self, c: Cluster, out_parts: int, batch: int, root: Path) -> None:
        self.c, self.out_parts, self.batch, self.root = c, out_parts, batch, root
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.restarts = 0

    def start(self, i: int) -> None:
        log_file = open(self.root / f"copier-{i}.log", "ab")
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "tests.transactions.copier", self.c.bootstrap, INPUT, OUTPUT,
             str(self.out_parts), GROUP, f"txn-soak-copier-{i}", str(self.batch)],
            cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT)

    def keep_alive(self) -> None:
        for i, p in list(self.procs.items()):
            if p.poll() is not None:
                log(f"copier {i} exited ({p.returncode}): starting a new one")
                self.restarts += 1
                self.start(i)

    def kill(self, i: int) -> None:
        self.procs[i].kill()
        self.procs[i].wait()

    def stop(self) -> None:
        for p in self.procs.values():
            p.kill()
            p.wait()


def committed_total(c: Cluster) -> int:
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": GROUP,
                     "isolation.level": "read_committed"})
    try:
        got = cons.committed([TopicPartition(INPUT, 0), TopicPartition(INPUT, 1)], 5)
        return sum(max(tp.offset, 0) for tp in got)
    except Exception:
        return -1
    finally:
        cons.close()


def read_output(c: Cluster, out_parts: int, expect: int, seen: list[tuple[int, int]],
                stop: threading.Event, wait_s: float) -> None:
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"soak-r-{time.time()}",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "fetch.wait.max.ms": 100})
    cons.assign([TopicPartition(OUTPUT, i, 0) for i in range(out_parts)])
    deadline = time.monotonic() + wait_s
    try:
        while not stop.is_set() and time.monotonic() < deadline and len(seen) < expect:
            for m in cons.consume(500, 0.5):
                if not m.error():
                    seen.append((m.partition(), int(m.value())))
        end = time.monotonic() + 2  # anything extra (a duplicate) shows up here
        while time.monotonic() < end:
            for m in cons.consume(500, 0.2):
                if not m.error():
                    seen.append((m.partition(), int(m.value())))
    finally:
        cons.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=750)
    ap.add_argument("--bounce", choices=["hard", "clean", "copier"], default="hard")
    ap.add_argument("--one-partition", action="store_true")
    ap.add_argument("--interval", type=float, default=3.0,
                    help="seconds between faults (and progress in between)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    # SIGTERM (timeout, Ctrl-C from make) still stops the brokers and copiers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rnd = random.Random(seed)
    out_parts = 1 if args.one_partition else 3
    root = Path(tempfile.mkdtemp(prefix="txn-soak-"))
    log(f"seed {seed}, {args.records} records, batches of {args.batch}, bounce {args.bounce}, "
        f"{out_parts} output partition(s), logs in {root}")
    c = Cluster(root, overrides={"transaction.state.log.num.partitions": "6",
                                 "transaction.abort.timed.out.transaction.cleanup.interval.ms":
                                 "1000"})
    c.start()
    copiers = Copiers(c, out_parts, args.batch, root)
    stop = threading.Event()
    seen: list[tuple[int, int]] = []
    ok = False
    try:
        with Client(c.brokers[1].bootstrap) as cl:
            cl.create_topic(INPUT, 2, 3, {"min.insync.replicas": "2"})
            cl.create_topic(OUTPUT, out_parts, 3, {"min.insync.replicas": "2"})
        time.sleep(1)
        p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True,
                      "linger.ms": 20})
        for i in range(args.records):
            while True:
                try:
                    p.produce(INPUT, key=b"%d" % (i % 2), value=b"%06d" % i,
                              partition=i % 2)
                    break
                except BufferError:  # the client's queue is full: let it drain
                    p.poll(0.1)
            if i % 5000 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        log("input written")
        reader = threading.Thread(target=read_output, args=(
            c, out_parts, args.records, seen, stop, args.timeout), daemon=True)
        reader.start()
        copiers.start(0)
        copiers.start(1)
        deadline = time.monotonic() + args.timeout
        next_fault = time.monotonic() + args.interval
        faults = 0
        done_at_fault = 0
        progress_at, last_done = time.monotonic(), 0
        watchdog_kills = 0
        while time.monotonic() < deadline:
            time.sleep(0.5)
            copiers.keep_alive()
            done = committed_total(c)
            if done != last_done:
                progress_at, last_done = time.monotonic(), done
            elif time.monotonic() - progress_at > WATCHDOG_S:
                # a copier wedged inside its client library (seen once: librdkafka's
                # send_offsets_to_transaction blocking past its timeout after a bounce
                # while the brokers answered): restart the copiers, as an operator would
                watchdog_kills += 1
                log(f"watchdog: no progress for {WATCHDOG_S:.0f} s at {done}: "
                    "restarting the copiers")
                for i in list(copiers.procs):
                    copiers.kill(i)
                progress_at = time.monotonic()
            if done >= args.records:
                log(f"every input record copied ({faults} faults, "
                    f"{copiers.restarts} copier restarts, {watchdog_kills} by the watchdog)")
                break
            # as Kafka's test: the next fault only once copying progressed since the last
            # (a killed copier's group member must time out before the group rebalances)
            if time.monotonic() >= next_fault and done > done_at_fault:
                done_at_fault = done
                faults += 1
                if args.bounce == "copier":
                    i = rnd.randrange(2)
                    log(f"fault {faults}: SIGKILL copier {i} (committed so far {done})")
                    copiers.kill(i)
                else:
                    b = c.brokers[rnd.choice(sorted(c.brokers))]
                    log(f"fault {faults}: {args.bounce} bounce of broker {b.broker_id} "
                        f"(committed so far {done})")
                    if args.bounce == "hard":
                        b.kill()
                    else:
                        b.stop()
                    b.start()
                    c.wait_registered(set(c.brokers), timeout=120)
                next_fault = time.monotonic() + args.interval
        else:
            log("timed out before every record was copied")
            return 1
        reader.join(args.timeout)
        copiers.stop()
        final: list[tuple[int, int]] = []
        read_output(c, out_parts, args.records, final, threading.Event(), 120)
        ok = check("final read", final, args.records, out_parts == 1)
        ok = check("concurrent read", seen, args.records, out_parts == 1) and ok
        return 0 if ok else 1
    finally:
        stop.set()
        copiers.stop()
        c.stop()
        log(f"{'PASS' if ok else 'FAIL'} (seed {seed}); logs in {root}")


def check(what: str, got: list[tuple[int, int]], n: int, ordered: bool) -> bool:
    counts = Counter(v for _, v in got)
    dups = {v: k for v, k in counts.items() if k > 1}
    missing = set(range(n)) - set(counts)
    extra = set(counts) - set(range(n))
    good = not dups and not missing and not extra
    if ordered:
        for part in (0, 1):
            seq = [v for _, v in got if v % 2 == part]
            if seq != sorted(seq):
                log(f"{what}: input partition {part} out of order in the output")
                good = False
    log(f"{what}: {len(got)} records, {len(dups)} duplicated, {len(missing)} missing, "
        f"{len(extra)} unexpected -> {'ok' if good else 'BROKEN'}")
    return good


if __name__ == "__main__":
    sys.exit(main())
