"""DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31), versions 1-3:
what `kafka-acls` and the admin clients' ACL calls drive.

ACLs are AccessControlEntryRecords in the metadata log (decided by the active
controller; other brokers forward Create/Delete to it), Kafka's model: resource
type TOPIC / GROUP / CLUSTER / TRANSACTIONAL_ID (also DELEGATION_TOKEN, USER
stored), pattern LITERAL / PREFIXED, principal `Type:name` (or `User:*`), host
(or `*`), operation, ALLOW / DENY. A new ACL with an unusable resource type,
pattern, operation, permission, principal, an empty name or a cluster name other
than `kafka-cluster` gets INVALID_REQUEST; creating an existing ACL again is a
no-op. Filters (Describe, Delete): ANY matches every value, null name / principal
/ host match any, pattern MATCH selects the ACLs that apply to the named resource
(literal, wildcard, prefixes). Without `authorizer.class.name` every call gets
SECURITY_DISABLED, as Kafka. Create and Delete need ALTER on the cluster,
Describe DESCRIBE (CLUSTER_AUTHORIZATION_FAILED).

Not implemented: v0 (removed in Kafka 4).
"""

from __future__ import annotations

import uuid
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import (
    CLUSTER,
    CLUSTER_NAME,
    LITERAL,
    PREFIXED,
    WILDCARD,
    authorize_cluster,
)
from jocko_py.broker.topics import is_forwarded
from jocko_py.cluster.metadata import (
    AccessControlEntryRecord,
    MetadataImage,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from jocko_py.cluster.quorum import NotControllerError
from jocko_py.protocol.errors import ErrorCode, KafkaError

ANY, MATCH = 1, 2
_RESOURCE_TYPES = {2, 3, 4, 5, 6, 7}
_OPERATIONS = set(range(2, 15))
_PERMISSIONS = {2, 3}
NO_AUTHORIZER = "No Authorizer is configured."


def _invalid_acl(c: Any) -> str | None:
    if c.resource_type not in _RESOURCE_TYPES:
        return "Invalid resourceType"
    if c.resource_pattern_type not in (LITERAL, PREFIXED):
        return "Invalid patternType"
    if c.operation not in _OPERATIONS:
        return "Invalid operation"
    if c.permission_type not in _PERMISSIONS:
        return "Invalid permissionType"
    if not c.resource_name:
        return "Resource name should not be empty"
    if c.resource_type == CLUSTER and c.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    kind, sep, name = (c.principal or "").partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal {c.principal!r}"
    if not c.host:
        return "Invalid host"
    return None


def _key(r: AccessControlEntryRecord) -> tuple[int, str, int, str, str, int, int]:
    return (r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
            r.operation, r.permission_type)


def matches(f: Any, r: AccessControlEntryRecord) -> bool:
    """Does the ACL binding filter ``f`` (Describe/Delete) match ACL ``r``?"""
    if f.resource_type_filter != ANY and f.resource_type_filter != r.resource_type:
        return False
    name, pt = f.resource_name_filter, f.pattern_type_filter
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
    if f.principal_filter is not None and f.principal_filter != r.principal:
        return False
    if f.host_filter is not None and f.host_filter != r.host:
        return False
    if f.operation != ANY and f.operation != r.operation:
        return False
    return bool(f.permission_type == ANY or f.permission_type == r.permission_type)


def _invalid_filter(f: Any) -> str | None:
    if f.resource_type_filter == 0 or f.pattern_type_filter == 0 or f.operation == 0 \
            or f.permission_type == 0:
        return "Filter contains UNKNOWN elements"
    return None


async def _commit_or_forward(ctx: RequestContext, key: int, body: dict[str, Any],
                             decide: Any, error_body: Any) -> Any:
    """Run ``decide`` as the controller, or forward the request to it; the response
    body (``decide`` returns (response, records))."""
    out: list[Any] = []

    def run(img: MetadataImage) -> tuple[int, list[MetadataRecord]]:
        resp, records = decide(img)
        out.append(resp)
        return 0, records

    try:
        await ctx.broker.topics.commit(run)
    except NotControllerError:
        if is_forwarded(ctx):
            return error_body(ErrorCode.NOT_CONTROLLER, None)
        try:
            resp = await ctx.broker.topics.forward(key, ctx.version, body)
        except KafkaError as e:
            return error_body(e.code, e.message)
        return _plain(resp)
    return out[-1]


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if not str(k).startswith("_")}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


@api(30, 1, 3)
async def create_acls(ctx: RequestContext, req: Any) -> dict[str, Any]:
    n = len(req.creations)

    def fail(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0,
                "results": [{"error_code": code, "error_message": msg}] * n}

    if ctx.broker.security.authorizer is None:
        return fail(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorize_cluster(ctx, "ALTER"):
        return fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)

    def decide(img: MetadataImage) -> tuple[dict[str, Any], list[MetadataRecord]]:
        existing = {_key(r) for r in img.acls.values()}
        results: list[dict[str, Any]] = []
        records: list[MetadataRecord] = []
        for c in req.creations:
            why = _invalid_acl(c)
            if why:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": why})
                continue
            rec = AccessControlEntryRecord(uuid.uuid4(), c.resource_type, c.resource_name,
                                           c.resource_pattern_type, c.principal, c.host,
                                           c.operation, c.permission_type)
            if _key(rec) not in existing:
                existing.add(_key(rec))
                records.append(rec)
            results.append({"error_code": ErrorCode.NONE, "error_message": None})
        return {"throttle_time_ms": 0, "results": results}, records

    body = {"creations": [dict(c) for c in req.creations]}
    return dict(await _commit_or_forward(ctx, 30, body, decide, fail))


@api(29, 1, 3)
async def describe_acls(ctx: RequestContext, req: Any) -> dict[str, Any]:
    def fail(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": msg,
                "resources": []}

    if ctx.broker.security.authorizer is None:
        return fail(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorize_cluster(ctx, "DESCRIBE"):
        return fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    why = _invalid_filter(req)
    if why:
        return fail(ErrorCode.INVALID_REQUEST, why)
    by_resource: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for r in sorted(ctx.broker.topics.image.acls.values(), key=_key):
        if matches(req, r):
            by_resource.setdefault((r.resource_type, r.resource_name, r.pattern_type), []).append(
                {"principal": r.principal, "host": r.host, "operation": r.operation,
                 "permission_type": r.permission_type})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "resources": [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
        for (t, n, p), acls in by_resource.items()]}


@api(31, 1, 3)
async def delete_acls(ctx: RequestContext, req: Any) -> dict[str, Any]:
    n = len(req.filters)

    def fail(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": code, "error_message": msg, "matching_acls": []}] * n}

    if ctx.broker.security.authorizer is None:
        return fail(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorize_cluster(ctx, "ALTER"):
        return fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)

    def decide(img: MetadataImage) -> tuple[dict[str, Any], list[MetadataRecord]]:
        results: list[dict[str, Any]] = []
        records: list[MetadataRecord] = []
        gone: set[uuid.UUID] = set()
        for f in req.filters:
            why = _invalid_filter(f)
            if why:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": why,
                                "matching_acls": []})
                continue
            hits = [r for r in sorted(img.acls.values(), key=_key)
                    if r.id not in gone and matches(f, r)]
            for r in hits:
                gone.add(r.id)
                records.append(RemoveAccessControlEntryRecord(r.id))
            results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
                {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name, "pattern_type": r.pattern_type,
                 "principal": r.principal, "host": r.host, "operation": r.operation,
                 "permission_type": r.permission_type} for r in hits]})
        return {"throttle_time_ms": 0, "filter_results": results}, records

    body = {"filters": [dict(f) for f in req.filters]}
    return dict(await _commit_or_forward(ctx, 31, body, decide, fail))

