"""Share group ACLs (KIP-932, Kafka's rules) on one broker with SASL/PLAIN and the
StandardAuthorizer, over the wire:

- ShareGroupHeartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on
  every subscribed topic (TOPIC_AUTHORIZATION_FAILED);
- ShareGroupDescribe needs DESCRIBE on the group, and DESCRIBE on the topics its members
  use (else TOPIC_AUTHORIZATION_FAILED for the group);
- group configs need DESCRIBE_CONFIGS / ALTER_CONFIGS on the group.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from jocko_py.protocol.errors import ErrorCode
from tests.security.raw import Raw
from tests.support.broker import BrokerProcess, free_port, wait_for_port

pytestmark = pytest.mark.timeout(120)
USERS = {"admin": "admin-pw", "app": "app-pw", "reader": "reader-pw", "peer": "peer-pw"}
TOPIC_T, GROUP_T = 2, 3
LITERAL = 3
OPS = {"READ": 3, "DESCRIBE": 8, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11}


def acl(rtype: int, name: str, user: str, op: str) -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": LITERAL,
            "principal": f"User:{user}", "host": "*", "operation": OPS[op],
            "permission_type": 3}


ACLS = [
    acl(GROUP_T, "q", "app", "READ"),  # READ implies DESCRIBE on the group
    acl(TOPIC_T, "work", "app", "DESCRIBE"),
    acl(GROUP_T, "q", "reader", "READ"),  # reader: the group, not the topic
    acl(GROUP_T, "q", "peer", "DESCRIBE_CONFIGS"),
]


@dataclass
class AclBroker:
    proc: BrokerProcess
    sasl_port: int

    def conn(self, user: str) -> Raw:
        return Raw(f"127.0.0.1:{self.sasl_port}").login(user, USERS[user])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    work = tmp_path_factory.mktemp("share-acl")
    users = work / "users.properties"
    users.write_text("".join(f"{u}={p}\n" for u, p in USERS.items()))
    sasl = free_port()
    proc = BrokerProcess(work / "data", overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "jocko.sasl.plain.users.file": str(users),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "offsets.topic.num.partitions": "1",
        "connection.failed.authentication.delay.ms": "0",
    })
    proc.start()
    try:
        wait_for_port("127.0.0.1", sasl, timeout=10)
        b = AclBroker(proc, sasl)
        with b.conn("admin") as c:
            r = c.call(19, 7, {"topics": [{"name": "work", "num_partitions": 1,
                                           "replication_factor": 1}], "timeout_ms": 10000})
            assert r.topics[0].error_code == 0
            r = c.call(30, 3, {"creations": ACLS})
            assert [x.error_code for x in r.results] == [0] * len(ACLS)
            r = c.call(10, 4, {"key_type": 0, "coordinator_keys": ["q"]})
            assert r.coordinators[0].error_code == 0, r
        yield b
    finally:
        proc.stop()


def join(c: Raw, member: str) -> Any:
    return c.call(76, 1, {"group_id": "q", "member_id": member, "member_epoch": 0,
                          "rack_id": None, "subscribed_topic_names": ["work"]})


def describe(c: Raw) -> Any:
    return c.call(77, 1, {"group_ids": ["q"], "include_authorized_operations": False}).groups[0]


def test_heartbeat_and_describe_acls(broker: AclBroker) -> None:
    with broker.conn("peer") as c:
        assert join(c, "m0").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert describe(c).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    with broker.conn("reader") as c:
        r = join(c, "m0")
        assert r.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert "work" in (r.error_message or "")
    with broker.conn("app") as c:
        r = join(c, "m1")
        assert r.error_code == 0 and r.member_epoch == 1
        d = describe(c)
        assert d.error_code == 0 and [m.member_id for m in d.members] == ["m1"]
    with broker.conn("reader") as c:  # may describe the group, not its topic
        assert describe(c).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_group_config_acls(broker: AclBroker) -> None:
    def configs(c: Raw) -> Any:
        return c.call(32, 4, {"resources": [{"resource_type": 32, "resource_name": "q",
                                             "configuration_keys": None}],
                              "include_synonyms": False,
                              "include_documentation": False}).results[0]

    def alter(c: Raw) -> Any:
        return c.call(44, 1, {"resources": [{
            "resource_type": 32, "resource_name": "q", "configs": [{
                "name": "share.record.lock.duration.ms", "config_operation": 0,
                "value": "20000"}]}], "validate_only": False}).responses[0]

    with broker.conn("app") as c:
        assert configs(c).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert alter(c).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    with broker.conn("peer") as c:
        assert configs(c).error_code == 0
        assert alter(c).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    with broker.conn("admin") as c:
        assert alter(c).error_code == 0
