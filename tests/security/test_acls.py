"""ACLs end to end: a broker with Kafka's StandardAuthorizer setting; ACLs created
over the wire (raw CreateAcls and confluent-kafka's admin client); for each API and
resource type, an allowed principal (alice) and one without ACLs (bob) get the
right answer and Kafka's error code; Metadata hides topics a principal may not
describe; a real consumer without READ sees TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.records import NewRecord, build_batch
from tests.security.certs import TestPki
from tests.security.raw import Raw
from tests.support.broker import REPO, BrokerProcess, free_port, wait_for_port

pytestmark = pytest.mark.timeout(60)
USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
ALLOW, DENY = 3, 2
OPS = {"ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
       "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11}
T29, G30, C31 = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                 ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


@dataclass
class AclBroker:
    proc: BrokerProcess
    plain_port: int
    sasl_port: int
    mtls_port: int
    pki: TestPki

    def conn(self, user: str | None) -> Raw:
        """Authenticated as ``user`` on SASL_PLAINTEXT (None: PLAINTEXT, ANONYMOUS)."""
        if user is None:
            return Raw(f"127.0.0.1:{self.plain_port}")
        return Raw(f"127.0.0.1:{self.sasl_port}").login(user, USERS[user])


def acl(rtype: int, name: str, principal: str, op: str, perm: int = ALLOW,
        pattern: int = LITERAL) -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": "*", "operation": OPS[op], "permission_type": perm}


ALICE_ACLS = [
    acl(TOPIC, "orders", "User:alice", "READ"),
    acl(TOPIC, "orders", "User:alice", "WRITE"),
    acl(GROUP, "g1", "User:alice", "READ"),
    acl(TOPIC, "alice-", "User:alice", "ALL", pattern=PREFIXED),
    acl(TOPIC, "alice-denied", "User:alice", "CREATE", DENY),
]


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory, pki: TestPki) -> Iterator[AclBroker]:
    work = tmp_path_factory.mktemp("acl")
    users = work / "users.properties"
    users.write_text("".join(f"{u}={p}\n" for u, p in USERS.items()))
    plain, sasl, mtls = free_port(), free_port(), free_port()
    proc = BrokerProcess(work / "data", port=plain, overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl},SSL://127.0.0.1:{mtls}",
        "ssl.keystore.location": str(pki.broker.both),
        "ssl.truststore.location": str(pki.ca.cert),
        "ssl.client.auth": "required",
        # the certificate's CN is the principal: CN=client,... -> User:client
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/",
        "sasl.enabled.mechanisms": "PLAIN",
        "jocko.sasl.plain.users.file": str(users),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
        "connection.failed.authentication.delay.ms": "0",
    })
    proc.start()
    try:
        wait_for_port("127.0.0.1", sasl, timeout=10)
        b = AclBroker(proc, plain, sasl, mtls, pki)
        with b.conn("admin") as c:
            r = c.call(19, 7, {"topics": [
                {"name": n, "num_partitions": 1, "replication_factor": 1}
                for n in ("orders", "secret")], "timeout_ms": 10000})
            assert [t.error_code for t in r.topics] == [0, 0]
            r = c.call(30, 3, {"creations": ALICE_ACLS + [
                acl(TOPIC, "secret", "User:client", "READ")]})
            assert [x.error_code for x in r.results] == [0] * (len(ALICE_ACLS) + 1)
            for t in ("orders", "secret"):
                assert produce(c, t) == 0
        yield b
    finally:
        proc.stop()


def produce(c: Raw, topic: str) -> int:
    batch = build_batch([NewRecord(b"k", b"v", (), int(time.time() * 1000))])
    r = c.call(0, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return int(r.responses[0].partition_responses[0].error_code)


# (name, call(conn) -> error code, alice's code, bob's code)
Case = tuple[str, Callable[[Raw], int], int, int]

CASES: list[Case] = [
    ("produce orders", lambda c: produce(c, "orders"), 0, T29),
    ("produce secret", lambda c: produce(c, "secret"), T29, T29),
    ("fetch orders", lambda c: c.call(1, 12, {"max_wait_ms": 0, "topics": [
        {"topic": "orders", "partitions": [{"partition": 0, "fetch_offset": 0,
                                            "partition_max_bytes": 1 << 20}]}]}
    ).responses[0].partitions[0].error_code, 0, T29),
    ("list offsets orders", lambda c: c.call(2, 7, {"replica_id": -1, "topics": [
        {"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
    ).topics[0].partitions[0].error_code, 0, T29),
    ("metadata secret", lambda c: c.call(3, 12, {"topics": [{"name": "secret"}]}
                                         ).topics[0].error_code, T29, T29),
    ("metadata orders", lambda c: c.call(3, 12, {"topics": [{"name": "orders"}]}
                                         ).topics[0].error_code, 0, T29),
    ("create topic", lambda c: c.call(19, 7, {"topics": [
        {"name": f"other-{uuid.uuid4().hex[:6]}", "num_partitions": 1,
         "replication_factor": 1}], "timeout_ms": 5000}).topics[0].error_code, T29, T29),
    ("create prefixed topic", lambda c: c.call(19, 7, {"topics": [
        {"name": f"alice-{uuid.uuid4().hex[:6]}", "num_partitions": 1,
         "replication_factor": 1}], "timeout_ms": 5000}).topics[0].error_code, 0, T29),
    ("create denied topic", lambda c: c.call(19, 7, {"topics": [
        {"name": "alice-denied", "num_partitions": 1, "replication_factor": 1}],
        "timeout_ms": 5000}).topics[0].error_code, T29, T29),
    ("delete topic", lambda c: c.call(20, 6, {"topics": [{"name": "orders"}],
                                              "timeout_ms": 5000}).responses[0].error_code,
     T29, T29),
    ("create partitions", lambda c: c.call(37, 3, {"topics": [
        {"name": "orders", "count": 2, "assignments": None}], "timeout_ms": 5000}
    ).results[0].error_code, T29, T29),
    ("delete records", lambda c: c.call(21, 2, {"topics": [
        {"name": "orders", "partitions": [{"partition_index": 0, "offset": 0}]}],
        "timeout_ms": 5000}).topics[0].partitions[0].error_code, T29, T29),
    ("describe topic configs", lambda c: c.call(32, 4, {"resources": [
        {"resource_type": 2, "resource_name": "orders", "configuration_keys": None}]}
    ).results[0].error_code, T29, T29),
    ("describe broker configs", lambda c: c.call(32, 4, {"resources": [
        {"resource_type": 4, "resource_name": "0", "configuration_keys": None}]}
    ).results[0].error_code, C31, C31),
    ("alter topic configs", lambda c: c.call(44, 1, {"resources": [
        {"resource_type": 2, "resource_name": "orders", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000000"}]}]}
    ).responses[0].error_code, T29, T29),
    ("find coordinator g1", lambda c: c.call(10, 4, {"key_type": 0, "coordinator_keys": ["g1"]}
                                             ).coordinators[0].error_code, 0, G30),
    ("offset commit g1", lambda c: c.call(8, 8, {
        "group_id": "g1", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}
    ).topics[0].partitions[0].error_code, 0, G30),
    ("offset commit secret", lambda c: c.call(8, 8, {
        "group_id": "g1", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": "secret", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}
    ).topics[0].partitions[0].error_code, T29, G30),
    ("offset fetch g1", lambda c: c.call(9, 8, {"groups": [
        {"group_id": "g1", "topics": None}]}).groups[0].error_code, 0, G30),
    ("describe group g1", lambda c: c.call(15, 5, {"groups": ["g1"]}).groups[0].error_code,
     0, G30),
    ("delete group g1", lambda c: c.call(42, 2, {"groups_names": ["g1"]}
                                         ).results[0].error_code, G30, G30),
    ("join group g1", lambda c: c.call(11, 9, {
        "group_id": "g1", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
        "member_id": "", "protocol_type": "consumer", "protocols": [
            {"name": "range", "metadata": b""}]}).error_code,
     ErrorCode.MEMBER_ID_REQUIRED, G30),
    ("init producer id", lambda c: c.call(22, 4, {"transactional_id": None,
                                                  "transaction_timeout_ms": 1000,
                                                  "producer_id": -1, "producer_epoch": -1}
                                          ).error_code, 0, C31),
    ("create acls", lambda c: c.call(30, 3, {"creations": [
        acl(TOPIC, "x", "User:bob", "READ")]}).results[0].error_code, C31, C31),
    ("describe acls", lambda c: c.call(29, 3, {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    ).error_code, C31, C31),
    ("delete acls", lambda c: c.call(31, 3, {"filters": [{
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]}
    ).filter_results[0].error_code, C31, C31),
    ("alter scram", lambda c: c.call(51, 0, {"deletions": [{"name": "x", "mechanism": 1}]}
                                     ).results[0].error_code, C31, C31),
    ("describe scram", lambda c: c.call(50, 0, {"users": None}).error_code, C31, C31),
    ("elect leaders", lambda c: c.call(43, 2, {"election_type": 0, "topic_partitions": None,
                                               "timeout_ms": 1000}).error_code, C31, C31),
    ("describe quorum", lambda c: c.call(55, 1, {"topics": [
        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    ).error_code, C31, C31),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_acl_matrix(acl_broker: AclBroker, case: Case) -> None:
    name, call, alice, bob = case
    with acl_broker.conn("alice") as c:
        assert call(c) == alice, f"alice: {name}"
    with acl_broker.conn("bob") as c:
        assert call(c) == bob, f"bob: {name}"


def test_metadata_hides_undescribable_topics(acl_broker: AclBroker) -> None:
    def names(user: str | None) -> set[str]:
        with acl_broker.conn(user) as c:
            return {t.name for t in c.call(3, 12, {"topics": None}).topics}
    assert {"orders", "secret"} <= names("admin")
    assert "orders" in names("alice") and "secret" not in names("alice")
    assert not {"orders", "secret"} & names("bob")


def test_authorized_operations_when_asked(acl_broker: AclBroker) -> None:
    with acl_broker.conn("alice") as c:
        md = c.call(3, 12, {"topics": [{"name": "orders"}],
                            "include_topic_authorized_operations": True})
        ops = md.topics[0].topic_authorized_operations
        assert ops == (1 << OPS["READ"]) | (1 << OPS["WRITE"]) | (1 << OPS["DESCRIBE"])
        dc = c.call(60, 0, {"include_cluster_authorized_operations": True})
        assert dc.cluster_authorized_operations == 0


def test_admin_manages_acls_with_filters(acl_broker: AclBroker) -> None:
    flt = {"resource_type_filter": TOPIC, "resource_name_filter": "orders",
           "pattern_type_filter": 2, "principal_filter": "User:alice", "host_filter": None,
           "operation": 1, "permission_type": 1}  # MATCH: what applies to "orders"
    with acl_broker.conn("admin") as c:
        r = c.call(29, 3, flt)
        assert r.error_code == 0
        found = {(x.resource_name, x.pattern_type, a.operation) for x in r.resources
                 for a in x.acls}
        assert found == {("orders", LITERAL, OPS["READ"]), ("orders", LITERAL, OPS["WRITE"])}
        bad = c.call(30, 3, {"creations": [
            acl(TOPIC, "", "User:x", "READ"), acl(CLUSTER, "other", "User:x", "ALTER"),
            dict(acl(TOPIC, "t", "User:x", "READ"), principal="nocolon"),
            dict(acl(TOPIC, "t", "User:x", "READ"), resource_pattern_type=1)]})
        assert [x.error_code for x in bad.results] == [ErrorCode.INVALID_REQUEST] * 4
        # a temporary ACL for bob, then deleted by filter
        assert c.call(30, 3, {"creations": [acl(TOPIC, "secret", "User:bob", "READ")]}
                      ).results[0].error_code == 0
    with acl_broker.conn("bob") as c:
        assert c.call(3, 12, {"topics": [{"name": "secret"}]}).topics[0].error_code == 0
    with acl_broker.conn("admin") as c:
        d = c.call(31, 3, {"filters": [dict(flt, resource_name_filter="secret",
                                            pattern_type_filter=LITERAL,
                                            principal_filter="User:bob")]})
        assert [(m.principal, m.operation) for m in d.filter_results[0].matching_acls] == [
            ("User:bob", OPS["READ"])]
    with acl_broker.conn("bob") as c:
        assert c.call(3, 12, {"topics": [{"name": "secret"}]}).topics[0].error_code == T29


def test_confluent_clients_with_acls(acl_broker: AclBroker) -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    def conf(user: str) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{acl_broker.sasl_port}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": USERS[user],
                "message.timeout.ms": 5000}

    from confluent_kafka.admin import NewTopic

    admin = AdminClient(conf("admin"))
    for f in admin.create_topics([NewTopic("confluent-t", 1, 1)]).values():
        f.result(timeout=10)
    binding = AclBinding(ResourceType.TOPIC, "confluent-t", ResourcePatternType.LITERAL,
                         "User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in admin.create_acls([binding], request_timeout=10).values():
        assert f.result(timeout=10) is None
    flt = AclBindingFilter(ResourceType.TOPIC, "confluent-t", ResourcePatternType.LITERAL,
                           None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(flt, request_timeout=10).result(timeout=10) == [binding]
    delivered: list[Any] = []
    p = Producer(conf("bob"))
    p.produce("confluent-t", b"x", on_delivery=lambda e, m: delivered.append(e))
    p.produce("orders", b"x", on_delivery=lambda e, m: delivered.append(e))
    p.flush(15)
    codes = sorted(str(e.code()) if e else "ok" for e in delivered)
    assert codes == sorted(["ok", str(KafkaError.TOPIC_AUTHORIZATION_FAILED)]), delivered
    deleted = admin.delete_acls([flt], request_timeout=10)[flt].result(timeout=10)
    assert deleted == [binding]


def test_cli_acl_commands(acl_broker: AclBroker, tmp_path: Path) -> None:
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.username=admin\nsasl.password=admin-pw\n")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jocko_py.cli", "acl", *args, "--bootstrap-server",
             f"127.0.0.1:{acl_broker.sasl_port}", "--command-config", str(props)],
            capture_output=True, text=True, timeout=60, cwd=REPO)

    r = cli("add", "--principal", "User:dave", "--operation", "read", "--operation",
            "describe", "--topic", "dave-", "--resource-pattern-type", "prefixed")
    assert r.returncode == 0 and "Added 2 ACL(s)" in r.stdout, r.stderr
    r = cli("list", "--principal", "User:dave")
    assert r.stdout.splitlines() == [
        "ALLOW User:dave            READ             TOPIC:dave- (PREFIXED) host=*",
        "ALLOW User:dave            DESCRIBE         TOPIC:dave- (PREFIXED) host=*"], r.stdout
    r = cli("remove", "--principal", "User:dave", "--operation", "read", "--topic", "dave-",
            "--resource-pattern-type", "prefixed")
    assert r.returncode == 0 and r.stdout.count("Removed") == 1, r.stdout + r.stderr
    assert len(cli("list", "--principal", "User:dave").stdout.splitlines()) == 1
    r = cli("add", "--principal", "User:dave", "--operation", "fly", "--topic", "x")
    assert r.returncode == 1 and "unknown operation" in r.stderr and "Traceback" not in r.stderr


def test_tls_certificate_principal_is_authorized(acl_broker: AclBroker) -> None:
    pki = acl_broker.pki
    with Raw(f"127.0.0.1:{acl_broker.mtls_port}", ca=str(pki.ca.cert),
             cert=(str(pki.client.cert), str(pki.client.key))) as c:
        md = c.call(3, 12, {"topics": None})
        assert {t.name for t in md.topics} == {"secret"}  # User:client may read only it
        assert produce(c, "secret") == T29
        r = c.call(1, 12, {"max_wait_ms": 0, "topics": [{"topic": "secret", "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
        assert r.responses[0].partitions[0].error_code == 0
        assert len(r.responses[0].partitions[0].records) > 0


def test_cluster_action_principal_is_served_the_broker_only_apis(acl_broker: AclBroker) -> None:
    """Kafka's rule: with an authorizer, a principal allowed CLUSTER_ACTION (here a super
    user) is served the controller APIs; any other principal is not even told of them,
    and a WriteTxnMarkers from it is refused."""
    with acl_broker.conn("admin") as c:
        keys = {k.api_key for k in c.call(18, 3, {"client_software_name": "t",
                                                  "client_software_version": "1"}).api_keys}
        assert {56, 63, 67} <= keys
        r = c.call(67, 0, {"broker_id": 0, "broker_epoch": 987654})
        assert r.error_code == ErrorCode.STALE_BROKER_EPOCH
    with acl_broker.conn("alice") as c:
        keys = {k.api_key for k in c.call(18, 3, {"client_software_name": "t",
                                                  "client_software_version": "1"}).api_keys}
        assert not keys & {56, 63, 67}
        r = c.call(27, 1, {"markers": [{
            "producer_id": 1, "producer_epoch": 0, "transaction_result": True,
            "topics": [{"name": "orders", "partition_indexes": [0]}], "coordinator_epoch": 0}]})
        assert r.markers[0].topics[0].partitions[0].error_code == \
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert c.call(67, 0, {"broker_id": 0, "broker_epoch": 0}) is None  # closed
