"""The authorizer's rules (Kafka's StandardAuthorizer) on an image of ACL records:
super users, literal / wildcard / prefixed patterns, principal and host wildcards,
DENY wins, implied DESCRIBE, allow.everyone.if.no.acl.found."""

from __future__ import annotations

import uuid

import pytest

from jocko_py.broker.security.authz import (
    CLUSTER,
    GROUP,
    LITERAL,
    OPERATIONS,
    PREFIXED,
    TOPIC,
    Authorizer,
)
from jocko_py.cluster.metadata import (
    AccessControlEntryRecord,
    MetadataImage,
    RemoveAccessControlEntryRecord,
)

ALLOW, DENY = 3, 2


def acl(rtype: int, name: str, principal: str, op: str, perm: int = ALLOW,
        pattern: int = LITERAL, host: str = "*") -> AccessControlEntryRecord:
    return AccessControlEntryRecord(uuid.uuid4(), rtype, name, pattern, principal, host,
                                    OPERATIONS[op], perm)


def authorizer(*acls: AccessControlEntryRecord, allow_if_none: bool = False,
               supers: tuple[str, ...] = ("User:root",)) -> tuple[Authorizer, MetadataImage]:
    img = MetadataImage()
    for a in acls:
        img.apply(a)
    return Authorizer(lambda: img, supers, allow_if_none), img


def ok(az: Authorizer, principal: str, op: str, rtype: int, name: str,
       host: str = "10.0.0.1") -> bool:
    return az.authorize(principal, host, OPERATIONS[op], rtype, name)


def test_no_acls_denies_unless_allow_everyone() -> None:
    az, _ = authorizer()
    assert not ok(az, "User:alice", "READ", TOPIC, "t")
    assert ok(az, "User:root", "READ", TOPIC, "t")  # super user
    az2, _ = authorizer(allow_if_none=True)
    assert ok(az2, "User:alice", "READ", TOPIC, "t")


def test_acl_on_a_resource_denies_everyone_else_even_with_allow_everyone() -> None:
    az, _ = authorizer(acl(TOPIC, "t", "User:alice", "READ"), allow_if_none=True)
    assert ok(az, "User:alice", "READ", TOPIC, "t")
    assert not ok(az, "User:bob", "READ", TOPIC, "t")
    assert ok(az, "User:bob", "READ", TOPIC, "other")  # no ACL there


MATRIX = [
    # (acls, principal, op, resource, name, expected)
    ([acl(TOPIC, "orders", "User:alice", "WRITE")], "User:alice", "WRITE", TOPIC, "orders", True),
    ([acl(TOPIC, "orders", "User:alice", "WRITE")], "User:alice", "READ", TOPIC, "orders", False),
    ([acl(TOPIC, "orders", "User:alice", "WRITE")], "User:alice", "DESCRIBE", TOPIC, "orders",
     True),  # implied
    ([acl(TOPIC, "orders", "User:alice", "DESCRIBE")], "User:alice", "READ", TOPIC, "orders",
     False),  # nothing implies more than itself
    ([acl(TOPIC, "orders", "User:alice", "ALTER_CONFIGS")], "User:alice", "DESCRIBE_CONFIGS",
     TOPIC, "orders", True),
    ([acl(TOPIC, "orders", "User:alice", "ALL")], "User:alice", "DELETE", TOPIC, "orders", True),
    ([acl(TOPIC, "*", "User:alice", "READ")], "User:alice", "READ", TOPIC, "anything", True),
    ([acl(TOPIC, "ord", "User:alice", "READ", pattern=PREFIXED)], "User:alice", "READ", TOPIC,
     "orders", True),
    ([acl(TOPIC, "ord", "User:alice", "READ", pattern=PREFIXED)], "User:alice", "READ", TOPIC,
     "or", False),
    ([acl(TOPIC, "ord", "User:alice", "READ")], "User:alice", "READ", TOPIC, "orders", False),
    ([acl(TOPIC, "orders", "User:*", "READ")], "User:bob", "READ", TOPIC, "orders", True),
    ([acl(TOPIC, "orders", "User:alice", "READ", host="10.0.0.2")], "User:alice", "READ", TOPIC,
     "orders", False),
    ([acl(TOPIC, "orders", "User:alice", "READ", host="10.0.0.1")], "User:alice", "READ", TOPIC,
     "orders", True),
    # DENY wins over ALLOW, whichever pattern carries it
    ([acl(TOPIC, "*", "User:alice", "ALL"), acl(TOPIC, "orders", "User:alice", "READ", DENY)],
     "User:alice", "READ", TOPIC, "orders", False),
    ([acl(TOPIC, "orders", "User:alice", "ALL"),
      acl(TOPIC, "o", "User:*", "ALL", DENY, pattern=PREFIXED)],
     "User:alice", "WRITE", TOPIC, "orders", False),
    # a DENY READ does not deny DESCRIBE implied by another ALLOW
    ([acl(TOPIC, "orders", "User:alice", "WRITE"), acl(TOPIC, "orders", "User:alice", "READ",
                                                       DENY)],
     "User:alice", "DESCRIBE", TOPIC, "orders", True),
    ([acl(GROUP, "g", "User:alice", "READ")], "User:alice", "READ", GROUP, "g", True),
    ([acl(GROUP, "g", "User:alice", "READ")], "User:alice", "READ", TOPIC, "g", False),
    ([acl(CLUSTER, "kafka-cluster", "User:alice", "ALTER")], "User:alice", "ALTER", CLUSTER,
     "kafka-cluster", True),
    ([acl(CLUSTER, "kafka-cluster", "User:alice", "ALTER")], "User:alice", "CLUSTER_ACTION",
     CLUSTER, "kafka-cluster", False),
]


@pytest.mark.parametrize(("acls", "principal", "op", "rtype", "name", "expected"), MATRIX)
def test_matrix(acls: list[AccessControlEntryRecord], principal: str, op: str, rtype: int,
                name: str, expected: bool) -> None:
    az, _ = authorizer(*acls)
    assert ok(az, principal, op, rtype, name) is expected


def test_acl_changes_are_seen_at_once() -> None:
    a = acl(TOPIC, "t", "User:alice", "READ")
    az, img = authorizer(a)
    assert ok(az, "User:alice", "READ", TOPIC, "t")
    img.apply(RemoveAccessControlEntryRecord(a.id))
    assert not ok(az, "User:alice", "READ", TOPIC, "t")


def test_authorized_operations_bitfield() -> None:
    az, _ = authorizer(acl(TOPIC, "t", "User:alice", "READ"))
    bits = az.authorized_operations("User:alice", "h", TOPIC, "t")
    assert bits == (1 << OPERATIONS["READ"]) | (1 << OPERATIONS["DESCRIBE"])


def test_acl_records_survive_a_snapshot() -> None:
    a = acl(TOPIC, "t", "User:alice", "READ", pattern=PREFIXED)
    _, img = authorizer(a)
    again = MetadataImage.from_records(img.snapshot())
    assert again.acls == img.acls and again.fingerprint() == img.fingerprint()
