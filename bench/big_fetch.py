"""Big fetches with and without zero-copy (sendfile): one jocko-py broker serving
librdkafka consumers that read a topic of big batches from the start.

    make -C bench big-fetch                             # 3 alternating rounds, ~5 min
    .venv/bin/python bench/big_fetch.py [--reps N] [--mb 256] [--consumers 4]

The topic (4 partitions, --mb MiB of 1 MiB batches of incompressible values) is written
once. Then each case restarts the broker on that data (so its peak resident memory is
the serving's alone) with `jocko.zero.copy.enable` true (sendfile) or false (reads
into memory, the path before zero-copy), and --consumers consumer processes
(confluent-kafka, `fetch.max.bytes` 50 MiB, `max.partition.fetch.bytes` 16 MiB, assigned
every partition) each read the whole topic at once. Figures: the broker's peak resident
memory (VmHWM) and CPU milliseconds per MiB served (from /proc), the consumers'
aggregate MiB/s (bytes of record values over the wall time of the slowest). Rounds
alternate the order of the two cases. Results: bench/results/<UTC stamp>-big-fetch.md
and .json; broker logs in bench/work/big-fetch/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "work" / "big-fetch"
RESULTS = ROOT / "bench" / "results"
TOPIC = "big"
PARTITIONS = 4
BATCH = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    def __init__(self, data: Path, zero_copy: bool) -> None:
        self.port = free_port()
        log = open(WORK / f"broker-{'zc' if zero_copy else 'mem'}.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jocko_py.cli", "broker", "--broker-id", "0",
             "--broker-addr", f"127.0.0.1:{self.port}", "--data-dir", str(data),
             "--override", f"jocko.zero.copy.enable={'true' if zero_copy else 'false'}",
             "--override", "log.segment.bytes=268435456",
             "--override", "message.max.bytes=16777216"],
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        log.close()
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("broker did not start") from None
                time.sleep(0.1)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def hwm_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def fill(bootstrap: str, mib: int) -> int:
    import confluent_kafka
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    prod = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
        "batch.size": BATCH, "message.max.bytes": 16 << 20, "compression.type": "none"})
    value = os.urandom(16 * 1024)
    n = mib * 64
    for i in range(n):
        while True:
            try:
                prod.produce(TOPIC, value[i % 7:] + value[:i % 7], partition=i % PARTITIONS)
                break
            except BufferError:
                prod.poll(0.05)
        prod.poll(0)
    assert prod.flush(120) == 0
    return n


def consume(bootstrap: str, records: int, out: Any) -> None:
    import confluent_kafka

    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bf-{os.getpid()}",
        "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
        "max.partition.fetch.bytes": 16 << 20, "queued.max.messages.kbytes": 262144})
    c.assign([confluent_kafka.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    t0 = time.monotonic()
    n = size = 0
    while n < records and time.monotonic() - t0 < 300:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                n += 1
                size += len(m.value())
    out.put((time.monotonic() - t0, n, size))
    c.close()


def run_case(data: Path, zero_copy: bool, records: int, consumers: int) -> dict[str, Any]:
    b = Broker(data, zero_copy)
    try:
        time.sleep(1.0)  # start-up work done before the clock starts
        cpu0 = b.cpu_s()
        q: Any = mp.Queue()
        procs = [mp.Process(target=consume, args=(b.bootstrap, records, q))
                 for _ in range(consumers)]
        for p in procs:
            p.start()
        got = [q.get(timeout=400) for _ in procs]
        for p in procs:
            p.join(30)
        cpu = b.cpu_s() - cpu0
        hwm = b.hwm_mib()
    finally:
        b.stop()
    wall = max(g[0] for g in got)
    mib = sum(g[2] for g in got) / (1 << 20)
    assert all(g[1] == records for g in got), got
    return {"zero_copy": zero_copy, "peak_rss_mib": round(hwm, 1),
            "cpu_ms_per_mib": round(cpu * 1000 / mib, 2),
            "consume_mib_s": round(mib / wall, 1), "served_mib": round(mib),
            "loadavg": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--mb", type=int, default=256, help="MiB written to the topic")
    ap.add_argument("--consumers", type=int, default=4)
    a = ap.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    data = WORK / "data"
    b = Broker(data, True)
    try:
        records = fill(b.bootstrap, a.mb)
    finally:
        b.stop()
    rows = []
    for rep in range(a.reps):
        for zc in ((True, False) if rep % 2 == 0 else (False, True)):
            r = run_case(data, zc, records, a.consumers) | {"round": rep}
            print(json.dumps(r), flush=True)
            rows.append(r)
    med = {zc: {k: round(statistics.median(r[k] for r in rows if r["zero_copy"] is zc), 2)
                for k in ("peak_rss_mib", "cpu_ms_per_mib", "consume_mib_s")}
           for zc in (True, False)}
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=ROOT).stdout.strip()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H%M")
    cpu = os.cpu_count()
    lines = [
        f"# Big fetches, zero-copy (sendfile) vs in memory, {stamp}", "",
        f"- {cpu} cores; jocko-py at {rev}; one broker; topic of {PARTITIONS} partitions, "
        f"{a.mb} MiB of 1 MiB batches (16 KiB incompressible values); {a.consumers} "
        f"librdkafka consumers at once, each reading all of it (fetch.max.bytes 50 MiB, "
        f"max.partition.fetch.bytes 16 MiB); the broker restarted for each case; "
        f"{a.reps} alternating rounds; medians.", "",
        "| figure (median) | sendfile | in memory | sendfile / in memory |",
        "|---|---:|---:|---:|",
    ]
    for k, name in (("peak_rss_mib", "broker peak resident memory (MiB)"),
                    ("cpu_ms_per_mib", "broker CPU ms per MiB served"),
                    ("consume_mib_s", "consumers' aggregate MiB/s")):
        on, off = med[True][k], med[False][k]
        lines.append(f"| {name} | {on} | {off} | {on / off:.2f} |")
    lines += ["", "| round | case | peak RSS MiB | CPU ms/MiB | MiB/s | loadavg |",
              "|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['round']} | {'sendfile' if r['zero_copy'] else 'in memory'} | "
                     f"{r['peak_rss_mib']} | {r['cpu_ms_per_mib']} | {r['consume_mib_s']} | "
                     f"{r['loadavg']:.2f} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stamp}-big-fetch.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{stamp}-big-fetch.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
