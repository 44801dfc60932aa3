"""Saturate a jocko-py broker with a near-free client and profile it with py-spy.

On a shared 2-core machine the Java tools are often the bottleneck (the broker sits in
epoll_wait), so their runs say little about where the broker spends CPU. This client pre-encodes
its requests once (jocko-py's own codec) and only writes and reads bytes on raw sockets, so
the broker is the busy side:

- produce: `--conns` connections, each keeps `--window` Produce v9 requests in flight, every
  request one 16 KiB batch of 1 KiB records (the Java producer's default batch.size);
- fetch: Fetch v12 requests walking the log from offset 0 in 1 MiB steps (the Java consumer's
  max.partition.fetch.bytes), one in flight per connection as a consumer does.

py-spy (CPU samples only) records the broker during each phase; the folded stacks and a
summary go to bench/work/profile/load-<phase>.*. Run from the repo root:

  .venv/bin/python bench/loadgen.py [--seconds 20] [--acks 1] [--partitions 1]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pyspy_profile as prof  # noqa: E402
import run as bench  # noqa: E402

from jocko_py.client import Client  # noqa: E402
from jocko_py.protocol import codec  # noqa: E402
from jocko_py.protocol.records import NewRecord, build_batch  # noqa: E402


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def produce_frame(topic: str, partition: int, acks: int, batch: bytes) -> bytes:
    body = {
        "acks": acks,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    return bytes(codec.encode_request(0, 9, 1, "loadgen", body))


def fetch_frame(topic: str, offset: int, max_bytes: int) -> bytes:
    body = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "fetch_offset": offset,
                        "current_leader_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return bytes(codec.encode_request(1, 12, 1, "loadgen", body))


def produce_load(
    addr: tuple[str, int], frames: list[bytes], window: int, stop: threading.Event, out: list[int]
) -> None:
    sock = socket.create_connection(addr)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    inflight = 0
    sent = done = 0
    i = 0
    while not stop.is_set():
        while inflight < window:
            sock.sendall(frames[i % len(frames)])
            i += 1
            inflight += 1
            sent += 1
        read_frame(sock)
        inflight -= 1
        done += 1
    while inflight:
        read_frame(sock)
        inflight -= 1
        done += 1
    sock.close()
    out.append(done)


def fetch_load(
    addr: tuple[str, int], frames: list[bytes], stop: threading.Event, out: list[int]
) -> None:
    sock = socket.create_connection(addr)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    nbytes = 0
    i = 0
    while not stop.is_set():
        sock.sendall(frames[i % len(frames)])
        nbytes += len(read_frame(sock))
        i += 1
    sock.close()
    out.append(nbytes)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--acks", type=int, default=1)
    p.add_argument("--conns", type=int, default=1)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--native", action="store_true", help="py-spy --native (C frames too)")
    args = p.parse_args()
    if args.native:
        prof.EXTRA.append("--native")
    bench.WORK.mkdir(parents=True, exist_ok=True)
    prof.OUT.mkdir(parents=True, exist_ok=True)
    b = bench.JockoBroker(
        "jocko-py",
        {
            "log.segment.bytes": str(bench.SEGMENT_BYTES),
            "group.initial.rebalance.delay.ms": "0",
        },
    )
    case = bench.WORK / "loadgen-broker"
    import shutil

    shutil.rmtree(case, ignore_errors=True)
    case.mkdir(parents=True)
    topic = "load"
    with bench.cleanup_guard():
        try:
            b.prepare(case)
            b.start()
            deadline = time.monotonic() + 60
            while True:
                try:
                    client = Client(b.bootstrap, timeout=30)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            client.create_topic(topic, args.partitions)
            time.sleep(0.5)
            value = b"x" * 1024
            batch = build_batch([NewRecord(None, value)] * 16)
            frames = [
                produce_frame(topic, i % args.partitions, args.acks, batch)
                for i in range(args.partitions)
            ]
            addr = ("127.0.0.1", b.port)
            assert b.proc is not None
            pid = b.proc.pid
            for phase in ("produce", "fetch"):
                stop = threading.Event()
                out: list[int] = []
                if phase == "produce":
                    workers = [
                        threading.Thread(
                            target=produce_load, args=(addr, frames, args.window, stop, out)
                        )
                        for _ in range(args.conns)
                    ]
                else:
                    # Learn the offsets of successive 1 MiB fetches once, then replay them.
                    offsets, off = [], 0
                    while len(offsets) < 64:
                        r = client.fetch(topic, 0, off, max_bytes=1 << 20)
                        offsets.append(off)
                        recs = r.records
                        if not recs:
                            break
                        last = _last_offset(bytes(recs))
                        if last < off:
                            break
                        off = last + 1
                    fr = [fetch_frame(topic, o, 1 << 20) for o in offsets]
                    workers = [
                        threading.Thread(target=fetch_load, args=(addr, fr, stop, out))
                        for _ in range(args.conns)
                    ]
                spy = None
                if not args.no_profile:
                    spy = prof.record(pid, f"load-{phase}", args.seconds, args.rate)
                c0 = bench.cpu_s(pid)
                t0 = time.monotonic()
                for w in workers:
                    w.start()
                time.sleep(args.seconds)
                stop.set()
                for w in workers:
                    w.join(timeout=60)
                secs = time.monotonic() - t0
                cpu = bench.cpu_s(pid) - c0
                if phase == "produce":
                    mb = sum(out) * len(batch) / 1048576
                else:
                    mb = sum(out) / 1048576
                bench.progress(
                    f"{phase}: {mb / secs:.1f} MB/s over {secs:.1f}s, broker CPU "
                    f"{100 * cpu / secs:.0f}% ({1000 * cpu / max(mb, 1e-9):.1f} ms/MB), "
                    f"loadavg {bench.loadavg():.1f}"
                )
                if spy is not None:
                    spy.wait(timeout=args.seconds + 30)
                    col = prof.OUT / f"load-{phase}.collapsed"
                    if col.exists():
                        text = prof.summarize(col)
                        (prof.OUT / f"load-{phase}.txt").write_text(text)
                        print(f"==== {phase} ====\n{text}")
            client.close()
        finally:
            b.stop()
            shutil.rmtree(case, ignore_errors=True)
    return 0


def _last_offset(records: bytes) -> int:
    """Last offset of the last whole batch in a fetched records blob (-1 if none)."""
    pos, last = 0, -1
    while pos + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > len(records):
            break
        (delta,) = struct.unpack_from(">i", records, pos + 23)
        last = base + delta
        pos += 12 + length
    return last


if __name__ == "__main__":
    sys.exit(main())
