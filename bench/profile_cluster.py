"""Profile the replication path: three jocko-py brokers under Kafka's ProducerPerformance
(acks=all, RF=3, min.insync.replicas=2), py-spy on every broker at once.

    .venv/bin/python bench/profile_cluster.py [--records 400000] [--seconds 15]

Writes bench/work/profile/cluster-broker-<id>.collapsed (folded stacks) and .txt (top
functions by self and inclusive time) and prints the summaries. With 6 partitions spread
over three brokers, every broker is leader of two and follower of four, so each profile
mixes both sides: produce handling, follower fetch serving, HW advance and purgatory
wake-ups on the leader side; the replica fetcher's appends on the follower side.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pyspy_profile import OUT, PYSPY, summarize  # noqa: E402

from bench.cluster import OUT as CLUSTER_OUT  # noqa: E402
from bench.cluster import TOPIC, JockoCluster, create_topic  # noqa: E402
from bench.run import java_tool, spawn  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--seconds", type=int, default=15)
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    d = CLUSTER_OUT / "profile"
    c = JockoCluster(d)
    try:
        c.start()
        create_topic(c, d / "tools.log")
        load = spawn(java_tool(
            "org.apache.kafka.tools.ProducerPerformance", "--topic", TOPIC, "--num-records",
            str(a.records), "--record-size", "1024", "--throughput", "-1", "--producer-props",
            f"bootstrap.servers={c.bootstrap}", "acks=all"), log=d / "producer.log")
        time.sleep(3)
        spies = {i: subprocess.Popen(
            [PYSPY, "record", "--pid", str(p.pid), "--duration", str(a.seconds), "--rate", "200",
             "--format", "raw", "--output", str(OUT / f"cluster-broker-{i}.collapsed")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i, p in c.procs.items()}
        for s in spies.values():
            s.wait(a.seconds + 60)
        load.wait(600)
        print((d / "producer.log").read_text().strip().splitlines()[-1])
        for i in spies:
            text = summarize(OUT / f"cluster-broker-{i}.collapsed", top=25)
            (OUT / f"cluster-broker-{i}.txt").write_text(text)
            print(f"===== broker {i}\n{text}")
    finally:
        c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
