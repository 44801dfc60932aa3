"""The Java kafka-clients 4.4.0 transactional producer on transaction.version 2
(KIP-890 part 2), seen on the wire.

A new cluster finalizes transaction.version 2, so kafka-clients 4.4.0 runs its
transaction version 2 protocol: tests/java's TxnClient copies records from an input
topic to an output topic in transactions (consume-transform-produce with
sendOffsetsToTransaction, every third transaction aborted on purpose and copied
again), through a tap (tests/parity/wire_tap.py) that decodes every transactional
request. On the wire: no AddPartitionsToTxn or AddOffsetsToTxn (Produce v12+ and
TxnOffsetCommit v5+ add the partitions), every EndTxn at v5 with the epoch one above
the previous transaction's, answered with the next one. A read_committed consumer
(4.4.0 too) then sees exactly the committed records, once each, in order. One broker,
then three (each broker behind its own tap; the transaction and offsets partitions
replicated).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from jocko_py.protocol.errors import ErrorCode as E
from tests.parity.wire_tap import WireTap
from tests.support.broker import REPO, BrokerProcess, free_port
from tests.support.cluster import running_cluster
from tests.support.prereq import missing, requires
from tests.transactions.conftest import OVERRIDES

pytestmark = [
    pytest.mark.clients,
    pytest.mark.java,
    requires(shutil.which("java") is not None, "no java on PATH"),
    pytest.mark.timeout(300),
]

JARS44 = REPO / ".cache-extra" / "kafka-44-jars"
SRC = REPO / "tests" / "java" / "src" / "main" / "java" / "jockopy" / "txn" / "TxnClient.java"
N = 120
TIMEOUT = 20.0
PRODUCE, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 0, 24, 25, 26, 28
RECORDED = frozenset({PRODUCE, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT})


def _classpath() -> str:
    wanted = ("kafka-clients-", "lz4-java-", "snappy-java-", "zstd-jni-", "slf4j-api-")
    jars = [j for j in sorted(JARS44.glob("*.jar")) if j.name.startswith(wanted)]
    if not any(j.name.startswith("kafka-clients-4.4") for j in jars):
        missing(f"{JARS44} has no kafka-clients 4.4 jar (make -C tests/java kafka-44)")
    return ":".join(str(j) for j in jars)


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = REPO / ".cache" / "java-test-classes"
    if (built / "jockopy" / "txn" / "TxnClient.class").exists():
        return built
    if shutil.which("javac") is None:
        missing("no javac on PATH and TxnClient not built (make java-deps)")
    out = tmp_path_factory.mktemp("txn-classes")
    subprocess.run(["javac", "--release", "17", "-cp", _classpath(), "-d", str(out), str(SRC)],
                   check=True, timeout=120)
    return out


def _java(classes: Path, *args: str) -> str:
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-cp", f"{classes}:{_classpath()}", "jockopy.txn.TxnClient", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, f"TxnClient {args[0]} exited {proc.returncode}\n" \
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}"
    return proc.stdout


def _copy_and_check(bootstrap: str, taps: list[WireTap], classes: Path, rf: int) -> None:
    src, dst = f"j4in-{uuid.uuid4().hex[:6]}", f"j4out-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(src, 2, rf), NewTopic(dst, 2, rf)]).values():
        f.result(TIMEOUT)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(N):
        p.produce(src, value=b"%04d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    group, tid = f"j4g-{uuid.uuid4().hex[:6]}", f"j4tid-{uuid.uuid4().hex[:6]}"
    out = _java(classes, "copy", bootstrap, src, dst, group, tid, str(N))
    assert f"COMMITTED {N}" in out, out
    assert " ABORTED 0" not in out, out  # aborted transactions did happen

    # the wire: transaction version 2 throughout
    mine = [x for tap in taps for x in tap.exchanges
            if getattr(x.request, "transactional_id", None) == tid
            or getattr(x.request, "v3_and_below_transactional_id", None) == tid]
    assert not [x for x in mine if x.api_key in (ADD_PARTITIONS, ADD_OFFSETS)], \
        "a transaction version 2 client adds partitions through Produce and TxnOffsetCommit"
    produces = [x for x in mine if x.api_key == PRODUCE]
    assert produces and {x.version for x in produces} <= {12, 13}, \
        {x.version for x in produces}
    commits = [x for x in mine if x.api_key == TXN_OFFSET_COMMIT]
    assert commits and {x.version for x in commits} <= {5, 6}, {x.version for x in commits}
    ends = [x for x in mine if x.api_key == END_TXN]
    assert ends and {x.version for x in ends} == {5}, {x.version for x in ends}
    # (the tap decodes a response after forwarding it: wait for the last ones)
    deadline = time.monotonic() + 5
    while any(x.response is None for x in ends) and time.monotonic() < deadline:
        time.sleep(0.05)
    errors = [int(x.response.error_code) for x in ends]
    # a retriable answer is retried by the client with the same epoch
    assert set(errors) <= {E.NONE, E.CONCURRENT_TRANSACTIONS}, errors
    ends = [x for x in ends if x.response.error_code == E.NONE]
    epochs = [int(x.request.producer_epoch) for x in ends]
    pid = int(ends[0].request.producer_id)
    # a new epoch per transaction: each end is answered with the next epoch, which the
    # next transaction uses
    assert epochs == list(range(epochs[0], epochs[0] + len(ends))), epochs
    assert [(int(x.response.producer_id), int(x.response.producer_epoch)) for x in ends] == \
        [(pid, e + 1) for e in epochs]
    assert {int(x.request.producer_id) for x in ends} == {pid}
    aborted = [x for x in ends if not x.request.committed]
    assert aborted and len(aborted) < len(ends)

    # read_committed (4.4.0 too) sees exactly the committed records, once, in order
    got = [v for v in _java(classes, "read", bootstrap, dst, str(N)).split()
           if v.startswith("out-")]
    assert len(got) == N, f"{len(got)} records, {N - len(set(got))} duplicates"
    assert sorted(got) == sorted(f"out-{i:04d}" for i in range(N))
    for part in (0, 1):
        seq = [int(v[4:]) for v in got if int(v[4:]) % 2 == part]
        assert seq == sorted(seq)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offs = c.committed([TopicPartition(src, 0), TopicPartition(src, 1)], TIMEOUT)
        assert [o.offset for o in offs] == [N // 2, N // 2]
    finally:
        c.close()


@pytest.fixture(scope="module")
def tapped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, WireTap]]:
    port = free_port()
    tap = WireTap(("127.0.0.1", port), record=RECORDED).start()
    b = BrokerProcess(tmp_path_factory.mktemp("j44") / "data", port=port, overrides={
        **OVERRIDES, "advertised.listeners": f"PLAINTEXT://127.0.0.1:{tap.port}"})
    b.start()
    try:
        yield b, tap
    finally:
        b.stop()
        tap.close()


@pytest.fixture(scope="module")
def txn_broker(tapped: tuple[BrokerProcess, WireTap]) -> BrokerProcess:
    """This module's broker is the tapped one (conftest checks it stays alive)."""
    return tapped[0]


def test_java_44_transactions_use_kip890_part2_on_one_broker(
        tapped: tuple[BrokerProcess, WireTap], classes: Path) -> None:
    b, tap = tapped
    _copy_and_check(f"127.0.0.1:{tap.port}", [tap], classes, rf=1)


@contextmanager
def tapped_cluster(root: Path, overrides: dict[str, str]) -> Iterator[list[WireTap]]:
    """Three brokers (tests/support/cluster.py), each advertising its own tap (clients
    and the other brokers reach it through the tap); yields the taps."""
    ports = {i: free_port() for i in (1, 2, 3)}
    taps = {i: WireTap(("127.0.0.1", port), record=RECORDED).start()
            for i, port in ports.items()}
    try:
        with running_cluster(root, 3, overrides, ports=ports, per_broker=lambda i: {
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{taps[i].port}"}):
            yield list(taps.values())
    finally:
        for t in taps.values():
            t.close()


def test_java_44_transactions_use_kip890_part2_on_three_brokers(
        tmp_path: Path, classes: Path) -> None:
    with tapped_cluster(tmp_path / "cluster", {
            **OVERRIDES, "transaction.state.log.num.partitions": "3",
            "offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3"}) as taps:
        bootstrap = ",".join(f"127.0.0.1:{t.port}" for t in taps)
        _copy_and_check(bootstrap, taps, classes, rf=3)
