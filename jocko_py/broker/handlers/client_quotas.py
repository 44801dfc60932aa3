"""DescribeClientQuotas (key 48) v0-1 and AlterClientQuotas (key 49) v0-1: what
`kafka-configs --entity-type users|clients --alter --add-config producer_byte_rate=...`
and the admin clients' quota calls drive.

Quotas are ClientQuotaRecords in the metadata log. Alter is decided by the active
controller (`cluster/client_quota_control.py`: entities, keys and the checks, each
entry on its own) through the broker's one commit-or-forward path (other brokers
forward it). Keys `producer_byte_rate`, `consumer_byte_rate` and `request_percentage`
are enforced (see `security/quotas.py`), `controller_mutation_rate` by CreateTopics,
DeleteTopics and CreatePartitions. Describe filters: EXACT (0) a name, DEFAULT (1)
the default entity, SPECIFIED (2) any name but the default; `strict` leaves out
entities with other types. Both need the cluster ALTER_CONFIGS / DESCRIBE_CONFIGS
permission when an authorizer is set (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.controller_channel import Forward, is_forwarded
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.cluster.client_quota_control import QuotaAlteration, QuotaAlterResult, QuotaOp
from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import MetadataImage
from jocko_py.protocol.errors import ErrorCode, KafkaError

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


@api(49, 0, 1)
async def alter(ctx: RequestContext, req: Any) -> dict[str, Any]:
    def entity(e: Any) -> list[dict[str, Any]]:
        return [{"entity_type": x.entity_type, "entity_name": x.entity_name}
                for x in e.entity]

    def fail(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": code, "error_message": msg, "entity": entity(e)}
            for e in req.entries]}

    if not authorize_cluster(ctx, "ALTER_CONFIGS"):
        return fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    entries = [QuotaAlteration(tuple((x.entity_type, x.entity_name) for x in e.entity),
                               tuple(QuotaOp(o.key, o.value, o.remove) for o in e.ops))
               for e in req.entries]

    def body(results: list[QuotaAlterResult]) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": r.error, "error_message": r.message, "entity": entity(e)}
            for e, r in zip(req.entries, results, strict=True)]}

    def decide(img: MetadataImage) -> ControllerResult[dict[str, Any]]:
        return ctx.broker.quorum.controller.quotas.alter_client_quotas(
            img, entries, req.validate_only).map(body)

    def relayed(resp: Any) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": x.error_code, "error_message": x.error_message,
             "entity": [dict(y) for y in x.entity]} for x in resp.entries]}

    forward = Forward(49, ctx.version, {"validate_only": req.validate_only, "entries": [
        {"entity": [dict(x) for x in e.entity], "ops": [dict(o) for o in e.ops]}
        for e in req.entries]}, relayed,
        lambda r: any(x.error_code == ErrorCode.NOT_CONTROLLER for x in r.entries))
    try:
        return await ctx.broker.controller_channel.submit(decide, forward, forwarded=is_forwarded(ctx))
    except KafkaError as e:
        return fail(e.code, e.message)


def _matches(components: Any, strict: bool, ent: tuple[tuple[str, str | None], ...]) -> bool:
    have = dict(ent)
    for c in components:
        if c.entity_type not in have:
            return False
        name = have[c.entity_type]
        if c.match_type == EXACT and name != c.match:
            return False
        if c.match_type == DEFAULT and name is not None:
            return False
        if c.match_type == SPECIFIED and name is None:
            return False
    return not strict or len(have) == len(components)


@api(48, 0, 1)
async def describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    def fail(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": msg,
                "entries": None}

    if not authorize_cluster(ctx, "DESCRIBE_CONFIGS"):
        return fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    types = [c.entity_type for c in req.components]
    if any(c.match_type not in (EXACT, DEFAULT, SPECIFIED) for c in req.components):
        return fail(ErrorCode.INVALID_REQUEST, "Unknown match type")
    if len(set(types)) != len(types):
        return fail(ErrorCode.INVALID_REQUEST, "An entity type appears more than once")
    entries = []
    for ent, values in sorted(ctx.broker.image.quotas.items(), key=repr):
        if _matches(req.components, req.strict, ent):
            entries.append({
                "entity": [{"entity_type": t, "entity_name": n} for t, n in ent],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}
