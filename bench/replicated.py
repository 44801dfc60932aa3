"""A quick jocko-py-only replicated-produce figure: one broker RF=1 against three brokers
RF=3 (the comparison with three Kafka brokers is bench/cluster.py, `make -C bench replicated`).

    make -C bench replicated-jocko  # or: .venv/bin/python bench/replicated.py [--seconds 12]

For each of `--reps` alternating runs: one jocko-py broker (RF=1) and a three-broker
jocko-py cluster on loopback (RF=3, min.insync.replicas=2), 3 partitions, 1 KiB
records from one idempotent acks=all librdkafka producer for `--seconds`; prints the
acknowledged MB/s of each run and the medians. On a 2-core machine the three brokers
and the client share the cores, so the cluster figure is bound by CPU.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402

from jocko_py.client import Client  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.cluster import Cluster  # noqa: E402


def produce_mb_s(bootstrap: str, topic: str, seconds: float, size: int = 1024) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True, "batch.size": 65536,
                  "queue.buffering.max.messages": 200000})
    value = b"x" * size
    acked = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < seconds:
        try:
            p.produce(topic, value, on_delivery=on_delivery)
            n += 1
        except BufferError:
            p.poll(0.01)
        if n % 1000 == 0:
            p.poll(0)
    p.flush(60)
    return acked * size / (time.monotonic() - t0) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=12)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    single: list[float] = []
    cluster: list[float] = []
    for rep in range(args.reps):
        root = Path(tempfile.mkdtemp(prefix="jocko-repl-bench-"))
        try:
            b = BrokerProcess(root / "single")
            b.start()
            try:
                with Client(b.bootstrap) as c:
                    c.create_topic("b", 3, 1)
                single.append(produce_mb_s(b.bootstrap, "b", args.seconds))
            finally:
                b.stop()
            print(f"run {rep + 1}: single broker RF=1: {single[-1]:.1f} MB/s", flush=True)
            cl = Cluster(root / "cluster")
            cl.start()
            try:
                with Client(cl.brokers[1].bootstrap) as c:
                    c.create_topic("b", 3, 3, {"min.insync.replicas": "2"})
                time.sleep(2)
                cluster.append(produce_mb_s(cl.bootstrap, "b", args.seconds))
            finally:
                cl.stop()
            print(f"run {rep + 1}: three brokers RF=3: {cluster[-1]:.1f} MB/s", flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    s, c = statistics.median(single), statistics.median(cluster)
    print(f"median acks=all 1 KiB, 3 partitions: single RF=1 {s:.1f} MB/s, "
          f"three brokers RF=3 {c:.1f} MB/s (ratio {c / s:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
