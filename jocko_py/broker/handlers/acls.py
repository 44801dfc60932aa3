"""DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31), versions 1-3:
what `kafka-acls` and the admin clients' ACL calls drive.

ACLs are AccessControlEntryRecords in the metadata log. Create and Delete are
decided by the active controller (`cluster/acl_control.py`: the model, validation
and filter rules), through the broker's one commit-or-forward path (other brokers
forward the request to it). Describe reads the local image with the same filters.
Without `authorizer.class.name` every call gets SECURITY_DISABLED, as Kafka. Create
and Delete need ALTER on the cluster, Describe DESCRIBE (CLUSTER_AUTHORIZATION_FAILED).

Not implemented: v0 (removed in Kafka 4).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.controller_channel import Forward, is_forwarded
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.cluster.acl_control import (
    AclBinding,
    AclBindingFilter,
    AclCreateResult,
    AclDeleteResult,
    invalid_filter,
    matches,
    record_key,
)
from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import MetadataImage
from jocko_py.protocol.errors import ErrorCode, KafkaError

NO_AUTHORIZER = "No Authorizer is configured."


def _binding(c: Any) -> AclBinding:
    return AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                      c.host, c.operation, c.permission_type)


def _filter(f: Any) -> AclBindingFilter:
    return AclBindingFilter(f.resource_type_filter, f.resource_name_filter,
                            f.pattern_type_filter, f.principal_filter, f.host_filter,
                            f.operation, f.permission_type)


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if not str(k).startswith("_")}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _relayed(resp: Any) -> dict[str, Any]:
    """The controller's answer to a forwarded request, as this broker's answer."""
    return dict(_plain(resp))


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
    bindings = [_binding(c) for c in req.creations]

    def body(results: list[AclCreateResult]) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": r.error, "error_message": r.message} for r in results]}

    def decide(img: MetadataImage) -> ControllerResult[dict[str, Any]]:
        return ctx.broker.quorum.controller.acls.create_acls(img, bindings).map(body)

    forward = Forward(30, ctx.version, {"creations": [dict(c) for c in req.creations]},
                      _relayed, lambda r: any(x.error_code == ErrorCode.NOT_CONTROLLER
                                              for x in r.results))
    try:
        return await ctx.broker.controller_channel.submit(decide, forward, forwarded=is_forwarded(ctx))
    except KafkaError as e:
        return fail(e.code, e.message)


@api(29, 1, 3)
async def describe_acls(ctx: RequestContext, req: Any) -> dict[str, Any]:
    def fail(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": msg,
                "resources": []}

    if ctx.broker.security.authorizer is None:
        return fail(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorize_cluster(ctx, "DESCRIBE"):
        return fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    f = _filter(req)
    why = invalid_filter(f)
    if why:
        return fail(ErrorCode.INVALID_REQUEST, why)
    by_resource: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for r in sorted(ctx.broker.image.acls.values(), key=record_key):
        if matches(f, r):
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
    filters = [_filter(f) for f in req.filters]

    def body(results: list[AclDeleteResult]) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": x.error, "error_message": x.message, "matching_acls": [
                {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name, "pattern_type": r.pattern_type,
                 "principal": r.principal, "host": r.host, "operation": r.operation,
                 "permission_type": r.permission_type} for r in x.deleted]}
            for x in results]}

    def decide(img: MetadataImage) -> ControllerResult[dict[str, Any]]:
        return ctx.broker.quorum.controller.acls.delete_acls(img, filters).map(body)

    forward = Forward(31, ctx.version, {"filters": [dict(f) for f in req.filters]},
                      _relayed, lambda r: any(x.error_code == ErrorCode.NOT_CONTROLLER
                                              for x in r.filter_results))
    try:
        return await ctx.broker.controller_channel.submit(decide, forward, forwarded=is_forwarded(ctx))
    except KafkaError as e:
        return fail(e.code, e.message)
