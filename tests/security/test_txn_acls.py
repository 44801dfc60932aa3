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
    with broker.conn("writer") as c:  # the coordinator on the listener asked (SASL), as
        r = c.call(10, 4, {"key_type": 1, "coordinator_keys": ["good-a"]})  # for groups
        assert (r.coordinators[0].host, r.coordinators[0].port) == ("127.0.0.1",
                                                                   broker.sasl_port)


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


# ------------------------------------------------------------------ every client


def read_committed(broker: TxnAclBroker, prefix: str) -> list[str]:
    """The values starting with ``prefix`` a read_committed consumer (admin) sees."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.addr, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                  "sasl.password": USERS["admin"], "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        c.assign([TopicPartition(TOPIC, 0, 0)])
        out: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                if c.position([TopicPartition(TOPIC, 0)])[0].offset >= high:
                    break
                continue
            if m.error() is None:
                out.append(m.value().decode())
        return [v for v in out if v.startswith(prefix)]
    finally:
        c.close()


def sasl_conf(user: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user]}


def run_confluent(broker: TxnAclBroker, user: str, tid: str) -> str:
    from confluent_kafka import KafkaException, Producer

    p = Producer({"bootstrap.servers": broker.addr, "transactional.id": tid,
                  **sasl_conf(user)})
    try:
        p.init_transactions(20)
        p.begin_transaction()
        for i in range(3):
            p.produce(TOPIC, value=f"{tid}-{i}".encode(), partition=0)
        p.commit_transaction(20)
        return "COMMITTED"
    except KafkaException as e:
        return f"FAILED: {e.args[0].name()}: {e}"


def run_kafka_python(broker: TxnAclBroker, user: str, tid: str) -> str:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    p = None
    try:
        p = KafkaProducer(bootstrap_servers=broker.addr, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="PLAIN", sasl_plain_username=user,
                          sasl_plain_password=USERS[user], transactional_id=tid,
                          max_block_ms=15000, request_timeout_ms=10000)
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send(TOPIC, value=f"{tid}-{i}".encode(), partition=0)
        p.commit_transaction()
        return "COMMITTED"
    except KafkaError as e:
        return f"FAILED: {type(e).__name__}: {e}"
    finally:
        if p is not None:
            p.close(timeout=5)


def run_aiokafka(broker: TxnAclBroker, user: str, tid: str) -> str:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def go() -> str:
        p = AIOKafkaProducer(bootstrap_servers=broker.addr, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username=user,
                             sasl_plain_password=USERS[user], transactional_id=tid,
                             request_timeout_ms=10000)
        try:
            await asyncio.wait_for(p.start(), 20)
            async with p.transaction():
                for i in range(3):
                    await p.send_and_wait(TOPIC, f"{tid}-{i}".encode(), partition=0)
            return "COMMITTED"
        except KafkaError as e:
            return f"FAILED: {type(e).__name__}: {e}"
        finally:
            await p.stop()
    return asyncio.run(go())


JAVA_JARS = {"java-3.9": REPO / ".cache" / "java-test-jars",
             "java-4.x": REPO / ".cache" / "java-test-jars-4"}
JAVA_SRC = REPO / "tests" / "security" / "java" / "SecTxn.java"


@pytest.fixture(scope="module")
def sectxn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SecTxn.java compiled once (the jars of 3.9 and 4.x share its API)."""
    jars = JAVA_JARS["java-3.9"]
    require(shutil.which("javac") is not None and any(jars.glob("kafka-clients-*.jar")),
            f"javac or the kafka-clients jars in {jars} (make java-deps)")
    out = tmp_path_factory.mktemp("sectxn")
    subprocess.run(["javac", "--release", "17", "-cp", f"{jars}/*", "-d", str(out),
                    str(JAVA_SRC)], check=True, timeout=120)
    return out


def run_java(jars: Path) -> Any:
    def run(broker: TxnAclBroker, user: str, tid: str, classes: Path) -> str:
        require(shutil.which("java") is not None and any(jars.glob("kafka-clients-*.jar")),
                f"java or the kafka-clients jars in {jars} (make java-deps)")
        r = subprocess.run(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-cp", f"{classes}:{jars}/*", "SecTxn", broker.addr, TOPIC, tid,
             "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
             "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
             f'required username="{user}" password="{USERS[user]}";'],
            capture_output=True, text=True, timeout=100)
        return r.stdout.strip() if r.returncode == 0 else r.stderr.strip()[-3000:]
    return run


@pytest.fixture(scope="module")
def gosec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("go") is not None, "no go on PATH")
    out = tmp_path_factory.mktemp("gosec-txn") / "gosec"
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY=os.environ.get("GOPROXY", "off"))
    r = subprocess.run(["go", "build", "-o", str(out), "."],
                       cwd=REPO / "tests" / "security" / "go", env=env,
                       capture_output=True, text=True, timeout=200)
    if r.returncode != 0:
        pytest.fail(f"go build failed (run `make go-deps`):\n{r.stderr[-2000:]}")
    return out


def run_go(lib: str) -> Any:
    def run(broker: TxnAclBroker, user: str, tid: str, gosec: Path) -> str:
        r = subprocess.run([str(gosec), "-lib", lib, "-brokers", broker.addr, "-topic", TOPIC,
                            "-txnid", tid, "-user", user, "-password", USERS[user],
                            "-timeout", "40s"], capture_output=True, text=True, timeout=60)
        return r.stdout.strip() if r.returncode == 0 else r.stderr.strip()[-3000:]
    return run


# client -> (runner, what its failure says when the transactional id is not authorized)
CLIENTS: dict[str, tuple[Any, str]] = {
    "confluent-kafka": (run_confluent, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    "kafka-python": (run_kafka_python, "TransactionalIdAuthorizationFailedError"),
    "aiokafka": (run_aiokafka, "TransactionalIdAuthorizationFailed"),
    "java-3.9": (run_java(JAVA_JARS["java-3.9"]), "TransactionalIdAuthorizationException"),
    "java-4.x": (run_java(JAVA_JARS["java-4.x"]), "TransactionalIdAuthorizationException"),
    "franz-go": (run_go("franz"), "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    "sarama": (run_go("sarama"), "KERROR 53"),
}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_transactions_need_write_on_the_transactional_id(
        broker: TxnAclBroker, client: str, request: pytest.FixtureRequest) -> None:
    """With WRITE on the transactional id the client commits a transaction (read back
    read_committed); a user with WRITE on the topic but no ACL on the id, or the writer
    with an id outside its ACL, fails to initialize with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and nothing of it is visible."""
    runner, denied = CLIENTS[client]
    fixture = {"franz-go": "gosec", "sarama": "gosec", "java-3.9": "sectxn",
               "java-4.x": "sectxn"}.get(client)
    extra = [request.getfixturevalue(fixture)] if fixture else []
    tag = uuid.uuid4().hex[:6]
    good, bad, other = f"good-{client}-{tag}", f"good-{client}-{tag}-plain", f"other-{tag}"
    assert runner(broker, "writer", good, *extra) == "COMMITTED"
    assert read_committed(broker, good) == [f"{good}-{i}" for i in range(3)]
    for user, tid in (("plain", bad), ("writer", other)):
        out = runner(broker, user, tid, *extra)
        assert out != "COMMITTED" and denied in out, f"{user} as {tid}: {out}"
        assert read_committed(broker, tid) == []
