"""The fault lab: real jocko-py broker processes, each in a network namespace of its own
and with its data on a filesystem of its own, so nemeses can act on real processes,
real links and real disks.

Layout (one lab per run, names carry a short random run id so labs never collide):

    root namespace                        namespace jf<id>-<i> (one per broker)
    bridge jf<id>  10.<a>.<b>.254/24  <->  veth eth0  10.<a>.<b>.<i>/24
    (clients run here)                     broker i: Kafka :9092, raft :9093, gossip :9094

A network partition is a set of blackhole routes inside the namespaces (``ip route add
blackhole 10.a.b.j/32`` in broker i's namespace drops everything i sends to j; installed
on both sides it cuts the link both ways), so no firewall tooling is needed. Every
broker's data directory is a tmpfs mounted with a size limit (a disk of its own that can
be filled). Both need root; without it the lab runs the brokers on loopback and reports
that partitions and disks are unavailable (`Lab.isolated`), and the nemeses that need
them are skipped with that reason.

Everything the lab creates (processes, mounts, namespaces, the bridge) is removed by
`close()`, which `open_lab` calls even on failure, and which also runs at interpreter
exit; `sweep_stale()` removes what a killed run left behind (names with the jf prefix
whose owning process is gone).
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.broker import free_port
from tests.support.cluster import FAST, ClusterBroker

KAFKA_PORT, RAFT_PORT, GOSSIP_PORT = 9092, 9093, 9094
PREFIX = "jf"

# Loopback timings for the fault runs (FAST plus what the nemeses rely on). The pause
# nemesis stops a broker for longer than replica.lag.time.max.ms and the session timeout.
FAULT_PROPS = dict(FAST) | {
    "replica.lag.time.max.ms": "5000",
    "broker.session.timeout.ms": "3000",
    "log.flush.offset.checkpoint.interval.ms": "5000",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "min.insync.replicas": "2",
}


def sh(*cmd: str, check: bool = True, timeout: float = 15) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def can_isolate() -> tuple[bool, str]:
    """Whether this process can create namespaces and mount filesystems."""
    if os.geteuid() != 0:
        return False, "needs root (network namespaces, tmpfs mounts)"
    if shutil.which("ip") is None:
        return False, "needs root and iproute2's `ip`"
    return True, ""


class FaultBroker(ClusterBroker):
    """A cluster broker (tests/support/cluster.py's) started inside its namespace (``ip
    netns exec`` execs the broker, so ``proc.pid`` is the broker's own pid: signals reach
    it directly)."""

    def __init__(self, lab: Lab, broker_id: int, host: str, ports: tuple[int, int, int],
                 netns: str | None, voters: str, join: str) -> None:
        super().__init__(lab.root / f"broker-{broker_id}" / "data", broker_id, voters,
                         ports[2], join, lab.props, lab.root / f"broker-{broker_id}.log",
                         port=ports[0], host=host)
        self.raft_port = ports[1]
        self.netns = netns
        self.paused = False

    @property
    def disk(self) -> Path:
        return self.data_dir.parent

    def command(self) -> list[str]:
        cmd = super().command()
        return (["ip", "netns", "exec", self.netns] + cmd) if self.netns else cmd

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.paused:
            self.resume()
        super().kill()

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False


class Lab:
    def __init__(self, root: Path, size: int = 3, props: dict[str, str] | None = None,
                 disk_mb: int = 384, isolate: bool | None = None) -> None:
        self.root = root
        self.size = size
        self.props = dict(FAULT_PROPS) | dict(props or {})
        self.disk_mb = disk_mb
        ok, why = can_isolate()
        self.isolated = ok if isolate is None else (isolate and ok)
        self.why_not_isolated = why or ("" if self.isolated else "isolation turned off")
        self.run_id = f"{os.getpid() % 10000:04d}{random.randrange(36 ** 2):02x}"[:6]
        self.bridge = f"{PREFIX}{self.run_id}"
        self.mounts: list[Path] = []
        self.namespaces: list[str] = []
        self.blackholes: set[tuple[int, int]] = set()
        self.brokers: dict[int, FaultBroker] = {}
        self.subnet = ""
        self.closed = False

    # -- set-up / tear-down -------------------------------------------------------------

    def open(self) -> Lab:
        atexit.register(self.close)
        self.root.mkdir(parents=True, exist_ok=True)
        if self.isolated:
            sweep_stale()
            self._make_network()
        # each broker's address and (Kafka, raft, gossip) ports, then the brokers
        where: dict[int, tuple[str, tuple[int, int, int], str | None]] = {}
        for i in range(1, self.size + 1):
            if self.isolated:
                where[i] = (f"{self.subnet}.{i}", (KAFKA_PORT, RAFT_PORT, GOSSIP_PORT),
                            f"{self.bridge}-{i}")
            else:
                where[i] = ("127.0.0.1",
                            (free_port(), free_port(), free_port(socket.SOCK_DGRAM)), None)
        self.voters = ",".join(f"{i}@{host}:{ports[1]}" for i, (host, ports, _) in where.items())
        for i, (host, ports, ns) in where.items():
            join = ",".join(f"{h}:{p[2]}" for j, (h, p, _) in where.items() if j != i)
            self.brokers[i] = FaultBroker(self, i, host, ports, ns, self.voters, join)
            if self.isolated:
                self._mount_disk(self.brokers[i].disk)
            self.brokers[i].data_dir.mkdir(parents=True, exist_ok=True)
        return self

    def _make_network(self) -> None:
        used = sh("ip", "-o", "-4", "addr").stdout
        for _ in range(50):
            subnet = f"10.{random.randrange(100, 250)}.{random.randrange(1, 250)}"
            if f" {subnet}." not in used:
                break
        self.subnet = subnet
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{subnet}.254/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i in range(1, self.size + 1):
            ns = f"{self.bridge}-{i}"
            host_if, ns_if = f"{self.bridge}h{i}", f"{self.bridge}n{i}"
            sh("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
            sh("ip", "link", "set", host_if, "master", self.bridge)
            sh("ip", "link", "set", host_if, "up")
            sh("ip", "link", "set", ns_if, "netns", ns)
            sh("ip", "-n", ns, "link", "set", ns_if, "name", "eth0")
            sh("ip", "-n", ns, "addr", "add", f"{subnet}.{i}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        (self.root / "lab.pid").write_text(f"{os.getpid()} {self.bridge}\n")

    def _mount_disk(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        sh("mount", "-t", "tmpfs", "-o", f"size={self.disk_mb}m", f"{self.bridge}-disk", str(path))
        self.mounts.append(path)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for b in self.brokers.values():
            try:
                b.kill()
            except Exception:
                pass
        for m in self.mounts:
            sh("umount", "-l", str(m), check=False)
        for ns in self.namespaces:
            sh("ip", "netns", "del", ns, check=False)
        if self.namespaces:
            sh("ip", "link", "del", self.bridge, check=False)

    # -- cluster ------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def alive(self) -> list[FaultBroker]:
        return [b for b in self.brokers.values() if b.alive()]

    def start(self) -> None:
        for b in self.brokers.values():
            b.start()
        self.wait_registered(set(self.brokers))

    def metadata(self, topics: list[str] | None = None, via: FaultBroker | None = None) -> Any:
        from jocko_py.client import Client

        last: Exception | None = None
        for b in ([via] if via else [b for b in self.alive() if not b.paused]):
            try:
                with Client(b.bootstrap, timeout=3) as c:
                    return c.metadata(topics)
            except OSError as e:
                last = e
        raise ConnectionError(f"no broker answered Metadata: {last}")

    def wait_registered(self, ids: set[int], timeout: float = 60.0) -> None:
        def ok() -> bool:
            for b in self.alive():
                md = self.metadata(via=b)
                if {x.node_id for x in md.brokers} != ids or md.controller_id < 0:
                    return False
            return True
        self.wait_for(f"brokers {sorted(ids)} registered", ok, timeout)

    def partitions(self, topic: str, via: FaultBroker | None = None) -> dict[int, tuple[int, list[int]]]:
        """partition -> (leader, isr) as one broker's metadata says."""
        md = self.metadata([topic], via)
        return {p.partition_index: (p.leader_id, sorted(p.isr_nodes))
                for t in md.topics for p in t.partitions}

    def controller(self) -> int:
        return int(self.metadata().controller_id)

    def wait_for(self, what: str, pred: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = pred()
                if last:
                    return last
            except (OSError, ConnectionError, KeyError) as e:
                last = e
            time.sleep(0.25)
        raise TimeoutError(f"{what}: not reached after {timeout}s (last {last!r})\n"
                           + self.log_tails())

    def log_tails(self, n: int = 20) -> str:
        return "\n".join(f"--- broker {i}:\n{b.log_tail(n)}" for i, b in self.brokers.items())

    # -- network ------------------------------------------------------------------------

    def cut(self, a: int, b: int) -> None:
        """Drop everything between brokers a and b, both ways."""
        for x, y in ((a, b), (b, a)):
            if (x, y) not in self.blackholes:
                sh("ip", "-n", self.brokers[x].netns or "", "route", "add", "blackhole",
                   f"{self.brokers[y].host}/32")
                self.blackholes.add((x, y))

    def cut_clients(self, a: int) -> None:
        """Drop everything between broker a and the clients (the root namespace)."""
        if (a, 0) not in self.blackholes:
            sh("ip", "-n", self.brokers[a].netns or "", "route", "add", "blackhole",
               f"{self.subnet}.254/32")
            self.blackholes.add((a, 0))

    def partition(self, groups: list[set[int]]) -> None:
        """Cut every link between brokers of different groups."""
        for i, g in enumerate(groups):
            for h in groups[i + 1:]:
                for a in g:
                    for b in h:
                        self.cut(a, b)

    def heal(self) -> None:
        for x, y in sorted(self.blackholes):
            host = self.brokers[y].host if y else f"{self.subnet}.254"
            sh("ip", "-n", self.brokers[x].netns or "", "route", "del", "blackhole",
               f"{host}/32", check=False)
        self.blackholes.clear()


def sweep_stale() -> None:
    """Remove namespaces, bridges and mounts a killed lab left behind (its pid is gone)."""
    out = sh("ip", "-o", "link", "show", "type", "bridge", check=False).stdout
    for line in out.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if not (name.startswith(PREFIX) and len(name) == len(PREFIX) + 6):
            continue
        pid = int(name[len(PREFIX):len(PREFIX) + 4]) if name[len(PREFIX):][:4].isdigit() else -1
        if pid > 0 and _pid_alive_with_lab(pid, name):
            continue
        for ns in sh("ip", "netns", "list", check=False).stdout.split():
            if ns.startswith(name + "-"):
                sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", name, check=False)
    for line in Path("/proc/mounts").read_text().splitlines():
        dev, mnt = line.split()[:2]
        if dev.startswith(PREFIX) and dev.endswith("-disk") and not _pid_alive_with_lab(
                int(dev[len(PREFIX):len(PREFIX) + 4]) if dev[len(PREFIX):][:4].isdigit() else -1,
                dev[:-5]):
            sh("umount", "-l", mnt, check=False)


def _pid_alive_with_lab(pid: int, bridge: str) -> bool:
    """Whether a live process with this pid (mod 10000) may own the lab: conservative,
    a live pid with the same residue keeps its lab."""
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) % 10000 == pid:
            return True
    return False


@contextmanager
def open_lab(root: Path, size: int = 3, props: dict[str, str] | None = None,
             isolate: bool | None = None) -> Iterator[Lab]:
    lab = Lab(root, size, props, isolate=isolate)
    try:
        lab.open()
        yield lab
    finally:
        lab.close()
