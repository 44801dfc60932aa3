"""DescribeClientQuotas (key 48) v0-1 and AlterClientQuotas (key 49) v0-1: what
`kafka-configs --entity-type users|clients --alter --add-config producer_byte_rate=...`
and the admin clients' quota calls drive.

Quotas are ClientQuotaRecords in the metadata log, decided by the active controller
(other brokers forward Alter to it). Entities combine `user` and `client-id` (a
null name is the default entity); keys `producer_byte_rate`, `consumer_byte_rate`
(enforced, see `security/quotas.py`), `request_percentage`,
`controller_mutation_rate` (stored, not enforced). An unknown entity type (also
`ip`: connection-rate quotas are not implemented), a repeated type, an unknown key
or a value that is not positive gets INVALID_REQUEST for that entry; removing an
unset key is a no-op. Describe filters: EXACT (0) a name, DEFAULT (1) the default
entity, SPECIFIED (2) any name but the default; `strict` leaves out entities with
other types. Both need the cluster ALTER_CONFIGS / DESCRIBE_CONFIGS permission
when an authorizer is set (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.broker.security.quotas import CLIENT_ID, KEYS, USER
from jocko_py.broker.topics import is_forwarded
from jocko_py.cluster.metadata import ClientQuotaRecord, MetadataImage, MetadataRecord
from jocko_py.cluster.quorum import NotControllerError
from jocko_py.protocol.errors import ErrorCode, KafkaError

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _entity(e: Any) -> tuple[tuple[str, str | None], ...] | str:
    """The sorted entity, or why it is invalid."""
    parts = [(x.entity_type, x.entity_name) for x in e.entity]
    types = [t for t, _ in parts]
    if not parts:
        return "An entity must name at least one entity type"
    if len(set(types)) != len(types):
        return "An entity type appears more than once"
    bad = [t for t in types if t not in (USER, CLIENT_ID)]
    if bad:
        return f"Unsupported entity type {bad[0]} (user and client-id are supported)"
    return tuple(sorted(parts))


@api(49, 0, 1)
async def alter(ctx: RequestContext, req: Any) -> dict[str, Any]:
    def entry(e: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"error_code": code, "error_message": msg, "entity": [
            {"entity_type": x.entity_type, "entity_name": x.entity_name} for x in e.entity]}

    def fail(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "entries": [entry(e, code, msg) for e in req.entries]}

    if not authorize_cluster(ctx, "ALTER_CONFIGS"):
        return fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    out: list[dict[str, Any]] = []

    def decide(img: MetadataImage) -> tuple[int, list[MetadataRecord]]:
        records: list[MetadataRecord] = []
        out.clear()
        for e in req.entries:
            ent = _entity(e)
            why = ent if isinstance(ent, str) else None
            recs: list[MetadataRecord] = []
            for op in e.ops:
                if why:
                    break
                if op.key not in KEYS:
                    why = f"Unknown quota key {op.key}"
                elif not op.remove and not op.value > 0:
                    why = f"Quota {op.key} must be positive"
                elif not isinstance(ent, str):
                    recs.append(ClientQuotaRecord(ent, op.key, float(op.value), op.remove))
            if why:
                out.append(entry(e, ErrorCode.INVALID_REQUEST, why))
                continue
            out.append(entry(e, ErrorCode.NONE, None))
            if not req.validate_only:
                records.extend(recs)
        return 0, records

    try:
        await ctx.broker.topics.commit(decide)
    except NotControllerError:
        if is_forwarded(ctx):
            return fail(ErrorCode.NOT_CONTROLLER, None)
        body = {"validate_only": req.validate_only, "entries": [
            {"entity": [dict(x) for x in e.entity], "ops": [dict(o) for o in e.ops]}
            for e in req.entries]}
        try:
            resp = await ctx.broker.topics.forward(49, ctx.version, body)
        except KafkaError as err:
            return fail(err.code, err.message)
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": x.error_code, "error_message": x.error_message,
             "entity": [dict(y) for y in x.entity]} for x in resp.entries]}
    return {"throttle_time_ms": 0, "entries": out}


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
    for ent, values in sorted(ctx.broker.topics.image.quotas.items(), key=repr):
        if _matches(req.components, req.strict, ent):
            entries.append({
                "entity": [{"entity_type": t, "entity_name": n} for t, n in ent],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}
