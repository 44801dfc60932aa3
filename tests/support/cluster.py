"""Three (or more) real `jocko-py broker` processes forming one cluster on loopback.

Each broker gets its own data directory, Kafka port, raft port and gossip (UDP) port;
every broker is a raft voter (`--controller-quorum-voters`) and joins the others by
gossip. `Cluster` starts them, waits (bounded) until every broker is registered and
unfenced in the metadata, and on exit stops every process (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.broker import BrokerProcess, free_port

# Loopback timings: failures are detected in a few seconds, not tens.
FAST = {
    "jocko.gossip.probe.interval.ms": "250",
    "controller.quorum.election.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "250",
    "broker.session.timeout.ms": "3000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "replica.lag.time.max.ms": "6000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
    "controlled.shutdown.timeout.ms": "10000",
}


class ClusterBroker(BrokerProcess):
    """One broker of a cluster: a `BrokerProcess` that is a raft voter among ``voters``
    (``id@host:port,...``), gossips on ``host:gossip_port`` and joins the gossip
    addresses ``join``. Listens on ``host`` (loopback unless a fault lab gives it its
    own address); ``port`` fixed if given (else picked, and picked again if taken)."""

    def __init__(self, data_dir: Path, broker_id: int, voters: str, gossip_port: int,
                 join: str, overrides: dict[str, str], log_path: Path,
                 port: int | None = None, host: str = "127.0.0.1") -> None:
        super().__init__(data_dir, port=port, broker_id=broker_id, overrides=overrides,
                         log_path=log_path)
        self.host = host
        self.voters = voters
        self.gossip_port = gossip_port
        self.join = join

    def command(self) -> list[str]:
        return super().command() + [
            "--controller-quorum-voters", self.voters,
            "--gossip-addr", f"{self.host}:{self.gossip_port}",
            "--join", self.join,
        ]


class Cluster:
    """The tests' launcher of a jocko-py cluster: ``size`` brokers (ids 1..size), all
    raft voters, with `FAST` timings, ``overrides`` for every broker and
    ``per_broker(id)`` for one (its own listeners, say); ``ports`` fixes a broker's
    Kafka port (one a proxy in front of it forwards to, say)."""

    def __init__(self, root: Path, size: int = 3, overrides: dict[str, str] | None = None,
                 per_broker: Callable[[int], dict[str, str]] | None = None,
                 ports: dict[int, int] | None = None):
        self.root = root
        raft_ports = {i: free_port() for i in range(1, size + 1)}
        gossip_ports = {i: free_port(socket.SOCK_DGRAM) for i in range(1, size + 1)}
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in raft_ports.items())
        props = dict(FAST) | dict(overrides or {})
        self.brokers: dict[int, ClusterBroker] = {}
        for i in range(1, size + 1):
            join = ",".join(f"127.0.0.1:{gossip_ports[j]}" for j in gossip_ports if j != i)
            self.brokers[i] = ClusterBroker(
                root / f"broker-{i}", i, voters, gossip_ports[i], join,
                props | (per_broker(i) if per_broker else {}), root / f"broker-{i}.log",
                port=(ports or {}).get(i))

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def alive(self) -> list[ClusterBroker]:
        return [b for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None]

    def start(self) -> Cluster:
        for b in self.brokers.values():
            b.start()
        self.wait_registered(set(self.brokers))
        return self

    def stop(self) -> None:
        """SIGTERM every broker at once (a whole-cluster stop), SIGKILL stragglers."""
        for b in self.alive():
            assert b.proc is not None
            b.proc.terminate()
        for b in self.brokers.values():
            b.stop(timeout=20)

    def metadata(self, via: ClusterBroker | None = None, topics: list[str] | None = None) -> Any:
        from jocko_py.client import Client

        last: Exception | None = None
        for b in ([via] if via else self.alive()):
            try:
                with Client(b.bootstrap, timeout=5) as c:
                    return c.metadata(topics)
            except OSError as e:
                last = e
        raise ConnectionError(f"no broker answered Metadata: {last}")

    def wait_registered(self, ids: set[int], timeout: float = 60.0) -> None:
        """Until every alive broker lists exactly ``ids`` as its live brokers."""
        deadline = time.monotonic() + timeout
        seen: Any = None
        while time.monotonic() < deadline:
            try:
                ok = True
                for b in self.alive():
                    md = self.metadata(b)
                    seen = (b.broker_id, sorted(x.node_id for x in md.brokers))
                    if {x.node_id for x in md.brokers} != ids or md.controller_id < 0:
                        ok = False
                        break
                if ok:
                    return
            except (OSError, ConnectionError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"brokers {sorted(ids)} not all registered after {timeout}s "
                           f"(last seen {seen})\n" + self.log_tails())

    def partition_state(self, topic: str, partition: int = 0,
                        via: ClusterBroker | None = None) -> tuple[int, list[int], int]:
        """(leader, isr, leader epoch) as a broker's metadata says."""
        md = self.metadata(via, [topic])
        for t in md.topics:
            for p in t.partitions:
                if p.partition_index == partition:
                    return p.leader_id, sorted(p.isr_nodes), p.leader_epoch
        raise KeyError(f"{topic}-{partition}")

    def wait_for(self, what: str, pred: Any, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = pred()
                if last:
                    return last
            except (OSError, ConnectionError, KeyError) as e:
                last = e
            time.sleep(0.2)
        raise TimeoutError(f"{what}: not reached after {timeout}s (last {last!r})\n"
                           + self.log_tails())

    def log_tails(self, n: int = 25) -> str:
        return "\n".join(f"--- broker {i}:\n{b.log_tail(n)}" for i, b in self.brokers.items())


@contextmanager
def running_cluster(root: Path, size: int = 3, overrides: dict[str, str] | None = None,
                    per_broker: Callable[[int], dict[str, str]] | None = None,
                    ports: dict[int, int] | None = None) -> Iterator[Cluster]:
    """A started `Cluster` (every broker registered), stopped on exit."""
    c = Cluster(root, size, overrides, per_broker, ports)
    try:
        c.start()
        yield c
    finally:
        c.stop()
