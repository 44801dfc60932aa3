"""Transactional-id ACLs (Kafka's rules), on one broker with SASL/PLAIN and the
StandardAuthorizer, over the wire and with every client that does transactions:
confluent-kafka (librdkafka), kafka-python, aiokafka, the Java client (3.9 and 4.x),
franz-go and Sarama.

- FindCoordinator for a transactional id needs DESCRIBE on it, InitProducerId with a
  transactional id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn and a
  transactional Produce need WRITE on it: TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise.
- InitProducerId without a transactional id (an idempotent producer) needs
  IDEMPOTENT_WRITE on the cluster or WRITE on any topic: CLUSTER_AUTHORIZATION_FAILED
  otherwise.

A user with WRITE on the transactional id (and on the topic) commits a transaction;
one without gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED when it initializes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.records import NewRecord, build_batch
from tests.security.raw import Raw
from tests.support.broker import REPO, BrokerProcess, free_port, wait_for_port
from tests.support.prereq import require

pytestmark = pytest.mark.timeout(120)
USERS = {"admin": "admin-pw", "writer": "writer-pw", "plain": "plain-pw",
         "describer": "describer-pw", "idem": "idem-pw", "nobody": "nobody-pw"}
TOPIC_T, GROUP_T, CLUSTER_T, TXN_T = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
ALLOW = 3
OPS = {"READ": 3, "WRITE": 4, "DESCRIBE": 8, "IDEMPOTENT_WRITE": 12}
TOPIC = "txn-acl"
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def acl(rtype: int, name: str, user: str, op: str, pattern: int = LITERAL) -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": f"User:{user}", "host": "*", "operation": OPS[op],
            "permission_type": ALLOW}


ACLS = [
    # writer: WRITE on the transactional ids "good-*" and on the topic
    acl(TXN_T, "good-", "writer", "WRITE", PREFIXED),
    # describer: only DESCRIBE on them
    acl(TXN_T, "good-", "describer", "DESCRIBE", PREFIXED),
    # idem: IDEMPOTENT_WRITE on the cluster, nothing on topics
    acl(CLUSTER_T, "kafka-cluster", "idem", "IDEMPOTENT_WRITE"),
] + [acl(TOPIC_T, TOPIC, u, op) for u in ("writer", "plain", "describer")
     for op in ("READ", "WRITE", "DESCRIBE")]


@dataclass
class TxnAclBroker:
    proc: BrokerProcess
    sasl_port: int

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def conn(self, user: str) -> Raw:
        return Raw(self.addr).login(user, USERS[user])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxnAclBroker]:
    work = tmp_path_factory.mktemp("txn-acl")
    users = work / "users.properties"
    users.write_text("".join(f"{u}={p}\n" for u, p in USERS.items()))
    plain, sasl = free_port(), free_port()
    proc = BrokerProcess(work / "data", port=plain, overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "jocko.sasl.plain.users.file": str(users),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "connection.failed.authentication.delay.ms": "0",
    })
    proc.start()
    try:
        wait_for_port("127.0.0.1", sasl, timeout=10)
        b = TxnAclBroker(proc, sasl)
        with b.conn("admin") as c:
            r = c.call(19, 7, {"topics": [{"name": TOPIC, "num_partitions": 1,
                                           "replication_factor": 1}], "timeout_ms": 10000})
            assert r.topics[0].error_code == 0
            r = c.call(30, 3, {"creations": ACLS})
            assert [x.error_code for x in r.results] == [0] * len(ACLS)
            # the transaction state topic exists before the first client asks
            r = c.call(10, 4, {"key_type": 1, "coordinator_keys": ["good-setup"]})
            assert r.coordinators[0].error_code == 0, r
        yield b
    finally:
        proc.stop()


# ------------------------------------------------------------------ over the wire


def find_txn_coordinator(c: Raw, tid: str) -> int:
    return int(c.call(10, 4, {"key_type": 1, "coordinator_keys": [tid]}
                      ).coordinators[0].error_code)


def init_pid(c: Raw, tid: str | None) -> Any:
    return c.call(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                          "producer_id": -1, "producer_epoch": -1})


def txn_produce(c: Raw, tid: str, pid: int, epoch: int) -> int:
    batch = build_batch([NewRecord(b"k", b"v", (), int(time.time() * 1000))],
                        producer_id=pid, producer_epoch=epoch, base_sequence=0,
                        is_transactional=True)
    r = c.call(0, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                      "topic_data": [{"name": TOPIC, "partition_data": [
                          {"index": 0, "records": batch}]}]})
    return int(r.responses[0].partition_responses[0].error_code)


def test_find_coordinator_needs_describe_on_the_transactional_id(broker: TxnAclBroker
                                                                 ) -> None:
    for user, tid, want in [("writer", "good-a", 0), ("describer", "good-a", 0),
                            ("plain", "good-a", TXN_DENIED), ("writer", "other-a", TXN_DENIED)]:
        with broker.conn(user) as c:
            assert find_txn_coordinator(c, tid) == want, (user, tid)
    with broker.conn("plain") as c:  # v0-3 carry the error the same way
        r = c.call(10, 3, {"key": "good-a", "key_type": 1})
        assert r.error_code == TXN_DENIED


def test_init_producer_id_needs_write_on_the_transactional_id(broker: TxnAclBroker) -> None:
    for user, tid, want in [("writer", "good-b", 0), ("describer", "good-b", TXN_DENIED),
                            ("plain", "good-b", TXN_DENIED), ("writer", "other-b", TXN_DENIED),
                            ("idem", "good-b", TXN_DENIED)]:
        with broker.conn(user) as c:
            assert init_pid(c, tid).error_code == want, (user, tid)


def test_idempotent_producer_needs_idempotent_write_or_a_topic_write(broker: TxnAclBroker
                                                                      ) -> None:
    for user, want in [("idem", 0), ("plain", 0), ("writer", 0),
                       ("nobody", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]:
        with broker.conn(user) as c:
            r = init_pid(c, None)
            assert r.error_code == want, user
            assert (r.producer_id >= 0) == (want == 0)


def test_transactional_requests_need_write_on_the_transactional_id(broker: TxnAclBroker
                                                                    ) -> None:
    """The writer begins a transaction; another user (WRITE on the topic, DESCRIBE on
    the id) sending the same id's AddPartitionsToTxn, Produce, AddOffsetsToTxn,
    TxnOffsetCommit and EndTxn gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED each time, and
    the writer's transaction commits."""
    tid = f"good-{uuid.uuid4().hex[:6]}"
    with broker.conn("writer") as w:
        r = init_pid(w, tid)
        assert r.error_code == 0
        pid, epoch = r.producer_id, r.producer_epoch
        add = {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
               "v3_and_below_producer_epoch": epoch,
               "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]}
        with broker.conn("describer") as d:
            r = d.call(24, 3, add)
            assert [p.partition_error_code for t in r.results_by_topic_v3_and_below
                    for p in t.results_by_partition] == [TXN_DENIED]
            assert txn_produce(d, tid, pid, epoch) == TXN_DENIED
            assert d.call(25, 3, {"transactional_id": tid, "producer_id": pid,
                                  "producer_epoch": epoch, "group_id": "g"}
                          ).error_code == TXN_DENIED
            r = d.call(28, 3, {"transactional_id": tid, "group_id": "g", "producer_id": pid,
                               "producer_epoch": epoch, "generation_id": -1,
                               "member_id": "", "group_instance_id": None,
                               "topics": [{"name": TOPIC, "partitions": [
                                   {"partition_index": 0, "committed_offset": 0,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": None}]}]})
            assert r.topics[0].partitions[0].error_code == TXN_DENIED
            assert d.call(26, 3, {"transactional_id": tid, "producer_id": pid,
                                  "producer_epoch": epoch, "committed": True}
                          ).error_code == TXN_DENIED
        r = w.call(24, 3, add)
        assert [p.partition_error_code for t in r.results_by_topic_v3_and_below
                for p in t.results_by_partition] == [0]
        assert txn_produce(w, tid, pid, epoch) == 0
        assert w.call(26, 3, {"transactional_id": tid, "producer_id": pid,
                              "producer_epoch": epoch, "committed": True}).error_code == 0
