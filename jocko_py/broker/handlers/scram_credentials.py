"""DescribeUserScramCredentials (key 50) v0 and AlterUserScramCredentials (key 51) v0:
what `kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`
drives.

Credentials live in the metadata log as UserScramCredentialRecord /
RemoveUserScramCredentialRecord (salt, iterations, StoredKey, ServerKey: the
client sends the salted password; the password itself never reaches the broker).
Alter is decided by the active controller (`cluster/scram_control.py`: per user all
of its changes apply or none; the checks and their errors) through the broker's one
commit-or-forward path (other brokers forward it). Describe with a null or empty user
list lists every user with a credential; an unknown user gets RESOURCE_NOT_FOUND, a
repeated one DUPLICATE_RESOURCE. Both need the cluster ALTER / DESCRIBE permission
when an authorizer is configured.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.controller_channel import Forward, is_forwarded
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import MetadataImage
from jocko_py.cluster.scram_control import ScramAlterResult, ScramDeletion, ScramUpsertion
from jocko_py.protocol.errors import ErrorCode, KafkaError


@api(51, 0, 0)
async def alter(ctx: RequestContext, req: Any) -> dict[str, Any]:
    names = list(dict.fromkeys([d.name for d in req.deletions] +
                               [u.name for u in req.upsertions]))

    def all_fail(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "results": [
            {"user": n, "error_code": code, "error_message": msg} for n in names]}

    if not authorize_cluster(ctx, "ALTER"):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    deletions = [ScramDeletion(d.name, d.mechanism) for d in req.deletions]
    upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt or b""),
                                 bytes(u.salted_password or b"")) for u in req.upsertions]

    def body(results: list[ScramAlterResult]) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "results": [
            {"user": r.user, "error_code": r.error, "error_message": r.message}
            for r in results]}

    def decide(img: MetadataImage) -> ControllerResult[dict[str, Any]]:
        return ctx.broker.quorum.controller.scram.alter_credentials(
            img, deletions, upsertions).map(body)

    forward = Forward(
        51, 0, {"deletions": [dict(d) for d in req.deletions],
                "upsertions": [dict(u) for u in req.upsertions]},
        lambda r: {"throttle_time_ms": 0, "results": [dict(x) for x in r.results]},
        lambda r: any(x.error_code == ErrorCode.NOT_CONTROLLER for x in r.results))
    try:
        return await ctx.broker.controller_channel.submit(decide, forward, forwarded=is_forwarded(ctx))
    except KafkaError as e:
        return all_fail(e.code, e.message)


@api(50, 0, 0)
async def describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, "DESCRIBE"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "results": []}
    img = ctx.broker.image
    by_user: dict[str, list[dict[str, int]]] = {}
    for (name, mech), rec in sorted(img.scram.items()):
        by_user.setdefault(name, []).append({"mechanism": mech, "iterations": rec.iterations})
    results = []
    if not req.users:
        results = [{"user": n, "error_code": ErrorCode.NONE, "error_message": None, "credential_infos": c}
                   for n, c in by_user.items()]
    else:
        wanted = [u.name for u in req.users]
        for n in dict.fromkeys(wanted):
            if wanted.count(n) > 1:
                results.append({"user": n, "error_code": ErrorCode.DUPLICATE_RESOURCE,
                                "error_message": "Cannot describe SCRAM credentials for the "
                                "same user twice in a single request", "credential_infos": []})
            elif n not in by_user:
                results.append({"user": n, "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                                "error_message": "Attempt to describe a user credential that "
                                "does not exist", "credential_infos": []})
            else:
                results.append({"user": n, "error_code": ErrorCode.NONE, "error_message": None,
                                "credential_infos": by_user[n]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}
