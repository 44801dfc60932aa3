"""`jocko-py transactions list|describe|abort` against a real broker process."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from jocko_py.cli import main
from jocko_py.client import Client
from jocko_py.protocol import records as rb
from tests.security.raw import Raw, cluster_secret
from tests.support.broker import BrokerProcess
from tests.transactions.conftest import OVERRIDES

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


def run(capsys: pytest.CaptureFixture[str], b: BrokerProcess, *args: str) -> tuple[int, str]:
    rc = main(["transactions", *args, "--bootstrap-server", b.bootstrap])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_transactions_cli(txn_broker: BrokerProcess, capsys: pytest.CaptureFixture[str]) -> None:
    b = txn_broker
    topic, tid = f"cli-{uuid.uuid4().hex[:6]}", f"cli-{uuid.uuid4().hex[:6]}"
    with Client(b.bootstrap) as c:
        c.create_topic(topic, 1, 1)
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(topic, b"open", partition=0)
        p.flush(20)

        rc, out = run(capsys, b, "list", "--state", "Ongoing")
        assert rc == 0 and any(line.split()[0] == tid and line.split()[-1] == "Ongoing"
                               for line in out.splitlines()), out
        rc, out = run(capsys, b, "describe", tid)
        row = out.splitlines()[1].split()
        assert rc == 0 and row[0] == tid and row[3] == "Ongoing" and row[-1] == f"{topic}-0"
        pid = row[1]
        rc, out = run(capsys, b, "describe", "no-such-id")
        assert rc == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in out

        # a hanging transaction (no transactional id, so nothing verified it), then abort
        r = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                              "producer_id": -1, "producer_epoch": -1})
        batch = rb.build_batch([rb.NewRecord(None, b"hang")], producer_id=r.producer_id,
                               producer_epoch=0, base_sequence=0, is_transactional=True)
        # refused to clients under an authorizer (as in Kafka): written as a broker
        peer = Raw(b.bootstrap).broker_login(0, cluster_secret(b.data_dir))
        peer.call(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                         "topic_data": [{"name": topic, "partition_data": [
                             {"index": 0, "records": batch}]}]})
        peer.close()
        rc, out = run(capsys, b, "abort", "--topic", topic, "--partition", "0",
                      "--start-offset", "5")
        assert rc == 1 and "no open transaction starts at offset 5" in out
        rc, out = run(capsys, b, "abort", "--topic", topic, "--partition", "0",
                      "--start-offset", "1")
        assert rc == 0 and f"producer {r.producer_id}" in out, out
        p.commit_transaction(20)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            rc, out = run(capsys, b, "list", "--producer-id", pid, "--state", "CompleteCommit")
            if tid in out:
                break
            time.sleep(0.1)
        assert tid in out
