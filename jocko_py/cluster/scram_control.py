"""SCRAM credential decisions of the controller (Kafka's ``ScramControlManager``):
AlterUserScramCredentials as a pure function of the metadata image, returning the
UserScramCredentialRecords / RemoveUserScramCredentialRecords to commit and one result
per user (a ``ControllerResult``).

The client sends the salted password; the controller keeps only what the server side
of SCRAM needs (RFC 5802): salt, iterations, StoredKey = H(HMAC(SaltedPassword,
"Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key").

Per user, all of its changes apply or none: an empty name gets
UNACCEPTABLE_CREDENTIAL, a mechanism named twice for one user DUPLICATE_RESOURCE, an
unknown mechanism UNSUPPORTED_SASL_MECHANISM, deleting a credential that does not
exist RESOURCE_NOT_FOUND, iterations outside 4096-16384 or an empty salt / salted
password UNACCEPTABLE_CREDENTIAL. Results come in the order users are first named,
deletions before upsertions (as the request lists them).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import (
    MetadataImage,
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from jocko_py.protocol.errors import ErrorCode

MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
HASH_NAMES = {1: "sha256", 2: "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


def scram_keys(hash_name: str, salted_password: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) of a salted password."""
    client_key = hmac.new(salted_password, b"Client Key", hash_name).digest()
    return (hashlib.new(hash_name, client_key).digest(),
            hmac.new(salted_password, b"Server Key", hash_name).digest())


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class ScramAlterResult:
    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


class ScramControlManager:
    def alter_credentials(self, image: MetadataImage, deletions: list[ScramDeletion],
                          upsertions: list[ScramUpsertion]
                          ) -> ControllerResult[list[ScramAlterResult]]:
        users: dict[str, list[ScramDeletion | ScramUpsertion]] = {}
        ops: list[ScramDeletion | ScramUpsertion] = [*deletions, *upsertions]
        for op in ops:
            users.setdefault(op.name, []).append(op)
        results: list[ScramAlterResult] = []
        records: list[MetadataRecord] = []
        for name, user_ops in users.items():
            err, msg, recs = self._alter_user(image, name, user_ops)
            if not err:
                records.extend(recs)
            results.append(ScramAlterResult(name, err, msg))
        return ControllerResult(records, results)

    @staticmethod
    def _alter_user(image: MetadataImage, name: str,
                    ops: list[ScramDeletion | ScramUpsertion]
                    ) -> tuple[ErrorCode, str | None, list[MetadataRecord]]:
        if not name:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty", []
        mechs = [op.mechanism for op in ops]
        if len(set(mechs)) != len(mechs):
            return (ErrorCode.DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request", [])
        recs: list[MetadataRecord] = []
        for op in ops:
            if op.mechanism not in MECHANISM_NAMES:
                return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism", []
            if isinstance(op, ScramDeletion):
                if (name, op.mechanism) not in image.scram:
                    return (ErrorCode.RESOURCE_NOT_FOUND,
                            "Attempt to delete a user credential that does not exist", [])
                recs.append(RemoveUserScramCredentialRecord(name, op.mechanism))
            elif op.iterations < MIN_ITERATIONS:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations", []
            elif op.iterations > MAX_ITERATIONS:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations", []
            elif not op.salt or not op.salted_password:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and password must be set", []
            else:
                stored, server = scram_keys(HASH_NAMES[op.mechanism], op.salted_password)
                recs.append(UserScramCredentialRecord(
                    name, op.mechanism, op.salt, stored, server, op.iterations))
        return ErrorCode.NONE, None, recs
