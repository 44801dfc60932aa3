"""Apache Kafka 4.4.0 as a reference broker: one KRaft node (broker and controller).

The jars come from Maven Central (`make -C tests/java kafka-44`, part of
`make test`'s java-deps) into `.cache-extra/kafka-44-jars`. `ApacheKafka44`
formats its data dir with `kafka-storage format --standalone` (a cluster id drawn
here, as `kafka-storage random-uuid` would) and runs `kafka-server-start`'s main
class, `kafka.Kafka`; both with Kafka's defaults apart from the ports, the data
dir and a replication factor of 1 for the internal topics. `kafka44_cluster` starts
several such nodes (each broker and controller) as one cluster with a static quorum
(`controller.quorum.voters`) and Kafka's default replication of the internal topics.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.broker import REPO, BrokerProcess, free_port

JARS = REPO / ".cache-extra" / "kafka-44-jars"
JAVA_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def _random_uuid() -> str:
    """A Kafka Uuid as `kafka-storage random-uuid` prints it: base64url, never starting
    with '-' (Kafka's Uuid.randomUuid draws again: the tools would take it for an option)."""
    while True:
        u = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not u.startswith("-"):
            return u


def missing() -> str | None:
    """Why Kafka 4.4.0 cannot run here, or None."""
    if shutil.which("java") is None:
        return "no java"
    if not (JARS / ".done").exists():
        return "Kafka 4.4.0 jars not fetched (make -C tests/java kafka-44)"
    return None


class ApacheKafka44(BrokerProcess):
    """One Apache Kafka 4.4.0 node; `start()` returns once its broker port accepts."""

    def __init__(self, data_dir: Path, node_id: int = 1,
                 extra: dict[str, str] | None = None) -> None:
        super().__init__(data_dir, log_path=data_dir.parent / "kafka44.log")
        self.extra = dict(extra or {})  # further server.properties (e.g. group.share.*)
        self.node_id = node_id
        self.controller_port = free_port()
        self.config = self.data_dir.parent / "server.properties"
        # several nodes: the static quorum ("1@host:port,...") and the shared cluster id
        self.voters: str | None = None
        self.cluster_id = _random_uuid()

    def _java(self, main: str, *args: str) -> list[str]:
        return ["java", *JAVA_OPTS, "-cp", f"{JARS}/*", main, *args]

    def command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.config))

    def start(self, timeout: float = 90.0) -> ApacheKafka44:
        self.format()
        super().start(timeout=timeout)
        return self

    def format(self) -> None:
        """Write server.properties and `kafka-storage format` the data dir, once."""
        if not (self.data_dir / "meta.properties").exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            quorum = (f"controller.quorum.voters={self.voters}" if self.voters else
                      f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}")
            rf = [] if self.voters else [
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
            ]
            self.config.write_text("\n".join([
                "process.roles=broker,controller",
                f"node.id={self.node_id}",
                quorum,
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                f"log.dirs={self.data_dir}",
                *rf,
                "group.initial.rebalance.delay.ms=0",
                *(f"{k}={v}" for k, v in self.extra.items()),
                "",
            ]))
            standalone = [] if self.voters else ["--standalone"]
            fmt = subprocess.run(
                self._java("kafka.tools.StorageTool", "format", *standalone,
                           "-t", self.cluster_id, "-c", str(self.config)),
                capture_output=True, text=True, timeout=120)
            if fmt.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed:\n{fmt.stdout}\n{fmt.stderr}")

    def start_unwaited(self) -> None:
        """Format and spawn the process without waiting for its port (the nodes of a
        static quorum wait for each other before they listen)."""
        import os
        import subprocess as sp

        self.format()
        with open(self.log_path, "ab") as log:
            self.proc = sp.Popen(self.command(), stdout=log, stderr=sp.STDOUT, cwd=REPO,
                                 env=dict(os.environ))

    def wait_ready(self, timeout: float = 60.0, brokers: int = 1) -> None:
        """Until the broker answers Metadata with itself (it has joined the quorum) and,
        in a cluster, with `brokers` brokers."""
        from jocko_py.client import Client

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with Client(self.bootstrap, timeout=5) as c:
                    if len(c.request(3, 12, {"topics": []}).brokers) >= brokers:
                        return
            except Exception as e:  # not up yet
                last = e
            time.sleep(0.5)
        raise TimeoutError(f"Kafka 4.4.0 not ready after {timeout}s ({last!r}):\n{self.log_tail()}")


@contextmanager
def kafka44_cluster(root: Path, size: int = 3, timeout: float = 180.0) -> Iterator[
        list[ApacheKafka44]]:
    """`size` Kafka 4.4.0 nodes (broker and controller each, ids 1..size) as one cluster
    under `root/kafka-N/`; yields once every node sees every broker; stops them all."""
    nodes = [ApacheKafka44(root / f"kafka-{i}" / "data", node_id=i) for i in range(1, size + 1)]
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes)
    for n in nodes:
        n.voters, n.cluster_id = voters, nodes[0].cluster_id
    try:
        for n in nodes:
            n.start_unwaited()
        for n in nodes:
            n.wait_ready(timeout, brokers=size)
        yield nodes
    finally:
        for n in nodes:
            n.stop()
