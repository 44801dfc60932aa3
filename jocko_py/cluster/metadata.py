"""The cluster metadata image: a pure state machine over KRaft-style metadata records.

This module owns the metadata record types, their durable encoding and the
``MetadataImage`` that every broker builds by applying the metadata log in order.
It does no I/O. The record vocabulary follows
``../shared/kafka-protocol/metadata-records/`` (apiKey, field names, defaults).

Public API
----------
Records (frozen dataclasses; list-valued fields are tuples):

- ``RegisterBrokerRecord(broker_id, incarnation_id, broker_epoch, endpoints, rack=None,
  fenced=True, in_controlled_shutdown=False)`` with ``BrokerEndpoint(name, host, port,
  security_protocol)``; ``.host`` / ``.port`` give the first endpoint.
- ``UnregisterBrokerRecord(broker_id, broker_epoch)``
- ``FenceBrokerRecord(id, epoch)``, ``UnfenceBrokerRecord(id, epoch)``
- ``BrokerRegistrationChangeRecord(broker_id, broker_epoch, fenced=0,
  in_controlled_shutdown=0)`` (fenced: 1 fence, -1 unfence, 0 no change)
- ``TopicRecord(name, topic_id)``, ``RemoveTopicRecord(topic_id)``
- ``PartitionRecord(partition_id, topic_id, replicas, isr, leader=-1, leader_epoch=0,
  partition_epoch=0, removing_replicas=(), adding_replicas=(), leader_recovery_state=0,
  elr=(), last_known_elr=())``
- ``PartitionChangeRecord(partition_id, topic_id, isr=None, leader=NO_LEADER_CHANGE,
  replicas=None, removing_replicas=None, adding_replicas=None, leader_recovery_state=-1,
  elr=None, last_known_elr=None)``
  (``None`` / ``NO_LEADER_CHANGE`` mean "unchanged"; ``leader=-1`` means no leader;
  ``elr`` / ``last_known_elr`` are KIP-966's eligible leader replicas, see controller.py,
  encoded only when not empty)
- ``ConfigRecord(resource_type, resource_name, name, value)`` (``value=None`` deletes;
  resource types ``CONFIG_RESOURCE_TOPIC`` = 2, ``CONFIG_RESOURCE_BROKER`` = 4)
- ``ProducerIdsRecord(broker_id, broker_epoch, next_producer_id)``: applied only if it
  strictly advances ``next_producer_id`` (else ignored: its block was already handed out)
- ``FeatureLevelRecord(name, feature_level)``, ``NoOpRecord()``
- ``UserScramCredentialRecord(name, mechanism, salt, stored_key, server_key, iterations)``,
  ``RemoveUserScramCredentialRecord(name, mechanism)``: SCRAM credentials (salted, never
  the password); ``AccessControlEntryRecord(id, resource_type, resource_name,
  pattern_type, principal, host, operation, permission_type)``,
  ``RemoveAccessControlEntryRecord(id)``: ACLs (bytes fields are base64 in the encoding);
  ``ClientQuotaRecord(entity, key, value, remove=False)``: client quotas
- ``ClusterSecretRecord(secret)`` (jocko-specific, apiKey 10000): the cluster's random
  32-byte secret, committed once by the active controller; brokers prove they know it
  when they connect to each other over Kafka's protocol (``broker/security/cluster_auth.py``;
  not the operator's ``jocko.cluster.secret.file``, which authenticates the raft and
  gossip links that carry this log). Its ``repr`` hides the value; the image keeps the
  first one (``cluster_secret``).
- ``MetadataRecord``: the union of all of the above.

Encoding:

- ``encode_record(rec) -> bytes`` / ``decode_record(data) -> MetadataRecord``. The format is
  compact, key-sorted UTF-8 JSON ``{"k": apiKey, "v": version, "d": {field: value}}``;
  UUIDs are hex strings, tuples are lists. Deterministic (same record -> same bytes) and
  versioned: a record with an unknown apiKey or a newer version than this code knows
  raises ``MetadataRecordError``; fields this code does not know are ignored, missing
  fields take the record's defaults.
- ``encode_records(records) -> bytes`` / ``decode_records(data) -> list``: several records
  as one blob (newline-separated ``encode_record`` outputs); the payload of a raft entry
  and of an image snapshot.

Image:

- ``MetadataImage()``; ``apply(record) -> None`` (deterministic and total: a record that
  does not fit the current image, e.g. a partition of an unknown topic, is ignored and
  logged, identically on every node, so replicas never diverge).
- ``topics: dict[str, TopicImage]``; ``TopicImage(name, topic_id, partitions:
  dict[int, PartitionImage])``; ``PartitionImage(replicas, isr, leader, leader_epoch,
  partition_epoch, ...)``. Topic and partition images are immutable snapshots, replaced
  on change, so a reader holding one sees a consistent value.
- ``topic_by_id(uuid) -> TopicImage | None``, ``topic_configs(name) -> dict[str, str]``,
  ``broker_configs(broker_id) -> dict[str, str]``.
- ``brokers: dict[int, BrokerImage]``; ``BrokerImage(broker_id, host, port, rack, fenced,
  broker_epoch, incarnation_id, endpoints, in_controlled_shutdown)``.
- ``next_producer_id: int``, ``features: dict[str, int]``, ``scram: dict[(user,
  mechanism), UserScramCredentialRecord]``, ``acls: dict[uuid, AccessControlEntryRecord]``
  (``acls_version`` counts ACL changes, for caches). ``topics_version``: a number that
  changes whenever a topic or partition changes (unique in the process, also across
  ``restore``), for caches of what is derived from ``topics``.
- ``apply_batch(records) -> MetadataDelta``: apply records in order and return what they
  changed (partitions with their image before and after, deleted topics, brokers,
  configs); ``delta.local_changes(broker_id)`` sorts the partition changes into the
  ones this broker now leads, follows, or no longer hosts.
- ``snapshot() -> list[MetadataRecord]`` (records that rebuild this image exactly),
  ``restore(records) -> None`` (replace the state by applying ``records`` to an empty
  image), ``MetadataImage.from_records(records)``, ``fingerprint() -> str`` (a digest of
  the snapshot, equal on two nodes iff their images are equal).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import json
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

log = logging.getLogger("jocko_py.cluster.metadata")

NO_LEADER = -1
NO_LEADER_CHANGE = -2

CONFIG_RESOURCE_TOPIC = 2
CONFIG_RESOURCE_BROKER = 4

# process-wide, so two images (or one image before and after `restore`) never share a value
_TOPICS_VERSIONS = itertools.count(1)


class MetadataRecordError(ValueError):
    """A metadata record could not be decoded (unknown type, newer version, bad bytes)."""


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


def format_endpoints(endpoints: Iterable[BrokerEndpoint]) -> str:
    """Endpoints as one string (what a broker gossips as its advertised address):
    ``NAME:PROTOCOL_ID@host:port,...``; a lone PLAINTEXT endpoint is plain ``host:port``."""
    eps = list(endpoints)
    if len(eps) == 1 and (eps[0].name, eps[0].security_protocol) == ("PLAINTEXT", 0):
        return f"{eps[0].host}:{eps[0].port}"
    return ",".join(f"{e.name}:{e.security_protocol}@{e.host}:{e.port}" for e in eps)


def parse_endpoints(value: str) -> tuple[BrokerEndpoint, ...]:
    """Inverse of ``format_endpoints``; raises ValueError on a malformed value."""
    if "@" not in value:
        host, _, port = value.rpartition(":")
        return (BrokerEndpoint("PLAINTEXT", host, int(port)),)
    out = []
    for part in value.split(","):
        head, _, addr = part.partition("@")
        name, _, proto = head.partition(":")
        host, _, port = addr.rpartition(":")
        out.append(BrokerEndpoint(name, host, int(port), int(proto)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    API_KEY: ClassVar[int] = 0
    VERSION: ClassVar[int] = 1
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False

    @property
    def host(self) -> str:
        return self.endpoints[0].host if self.endpoints else ""

    @property
    def port(self) -> int:
        return self.endpoints[0].port if self.endpoints else -1


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    API_KEY: ClassVar[int] = 1
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    API_KEY: ClassVar[int] = 2
    VERSION: ClassVar[int] = 0
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    API_KEY: ClassVar[int] = 3
    VERSION: ClassVar[int] = 0
    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    # KIP-966: replicas out of the ISR that still hold everything up to the HW
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    API_KEY: ClassVar[int] = 4
    VERSION: ClassVar[int] = 0
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    API_KEY: ClassVar[int] = 5
    VERSION: ClassVar[int] = 0
    partition_id: int
    topic_id: uuid.UUID
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = -1
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    API_KEY: ClassVar[int] = 7
    VERSION: ClassVar[int] = 0
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    API_KEY: ClassVar[int] = 8
    VERSION: ClassVar[int] = 0
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    API_KEY: ClassVar[int] = 9
    VERSION: ClassVar[int] = 0
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    API_KEY: ClassVar[int] = 12
    VERSION: ClassVar[int] = 0
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    API_KEY: ClassVar[int] = 15
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    API_KEY: ClassVar[int] = 17
    VERSION: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int
    fenced: int = 0
    in_controlled_shutdown: int = 0


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    API_KEY: ClassVar[int] = 11
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int  # 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    API_KEY: ClassVar[int] = 22
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    API_KEY: ClassVar[int] = 18
    VERSION: ClassVar[int] = 0
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    API_KEY: ClassVar[int] = 19
    VERSION: ClassVar[int] = 0
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    API_KEY: ClassVar[int] = 14
    VERSION: ClassVar[int] = 0
    # ((entity type, entity name or None for the default), ...), sorted by type
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True, slots=True)
class ClusterSecretRecord:
    """jocko-specific: the secret brokers authenticate each other with (never printed)."""

    API_KEY: ClassVar[int] = 10000
    VERSION: ClassVar[int] = 0
    secret: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    API_KEY: ClassVar[int] = 20
    VERSION: ClassVar[int] = 0


MetadataRecord: TypeAlias = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | ProducerIdsRecord
    | BrokerRegistrationChangeRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | ClientQuotaRecord
    | ClusterSecretRecord
    | NoOpRecord
)

RECORD_TYPES: dict[int, type[Any]] = {
    cls.API_KEY: cls
    for cls in (
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        ConfigRecord,
        PartitionChangeRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        RemoveTopicRecord,
        FeatureLevelRecord,
        ProducerIdsRecord,
        BrokerRegistrationChangeRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        ClientQuotaRecord,
        ClusterSecretRecord,
        NoOpRecord,
    )
}

# --------------------------------------------------------------------------- encoding

_UUID_FIELDS = {"incarnation_id", "topic_id", "id"}
_BYTES_FIELDS = {"salt", "stored_key", "server_key", "secret"}
_INT_TUPLE_FIELDS = {"replicas", "isr", "removing_replicas", "adding_replicas", "elr",
                     "last_known_elr"}
# fields added after the first records were written: left out while at their default,
# so records without them encode as before
_OMITTED_AT_DEFAULT = {"elr", "last_known_elr"}


# each record class's fields, and whether each is left out at its default
# (`dataclasses.fields` builds its answer anew on every call: thousands of records a
# CreateTopics)
_JSON_FIELDS: dict[type[Any], tuple[tuple[str, Any, bool], ...]] = {}


def _json_fields(cls: type[Any]) -> tuple[tuple[str, Any, bool], ...]:
    fields = _JSON_FIELDS.get(cls)
    if fields is None:
        fields = _JSON_FIELDS[cls] = tuple(
            (f.name, f.default, f.name in _OMITTED_AT_DEFAULT) for f in dataclasses.fields(cls))
    return fields


def _to_json(rec: MetadataRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, default, omitted in _json_fields(type(rec)):
        v = getattr(rec, name)
        if omitted and v == default:
            continue
        if isinstance(v, uuid.UUID):
            out[name] = v.hex
        elif isinstance(v, bytes):
            out[name] = base64.b64encode(v).decode()
        elif name == "endpoints":
            out[name] = [[e.name, e.host, e.port, e.security_protocol] for e in v]
        elif isinstance(v, tuple):
            out[name] = list(v)
        else:
            out[name] = v
    return out


def _from_json(cls: type[Any], data: dict[str, Any]) -> MetadataRecord:
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING:
                raise MetadataRecordError(f"{cls.__name__}: missing field {f.name}")
            continue
        v = data[f.name]
        if f.name in _UUID_FIELDS and isinstance(v, str):
            v = uuid.UUID(hex=v)
        elif f.name in _BYTES_FIELDS:
            v = base64.b64decode(v)
        elif f.name == "entity":
            v = tuple((str(t), None if n is None else str(n)) for t, n in v)
        elif f.name == "endpoints":
            v = tuple(BrokerEndpoint(str(n), str(h), int(p), int(s)) for n, h, p, s in v)
        elif f.name in _INT_TUPLE_FIELDS and v is not None:
            v = tuple(int(x) for x in v)
        kwargs[f.name] = v
    rec: MetadataRecord = cls(**kwargs)
    return rec


def encode_record(rec: MetadataRecord) -> bytes:
    """Serialise a metadata record; deterministic and versioned (see module docstring)."""
    doc = {"k": rec.API_KEY, "v": rec.VERSION, "d": _to_json(rec)}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def decode_record(data: bytes) -> MetadataRecord:
    """Inverse of ``encode_record``; raises ``MetadataRecordError`` on anything invalid."""
    try:
        doc = json.loads(data)
        key, version, body = doc["k"], doc["v"], doc["d"]
    except (ValueError, KeyError, TypeError) as e:
        raise MetadataRecordError(f"undecodable metadata record: {e}") from e
    cls = RECORD_TYPES.get(key) if isinstance(key, int) else None
    if cls is None:
        raise MetadataRecordError(f"unknown metadata record apiKey {key!r}")
    if not isinstance(version, int) or version < 0 or version > cls.VERSION:
        raise MetadataRecordError(f"{cls.__name__} version {version!r} not supported")
    if not isinstance(body, dict):
        raise MetadataRecordError(f"{cls.__name__}: body is not an object")
    try:
        return _from_json(cls, body)
    except (ValueError, TypeError) as e:
        raise MetadataRecordError(f"{cls.__name__}: bad field: {e}") from e


# --------------------------------------------------------------------------- delta


@dataclass(frozen=True, slots=True)
class PartitionRef:
    """One partition as a delta reports it: where it was and where it is now."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    before: PartitionImage | None
    after: PartitionImage | None


@dataclass(slots=True)
class LocalChanges:
    leaders: list[PartitionRef] = field(default_factory=list)
    followers: list[PartitionRef] = field(default_factory=list)
    deleted: list[PartitionRef] = field(default_factory=list)


@dataclass(slots=True)
class MetadataDelta:
    """What one batch of records changed; built by ``MetadataImage.apply_batch``."""

    partitions: dict[tuple[uuid.UUID, int], PartitionRef] = field(default_factory=dict)
    deleted_topics: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    brokers: set[int] = field(default_factory=set)
    configs: set[tuple[int, str]] = field(default_factory=set)
    snapshot_loaded: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.partitions or self.deleted_topics or self.brokers or self.configs
            or self.snapshot_loaded
        )

    def local_changes(self, broker_id: int) -> LocalChanges:
        """Partitions of which ``broker_id`` became (or stays, with a change) the leader,
        a follower, or stopped being a replica (including deleted topics)."""
        out = LocalChanges()
        for ref in self.partitions.values():
            after = ref.after
            if after is None or broker_id not in after.replicas:
                if ref.before is not None and broker_id in ref.before.replicas:
                    out.deleted.append(ref)
                continue
            if after.leader == broker_id:
                out.leaders.append(ref)
            else:
                out.followers.append(ref)
        for t in self.deleted_topics.values():
            for pid, p in t.partitions.items():
                if broker_id in p.replicas and (t.topic_id, pid) not in self.partitions:
                    out.deleted.append(PartitionRef(t.name, pid, t.topic_id, p, None))
        return out


# --------------------------------------------------------------------------- image


@dataclass(frozen=True, slots=True)
class PartitionImage:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    elr: tuple[int, ...] = ()  # eligible leader replicas (KIP-966)
    last_known_elr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BrokerImage:
    broker_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool
    broker_epoch: int = 0
    incarnation_id: uuid.UUID = uuid.UUID(int=0)
    endpoints: tuple[BrokerEndpoint, ...] = ()
    in_controlled_shutdown: bool = False


class MetadataImage:
    """The metadata state built by applying records in log order. Not thread-safe."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicImage] = {}
        self._topics_by_id: dict[uuid.UUID, str] = {}
        self.brokers: dict[int, BrokerImage] = {}
        self._configs: dict[tuple[int, str], dict[str, str]] = {}
        self.next_producer_id: int = 0
        self.features: dict[str, int] = {}
        # SCRAM credentials by (user, mechanism) and ACLs by id (security)
        self.scram: dict[tuple[str, int], UserScramCredentialRecord] = {}
        self.acls: dict[uuid.UUID, AccessControlEntryRecord] = {}
        self.acls_version: int = 0
        self.topics_version: int = next(_TOPICS_VERSIONS)
        # client quotas: entity -> {key: value}
        self.quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
        # the cluster's secret (ClusterSecretRecord; None until the controller commits one)
        self.cluster_secret: bytes | None = None
        self.records_applied: int = 0
        self._fingerprint: str | None = None

    @classmethod
    def from_records(cls, records: Iterable[MetadataRecord]) -> MetadataImage:
        img = cls()
        for r in records:
            img.apply(r)
        return img

    # ---- queries

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        name = self._topics_by_id.get(topic_id)
        return None if name is None else self.topics[name]

    def topic_configs(self, name: str) -> dict[str, str]:
        return dict(self._configs.get((CONFIG_RESOURCE_TOPIC, name), {}))

    def broker_configs(self, broker_id: int) -> dict[str, str]:
        return dict(self._configs.get((CONFIG_RESOURCE_BROKER, str(broker_id)), {}))

    def configs(self, resource_type: int, resource_name: str) -> dict[str, str]:
        return dict(self._configs.get((resource_type, resource_name), {}))

    def config_resources(self, resource_type: int) -> list[str]:
        """The names of the resources of a type that have configs set."""
        return sorted(n for (t, n), cfg in self._configs.items() if t == resource_type and cfg)

    def partition(self, topic: str, partition_id: int) -> PartitionImage | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition_id)

    # ---- transitions

    def apply_batch(self, records: Iterable[MetadataRecord]) -> MetadataDelta:
        """Apply ``records`` in order; return the delta they make (see ``MetadataDelta``)."""
        delta = MetadataDelta()
        for r in records:
            self._note(delta, r)
            self.apply(r)
        for key, ref in list(delta.partitions.items()):
            t = self.topic_by_id(key[0])
            after = None if t is None else t.partitions.get(key[1])
            if after == ref.before:
                del delta.partitions[key]
            else:
                delta.partitions[key] = dataclasses.replace(ref, after=after)
        return delta

    @staticmethod
    def diff(old: MetadataImage, new: MetadataImage) -> MetadataDelta:
        """The delta that turns ``old`` into ``new`` (after loading a snapshot)."""
        delta = MetadataDelta(snapshot_loaded=True)
        for t in new.topics.values():
            prev = old.topic_by_id(t.topic_id)
            for pid, p in t.partitions.items():
                before = None if prev is None else prev.partitions.get(pid)
                if before != p:
                    delta.partitions[(t.topic_id, pid)] = PartitionRef(
                        t.name, pid, t.topic_id, before, p)
        for t in old.topics.values():
            if new.topic_by_id(t.topic_id) is None:
                delta.deleted_topics[t.topic_id] = t
        delta.brokers = set(old.brokers) | set(new.brokers)
        delta.configs = set(old._configs) | set(new._configs)
        return delta

    def _note(self, delta: MetadataDelta, r: MetadataRecord) -> None:
        if isinstance(r, PartitionRecord | PartitionChangeRecord):
            key = (r.topic_id, r.partition_id)
            if key not in delta.partitions:
                t = self.topic_by_id(r.topic_id)
                if t is not None:
                    before = t.partitions.get(r.partition_id)
                    delta.partitions[key] = PartitionRef(
                        t.name, r.partition_id, t.topic_id, before, None
                    )
        elif isinstance(r, RemoveTopicRecord):
            t = self.topic_by_id(r.topic_id)
            if t is not None:
                # partitions changed earlier in this batch are reported as deleted too
                parts = dict(t.partitions)
                for (tid, pid), ref in list(delta.partitions.items()):
                    if tid == t.topic_id:
                        if ref.before is not None:
                            parts[pid] = ref.before
                        else:
                            parts.pop(pid, None)
                        del delta.partitions[(tid, pid)]
                delta.deleted_topics[t.topic_id] = TopicImage(t.name, t.topic_id, parts)
                delta.configs.add((CONFIG_RESOURCE_TOPIC, t.name))
        elif isinstance(r, ConfigRecord):
            delta.configs.add((r.resource_type, r.resource_name))
        elif isinstance(r, FenceBrokerRecord | UnfenceBrokerRecord):
            delta.brokers.add(r.id)
        elif isinstance(
            r, RegisterBrokerRecord | UnregisterBrokerRecord | BrokerRegistrationChangeRecord
        ):
            delta.brokers.add(r.broker_id)

    def apply(self, record: MetadataRecord) -> None:
        """Apply one record. Deterministic; ignores (and logs) records that do not fit."""
        self.records_applied += 1
        self._fingerprint = None
        handler = _APPLY.get(type(record))
        if handler is None:
            log.warning("[metadata] ignoring unsupported record %r", record)
            return
        handler(self, record)

    def _apply_register_broker(self, r: RegisterBrokerRecord) -> None:
        self.brokers[r.broker_id] = BrokerImage(
            broker_id=r.broker_id,
            host=r.host,
            port=r.port,
            rack=r.rack,
            fenced=r.fenced,
            broker_epoch=r.broker_epoch,
            incarnation_id=r.incarnation_id,
            endpoints=r.endpoints,
            in_controlled_shutdown=r.in_controlled_shutdown,
        )

    def _apply_unregister_broker(self, r: UnregisterBrokerRecord) -> None:
        b = self.brokers.get(r.broker_id)
        if b is None or b.broker_epoch != r.broker_epoch:
            log.info("[metadata] stale unregister %r", r)
            return
        del self.brokers[r.broker_id]

    def _set_fenced(self, broker_id: int, epoch: int, fenced: bool) -> None:
        b = self.brokers.get(broker_id)
        if b is None or b.broker_epoch != epoch:
            log.info("[metadata] stale fence change broker=%d epoch=%d", broker_id, epoch)
            return
        self.brokers[broker_id] = dataclasses.replace(b, fenced=fenced)

    def _apply_fence(self, r: FenceBrokerRecord) -> None:
        self._set_fenced(r.id, r.epoch, True)

    def _apply_unfence(self, r: UnfenceBrokerRecord) -> None:
        self._set_fenced(r.id, r.epoch, False)

    def _apply_registration_change(self, r: BrokerRegistrationChangeRecord) -> None:
        b = self.brokers.get(r.broker_id)
        if b is None or b.broker_epoch != r.broker_epoch:
            return
        fenced = b.fenced if r.fenced == 0 else r.fenced > 0
        shut = (
            b.in_controlled_shutdown
            if r.in_controlled_shutdown == 0
            else r.in_controlled_shutdown > 0
        )
        self.brokers[r.broker_id] = dataclasses.replace(
            b, fenced=fenced, in_controlled_shutdown=shut
        )

    def _apply_topic(self, r: TopicRecord) -> None:
        if r.name in self.topics or r.topic_id in self._topics_by_id:
            log.warning("[metadata] duplicate topic %r ignored", r)
            return
        self.topics[r.name] = TopicImage(r.name, r.topic_id, {})
        self._topics_by_id[r.topic_id] = r.name
        self.topics_version = next(_TOPICS_VERSIONS)

    def _apply_remove_topic(self, r: RemoveTopicRecord) -> None:
        name = self._topics_by_id.pop(r.topic_id, None)
        if name is None:
            log.info("[metadata] remove of unknown topic %s ignored", r.topic_id)
            return
        del self.topics[name]
        self._configs.pop((CONFIG_RESOURCE_TOPIC, name), None)
        self.topics_version = next(_TOPICS_VERSIONS)

    def _apply_partition(self, r: PartitionRecord) -> None:
        t = self.topic_by_id(r.topic_id)
        if t is None:
            log.warning("[metadata] partition of unknown topic %r ignored", r)
            return
        parts = dict(t.partitions)
        parts[r.partition_id] = PartitionImage(
            replicas=r.replicas,
            isr=r.isr,
            leader=r.leader,
            leader_epoch=r.leader_epoch,
            partition_epoch=r.partition_epoch,
            removing_replicas=r.removing_replicas,
            adding_replicas=r.adding_replicas,
            leader_recovery_state=r.leader_recovery_state,
            elr=r.elr,
            last_known_elr=r.last_known_elr,
        )
        self.topics[t.name] = TopicImage(t.name, t.topic_id, parts)
        self.topics_version = next(_TOPICS_VERSIONS)

    def _apply_partition_change(self, r: PartitionChangeRecord) -> None:
        t = self.topic_by_id(r.topic_id)
        p = None if t is None else t.partitions.get(r.partition_id)
        if t is None or p is None:
            log.warning("[metadata] change of unknown partition %r ignored", r)
            return
        # As in KRaft: any change bumps the partition epoch; a leader change bumps the
        # leader epoch so followers and clients can fence the old leader.
        leader_changed = r.leader != NO_LEADER_CHANGE
        new = PartitionImage(
            replicas=p.replicas if r.replicas is None else r.replicas,
            isr=p.isr if r.isr is None else r.isr,
            leader=r.leader if leader_changed else p.leader,
            leader_epoch=p.leader_epoch + 1 if leader_changed else p.leader_epoch,
            partition_epoch=p.partition_epoch + 1,
            removing_replicas=(
                p.removing_replicas if r.removing_replicas is None else r.removing_replicas
            ),
            adding_replicas=p.adding_replicas if r.adding_replicas is None else r.adding_replicas,
            leader_recovery_state=(
                p.leader_recovery_state if r.leader_recovery_state < 0 else r.leader_recovery_state
            ),
            elr=p.elr if r.elr is None else r.elr,
            last_known_elr=p.last_known_elr if r.last_known_elr is None else r.last_known_elr,
        )
        parts = dict(t.partitions)
        parts[r.partition_id] = new
        self.topics[t.name] = TopicImage(t.name, t.topic_id, parts)
        self.topics_version = next(_TOPICS_VERSIONS)

    def _apply_config(self, r: ConfigRecord) -> None:
        key = (r.resource_type, r.resource_name)
        if r.value is None:
            cfg = self._configs.get(key)
            if cfg is not None:
                cfg.pop(r.name, None)
                if not cfg:
                    del self._configs[key]
        else:
            self._configs.setdefault(key, {})[r.name] = r.value

    def _apply_producer_ids(self, r: ProducerIdsRecord) -> None:
        if r.next_producer_id <= self.next_producer_id:
            # A second allocation computed from the same image: its block is already out.
            log.warning("[metadata] producer id block not advancing ignored: %r", r)
            return
        self.next_producer_id = r.next_producer_id

    def _apply_feature_level(self, r: FeatureLevelRecord) -> None:
        self.features[r.name] = r.feature_level

    def _apply_noop(self, r: NoOpRecord) -> None:
        pass

    def _apply_scram(self, r: UserScramCredentialRecord) -> None:
        self.scram[(r.name, r.mechanism)] = r

    def _apply_remove_scram(self, r: RemoveUserScramCredentialRecord) -> None:
        self.scram.pop((r.name, r.mechanism), None)

    def _apply_acl(self, r: AccessControlEntryRecord) -> None:
        self.acls[r.id] = r
        self.acls_version += 1

    def _apply_quota(self, r: ClientQuotaRecord) -> None:
        if r.remove:
            q = self.quotas.get(r.entity)
            if q is not None:
                q.pop(r.key, None)
                if not q:
                    del self.quotas[r.entity]
        else:
            self.quotas.setdefault(r.entity, {})[r.key] = float(r.value)

    def _apply_cluster_secret(self, r: ClusterSecretRecord) -> None:
        if self.cluster_secret is None and len(r.secret) >= 16:
            self.cluster_secret = r.secret  # the first one stays (brokers already use it)
        else:
            log.warning("[metadata] cluster secret record ignored (the cluster has one)")

    def _apply_remove_acl(self, r: RemoveAccessControlEntryRecord) -> None:
        if self.acls.pop(r.id, None) is not None:
            self.acls_version += 1

    # ---- snapshots

    def snapshot(self) -> list[MetadataRecord]:
        """Records that rebuild exactly this image (in a canonical order)."""
        out: list[MetadataRecord] = []
        for name in sorted(self.features):
            out.append(FeatureLevelRecord(name, self.features[name]))
        for bid in sorted(self.brokers):
            b = self.brokers[bid]
            out.append(
                RegisterBrokerRecord(
                    broker_id=b.broker_id,
                    incarnation_id=b.incarnation_id,
                    broker_epoch=b.broker_epoch,
                    endpoints=b.endpoints,
                    rack=b.rack,
                    fenced=b.fenced,
                    in_controlled_shutdown=b.in_controlled_shutdown,
                )
            )
        for name in sorted(self.topics):
            t = self.topics[name]
            out.append(TopicRecord(t.name, t.topic_id))
            for pid in sorted(t.partitions):
                p = t.partitions[pid]
                out.append(
                    PartitionRecord(
                        partition_id=pid,
                        topic_id=t.topic_id,
                        replicas=p.replicas,
                        isr=p.isr,
                        leader=p.leader,
                        leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch,
                        removing_replicas=p.removing_replicas,
                        adding_replicas=p.adding_replicas,
                        leader_recovery_state=p.leader_recovery_state,
                        elr=p.elr,
                        last_known_elr=p.last_known_elr,
                    )
                )
        for rtype, rname in sorted(self._configs):
            cfg = self._configs[(rtype, rname)]
            for k in sorted(cfg):
                out.append(ConfigRecord(rtype, rname, k, cfg[k]))
        if self.next_producer_id:
            out.append(ProducerIdsRecord(-1, -1, self.next_producer_id))
        out.extend(self.scram[k] for k in sorted(self.scram))
        out.extend(self.acls[k] for k in sorted(self.acls))
        for ent in sorted(self.quotas, key=repr):
            for k in sorted(self.quotas[ent]):
                out.append(ClientQuotaRecord(ent, k, self.quotas[ent][k]))
        if self.cluster_secret is not None:
            out.append(ClusterSecretRecord(self.cluster_secret))
        return out

    def restore(self, records: Iterable[MetadataRecord]) -> None:
        """Replace this image's state with the one ``records`` build from empty."""
        fresh = MetadataImage.from_records(records)
        self.__dict__.update(fresh.__dict__)

    def fingerprint(self) -> str:
        if self._fingerprint is not None:
            return self._fingerprint
        h = hashlib.sha256()
        for r in self.snapshot():
            h.update(encode_record(r))
            h.update(b"\n")
        self._fingerprint = h.hexdigest()
        return self._fingerprint

    def __repr__(self) -> str:
        return (
            f"MetadataImage(brokers={sorted(self.brokers)}, topics={sorted(self.topics)}, "
            f"next_producer_id={self.next_producer_id})"
        )


_APPLY: dict[type[Any], Any] = {
    RegisterBrokerRecord: MetadataImage._apply_register_broker,
    UnregisterBrokerRecord: MetadataImage._apply_unregister_broker,
    TopicRecord: MetadataImage._apply_topic,
    RemoveTopicRecord: MetadataImage._apply_remove_topic,
    PartitionRecord: MetadataImage._apply_partition,
    PartitionChangeRecord: MetadataImage._apply_partition_change,
    ConfigRecord: MetadataImage._apply_config,
    FenceBrokerRecord: MetadataImage._apply_fence,
    UnfenceBrokerRecord: MetadataImage._apply_unfence,
    BrokerRegistrationChangeRecord: MetadataImage._apply_registration_change,
    ProducerIdsRecord: MetadataImage._apply_producer_ids,
    FeatureLevelRecord: MetadataImage._apply_feature_level,
    NoOpRecord: MetadataImage._apply_noop,
    UserScramCredentialRecord: MetadataImage._apply_scram,
    RemoveUserScramCredentialRecord: MetadataImage._apply_remove_scram,
    AccessControlEntryRecord: MetadataImage._apply_acl,
    RemoveAccessControlEntryRecord: MetadataImage._apply_remove_acl,
    ClientQuotaRecord: MetadataImage._apply_quota,
    ClusterSecretRecord: MetadataImage._apply_cluster_secret,
}


def encode_records(records: Iterable[MetadataRecord]) -> bytes:
    """A list of records as one blob (raft entry payloads and image snapshots)."""
    return b"\n".join(encode_record(r) for r in records)


def decode_records(data: bytes) -> list[MetadataRecord]:
    return [decode_record(line) for line in data.split(b"\n") if line]
