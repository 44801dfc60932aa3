"""The Java clients, kafka-clients 3.9 and 4.x, against a three-broker cluster.

The same classes (tests/java/src, compiled against 3.9 by `make java-deps`) run on
either jar set: .cache/java-test-jars (3.9) or .cache/java-test-jars-4 (4.x,
tests/java/kafka4/pom.xml). Scenarios (scenarios.py): `E2EClient produce-paced` (default
producer settings: idempotent, acks=all) streams while the leader of partition 0 is
killed and restarted, `E2EClient consume` reads everything back; `GroupClient` (the
classic-protocol group worker of tests/groups) keeps going when its coordinator's
broker is killed. One cluster for the module.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.cluster_e2e.scenarios import (
    PACE_EVERY,
    PACE_PAUSE_S,
    PARTITIONS,
    WorkerMember,
    coordinator_kill_scenario,
    leader_kill_scenario,
    partition_of,
)
from tests.groups.harness import Worker
from tests.support.broker import REPO, terminate
from tests.support.cluster import Cluster
from tests.support.e2e import JAVA_CLASSES, JAVA_JARS, Rec, read_tsv, write_tsv
from tests.support.prereq import requires

JAVA_JARS_4 = REPO / ".cache" / "java-test-jars-4"
JARS = {"3.9": JAVA_JARS, "4.x": JAVA_JARS_4}
JVM = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.clients,
    pytest.mark.java,
    pytest.mark.timeout(300),
    requires(shutil.which("java") is not None, "no java on PATH"),
]


def classpath(version: str) -> str:
    jars = JARS[version]
    if not (JAVA_CLASSES / ".done").exists() or not (jars / ".done").exists():
        pytest.fail(f"{JAVA_CLASSES} or {jars} missing: run `make java-deps` (tests/java/Makefile)")
    return f"{JAVA_CLASSES}:{jars}/*"


class JavaProducing:
    """`E2EClient produce-paced`: its "acked N" lines are the progress."""

    def __init__(self, version: str, bootstrap: str, topic: str, sent: list[bytes],
                 workdir: Path) -> None:
        now = int(time.time() * 1000)
        tsv = workdir / f"{topic}.tsv"
        write_tsv(tsv, topic, [Rec(partition_of(i), None, v, (), now)
                               for i, v in enumerate(sent)])
        self.err = workdir / f"{topic}-producer.err"
        self.out: list[str] = []
        self.acked = 0
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [*JVM, "-cp", classpath(version), "jockopy.e2e.E2EClient", "produce-paced",
                 bootstrap, str(PACE_EVERY), str(int(PACE_PAUSE_S * 1000)), str(tsv)],
                stdout=subprocess.PIPE, stderr=err)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.out.append(line)
            if line.startswith("acked "):
                self.acked = max(self.acked, int(line.split()[1]))

    def progress(self) -> int:
        if self.proc.poll() not in (None, 0):
            raise AssertionError(f"the producer exited early\n{self.describe()}")
        return self.acked

    def finish(self, timeout: float) -> None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            terminate(self.proc, 5)
            raise AssertionError(f"the producer did not exit in {timeout}s\n{self.describe()}") \
                from None
        self.reader.join(5)
        assert rc == 0, f"E2EClient produce-paced exited {rc}\n{self.describe()}"

    def describe(self) -> str:
        return ("E2EClient produce-paced stdout:\n" + "\n".join(self.out[-5:]) + "\nstderr:\n"
                + self.err.read_text(errors="replace")[-4000:])


def java_read(version: str, bootstrap: str, topic: str, workdir: Path) -> dict[int, list[bytes]]:
    out = workdir / f"{topic}-read.tsv"
    proc = subprocess.run(
        [*JVM, "-cp", classpath(version), "jockopy.e2e.E2EClient", "consume", bootstrap,
         str(out), f"{topic}:{PARTITIONS}"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"E2EClient consume exited {proc.returncode}\n{proc.stderr[-4000:]}"
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for r in sorted(read_tsv(out).get(topic, []), key=lambda r: (r.partition, r.offset)):
        assert r.value is not None
        got[r.partition].append(r.value)
    return got


@pytest.mark.parametrize("version", list(JARS))
def test_java_leader_kill(shared_cluster: Cluster, tmp_path: Path, version: str) -> None:
    c = shared_cluster
    topic = f"java-{version.replace('.', '')}-stream"
    t = leader_kill_scenario(
        c, topic, lambda vals: JavaProducing(version, c.bootstrap, topic, vals, tmp_path),
        lambda: java_read(version, c.bootstrap, topic, tmp_path))
    print(f"java {version} leader kill: {t}")


@pytest.mark.parametrize("version", list(JARS))
def test_java_group_member_survives_coordinator_kill(shared_cluster: Cluster, tmp_path: Path,
                                                     version: str) -> None:
    def start(bootstrap: str, topic: str, group: str) -> WorkerMember:
        classpath(version)  # fails early, saying what to build
        return WorkerMember(Worker("java", bootstrap, topic, group, tmp_path,
                                   java_jars=JARS[version]))

    v = version.replace(".", "")
    t = coordinator_kill_scenario(shared_cluster, f"grp-java-{v}", f"g-java-{v}", start)
    print(f"java {version} coordinator kill: {t}")


def test_java_consumer_protocol_member_survives_coordinator_kill(shared_cluster: Cluster,
                                                                 tmp_path: Path) -> None:
    """KIP-848 (Java 4.4.0, group.protocol=consumer): the group's records in
    __consumer_offsets are loaded by the new coordinator, and the member carries on."""
    version = "4.x"

    def start(bootstrap: str, topic: str, group: str) -> WorkerMember:
        classpath(version)
        return WorkerMember(Worker("java", bootstrap, topic, group, tmp_path,
                                   java_jars=JARS[version],
                                   extra=["--protocol", "consumer"]))

    t = coordinator_kill_scenario(shared_cluster, "grp-java-kip848", "g-java-kip848", start)
    print(f"java {version} consumer protocol coordinator kill: {t}")
