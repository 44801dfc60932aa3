"""ACL authorization, Kafka's StandardAuthorizer rules, over the ACLs in the
metadata image (AccessControlEntryRecord).

Enabled by `authorizer.class.name` (Kafka's
`org.apache.kafka.metadata.authorizer.StandardAuthorizer`, or
`kafka.security.authorizer.AclAuthorizer`, or `jocko`); empty (the default) lets
every principal do everything, as Kafka without an authorizer. Rules, in order:

1. a principal in `super.users` (`User:a;User:b`) may do everything;
2. an ACL matches a request when its resource type is the resource's, its pattern
   matches the name (LITERAL: equal, or the wildcard `*`; PREFIXED: a prefix of
   the name), its principal is the request's or `User:*`, its host is the
   client's or `*`;
3. a matching DENY for the operation (or ALL) wins over everything;
4. a matching ALLOW for the operation, ALL, or one that implies it (READ, WRITE,
   DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
5. with no ACL at all on the resource, `allow.everyone.if.no.acl.found` (false)
   decides; otherwise the request is denied.

Whatever the authorizer, a broker of the cluster (a connection authenticated with
JOCKO-CLUSTER) may do everything, and CLUSTER_ACTION (the inter-broker requests:
WriteTxnMarkers, follower Fetch, OffsetForLeaderEpoch for a replica, the controller
APIs) is allowed only to brokers, or to a principal the authorizer allows it (Kafka's
rule), never to everyone just because no authorizer is configured.

Handlers call `authorize(ctx, op, resource_type, name)` (or the `authorize_*`
shorthands) and answer Kafka's error code themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from jocko_py.cluster.acl_control import CLUSTER as CLUSTER
from jocko_py.cluster.acl_control import CLUSTER_NAME as CLUSTER_NAME
from jocko_py.cluster.acl_control import GROUP as GROUP
from jocko_py.cluster.acl_control import LITERAL as LITERAL
from jocko_py.cluster.acl_control import PREFIXED as PREFIXED
from jocko_py.cluster.acl_control import TOPIC as TOPIC
from jocko_py.cluster.acl_control import TRANSACTIONAL_ID as TRANSACTIONAL_ID
from jocko_py.cluster.acl_control import WILDCARD as WILDCARD
from jocko_py.cluster.metadata import AccessControlEntryRecord, MetadataImage

# Kafka's ResourceType, PatternType, AclOperation and AclPermissionType codes
RESOURCE_TYPES = {"UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4,
                  "TRANSACTIONAL_ID": 5, "DELEGATION_TOKEN": 6, "USER": 7}
PATTERN_TYPES = {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"UNKNOWN": 0, "ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5,
              "DELETE": 6, "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9,
              "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12,
              "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
PERMISSIONS = {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}
ALL, DENY, ALLOW = 2, 2, 3
AUTHORIZER_NAMES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer", "jocko"})
_IMPLIES = {OPERATIONS["DESCRIBE"]: {3, 4, 6, 7}, OPERATIONS["DESCRIBE_CONFIGS"]: {11}}
# the operations each resource type supports (Kafka's, for authorized_operations bitfields)
RESOURCE_OPS = {
    TOPIC: (3, 4, 5, 6, 7, 8, 10, 11),
    GROUP: (3, 6, 8),
    CLUSTER: (5, 7, 8, 9, 10, 11, 12),
    TRANSACTIONAL_ID: (4, 8),
}


@dataclass(frozen=True)
class Acl:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    @classmethod
    def of(cls, r: AccessControlEntryRecord) -> Acl:
        return cls(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
                   r.operation, r.permission_type)


class Authorizer:
    def __init__(self, image: Callable[[], MetadataImage], super_users: Iterable[str],
                 allow_if_no_acl: bool) -> None:
        self._image = image
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._version = -1
        self._by_type: dict[int, list[Acl]] = {}

    def _acls(self, resource_type: int) -> list[Acl]:
        img = self._image()
        if img.acls_version != self._version or not self._by_type and img.acls:
            by: dict[int, list[Acl]] = {}
            for r in img.acls.values():
                by.setdefault(r.resource_type, []).append(Acl.of(r))
            self._by_type, self._version = by, img.acls_version
        return self._by_type.get(resource_type, [])

    def authorize(self, principal: str, host: str, op: int, resource_type: int,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        matching = [a for a in self._acls(resource_type)
                    if (a.name == name or a.name == WILDCARD) if a.pattern_type == LITERAL
                    ] + [a for a in self._acls(resource_type)
                         if a.pattern_type == PREFIXED and name.startswith(a.name)]
        if not matching:
            return self.allow_if_no_acl
        mine = [a for a in matching if a.principal in (principal, "User:*")
                and a.host in (host, WILDCARD)]
        if any(a.permission == DENY and a.operation in (op, ALL) for a in mine):
            return False
        implied = _IMPLIES.get(op, set())
        return any(a.permission == ALLOW and (a.operation in (op, ALL) or a.operation in implied)
                   for a in mine)

    def authorized_operations(self, principal: str, host: str, resource_type: int,
                              name: str) -> int:
        """Kafka's bitfield of the operations allowed on a resource (bit = op code)."""
        bits = 0
        for op in RESOURCE_OPS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits


class Principal(Protocol):
    """Who sends a request: a connection's `Session`."""

    @property
    def principal(self) -> str: ...

    @property
    def client_host(self) -> str: ...

    @property
    def authenticated(self) -> bool: ...

    @property
    def cluster_broker_id(self) -> int | None: ...


class Guard(Protocol):
    """The broker's security settings, as the checks use them (`SecurityManager`)."""

    @property
    def authorizer(self) -> Authorizer | None: ...

    def is_cluster_peer(self, s: Principal | None) -> bool: ...


class _Guarded(Protocol):
    @property
    def security(self) -> Guard: ...


class AccessRequest(Protocol):
    """What the checks read of a request: a handler's `RequestContext`."""

    @property
    def session(self) -> Principal | None: ...

    @property
    def broker(self) -> _Guarded: ...


def authorize(ctx: AccessRequest, op: str, resource_type: int, name: str) -> bool:
    """May this request's principal do ``op`` on the resource? True for in-process
    callers without a session and for brokers of the cluster (JOCKO-CLUSTER); else True
    without an authorizer, except CLUSTER_ACTION (what brokers do to each other: only
    brokers, or principals the authorizer allows it)."""
    s = ctx.session
    if s is None or s.cluster_broker_id is not None:
        return True
    if op == "CLUSTER_ACTION":
        return ctx.broker.security.is_cluster_peer(s)
    az = ctx.broker.security.authorizer
    if az is None:
        return True
    return az.authorize(s.principal, s.client_host, OPERATIONS[op], resource_type, name)


def authorize_topic(ctx: AccessRequest, op: str, topic: str) -> bool:
    return authorize(ctx, op, TOPIC, topic)


def authorize_group(ctx: AccessRequest, op: str, group: str) -> bool:
    return authorize(ctx, op, GROUP, group)


def authorize_transactional_id(ctx: AccessRequest, op: str, transactional_id: str) -> bool:
    return authorize(ctx, op, TRANSACTIONAL_ID, transactional_id)


def authorize_cluster(ctx: AccessRequest, op: str) -> bool:
    return authorize(ctx, op, CLUSTER, CLUSTER_NAME)


def authorized_operations(ctx: AccessRequest, resource_type: int, name: str) -> int:
    """The authorized-operations bitfield a response reports when asked."""
    az = ctx.broker.security.authorizer
    s = ctx.session
    if az is None or s is None or s.cluster_broker_id is not None:
        return sum(1 << op for op in RESOURCE_OPS.get(resource_type, ()))
    return az.authorized_operations(s.principal, s.client_host, resource_type, name)


def denied_topics(ctx: AccessRequest, op: str, topics: Iterable[str]) -> set[str]:
    """The topics among ``topics`` this request may not ``op`` (empty without an
    authorizer: the common case costs one attribute lookup)."""
    if ctx.broker.security.authorizer is None or ctx.session is None:
        return set()
    return {t for t in set(topics) if not authorize(ctx, op, TOPIC, t)}


def may_create_topic(ctx: AccessRequest, topic: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka's rule for topic creation)."""
    return authorize_cluster(ctx, "CREATE") or authorize_topic(ctx, "CREATE", topic)


def authorize_any_topic(ctx: AccessRequest, op: str) -> bool:
    """Kafka's authorizeByResourceType (KIP-679): may the principal ``op`` some topic
    (an ALLOW ACL for it on any topic pattern)? Used for idempotent producers."""
    az = ctx.broker.security.authorizer
    s = ctx.session
    if az is None or s is None or s.principal in az.super_users or \
            s.cluster_broker_id is not None:
        return True
    code = OPERATIONS[op]
    return any(a.permission == ALLOW and a.operation in (code, ALL)
               and a.principal in (s.principal, "User:*") and a.host in (s.client_host, WILDCARD)
               for a in az._acls(TOPIC))
