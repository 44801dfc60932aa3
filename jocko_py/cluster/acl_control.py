"""ACL decisions of the controller (Kafka's ``AclControlManager``): CreateAcls and
DeleteAcls as pure functions of the metadata image, each returning the records to
commit and the per-entry results (a ``ControllerResult``).

Kafka's model: resource type TOPIC / GROUP / CLUSTER / TRANSACTIONAL_ID (also
DELEGATION_TOKEN, USER stored), pattern LITERAL / PREFIXED, principal ``Type:name``
(or ``User:*``), host (or ``*``), operation, ALLOW / DENY.

- Create: a binding with an unusable resource type, pattern, operation, permission,
  principal or host, an empty name or a cluster name other than ``kafka-cluster`` gets
  INVALID_REQUEST (and no record); an ACL that exists already (or earlier in the same
  request) is a success without a record. Each new ACL gets a fresh id.
- Delete: a filter with an UNKNOWN element gets INVALID_REQUEST; otherwise every ACL it
  matches (and no earlier filter of the request removed) is removed and listed. A filter
  that matches nothing succeeds with an empty list (Kafka: deleting what does not exist
  is not an error).
- Filters (Describe, Delete): ANY matches every value, a null name / principal / host
  matches any, pattern MATCH selects the ACLs that apply to the named resource (literal,
  the wildcard, prefixes).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import (
    AccessControlEntryRecord,
    MetadataImage,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from jocko_py.protocol.errors import ErrorCode

# Kafka's ResourceType, PatternType, AclOperation and AclPermissionType codes
ANY, MATCH = 1, 2
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"
RESOURCE_TYPES = frozenset({2, 3, 4, 5, 6, 7})
OPERATIONS = frozenset(range(2, 15))
PERMISSIONS = frozenset({2, 3})

AclKey = tuple[int, str, int, str, str, int, int]


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL as CreateAcls names it."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def key(self) -> AclKey:
        return (self.resource_type, self.resource_name, self.pattern_type, self.principal,
                self.host, self.operation, self.permission_type)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter (None: any name, principal or host)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class AclCreateResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    deleted: tuple[AccessControlEntryRecord, ...] = ()


def record_key(r: AccessControlEntryRecord) -> AclKey:
    return (r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
            r.operation, r.permission_type)


def invalid_binding(b: AclBinding) -> str | None:
    """Why ``b`` cannot be stored (Kafka's messages), or None."""
    if b.resource_type not in RESOURCE_TYPES:
        return "Invalid resourceType"
    if b.pattern_type not in (LITERAL, PREFIXED):
        return "Invalid patternType"
    if b.operation not in OPERATIONS:
        return "Invalid operation"
    if b.permission_type not in PERMISSIONS:
        return "Invalid permissionType"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == CLUSTER and b.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    kind, sep, name = (b.principal or "").partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal {b.principal!r}"
    if not b.host:
        return "Invalid host"
    return None


def invalid_filter(f: AclBindingFilter) -> str | None:
    if 0 in (f.resource_type, f.pattern_type, f.operation, f.permission_type):
        return "Filter contains UNKNOWN elements"
    return None


def matches(f: AclBindingFilter, r: AccessControlEntryRecord) -> bool:
    """Does the filter ``f`` match the ACL ``r``?"""
    if f.resource_type != ANY and f.resource_type != r.resource_type:
        return False
    name, pt = f.resource_name, f.pattern_type
    if pt == MATCH:
        if name is not None and not (
                (r.pattern_type == LITERAL and r.resource_name in (name, WILDCARD))
                or (r.pattern_type == PREFIXED and name.startswith(r.resource_name))):
            return False
    else:
        if pt != ANY and pt != r.pattern_type:
            return False
        if name is not None and name != r.resource_name:
            return False
    if f.principal is not None and f.principal != r.principal:
        return False
    if f.host is not None and f.host != r.host:
        return False
    if f.operation != ANY and f.operation != r.operation:
        return False
    return f.permission_type in (ANY, r.permission_type)


class AclControlManager:
    """CreateAcls / DeleteAcls decisions; ``new_id`` names each new ACL (random by
    default, as Kafka's; tests pass a deterministic one)."""

    def __init__(self, new_id: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self._new_id = new_id

    def create_acls(self, image: MetadataImage, bindings: list[AclBinding]
                    ) -> ControllerResult[list[AclCreateResult]]:
        existing = {record_key(r) for r in image.acls.values()}
        results: list[AclCreateResult] = []
        records: list[MetadataRecord] = []
        for b in bindings:
            why = invalid_binding(b)
            if why:
                results.append(AclCreateResult(ErrorCode.INVALID_REQUEST, why))
                continue
            if b.key() not in existing:
                existing.add(b.key())
                records.append(AccessControlEntryRecord(
                    self._new_id(), b.resource_type, b.resource_name, b.pattern_type,
                    b.principal, b.host, b.operation, b.permission_type))
            results.append(AclCreateResult())
        return ControllerResult(records, results)

    def delete_acls(self, image: MetadataImage, filters: list[AclBindingFilter]
                    ) -> ControllerResult[list[AclDeleteResult]]:
        results: list[AclDeleteResult] = []
        records: list[MetadataRecord] = []
        gone: set[uuid.UUID] = set()
        ordered = sorted(image.acls.values(), key=record_key)
        for f in filters:
            why = invalid_filter(f)
            if why:
                results.append(AclDeleteResult(ErrorCode.INVALID_REQUEST, why))
                continue
            hits = tuple(r for r in ordered if r.id not in gone and matches(f, r))
            for r in hits:
                gone.add(r.id)
                records.append(RemoveAccessControlEntryRecord(r.id))
            results.append(AclDeleteResult(deleted=hits))
        return ControllerResult(records, results)
