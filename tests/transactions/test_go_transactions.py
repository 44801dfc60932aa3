"""franz-go's GroupTransactSession (tests/transactions/gotxn) against a real broker.

300 records copied from a two-partition input topic to an output topic in
transactions that commit the group's offsets, every third one aborted on purpose (and
its records copied again); the output, read back by a confluent-kafka read_committed
consumer, must be exactly the input once each, in input order per partition, and
the group's committed offsets the input's end. The program is built with
`go build` (offline module cache, as tests/clients/go) into a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import REPO, BrokerProcess
from tests.support.prereq import requires
from tests.transactions.test_confluent_transactions import _read_all

pytestmark = [
    pytest.mark.clients,
    requires(shutil.which("go") is not None, "no go on PATH"),
    pytest.mark.timeout(300),
]

MODULE = REPO / "tests" / "transactions" / "gotxn"
N = 300
TIMEOUT = 20.0


@pytest.fixture(scope="module")
def gotxn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gotxn") / "gotxn"
    env = dict(os.environ, GOFLAGS="-mod=mod -buildvcs=false")
    proc = subprocess.run(["go", "build", "-o", str(out), "."], cwd=MODULE, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        pytest.fail(f"go build in {MODULE} failed:\n{proc.stdout}\n{proc.stderr}")
    return out


def test_franz_go_group_transact_session(txn_broker: BrokerProcess, gotxn: Path) -> None:
    b = txn_broker
    src, dst = f"gin-{uuid.uuid4().hex[:6]}", f"gout-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(src, 2, 1), NewTopic(dst, 2, 1)]).values():
        f.result(TIMEOUT)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
    for i in range(N):
        p.produce(src, value=b"%04d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    group = f"gg-{uuid.uuid4().hex[:6]}"
    proc = subprocess.run([str(gotxn), "-brokers", b.bootstrap, "-in", src, "-out", dst,
                           "-group", group, "-txnid", f"gtid-{uuid.uuid4().hex[:6]}",
                           "-n", str(N)], capture_output=True, text=True, timeout=150,
                          check=False)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-5000:]}"
    assert f"COMMITTED {N}" in proc.stdout, proc.stdout
    assert " ABORTED 0" not in proc.stdout, proc.stdout
    got = _read_all(b, dst, 2, "read_committed", N)
    values = [v.decode() for _, v in got]
    assert len(values) == N, f"{len(values)} records, {N - len(set(values))} duplicates"
    assert sorted(values) == sorted(f"out-{i:04d}" for i in range(N))
    for part in (0, 1):
        seq = [int(v[4:]) for pp, v in ((pp, v.decode()) for pp, v in got) if pp == part]
        assert seq == sorted(seq) and all(i % 2 == part for i in seq)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        offs = c.committed([TopicPartition(src, 0), TopicPartition(src, 1)], TIMEOUT)
        assert [o.offset for o in offs] == [N // 2, N // 2]
    finally:
        c.close()
