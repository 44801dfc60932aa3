"""Streams group ACLs (KIP-1071, Kafka's rules) on one broker with SASL/PLAIN and the
StandardAuthorizer, over the wire:

- StreamsGroupHeartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE
  on every topic of a joining member's topology (TOPIC_AUTHORIZATION_FAILED);
- the broker creates a missing internal topic only for a principal with CREATE on the
  cluster or on that topic; otherwise the MISSING_INTERNAL_TOPICS status says "Unauthorized
  to CREATE on topics ..." and the topic is not created;
- StreamsGroupDescribe needs DESCRIBE on the group.
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
USERS = {"admin": "admin-pw", "app": "app-pw", "creator": "creator-pw",
         "reader": "reader-pw"}
TOPIC_T, GROUP_T, CLUSTER_T = 2, 3, 4
LITERAL, PREFIXED = 3, 4
OPS = {"READ": 3, "WRITE": 4, "CREATE": 5, "DESCRIBE": 8}


def acl(rtype: int, name: str, user: str, op: str, pattern: int = LITERAL) -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": f"User:{user}", "host": "*", "operation": OPS[op],
            "permission_type": 3}


ACLS = [
    # app and creator: READ on their groups, DESCRIBE on the topics of the topology
    acl(GROUP_T, "app", "app", "READ"),
    acl(GROUP_T, "crt", "creator", "READ"),
    acl(TOPIC_T, "in", "app", "DESCRIBE"),
    acl(TOPIC_T, "in", "creator", "DESCRIBE"),
    acl(TOPIC_T, "app-", "app", "DESCRIBE", PREFIXED),
    acl(TOPIC_T, "crt-", "creator", "DESCRIBE", PREFIXED),
    # only creator may create its internal topics
    acl(TOPIC_T, "crt-", "creator", "CREATE", PREFIXED),
    # reader: READ on the group "app", nothing on topics
    acl(GROUP_T, "app", "reader", "READ"),
]


def topology(prefix: str) -> dict[str, Any]:
    return {"epoch": 0, "subtopologies": [{
        "subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [],
        "state_changelog_topics": [{"name": f"{prefix}-store-changelog", "partitions": 0,
                                    "replication_factor": 0, "topic_configs": []}],
        "repartition_sink_topics": [], "repartition_source_topics": [],
        "copartition_groups": []}]}


@dataclass
class AclBroker:
    proc: BrokerProcess
    sasl_port: int

    def conn(self, user: str) -> Raw:
        return Raw(f"127.0.0.1:{self.sasl_port}").login(user, USERS[user])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    work = tmp_path_factory.mktemp("streams-acl")
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
        "group.streams.initial.rebalance.delay.ms": "0",
        "connection.failed.authentication.delay.ms": "0",
    })
    proc.start()
    try:
        wait_for_port("127.0.0.1", sasl, timeout=10)
        b = AclBroker(proc, sasl)
        with b.conn("admin") as c:
            r = c.call(19, 7, {"topics": [{"name": "in", "num_partitions": 2,
                                           "replication_factor": 1}], "timeout_ms": 10000})
            assert r.topics[0].error_code == 0
            r = c.call(30, 3, {"creations": ACLS})
            assert [x.error_code for x in r.results] == [0] * len(ACLS)
            r = c.call(10, 4, {"key_type": 0, "coordinator_keys": ["app"]})
            assert r.coordinators[0].error_code == 0, r
        yield b
    finally:
        proc.stop()


def join(c: Raw, group: str, member: str, prefix: str) -> Any:
    return c.call(88, 1, {"group_id": group, "member_id": member, "member_epoch": 0,
                          "endpoint_information_epoch": 0, "rebalance_timeout_ms": 30000,
                          "topology": topology(prefix), "process_id": member,
                          "active_tasks": [], "standby_tasks": [], "warmup_tasks": []})


def topic_exists(b: AclBroker, name: str) -> bool:
    with b.conn("admin") as c:
        md = c.call(3, 12, {"topics": [{"name": name, "topic_id": None}],
                            "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False})
        return bool(md.topics[0].error_code == 0)


def test_heartbeat_needs_group_read_and_topic_describe(broker: AclBroker) -> None:
    with broker.conn("creator") as c:
        assert join(c, "app", "m", "app").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    with broker.conn("reader") as c:
        r = join(c, "app", "m", "app")
        assert r.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert "in" in (r.error_message or "")


def test_internal_topics_created_only_with_create(broker: AclBroker) -> None:
    with broker.conn("app") as c:
        r = join(c, "app", "m1", "app")
        assert r.error_code == 0
        detail = {s.status_code: s.status_detail for s in r.status}[3]
        assert detail == ("Internal topics are missing: [app-store-changelog]; Unauthorized "
                          "to CREATE on topics app-store-changelog.")
    assert not topic_exists(broker, "app-store-changelog")
    with broker.conn("creator") as c:
        r = join(c, "crt", "m2", "crt")
        assert r.error_code == 0
        assert {s.status_code: s.status_detail for s in r.status}[3] == (
            "Internal topics are missing: [crt-store-changelog]")
    assert topic_exists(broker, "crt-store-changelog")


def test_describe_needs_group_describe(broker: AclBroker) -> None:
    body = {"group_ids": ["app"], "include_authorized_operations": False}
    with broker.conn("creator") as c:
        g = c.call(89, 0, body).groups[0]
        assert g.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    with broker.conn("app") as c:
        g = c.call(89, 0, body).groups[0]
        assert g.error_code == 0 and [m.member_id for m in g.members] == ["m1"]
