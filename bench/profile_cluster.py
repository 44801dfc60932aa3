"""Profile the replication path: three jocko-py brokers under Kafka's ProducerPerformance
(acks=all, RF=3, min.insync.replicas=2, 1 KiB records), py-spy on every broker at once.

    make -C bench profile-replicated
    .venv/bin/python bench/profile_cluster.py [--layout split|mixed] [--records 600000]
                                              [--seconds 15] [--rate 100]

--layout split (default): the load goes to a one-partition RF=3 topic (jocko-py has no
manual replica assignment), so its leader's profile is the leader side only (produce
handling, serving follower fetches, HW advance, acks=all purgatory) and the other two are
pure followers (replica fetcher: fetch round trips, decoding, appends).
--layout mixed: the benchmark's six-partition topic, every broker leads two partitions and
follows four.

py-spy samples non-blocking (`--nonblocking`, the broker is not paused) at --rate Hz for
--seconds while the producer is in its steady state (after a 3-s start). Writes
bench/work/profile/cluster-<layout>-broker-<id>.collapsed (folded stacks) and .txt (top
functions by self and inclusive time, event-loop thread only, plus a replication-path
breakdown) and prints the summaries.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pyspy_profile import OUT, PYSPY, _short  # noqa: E402

from bench.cluster import OUT as CLUSTER_OUT  # noqa: E402
from bench.cluster import (  # noqa: E402
    TOPIC,
    JockoCluster,
    cluster_cpu,
    create_topic,
    partitions,
)
from bench.run import cpu_s, java_tool, loadavg, parse_producer, spawn  # noqa: E402

# Replication-path buckets, by inclusive time (a sample counts in every bucket whose
# function is on its stack). Names as py-spy prints them: "function (file)".
BUCKETS = [
    ("produce request (handler, whole)", ("_handle_produce", "handle_produce")),
    ("  append as leader (validate + Log.append)", ("append_as_leader",)),
    ("  acks=all wait (wait_replicated)", ("wait_replicated",)),
    ("fetch request (handler, whole)", ("_handle_fetch", "handle_fetch")),
    ("  ReplicaManager._read_all (reads, follower positions)", ("_read_all",)),
    ("  read_for_follower", ("read_for_follower",)),
    ("  HW advance (maybe_advance_high_watermark)", ("maybe_advance_high_watermark",)),
    ("purgatory wait_any / notify", ("wait_any", "notify")),
    ("replica fetcher (_fetch_once, whole)", ("_fetch_once",)),
    ("  BrokerChannel.request (send + wait + decode)", ("request",)),
    ("  append_as_follower", ("append_as_follower",)),
    ("Log.append (leader and follower)", ("append (jocko_py/commitlog/log.py)",)),
    ("response encode", ("encode_response", "encode")),
    ("transport write (StreamWriter.write / writelines)", ("write", "writelines")),
]


def summarize(collapsed: Path, top: int = 30) -> str:
    """Event-loop thread only (worker threads are counted apart): top self / inclusive
    functions and the replication-path buckets."""
    self_t: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    buckets: collections.Counter[str] = collections.Counter()
    total = threads = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n_s = line.rpartition(" ")
        if not n_s.isdigit():
            continue
        n = int(n_s)
        frames = [_short(f) for f in stack.split(";")]
        if frames and frames[0].startswith("_bootstrap "):
            threads += n  # a worker thread (to_thread fsyncs, or idle in queue.get)
            continue
        total += n
        self_t[frames[-1]] += n
        seen = set(frames)
        for f in seen:
            incl[f] += n
        names = [f.split(" (")[0] for f in seen]
        for label, keys in BUCKETS:
            if any(k in seen if " (" in k else k in names for k in keys):
                buckets[label] += n
    pct = 100 / max(total, 1)
    lines = [f"{collapsed.name}: {total} event-loop samples ({threads} more in worker "
             "threads, not counted below)", "", "replication path (inclusive, % of event-loop "
             "samples):"]
    for label, _ in BUCKETS:
        lines.append(f"  {buckets[label] * pct:5.1f}%  {label}")
    lines += ["", "top self time:"]
    lines += [f"  {n * pct:5.1f}%  {f}" for f, n in self_t.most_common(top)]
    lines += ["", "top inclusive time:"]
    lines += [f"  {n * pct:5.1f}%  {f}" for f, n in incl.most_common(top)]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layout", choices=["split", "mixed"], default="split")
    ap.add_argument("--records", type=int, default=600_000)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--rate", type=int, default=100)
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    d = CLUSTER_OUT / f"profile-{a.layout}"
    c = JockoCluster(d)
    topic = TOPIC + "-p1" if a.layout == "split" else TOPIC
    try:
        c.start()
        create_topic(c, d / "tools.log", (topic, 1) if a.layout == "split" else None)
        print("leaders / ISR:", partitions(c, topic), flush=True)
        la0, cpu0 = loadavg(), cluster_cpu(c)
        each0 = {i: cpu_s(p.pid) for i, p in c.procs.items()}
        load = spawn(java_tool(
            "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records",
            str(a.records), "--record-size", "1024", "--throughput", "-1", "--producer-props",
            f"bootstrap.servers={c.bootstrap}", "acks=all"), log=d / "producer.log")
        time.sleep(3)
        spies = {i: subprocess.Popen(
            [PYSPY, "record", "--pid", str(p.pid), "--duration", str(a.seconds), "--rate",
             str(a.rate), "--nonblocking", "--format", "raw", "--output",
             str(OUT / f"cluster-{a.layout}-broker-{i}.collapsed")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i, p in c.procs.items()}
        for s in spies.values():
            s.wait(a.seconds + 60)
        load.wait(900)
        cpu = cluster_cpu(c) - cpu0
        pp = parse_producer((d / "producer.log").read_text(), timed_out=False)
        mb = max(1.0, pp.get("records", 0) / 1024)
        each = ", ".join(f"broker {i} {1000 * (cpu_s(p.pid) - each0[i]) / mb:.1f}"
                         for i, p in c.procs.items())
        print(f"producer: {pp.get('mb_per_s')} MB/s over {pp.get('duration_s', 0):.1f} s, "
              f"brokers' CPU {1000 * cpu / mb:.1f} ms/MB ({each}), "
              f"loadavg {la0:.1f} -> {loadavg():.1f}", flush=True)
        for i in spies:
            text = summarize(OUT / f"cluster-{a.layout}-broker-{i}.collapsed")
            (OUT / f"cluster-{a.layout}-broker-{i}.txt").write_text(text)
            print(f"===== broker {i}\n{text}")
    finally:
        c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
