"""Client quota decisions of the controller (Kafka's ``ClientQuotaControlManager``):
AlterClientQuotas as a pure function of the metadata image, returning the
ClientQuotaRecords to commit and one result per entry (a ``ControllerResult``).

An entity combines ``user`` and ``client-id`` (a None name is the default entity);
keys ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``. An entry with no entity type, a repeated type, an
unknown type (also ``ip``: connection-rate quotas are not implemented), an unknown key
or a value that is not positive gets INVALID_REQUEST and no record; the other entries
of the request still apply. Removing a key that is not set is a no-op (its record
changes nothing). ``validate_only`` answers the same and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import ClientQuotaRecord, MetadataImage, MetadataRecord
from jocko_py.protocol.errors import ErrorCode

Entity = tuple[tuple[str, str | None], ...]
USER, CLIENT_ID = "user", "client-id"
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
              "controller_mutation_rate")


@dataclass(frozen=True, slots=True)
class QuotaOp:
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One AlterClientQuotas entry: the entity as sent (type, name) and its ops."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[QuotaOp, ...]


@dataclass(frozen=True, slots=True)
class QuotaAlterResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


def normalize_entity(parts: tuple[tuple[str, str | None], ...]) -> Entity | str:
    """The entity sorted by type, as records store it, or why it is invalid."""
    types = [t for t, _ in parts]
    if not parts:
        return "An entity must name at least one entity type"
    if len(set(types)) != len(types):
        return "An entity type appears more than once"
    bad = [t for t in types if t not in (USER, CLIENT_ID)]
    if bad:
        return f"Unsupported entity type {bad[0]} (user and client-id are supported)"
    return tuple(sorted(parts))


class ClientQuotaControlManager:
    def alter_client_quotas(self, image: MetadataImage, entries: list[QuotaAlteration],
                            validate_only: bool = False
                            ) -> ControllerResult[list[QuotaAlterResult]]:
        records: list[MetadataRecord] = []
        results: list[QuotaAlterResult] = []
        for e in entries:
            ent = normalize_entity(e.entity)
            why = ent if isinstance(ent, str) else None
            recs: list[MetadataRecord] = []
            for op in e.ops:
                if why:
                    break
                if op.key not in QUOTA_KEYS:
                    why = f"Unknown quota key {op.key}"
                elif not op.remove and not op.value > 0:
                    why = f"Quota {op.key} must be positive"
                elif not isinstance(ent, str):
                    recs.append(ClientQuotaRecord(ent, op.key, float(op.value), op.remove))
            if why:
                results.append(QuotaAlterResult(ErrorCode.INVALID_REQUEST, why))
                continue
            results.append(QuotaAlterResult())
            if not validate_only:
                records.extend(recs)
        return ControllerResult(records, results)
