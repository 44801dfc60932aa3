"""Apache Kafka's `kafka-transactions` tool (3.9.2, org.apache.kafka.tools.TransactionsCommand)
against a jocko-py broker: list, describe, describe-producers, find-hanging and abort.

A hanging transaction is made the way old clients could: a transactional batch
produced without a transactional id (so nothing verifies it and no coordinator knows
its producer). find-hanging must report that one and not the open transaction of a
real transactional producer; abort must close it (the LSO moves past it).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from tests.security.raw import Raw, cluster_secret
from tests.support.broker import REPO, BrokerProcess
from tests.support.prereq import requires
from tests.transactions.conftest import OVERRIDES

TOOLS = REPO / ".cache" / "kafka-tools-jars"
pytestmark = [
    pytest.mark.java,
    pytest.mark.timeout(240),
    requires((TOOLS / ".done").exists() and shutil.which("java") is not None,
             "Kafka's tools not fetched (make -C tests/java tools) or no java"),
]


# Aborting a hanging transaction writes WriteTxnMarkers, which only brokers, or a
# principal allowed CLUSTER_ACTION (Kafka's rule for its abort), may send: this module's
# broker has an authorizer whose super user is the tools' (PLAINTEXT) principal.
ADMIN_OVERRIDES = OVERRIDES | {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-admin") / "data", overrides=ADMIN_OVERRIDES)
    b.start()
    try:
        yield b
    finally:
        b.stop()


def tool(b: BrokerProcess, *args: str) -> list[list[str]]:
    r = subprocess.run(["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{TOOLS}/*",
                        "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                        b.bootstrap, *args], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, f"{args}: {r.stdout}\n{r.stderr[-3000:]}"
    return [line.split() for line in r.stdout.splitlines()[1:] if line.strip()]


def _lso(c: Client, topic: str) -> int:
    r = c.request(2, 7, {"replica_id": -1, "isolation_level": 1, "topics": [{
        "name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return int(r.topics[0].partitions[0].offset)


def test_kafka_transactions_tool(txn_broker: BrokerProcess) -> None:
    b = txn_broker
    topic, tid = f"tool-{uuid.uuid4().hex[:6]}", f"tool-{uuid.uuid4().hex[:6]}"
    with Client(b.bootstrap) as c:
        c.create_topic(topic, 1, 1)
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(topic, b"open", partition=0)
        p.flush(20)                                                        # offset 0
        r = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                              "producer_id": -1, "producer_epoch": -1})
        hanging = r.producer_id
        batch = rb.build_batch([rb.NewRecord(None, b"hang")], producer_id=hanging,
                               producer_epoch=0, base_sequence=0, is_transactional=True)
        # a transactional batch with no transactional id (what an old client's hanging
        # transaction looks like): refused to clients under an authorizer, as in Kafka,
        # so written here over a broker's connection, which is not authorized again
        peer = Raw(b.bootstrap).broker_login(0, cluster_secret(b.data_dir))
        r = peer.call(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                             "topic_data": [{"name": topic, "partition_data": [
                                 {"index": 0, "records": batch}]}]})
        peer.close()
        assert r.responses[0].partition_responses[0].base_offset == 1     # offset 1

        listed = {row[0]: row for row in tool(b, "list")}
        assert listed[tid][3] == "Ongoing"
        desc = tool(b, "describe", "--transactional-id", tid)
        assert desc[0][1] == tid and desc[0][4] == "Ongoing" and desc[0][-1] == f"{topic}-0"
        producers = {int(row[0]): row for row in tool(
            b, "describe-producers", "--topic", topic, "--partition", "0")}
        assert producers[hanging][-1] == "1"                               # its start offset
        found = tool(b, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")
        assert [(row[0], int(row[2]), row[5]) for row in found] == [(topic, hanging, "1")]

        tool(b, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1")
        producers = {int(row[0]): row for row in tool(
            b, "describe-producers", "--topic", topic, "--partition", "0")}
        assert producers[hanging][-1] == "None"
        p.commit_transaction(20)
        deadline = time.monotonic() + 10
        while _lso(c, topic) != 4 and time.monotonic() < deadline:                 # 2 markers
            time.sleep(0.05)
        assert _lso(c, topic) == 4
        assert {row[0]: row for row in tool(b, "list")}[tid][3] == "CompleteCommit"
