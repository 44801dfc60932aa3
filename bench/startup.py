"""Start-up time of a broker for a test suite: from "start" to the first acknowledged
produce (kafka-python), for jocko-py in-process (the pytest plugin's `kafka_broker`),
jocko-py as a subprocess, and, given its jars, Apache Kafka 3.9 in KRaft mode (format +
start, what the Kafka test containers run inside Docker, here without Docker).

    .venv/bin/python bench/startup.py [--runs 3] [--kafka-libs DIR]

`DIR` holds Kafka's jars (e.g. `mvn -f tests/java/kafka-ref/pom.xml
dependency:copy-dependencies -DoutputDirectory=DIR`).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaProducer
from kafka.errors import KafkaError

from jocko_py.embedded import EmbeddedBroker, free_port


def first_ack(bootstrap: str, deadline: float) -> None:
    # wait for the port first: a client that dials too early backs off for seconds
    host, _, port = bootstrap.rpartition(":")
    while True:
        try:
            socket.create_connection((host, int(port)), 0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    while True:
        try:
            p = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=5000,
                              max_block_ms=5000)
            p.send("startup", b"x").get(10)
            p.close()
            return
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def jocko_embedded() -> float:
    t0 = time.monotonic()
    with EmbeddedBroker() as b:
        first_ack(b.bootstrap_servers, t0 + 60)
        return time.monotonic() - t0


def jocko_process() -> float:
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "jocko_py.cli", "broker", "--broker-addr",
                                 f"127.0.0.1:{port}", "--data-dir", d],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            first_ack(f"127.0.0.1:{port}", t0 + 60)
            return time.monotonic() - t0
        finally:
            proc.terminate()
            proc.wait(30)


def kafka(libs: Path) -> float:
    port, ctrl = free_port(), free_port()
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "server.properties"
        cfg.write_text(
            "process.roles=broker,controller\nnode.id=1\n"
            f"controller.quorum.voters=1@127.0.0.1:{ctrl}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctrl}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
            "controller.listener.names=CONTROLLER\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            f"log.dirs={d}/logs\noffsets.topic.replication.factor=1\n"
            "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n")
        java = ["java", "-Xms256m", "-Xmx768m", "-cp", f"{libs}/*"]
        t0 = time.monotonic()
        subprocess.run(java + ["kafka.tools.StorageTool", "format", "-t",
                               "q1Sh-9_ISia_zwGINzRvyQ", "-c", str(cfg)],
                       check=True, stdout=subprocess.DEVNULL)
        proc = subprocess.Popen(java + ["kafka.Kafka", str(cfg)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            first_ack(f"127.0.0.1:{port}", t0 + 120)
            return time.monotonic() - t0
        finally:
            proc.terminate()
            proc.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kafka-libs", type=Path, default=None)
    args = ap.parse_args()
    cases: list[tuple[str, Callable[[], float]]] = [
        ("jocko-py in-process (kafka_broker fixture)", jocko_embedded),
        ("jocko-py subprocess", jocko_process),
    ]
    if args.kafka_libs:
        libs = args.kafka_libs
        cases.append(("Apache Kafka 3.9 JVM, KRaft (format + start, no Docker)",
                      lambda: kafka(libs)))
    print("| broker | start to first acknowledged produce, median (min-max) of "
          f"{args.runs} |\n| --- | --- |")
    for name, fn in cases:
        times = [fn() for _ in range(args.runs)]
        print(f"| {name} | {statistics.median(times):.2f} s ({min(times):.2f}-"
              f"{max(times):.2f}) |", flush=True)


if __name__ == "__main__":
    main()
