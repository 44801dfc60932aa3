"""Zero-copy fetch (connection.py, segment.py `FileRegion`): on a plaintext listener a
Fetch response whose records are sent with sendfile is byte for byte the response the
in-memory path gives, pipelined responses keep their order, real consumers (librdkafka,
kafka-python) read big compressed batches exactly, followers of a 3-broker cluster end
up with segment files identical to the leader's, and a segment cut while its bytes are
being sent closes the connection with the frame incomplete, never complete with other
bytes, and a TLS listener answers the same bytes read into memory.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import socket
import struct
import time
import types
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import kafka
import pytest

from jocko_py.broker.connection import Connection
from jocko_py.broker.stats import BrokerStats
from jocko_py.client import Client
from jocko_py.commitlog import Log, LogConfig
from jocko_py.commitlog.segment import FileRegion
from jocko_py.protocol import codec
from jocko_py.protocol.records import NewRecord, build_batch

# the secure broker of tests/security (PLAINTEXT and SSL listeners), as a fixture here
from tests.security.conftest import SecureBroker, pki, secure_broker  # noqa: F401
from tests.security.raw import Raw
from tests.support.broker import BrokerProcess, free_port
from tests.support.cluster import Cluster

NOW = 1_700_000_000_000


def produce_varied(c: Client, topic: str, partitions: int, rng: random.Random,
                   batches: int) -> None:
    for i in range(batches):
        size = rng.choice([200, 5_000, 40_000, 150_000, 400_000])
        recs = [NewRecord(b"k%d" % i, rng.randbytes(size // 4), (), NOW + i) for _ in range(4)]
        c.produce(topic, i % partitions, build_batch(recs))


def read_frame(s: socket.socket) -> bytes:
    head = recv_exact(s, 4)
    return head + recv_exact(s, struct.unpack(">i", head)[0])


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def fetch_requests(topic: str, tid: uuid.UUID, rng: random.Random, ends: dict[int, int],
                   n: int) -> list[bytes]:
    """Sessionless Fetch requests at versions 4, 11, 12 and 16 (topic ids), with
    random offsets and limits, two partitions each."""
    out = []
    for i in range(n):
        v = rng.choice([4, 11, 12, 16])
        parts = [{"partition": p, "fetch_offset": rng.randrange(ends[p]),
                  "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1,
                  "partition_max_bytes": rng.choice([1, 70_000, 300_000, 2 << 20, 16 << 20])}
                 for p in (0, 1)]
        body: dict[str, Any] = {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": rng.choice([100_000, 1 << 20, 50 << 20]), "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "topic_id": tid, "partitions": parts}]}
        out.append(bytes(codec.encode_request(1, v, i, "zc", body)))
    return out


def answers(bootstrap: str, requests: list[bytes]) -> list[bytes]:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        # half of them one by one, the other half pipelined in one write
        half = len(requests) // 2
        got = []
        for r in requests[:half]:
            s.sendall(r)
            got.append(read_frame(s))
        s.sendall(b"".join(requests[half:]))
        got += [read_frame(s) for _ in requests[half:]]
    return got


def test_sendfile_responses_are_byte_identical_to_in_memory_ones(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    # small segments and index interval: reads start and end around segment and index
    # boundaries
    metrics = free_port()
    props = {"log.segment.bytes": str(3 << 20), "log.index.interval.bytes": "4096",
             "jocko.metrics.addr": f"127.0.0.1:{metrics}"}
    b = BrokerProcess(tmp_path / "data", overrides=props)
    b.start()
    try:
        with Client(b.bootstrap) as c:
            c.create_topic("zc", 2)
            produce_varied(c, "zc", 2, rng, 60)
            tid = next(t.topic_id for t in c.metadata(["zc"]).topics)
            ends = {p: c.fetch("zc", p, 0, max_wait_ms=0).high_watermark for p in (0, 1)}
        reqs = fetch_requests("zc", tid, rng, ends, 40)
        zero_copy = answers(b.bootstrap, reqs)
        sent_zc = zero_copy_bytes(metrics)
        b.stop_gracefully()
        b.overrides["jocko.zero.copy.enable"] = "false"
        b.start()
        in_memory = answers(b.bootstrap, reqs)
        assert zero_copy_bytes(metrics) == 0
        for i, (got, want) in enumerate(zip(zero_copy, in_memory, strict=True)):
            assert struct.unpack_from(">i", got, 4)[0] == i  # in request order
            assert got == want, f"request {i} differs"
        # most of what was answered went by sendfile
        assert sent_zc > 0.5 * sum(len(x) for x in zero_copy) > 4 << 20, sent_zc
    finally:
        b.stop()


async def test_a_segment_cut_while_being_sent_closes_the_connection(tmp_path: Path) -> None:
    """A region whose segment is truncated below its end while it is being sent: the
    peer gets a frame short of its last byte and the connection closes."""
    lg = Log.open(tmp_path / "t-0", LogConfig())
    for i in range(40):
        lg.append(build_batch([NewRecord(None, os.urandom(100_000), (), NOW + i)]), 0,
                  now_ms=NOW)
    region = lg.read(0, 1 << 30, region_min=1).records
    assert isinstance(region, FileRegion) and region.size > 3 << 20
    sent: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection.__new__(Connection)  # only its writer and peer are used
        conn.writer, conn.peer, conn.has_regions = writer, "test", True
        conn.broker = types.SimpleNamespace(stats=BrokerStats())  # type: ignore[assignment]
        conn.outs = [struct.pack(">i", region.size), region]
        # small buffers: the send stalls far before the region's end, whatever the
        # machine's defaults (with megabytes of buffer the whole region could be out
        # before the cut)
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF,
                                                   1 << 16)
        try:
            await conn.send()
            sent.set_result(None)
        except Exception as e:
            sent.set_result(e)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)  # before connect
        client.connect(("127.0.0.1", port))
        client.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=client)
        head = await reader.readexactly(4 + 1024)  # the send is under way, then stalls
        assert struct.unpack(">i", head[:4])[0] == region.size
        lg.truncate_to(20)  # a leader change cuts the log below the region's end
        rest = await asyncio.wait_for(reader.read(), 10)  # to EOF
        got = len(head) - 4 + len(rest)
        assert got < region.size, "the whole frame arrived although its file was cut"
        err = await asyncio.wait_for(sent, 10)
        assert err is not None and "truncated" in str(err)
        writer.close()
    finally:
        server.close()
        lg.close()


def digest(values: list[bytes]) -> str:
    return hashlib.sha256(b"".join(hashlib.sha256(v).digest() for v in values)).hexdigest()


def test_consumers_read_big_compressed_batches_from_a_replicated_topic(
        tmp_path: Path) -> None:
    """Three brokers, replication factor 3: compressed 1 MiB-ish batches read back
    exactly by librdkafka and kafka-python through sendfile, and every follower's
    segment files identical to the leader's (followers fetch with sendfile too)."""
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    cluster = Cluster(tmp_path, 3)
    taken = {int(v.rsplit(":", 1)[1]) for v in cluster.brokers[1].voters.split(",")} | \
        {b.port for b in cluster.brokers.values()}
    ports: dict[int, int] = {}
    while len(ports) < len(cluster.brokers):
        p = free_port()
        if p not in taken:
            taken.add(p)
            ports[len(ports) + 1] = p
    for i, b in cluster.brokers.items():
        b.overrides["jocko.metrics.addr"] = f"127.0.0.1:{ports[i]}"
    try:
        cluster.start()
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
        fs = admin.create_topics([confluent_kafka.admin.NewTopic("big", 2, 3)])
        fs["big"].result(30)
        sent: dict[int, list[bytes]] = {0: [], 1: []}
        for codec_name in ("lz4", "zstd", "gzip"):
            prod = confluent_kafka.Producer({
                "bootstrap.servers": cluster.bootstrap, "acks": "all",
                "compression.type": codec_name, "linger.ms": 50,
                "batch.size": 4 << 20, "message.max.bytes": 8 << 20})
            for i in range(160):
                # half random (incompressible), half repetitive: batches of ~1 MiB
                v = rng.randbytes(4000) if i % 2 else bytes([i % 251]) * 40_000
                p = i % 2
                prod.produce("big", v, partition=p)
                sent[p].append(v)
            assert prod.flush(30) == 0
        total = {p: len(v) for p, v in sent.items()}

        cons = confluent_kafka.Consumer({
            "bootstrap.servers": cluster.bootstrap, "group.id": "zc-rd",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20})
        cons.subscribe(["big"])
        got: dict[int, list[bytes]] = {0: [], 1: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < sum(total.values()) and time.monotonic() < deadline:
            for m in cons.consume(500, 1.0):
                assert m.error() is None, m.error()
                got[m.partition()].append(m.value())
        cons.close()
        assert {p: digest(v) for p, v in got.items()} == {p: digest(v) for p, v in sent.items()}

        kc = kafka.KafkaConsumer(
            "big", bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
            enable_auto_commit=False, consumer_timeout_ms=5000,
            fetch_max_bytes=50 << 20, max_partition_fetch_bytes=8 << 20)
        got = {0: [], 1: []}
        for m in kc:
            got[m.partition].append(m.value)
            if sum(map(len, got.values())) == sum(total.values()):
                break
        kc.close()
        assert {p: digest(v) for p, v in got.items()} == {p: digest(v) for p, v in sent.items()}

        # followers: the same bytes on disk as the leader (they fetched them by sendfile)
        def logs_equal() -> bool:
            for p in (0, 1):
                files = [sorted((b.data_dir / f"big-{p}").glob("*.log"))
                         for b in cluster.brokers.values()]
                contents = {b"".join(f.read_bytes() for f in fs) for fs in files}
                if len(contents) != 1 or not next(iter(contents)):
                    return False
            return True
        cluster.wait_for("followers hold the leader's bytes", logs_equal, timeout=20)
        # and it was sendfile that carried them: more than the log holds (each consumer
        # read all of it, the followers too, most in reads of 64 KiB or more)
        stored = sum(f.stat().st_size for p in (0, 1)
                     for f in (cluster.brokers[1].data_dir / f"big-{p}").glob("*.log"))
        sent_zc = sum(zero_copy_bytes(ports[i]) for i in cluster.brokers)
        assert sent_zc > stored, (sent_zc, stored)
    finally:
        cluster.stop()


def zero_copy_bytes(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("jocko_fetch_zero_copy_bytes_total "):
                return float(line.split()[1])
    return 0.0



@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_regions_leave_in_order_after_bytes_the_transport_holds(
        tmp_path: Path, loop: str) -> None:
    """Several responses queued at once, in-memory parts (one of several MiB, which the
    transport cannot write at once to a slow reader) before, between and after regions:
    the reader gets exactly their concatenation, in order (on both event loops)."""
    import uvloop

    lg = Log.open(tmp_path / "t-0", LogConfig())
    for i in range(30):
        lg.append(build_batch([NewRecord(None, os.urandom(100_000), (), NOW + i)]), 0,
                  now_ms=NOW)
    r1 = lg.read(0, 1 << 20, region_min=1).records
    r2 = lg.read(15, 2 << 20, region_min=1).records
    assert isinstance(r1, FileRegion) and isinstance(r2, FileRegion)
    parts: list[Any] = [b"head", os.urandom(6 << 20), r1, b"mid", r2, os.urandom(300_000)]
    expected = b"".join(p.read() if isinstance(p, FileRegion) else p for p in parts)

    async def run() -> bytes:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = Connection.__new__(Connection)
            conn.writer, conn.peer, conn.has_regions = writer, "test", True
            conn.broker = types.SimpleNamespace(stats=BrokerStats())  # type: ignore[assignment]
            conn.outs = list(parts)
            await conn.send()
            await writer.drain()
            writer.close()
            done.set_result(None)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            got = bytearray()
            while chunk := await asyncio.wait_for(reader.read(64 * 1024), 20):
                got += chunk
                if len(got) < 1 << 20:
                    await asyncio.sleep(0.01)  # slow at first: the transport buffers
            await asyncio.wait_for(done, 20)
            writer.close()
            return bytes(got)
        finally:
            server.close()

    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        got = runner.run(run())
    lg.close()
    assert len(got) == len(expected)
    assert got == expected


def test_tls_listener_answers_the_same_bytes_from_memory(
        secure_broker: SecureBroker) -> None:  # noqa: F811 (the imported fixture)
    """A TLS listener reads regions into memory (sendfile would bypass TLS): the same
    big Fetch answered on PLAINTEXT (sendfile) and on SSL is byte for byte the same."""
    plain = secure_broker.addr("PLAINTEXT")
    rng = random.Random(5)
    with Client(plain) as c:
        c.create_topic("zc-tls", 2)
        produce_varied(c, "zc-tls", 2, rng, 16)
        tid = next(t.topic_id for t in c.metadata(["zc-tls"]).topics)
        ends = {p: c.fetch("zc-tls", p, 0, max_wait_ms=0).high_watermark for p in (0, 1)}
    reqs = fetch_requests("zc-tls", tid, rng, ends, 8)
    over_plaintext = answers(plain, reqs)
    with Raw(secure_broker.addr("SSL"), ca=str(secure_broker.pki.ca.cert)) as tls:
        over_tls = []
        for r in reqs:
            tls.sock.sendall(r)
            head = tls._exact(4)
            assert head is not None
            body = tls._exact(struct.unpack(">i", head)[0])
            assert body is not None
            over_tls.append(head + body)
    assert over_tls == over_plaintext
    assert sum(len(x) for x in over_tls) > 1 << 20
