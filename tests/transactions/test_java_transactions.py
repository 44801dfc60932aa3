"""The Java transactional producer (kafka-clients 3.9 and 4.x) in a consume-transform-
produce loop, and a Java read_committed consumer, against a real broker process.

tests/java/src/main/java/jockopy/txn/TxnClient.java copies 300 records from a
two-partition input topic to an output topic in transactions with
sendOffsetsToTransaction, aborting every third transaction on purpose (and copying
those records again). The output read back by a Java read_committed consumer must be
exactly the input, transformed, once each, in input order per partition; the group's
committed offsets must be the input's end. The class is compiled by `make java-deps`
into .cache/java-test-classes, or by this test into a temporary directory.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import REPO, BrokerProcess
from tests.support.prereq import missing, requires

pytestmark = [
    pytest.mark.clients,
    pytest.mark.java,
    requires(shutil.which("java") is not None, "no java on PATH"),
    pytest.mark.timeout(300),
]

JARS = {"3.9": REPO / ".cache" / "java-test-jars", "4.x": REPO / ".cache" / "java-test-jars-4"}
SRC = REPO / "tests" / "java" / "src" / "main" / "java" / "jockopy" / "txn" / "TxnClient.java"
N = 300
TIMEOUT = 20.0


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = REPO / ".cache" / "java-test-classes"
    if (built / "jockopy" / "txn" / "TxnClient.class").exists():
        return built
    if shutil.which("javac") is None:
        missing("no javac on PATH and TxnClient not built (make java-deps)")
    out = tmp_path_factory.mktemp("txn-classes")
    subprocess.run(["javac", "--release", "17", "-cp", f"{JARS['3.9']}/*", "-d", str(out),
                    str(SRC)], check=True, timeout=120)
    return out


def java(classes: Path, jars: Path, *args: str) -> str:
    if not any(jars.glob("kafka-clients-*.jar")):
        pytest.fail(f"{jars} has no kafka-clients jar: run `make java-deps`")
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-cp", f"{classes}:{jars}/*", "jockopy.txn.TxnClient", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, f"TxnClient {args[0]} exited {proc.returncode}\n" \
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}"
    return proc.stdout


@pytest.mark.parametrize("client", ["3.9", "4.x"])
def test_java_consume_transform_produce(txn_broker: BrokerProcess, classes: Path,
                                        client: str) -> None:
    b = txn_broker
    src, dst = f"jin-{uuid.uuid4().hex[:6]}", f"jout-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(src, 2, 1), NewTopic(dst, 2, 1)]).values():
        f.result(TIMEOUT)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(N):
        p.produce(src, value=b"%04d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    group = f"jg-{uuid.uuid4().hex[:6]}"
    out = java(classes, JARS[client], "copy", b.bootstrap, src, dst, group,
               f"jtid-{uuid.uuid4().hex[:6]}", str(N))
    assert "COMMITTED 300" in out, out
    assert " ABORTED 0" not in out, out  # aborted transactions did happen
    got = java(classes, JARS[client], "read", b.bootstrap, dst, str(N)).split()
    assert len(got) == N, f"{len(got)} records, {N - len(set(got))} duplicates"
    assert sorted(got) == sorted(f"out-{i:04d}" for i in range(N))
    for part in (0, 1):
        seq = [int(v[4:]) for v in got if int(v[4:]) % 2 == part]
        assert seq == sorted(seq)  # input order kept per partition
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        offs = c.committed([TopicPartition(src, 0), TopicPartition(src, 1)], TIMEOUT)
        assert [o.offset for o in offs] == [N // 2, N // 2]
    finally:
        c.close()
