"""Raft messages, log entries and actions of the sans-IO raft core.

Messages carry the fields of KRaft's RPCs for the single metadata partition
(``__cluster_metadata-0``), flattened: the topic/partition arrays of the real
requests hold exactly one element here, so a later codec can map each dataclass onto
the broker's generated ``Vote``/``BeginQuorumEpoch``/``EndQuorumEpoch``/``Fetch``/
``FetchSnapshot``/``DescribeQuorum`` messages field by field. Every message also carries
an envelope (``src``, ``dest``, ``correlation_id``) as the request header would.

``VoteRequest.pre_vote`` is KIP-996's PreVote field (VoteRequest v2), which is newer
than the spec snapshot in ``../shared/kafka-protocol``.

``encode_message`` / ``decode_message`` give a self-describing JSON form used by the TCP
adapter until the protocol codec carries these APIs.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, TypeAlias

# Entry kinds: DATA carries application bytes; the others are raft control records
# (KRaft's LeaderChangeMessage and VotersRecord; CLUSTER_ID, the cluster id as UTF-8,
# is jocko-py's: how a cluster started without `storage format` agrees on its id).
DATA = 0
LEADER_CHANGE = 1
VOTERS = 2
CLUSTER_ID = 3


@dataclass(frozen=True, slots=True)
class Entry:
    offset: int
    epoch: int
    data: bytes
    kind: int = DATA


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Image of the state machine covering offsets ``[0, end_offset)``."""

    end_offset: int
    epoch: int
    voters: dict[int, str]
    data: bytes
    # the cluster id committed in the log below end_offset ("" if none)
    cluster_id: str = ""

    def to_bytes(self) -> bytes:
        doc: dict[str, Any] = {"end_offset": self.end_offset, "epoch": self.epoch,
                               "voters": self.voters}
        if self.cluster_id:
            doc["cluster_id"] = self.cluster_id
        head = json.dumps(doc, sort_keys=True).encode()
        return len(head).to_bytes(4, "big") + head + self.data

    @staticmethod
    def from_bytes(b: bytes) -> Snapshot:
        n = int.from_bytes(b[:4], "big")
        head = json.loads(b[4 : 4 + n])
        return Snapshot(
            int(head["end_offset"]),
            int(head["epoch"]),
            {int(k): str(v) for k, v in head["voters"].items()},
            bytes(b[4 + n :]),
            str(head.get("cluster_id", "")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteRequest:
    src: int
    dest: int
    correlation_id: int
    cluster_id: str
    voter_id: int
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteResponse:
    src: int
    dest: int
    correlation_id: int
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    # the responder's cluster id, sent with INCONSISTENT_CLUSTER_ID only (jocko-py's
    # addition to Kafka's fields: the refused node can say which cluster refused it)
    cluster_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochRequest:
    src: int
    dest: int
    correlation_id: int
    cluster_id: str
    voter_id: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochResponse:
    src: int
    dest: int
    correlation_id: int
    error_code: int
    leader_id: int
    leader_epoch: int
    # the responder's cluster id, sent with INCONSISTENT_CLUSTER_ID only (jocko-py's
    # addition to Kafka's fields: the refused node can say which cluster refused it)
    cluster_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochRequest:
    src: int
    dest: int
    correlation_id: int
    cluster_id: str
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest:
    """Fetch of the metadata partition (follower or observer -> leader)."""

    src: int
    dest: int
    correlation_id: int
    cluster_id: str
    replica_id: int
    max_wait_ms: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse:
    src: int
    dest: int
    correlation_id: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    leader_id: int
    leader_epoch: int
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset)
    snapshot_id: tuple[int, int] | None = None  # (end_offset, epoch)
    records: tuple[Entry, ...] = ()
    # the responder's cluster id, sent with INCONSISTENT_CLUSTER_ID only (jocko-py's
    # addition to Kafka's fields: the refused node can say which cluster refused it)
    cluster_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotRequest:
    src: int
    dest: int
    correlation_id: int
    cluster_id: str
    replica_id: int
    current_leader_epoch: int
    snapshot_id: tuple[int, int]  # (end_offset, epoch)
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotResponse:
    src: int
    dest: int
    correlation_id: int
    error_code: int
    leader_id: int
    leader_epoch: int
    snapshot_id: tuple[int, int]
    size: int
    position: int
    unaligned_records: bytes = b""
    # the responder's cluster id, sent with INCONSISTENT_CLUSTER_ID only (jocko-py's
    # addition to Kafka's fields: the refused node can say which cluster refused it)
    cluster_id: str = ""


@dataclass(frozen=True, slots=True)
class ReplicaState:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumResult:
    """The partition body of a DescribeQuorumResponse."""

    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()


Message: TypeAlias = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)

_MESSAGE_TYPES: dict[str, type[Any]] = {
    c.__name__: c
    for c in (
        VoteRequest,
        VoteResponse,
        BeginQuorumEpochRequest,
        BeginQuorumEpochResponse,
        EndQuorumEpochRequest,
        FetchRequest,
        FetchResponse,
        FetchSnapshotRequest,
        FetchSnapshotResponse,
    )
}


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Send:
    message: Message


@dataclass(frozen=True, slots=True)
class PersistQuorumState:
    """Durably record (epoch, voted_for) before any later action runs."""

    epoch: int
    voted_for: int | None


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Durably drop every entry with offset >= ``offset``."""

    offset: int


@dataclass(frozen=True, slots=True)
class AppendLog:
    """Durably append ``entries`` (contiguous, following the current end)."""

    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class PersistSnapshot:
    """Durably store ``snapshot``, then drop log entries below its end offset
    (all entries when ``replace_log``: a snapshot fetched from the leader)."""

    snapshot: Snapshot
    replace_log: bool = False


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """The state machine must reset itself to ``snapshot`` (start-up or fetched)."""

    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class Commit:
    """Entries newly known to be committed, in offset order; apply them."""

    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class RoleChanged:
    role: str
    epoch: int
    leader_id: int


Action: TypeAlias = (
    Send
    | PersistQuorumState
    | TruncateLog
    | AppendLog
    | PersistSnapshot
    | LoadSnapshot
    | Commit
    | RoleChanged
)


# --------------------------------------------------------------------------- wire form


def _enc(v: Any) -> Any:
    if isinstance(v, bytes):
        return {"$b": base64.b64encode(v).decode()}
    if isinstance(v, Entry):
        return {"$e": [v.offset, v.epoch, base64.b64encode(v.data).decode(), v.kind]}
    if isinstance(v, tuple):
        return [_enc(x) for x in v]
    return v


def _dec(v: Any) -> Any:
    if isinstance(v, dict):
        if "$b" in v:
            return base64.b64decode(v["$b"])
        if "$e" in v:
            o, e, d, k = v["$e"]
            return Entry(int(o), int(e), base64.b64decode(d), int(k))
    if isinstance(v, list):
        return tuple(_dec(x) for x in v)
    return v


def encode_message(m: Message) -> bytes:
    body = {f.name: _enc(getattr(m, f.name)) for f in dataclasses.fields(m)}
    return json.dumps({"t": type(m).__name__, "b": body}, separators=(",", ":")).encode()


def decode_message(b: bytes) -> Message:
    doc = json.loads(b)
    cls = _MESSAGE_TYPES[doc["t"]]
    m: Message = cls(**{k: _dec(v) for k, v in doc["b"].items()})
    return m
