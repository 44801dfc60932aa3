"""Capture golden request frames from real Kafka clients (run by hand, not by pytest).

    .venv/bin/python -m tests.protocol.golden.capture

starts a jocko-py broker that advertises a recording proxy's address, runs
kafka-python, aiokafka and confluent-kafka (librdkafka) through the proxy (a
produce, a consume, metadata and admin calls), splits what each client sent into
request frames and writes the first frames of each (client, api, version) to
`frames.json`. `test_codec_golden.py` decodes and re-encodes them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.broker import BrokerProcess, free_port

OUT = Path(__file__).with_name("frames.json")
PER_KIND = 2  # frames kept per (client, api key, api version)


class RecordingProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.streams: list[tuple[str, bytearray]] = []
        self.label = "?"
        self._srv = socket.create_server(("127.0.0.1", self.port))
        self._srv.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self._srv.accept()
            except TimeoutError:
                continue
            u = socket.create_connection(("127.0.0.1", self.target_port))
            rec = bytearray()
            self.streams.append((self.label, rec))
            threading.Thread(target=self._pump, args=(c, u, rec), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, None), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, rec: bytearray | None) -> None:
        try:
            while data := src.recv(65536):
                if rec is not None:
                    rec += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._srv.close()


def frames_of(stream: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(stream):
        (n,) = struct.unpack_from(">i", stream, pos)
        if pos + 4 + n > len(stream):
            break
        out.append(bytes(stream[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return out


def run_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="golden-kafka-python")
    admin.create_topics([NewTopic("golden-kp", 1, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=bootstrap, client_id="golden-kafka-python")
    for i in range(3):
        p.send("golden-kp", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
    p.flush(10)
    p.close(10)
    c = KafkaConsumer(
        bootstrap_servers=bootstrap, client_id="golden-kafka-python", consumer_timeout_ms=3000
    )
    tp = TopicPartition("golden-kp", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = [m for _, ms in c.poll(5000).items() for m in ms]
    assert got, "kafka-python consumed nothing"
    c.close()


def run_confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = {"bootstrap.servers": bootstrap, "client.id": "golden-librdkafka"}
    a = AdminClient(conf)
    for f in a.create_topics([NewTopic("golden-rd", 1, 1)]).values():
        f.result(10)
    p = Producer(dict(conf, **{"compression.type": "lz4"}))
    for i in range(3):
        p.produce("golden-rd", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
    assert p.flush(10) == 0
    c = Consumer(dict(conf, **{"group.id": "golden", "enable.auto.commit": False}))
    c.assign([TopicPartition("golden-rd", 0, 0)])
    deadline = time.monotonic() + 10
    n = 0
    while n < 3 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            n += 1
    c.close()
    assert n == 3, "librdkafka consumed too little"


def run_aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="golden-aiokafka")
        await p.start()
        try:
            for i in range(3):
                await p.send_and_wait("golden-kp", b"a%d" % i, key=b"k")
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="golden-aiokafka")
        await c.start()
        try:
            tp = TopicPartition("golden-kp", 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got = await c.getmany(tp, timeout_ms=5000)
            assert got, "aiokafka consumed nothing"
        finally:
            await c.stop()

    asyncio.run(asyncio.wait_for(go(), 60))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        proxy = RecordingProxy(port)
        broker = BrokerProcess(
            Path(tmp) / "data",
            port=port,
            overrides={"jocko.advertised.addr": f"127.0.0.1:{proxy.port}"},
        )
        broker.start()
        try:
            bootstrap = f"127.0.0.1:{proxy.port}"
            for label, fn in [
                ("kafka-python", run_kafka_python),
                ("librdkafka", run_confluent),
                ("aiokafka", run_aiokafka),
            ]:
                proxy.label = label
                fn(bootstrap)
                time.sleep(0.5)
        finally:
            broker.stop()
            proxy.close()
    kept: dict[tuple[str, int, int], list[str]] = {}
    for label, stream in proxy.streams:
        for f in frames_of(bytes(stream)):
            key, version = struct.unpack_from(">hh", f, 0)
            slot = kept.setdefault((label, key, version), [])
            if len(slot) < PER_KIND and f.hex() not in slot:
                slot.append(f.hex())
    records: list[dict[str, Any]] = [
        {"client": c, "api_key": k, "api_version": v, "frame": h}
        for (c, k, v), hs in sorted(kept.items())
        for h in hs
    ]
    OUT.write_text(json.dumps(records, indent=1) + "\n")
    print(f"wrote {len(records)} frames to {OUT}")


if __name__ == "__main__":
    main()
