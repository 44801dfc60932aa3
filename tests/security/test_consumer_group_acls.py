"""KIP-848 consumer group ACLs (Kafka's rules) on one broker with SASL/PLAIN and the
StandardAuthorizer, over the wire (the broker and ACLs of test_streams_acls.py):

- ConsumerGroupHeartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED) and
  DESCRIBE on every subscribed topic name (TOPIC_AUTHORIZATION_FAILED);
- ConsumerGroupDescribe needs DESCRIBE on the group (READ implies it).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from jocko_py.protocol.errors import ErrorCode
from tests.security.raw import Raw
from tests.security.test_streams_acls import AclBroker, broker  # noqa: F401 (the fixture)

pytestmark = pytest.mark.timeout(120)


def heartbeat(c: Raw, group: str, topics: list[str]) -> Any:
    return c.call(68, 1, {"group_id": group, "member_id": uuid.uuid4().hex[:22],
                          "member_epoch": 0, "instance_id": None, "rack_id": None,
                          "rebalance_timeout_ms": 30000, "subscribed_topic_names": topics,
                          "subscribed_topic_regex": None, "server_assignor": None,
                          "topic_partitions": []})


def test_heartbeat_needs_group_read_and_topic_describe(broker: AclBroker) -> None:  # noqa: F811
    with broker.conn("creator") as c:   # no READ on the group "app"
        r = heartbeat(c, "app", ["in"])
        assert r.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert r.member_epoch == -1 and r.assignment is None
    with broker.conn("reader") as c:    # READ on "app", nothing on topics
        r = heartbeat(c, "app", ["in"])
        assert r.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert "in" in (r.error_message or "")
    with broker.conn("app") as c:       # READ on "app", DESCRIBE on "in"
        r = heartbeat(c, "app", ["in"])
        assert r.error_code == ErrorCode.NONE and r.member_epoch > 0


def test_describe_needs_group_describe(broker: AclBroker) -> None:  # noqa: F811
    body = {"group_ids": ["app"], "include_authorized_operations": False}
    with broker.conn("creator") as c:
        g = c.call(69, 1, body).groups[0]
        assert g.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED and not g.members
    with broker.conn("app") as c:
        assert c.call(69, 1, body).groups[0].error_code != ErrorCode.GROUP_AUTHORIZATION_FAILED
