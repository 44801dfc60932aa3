"""ShareFetch / ShareAcknowledge ACLs (KIP-932, Kafka's rules) on one broker with
SASL/PLAIN and the StandardAuthorizer, over the wire: READ on the group, else
GROUP_AUTHORIZATION_FAILED for the whole request; READ on each topic, else
TOPIC_AUTHORIZATION_FAILED for its partitions (the others are served)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from jocko_py.protocol.errors import ErrorCode
from tests.security.raw import Raw
from tests.support.broker import BrokerProcess, free_port, wait_for_port

pytestmark = pytest.mark.timeout(120)
USERS = {"admin": "admin-pw", "app": "app-pw", "nogroup": "nogroup-pw",
         "notopic": "notopic-pw"}
TOPIC_T, GROUP_T = 2, 3
READ = 3


def acl(rtype: int, name: str, user: str) -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": 3,
            "principal": f"User:{user}", "host": "*", "operation": READ,
            "permission_type": 3}


ACLS = [acl(GROUP_T, "sg", "app"), acl(TOPIC_T, "q", "app"),
        acl(TOPIC_T, "q", "nogroup"), acl(GROUP_T, "sg", "notopic")]


@dataclass
class AclBroker:
    proc: BrokerProcess
    sasl_port: int
    topic_ids: dict[str, Any]

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
        "connection.failed.authentication.delay.ms": "0",
    })
    proc.start()
    try:
        wait_for_port("127.0.0.1", sasl, timeout=10)
        ids = {}
        with Raw(f"127.0.0.1:{sasl}").login("admin", USERS["admin"]) as c:
            for name in ("q", "other"):
                r = c.call(19, 7, {"topics": [{"name": name, "num_partitions": 1,
                                               "replication_factor": 1}],
                                   "timeout_ms": 10000})
                assert r.topics[0].error_code == 0
                ids[name] = r.topics[0].topic_id
            r = c.call(30, 3, {"creations": ACLS})
            assert [x.error_code for x in r.results] == [0] * len(ACLS)
        yield AclBroker(proc, sasl, ids)
    finally:
        proc.stop()


def fetch(c: Raw, tids: list[Any], member: str) -> Any:
    return c.call(78, 2, {
        "group_id": "sg", "member_id": member, "share_session_epoch": 0,
        "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10,
        "batch_size": 10, "share_acquire_mode": 0, "is_renew_ack": False,
        "topics": [{"topic_id": t, "partitions": [
            {"partition_index": 0, "acknowledgement_batches": []}]} for t in tids],
        "forgotten_topics_data": []})


def errors(r: Any) -> dict[Any, int]:
    return {t.topic_id: p.error_code for t in r.responses for p in t.partitions}


def test_group_read_needed(broker: AclBroker) -> None:
    with broker.conn("nogroup") as c:
        r = fetch(c, [broker.topic_ids["q"]], "m1")
        assert r.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED and r.responses == []
        a = c.call(79, 2, {"group_id": "sg", "member_id": "m1", "share_session_epoch": 1,
                           "is_renew_ack": False, "topics": []})
        assert a.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_topic_read_needed_per_topic(broker: AclBroker) -> None:
    q, other = broker.topic_ids["q"], broker.topic_ids["other"]
    with broker.conn("notopic") as c:
        r = fetch(c, [q], "m2")
        assert r.error_code == ErrorCode.NONE
        assert errors(r) == {q: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    with broker.conn("app") as c:
        r = fetch(c, [q, other], "m3")
        assert r.error_code == ErrorCode.NONE
        assert errors(r) == {q: ErrorCode.NONE, other: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
