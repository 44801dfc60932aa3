"""DescribeUserScramCredentials (key 50) v0 and AlterUserScramCredentials (key 51) v0:
what `kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`
drives.

Credentials live in the metadata log as UserScramCredentialRecord /
RemoveUserScramCredentialRecord (salt, iterations, StoredKey, ServerKey: the
client sends the salted password; the password itself never reaches the broker).
Alter is decided by the active controller (other brokers forward it). Per user,
all of its changes apply or none: an empty name gets UNACCEPTABLE_CREDENTIAL, an
unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside 4096-16384 or an
empty salt / salted password UNACCEPTABLE_CREDENTIAL, a user named twice for one
mechanism DUPLICATE_RESOURCE, deleting a missing credential RESOURCE_NOT_FOUND.
Describe with a null or empty user list lists every user with a credential; an
unknown user gets RESOURCE_NOT_FOUND, a repeated one DUPLICATE_RESOURCE. Both
need the cluster ALTER / DESCRIBE permission when an authorizer is configured.
"""

from __future__ import annotations

from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.security.authz import authorize_cluster
from jocko_py.broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    credential_from_salted,
)
from jocko_py.broker.topics import is_forwarded
from jocko_py.cluster.metadata import (
    MetadataImage,
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from jocko_py.cluster.quorum import NotControllerError
from jocko_py.protocol.errors import ErrorCode, KafkaError

_HASH = {1: "sha256", 2: "sha512"}


def _decide(img: MetadataImage, req: Any) -> tuple[list[dict[str, Any]], list[MetadataRecord]]:
    users: dict[str, list[tuple[str, Any]]] = {}
    for d in req.deletions:
        users.setdefault(d.name, []).append(("delete", d))
    for u in req.upsertions:
        users.setdefault(u.name, []).append(("upsert", u))
    results: list[dict[str, Any]] = []
    records: list[MetadataRecord] = []
    for name, ops in users.items():
        err, msg = ErrorCode.NONE, None
        recs: list[MetadataRecord] = []
        mechs = [op.mechanism for _, op in ops]
        if not name:
            err, msg = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        elif len(set(mechs)) != len(mechs):
            err, msg = (ErrorCode.DUPLICATE_RESOURCE,
                        "A user credential cannot be altered twice in the same request")
        for kind, op in ops:
            if err:
                break
            if op.mechanism not in MECHANISM_NAMES:
                err, msg = ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
            elif kind == "delete":
                if (name, op.mechanism) not in img.scram:
                    err, msg = (ErrorCode.RESOURCE_NOT_FOUND,
                                "Attempt to delete a user credential that does not exist")
                else:
                    recs.append(RemoveUserScramCredentialRecord(name, op.mechanism))
            elif op.iterations < MIN_ITERATIONS:
                err, msg = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
            elif op.iterations > MAX_ITERATIONS:
                err, msg = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
            elif not op.salt or not op.salted_password:
                err, msg = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and password must be set"
            else:
                c = credential_from_salted(_HASH[op.mechanism], bytes(op.salted_password),
                                           bytes(op.salt), op.iterations)
                recs.append(UserScramCredentialRecord(
                    name, op.mechanism, c.salt, c.stored_key, c.server_key, c.iterations))
        if not err:
            records.extend(recs)
        results.append({"user": name, "error_code": err, "error_message": msg})
    return results, records


@api(51, 0, 0)
async def alter(ctx: RequestContext, req: Any) -> dict[str, Any]:
    names = list(dict.fromkeys([d.name for d in req.deletions] +
                               [u.name for u in req.upsertions]))

    def all_fail(code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "results": [
            {"user": n, "error_code": code, "error_message": msg} for n in names]}

    if not authorize_cluster(ctx, "ALTER"):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    broker = ctx.broker
    out: list[list[dict[str, Any]]] = []

    def decide(img: MetadataImage) -> tuple[int, list[MetadataRecord]]:
        results, records = _decide(img, req)
        out.append(results)
        return 0, records

    try:
        await broker.topics.commit(decide)
    except NotControllerError:
        if is_forwarded(ctx):
            return all_fail(ErrorCode.NOT_CONTROLLER, None)
        try:
            resp = await broker.topics.forward(
                51, 0, {"deletions": [dict(d) for d in req.deletions],
                        "upsertions": [dict(u) for u in req.upsertions]},
                ok=lambda r: not any(x.error_code == ErrorCode.NOT_CONTROLLER
                                     for x in r.results))
        except KafkaError as e:
            return all_fail(e.code, e.message)
        return {"throttle_time_ms": 0, "results": [dict(r) for r in resp.results]}
    return {"throttle_time_ms": 0, "results": out[-1]}


@api(50, 0, 0)
async def describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, "DESCRIBE"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "results": []}
    img = ctx.broker.topics.image
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
