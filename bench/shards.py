"""One jocko-py broker with one shard and with two, 8 partitions, librdkafka producers:
throughput of `--shards 2` against `--shards 1`, next to Apache Kafka 4.4.0's from the
same run (docs/shards.md quotes the results).

Each run starts the broker fresh (its own data directory), creates one topic of 8
partitions (replication factor 1), starts ``--producers`` producer processes
(``--client``: bench/lean_producer.c by default, librdkafka with acks=1, linger.ms=0,
batch.size=16384; or kcat, or confluent-kafka in Python; 1 KiB values spread over the
8 partitions), lets each send a warm-up, then ``--records`` records, and flushes. The
throughput is all timed bytes over the span from the first timed send to the last
flush. Runs alternate (1 shard, 2 shards, Kafka, 1 shard, ...) so a change in the
machine's load touches all alike; the 1-minute load average is recorded before each.
``--proxy`` adds a run through a byte-forwarding asyncio proxy in front of one shard
(the broker advertises the proxy), the floor of design (b)'s cost: a front listener
that forwards to the owning shard does at least this much work per byte.

  .venv/bin/python bench/shards.py [--reps 3] [--records 200000] [--no-kafka] [--proxy]

Results: bench/results/shards.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.broker import free_port, free_port_block, terminate, wait_for_port  # noqa: E402

TOPIC = "shards-bench"
PARTITIONS = 8


def producer_main(bootstrap: str, records: int, size: int, warmup: int) -> None:
    """One producer process: warm-up, then the timed records; prints one JSON line."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                  "queue.buffering.max.messages": 1000000,
                  "queue.buffering.max.kbytes": 1048576})
    value = os.urandom(size)
    errors = [0]

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            errors[0] += 1

    def send(n: int) -> None:
        for i in range(n):
            while True:
                try:
                    p.produce(TOPIC, value, partition=i % PARTITIONS, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.01)
            if i % 1000 == 0:
                p.poll(0)
        p.flush(120)

    send(warmup)
    t0 = time.time()
    send(records)
    t1 = time.time()
    print(json.dumps({"start": t0, "end": t1, "records": records, "bytes": records * size,
                      "errors": errors[0]}), flush=True)


def run_producers(bootstrap: str, n: int, records: int, size: int) -> dict[str, float]:
    procs = [subprocess.Popen([sys.executable, __file__, "--producer", bootstrap,
                               str(records), str(size)], stdout=subprocess.PIPE, text=True)
             for _ in range(n)]
    outs = []
    for pr in procs:
        out, _ = pr.communicate(timeout=600)
        if pr.returncode != 0:
            raise RuntimeError(f"producer exited with {pr.returncode}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    span = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    total = sum(o["bytes"] for o in outs)
    recs = sum(o["records"] for o in outs)
    errs = sum(o["errors"] for o in outs)
    if errs:
        raise RuntimeError(f"{errs} records failed")
    return {"mb_s": total / span / 1e6, "records_s": recs / span, "seconds": span}


def run_kcat(bootstrap: str, n: int, records: int, size: int, work: Path,
             props: list[str]) -> dict[str, float]:
    """``n`` kcat producers (librdkafka in C, so the client's CPU per record is small),
    each sending ``records`` lines of ``size`` bytes from one file to partitions chosen
    by librdkafka's partitioner; a short warm-up first."""
    data = work / f"records-{records}-{size}.txt"
    if not data.exists():
        line = (os.urandom(size // 2).hex()[: size - 1] + "\n").encode()
        data.write_bytes(line * records)
    warm = work / "warmup.txt"
    if not warm.exists():
        warm.write_bytes(data.read_bytes()[: size * min(records, 20000)])
    x = [a for p in props for a in ("-X", p)]

    def kcat(path: Path) -> list[subprocess.Popen[bytes]]:
        return [subprocess.Popen(["kcat", "-P", "-q", "-b", bootstrap, "-t", TOPIC, "-l",
                                  str(path), *x], stderr=subprocess.PIPE) for _ in range(n)]

    for pr in kcat(warm):
        _, err = pr.communicate(timeout=300)
        if pr.returncode:
            raise RuntimeError(f"kcat: {err.decode(errors='replace')[-500:]}")
    t0 = time.time()
    procs = kcat(data)
    for pr in procs:
        _, err = pr.communicate(timeout=600)
        if pr.returncode:
            raise RuntimeError(f"kcat: {err.decode(errors='replace')[-500:]}")
    span = time.time() - t0
    return {"mb_s": n * records * size / span / 1e6, "records_s": n * records / span,
            "seconds": span}


LEAN = ROOT / "build" / "lean_producer"


def run_lean(bootstrap: str, n: int, records: int, size: int,
             props: list[str]) -> dict[str, float]:
    """``n`` lean_producer processes (bench/lean_producer.c: librdkafka with the least
    work of its own per record), each sending a warm-up, then ``records`` timed records
    of ``size`` bytes to the 8 partitions in turn; the span from the first timed send
    to the last flush."""
    if not LEAN.exists():
        raise RuntimeError(f"{LEAN} is missing: make -C bench lean-producer")
    warmup = min(20000, records // 5)
    procs = [subprocess.Popen([str(LEAN), bootstrap, TOPIC, str(PARTITIONS), str(records),
                               str(size), str(warmup), *props], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(n)]
    outs = []
    for pr in procs:
        out, err = pr.communicate(timeout=600)
        if pr.returncode:
            raise RuntimeError(f"lean_producer exited with {pr.returncode}: {err[-500:]}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    span = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    return {"mb_s": sum(o["bytes"] for o in outs) / span / 1e6,
            "records_s": sum(o["records"] for o in outs) / span, "seconds": span}


def create_topic(bootstrap: str, brokers: int, timeout: float = 60.0) -> None:
    from jocko_py.client import Client

    deadline = time.monotonic() + timeout
    while True:
        try:
            with Client(bootstrap, timeout=5) as c:
                md = c.request(3, 12, {"topics": []})
                if len(md.brokers) >= brokers:
                    c.create_topic(TOPIC, PARTITIONS, 1, {})
                    break
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.3)
    while True:
        with Client(bootstrap, timeout=5) as c:
            md = c.metadata([TOPIC])
            t = md.topics[0]
            if not t.error_code and len(t.partitions) == PARTITIONS and all(
                    p.leader_id >= 0 for p in t.partitions):
                return
        if time.monotonic() > deadline:
            raise TimeoutError("topic not ready")
        time.sleep(0.2)


async def _proxy(listen: int, target: int, ready: asyncio.Event | None = None) -> None:
    async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(1 << 16):
                w.write(data)
                await w.drain()
        except ConnectionError:
            pass
        finally:
            w.close()

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        br, bw = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(r, bw), pipe(br, w))

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes and their running children (the shards)."""
    tick = os.sysconf("SC_CLK_TCK")
    seen = set(pids)
    total = 0.0
    for pid in list(seen):
        kids = Path(f"/proc/{pid}/task/{pid}/children")
        if kids.exists():
            seen.update(int(x) for x in kids.read_text().split())
    for pid in seen:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(f[11]) + int(f[12])) / tick
    return total


def _machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot, from /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def one_run(kind: str, work: Path, args: argparse.Namespace) -> dict[str, object]:
    load = os.getloadavg()[0]
    data = work / f"{kind}-{time.monotonic_ns()}"
    procs: list[subprocess.Popen[bytes]] = []
    log = open(work / f"{kind}.log", "ab")  # noqa: SIM115 - closed below
    kafka = None
    try:
        if kind == "kafka":
            from tests.support.kafka44 import ApacheKafka44

            kafka = ApacheKafka44(data)
            kafka.start()
            kafka.wait_ready()
            bootstrap, brokers = kafka.bootstrap, 1
        else:
            shards = 2 if kind == "2 shards" else 1
            base = free_port_block(tuple(range(3 * shards)), udp=tuple(range(3 * shards)))
            cmd = [sys.executable, "-m", "jocko_py.cli", "--log-level", "WARNING", "broker",
                   "--shards", str(shards), "--data-dir", str(data)]
            if kind == "proxy":
                proxy_port = free_port()
                cmd += ["--broker-addr", f"127.0.0.1:{base}",
                        "--advertised-addr", f"127.0.0.1:{proxy_port}"]
                procs.append(subprocess.Popen(
                    [sys.executable, __file__, "--proxy-main", str(proxy_port), str(base)],
                    stdout=log, stderr=subprocess.STDOUT))
                wait_for_port("127.0.0.1", proxy_port)
                bootstrap = f"127.0.0.1:{proxy_port}"
            else:
                cmd += ["--broker-addr", f"127.0.0.1:{base}"]
                bootstrap = f"127.0.0.1:{base}"
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT))
            wait_for_port("127.0.0.1", base, timeout=30)
            brokers = shards
        create_topic(bootstrap, brokers)
        pids = [kafka.proc.pid] if kafka is not None and kafka.proc is not None else [
            p.pid for p in procs]
        c0, (b0, t0) = _cpu_seconds(pids), _machine_busy()
        u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if args.client == "kcat":
            r = run_kcat(bootstrap, args.producers, args.records, args.size, work,
                         args.producer_config)
        elif args.client == "lean":
            r = run_lean(bootstrap, args.producers, args.records, args.size,
                         args.producer_config)
        else:
            r = run_producers(bootstrap, args.producers, args.records, args.size)
        c1, (b1, t1) = _cpu_seconds(pids), _machine_busy()
        u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {"kind": kind, "load1": load, **r, "broker_cpu_s": c1 - c0,
                "client_cpu_s": u1.ru_utime + u1.ru_stime - u0.ru_utime - u0.ru_stime,
                "machine_busy": (b1 - b0) / max(1, t1 - t0)}
    finally:
        if kafka is not None:
            kafka.stop()
        for pr in reversed(procs):
            terminate(pr, 60)
        log.close()
        shutil.rmtree(data, ignore_errors=True)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--producer":
        producer_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                      warmup=min(20000, int(sys.argv[3]) // 5))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--proxy-main":
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
        asyncio.run(_proxy(int(sys.argv[2]), int(sys.argv[3])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--records", type=int, default=200000, help="per producer")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--client", choices=["lean", "kcat", "python"], default="lean",
                    help="lean_producer processes (bench/lean_producer.c, default), kcat, "
                    "or confluent-kafka in Python")
    ap.add_argument("--producer-config", action="append", default=[], metavar="K=V",
                    help="librdkafka settings for lean_producer and kcat (repeatable; "
                    "default: acks=1 linger.ms=0 batch.size=16384)")
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--proxy", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "shards.json"))
    args = ap.parse_args()
    args.producer_config = args.producer_config or ["acks=1", "linger.ms=0",
                                                    "batch.size=16384"]
    kinds = ["1 shard", "2 shards"]
    if args.proxy:
        kinds.append("proxy")
    if not args.no_kafka:
        from tests.support.kafka44 import missing

        why = missing()
        if why:
            print(f"Kafka 4.4.0 left out: {why}", file=sys.stderr)
        else:
            kinds.append("kafka")
    runs: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="shards-bench-") as tmp:
        for rep in range(args.reps):
            for kind in kinds:
                r = one_run(kind, Path(tmp), args)
                runs.append(r)
                print(f"rep {rep + 1} {kind:<9} {r['mb_s']:7.1f} MB/s "
                      f"{r['records_s']:9.0f} records/s  load1 {r['load1']:.2f}  broker "
                      f"{r['broker_cpu_s']:.1f} CPU-s, producers {r['client_cpu_s']:.1f} CPU-s, "
                      f"in {r['seconds']:.1f} s, machine "
                      f"{100 * float(str(r['machine_busy'])):.0f}% busy", flush=True)
    summary = {}
    for kind in kinds:
        mine = [r for r in runs if r["kind"] == kind]
        summary[kind] = {"median_mb_s": statistics.median(float(str(r["mb_s"])) for r in mine),
                         "median_records_s": statistics.median(
                             float(str(r["records_s"])) for r in mine),
                         "median_load1": statistics.median(float(str(r["load1"])) for r in mine),
                         # the broker's (with --proxy: broker + proxy) CPU per MB sent
                         "median_broker_cpu_ms_per_mb": statistics.median(
                             1000 * float(str(r["broker_cpu_s"])) * 1e6
                             / (args.producers * args.records * args.size) for r in mine)}
    ratio = summary["2 shards"]["median_mb_s"] / summary["1 shard"]["median_mb_s"]
    print(f"\n{'':<10}{'MB/s':>8}{'records/s':>12}{'load1':>7}{'CPU ms/MB':>11}"
          f"   (medians of {args.reps})")
    for kind, s in summary.items():
        print(f"{kind:<10}{s['median_mb_s']:8.1f}{s['median_records_s']:12.0f}"
              f"{s['median_load1']:7.2f}{s['median_broker_cpu_ms_per_mb']:11.1f}")
    print(f"2 shards / 1 shard: {ratio:.2f}x")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
        "args": vars(args), "runs": runs, "summary": summary, "ratio_2_to_1": ratio},
        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
