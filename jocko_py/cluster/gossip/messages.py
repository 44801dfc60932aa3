"""Gossip (SWIM) messages, member metadata and actions, plus their datagram encoding.

Datagram encoding: compact JSON ``{"t": type, ...fields}``; one message per UDP
datagram. A member's metadata is a list ``[broker id, advertised, raft, rack,
incarnation]``, followed by the previous broker epoch only when there is one: a
member that names none encodes exactly as versions before it, whose decoders refuse a
sixth field (so, in a rolling upgrade, only a broker restarted cleanly by the new
version, which is then the only one with a previous epoch, is unreadable to the old
ones, and only until they are upgraded too); extra trailing fields are ignored here. ``decode_datagram`` raises ``GossipDecodeError`` on anything malformed so a
garbled or hostile datagram is dropped, never crashes the member.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any


class GossipDecodeError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class MemberMeta:
    """What a member advertises: Serf's tags for a jocko broker."""

    broker_id: int
    advertised_addr: str
    raft_addr: str
    rack: str | None = None
    # Fresh for every process start (uuid4 as text): a restarted broker is a new
    # incarnation, so the controller registers it with a new broker epoch.
    incarnation_id: str = ""
    # The member's cluster id ("" while it has none): members of another cluster are
    # ignored (gossip/core.py, rule 7).
    cluster_id: str = ""
    # The broker epoch the previous process was registered under, from the clean-shutdown
    # markers of its log dirs (Kafka's BrokerRegistration PreviousBrokerEpoch); -1 when
    # it did not stop cleanly.
    previous_broker_epoch: int = -1


def member_incarnation(meta: MemberMeta) -> uuid.UUID:
    """The broker incarnation a member advertises (its process-start uuid4); a member
    that advertises none gets one stable id per address (no restart detection)."""
    try:
        return uuid.UUID(meta.incarnation_id)
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_OID, meta.advertised_addr)


@dataclass(frozen=True, slots=True)
class Update:
    """One member's state as gossiped: state is alive | suspect | dead | left."""

    state: str
    name: str
    addr: str
    incarnation: int
    meta: MemberMeta


@dataclass(frozen=True, slots=True)
class Ping:
    src: str
    src_addr: str
    seq: int
    target: str
    updates: tuple[Update, ...] = ()


@dataclass(frozen=True, slots=True)
class Ack:
    src: str
    src_addr: str
    seq: int
    updates: tuple[Update, ...] = ()


@dataclass(frozen=True, slots=True)
class PingReq:
    src: str
    src_addr: str
    seq: int
    target: str
    target_addr: str
    updates: tuple[Update, ...] = ()


@dataclass(frozen=True, slots=True)
class Sync:
    """Push-pull anti-entropy: the sender's whole view; ``reply`` asks for the peer's."""

    src: str
    src_addr: str
    reply: bool
    updates: tuple[Update, ...] = ()


GossipMessage = Ping | Ack | PingReq | Sync


@dataclass(frozen=True, slots=True)
class Send:
    addr: str
    message: GossipMessage


@dataclass(frozen=True, slots=True)
class MemberEvent:
    """kind: join | update | suspect | alive | failed | left."""

    kind: str
    name: str
    addr: str
    meta: MemberMeta
    incarnation: int


_TYPES: dict[str, type[Any]] = {"ping": Ping, "ack": Ack, "pingreq": PingReq, "sync": Sync}
_NAMES = {v: k for k, v in _TYPES.items()}
_STATES = {"alive", "suspect", "dead", "left"}


def _enc_update(u: Update) -> list[Any]:
    m = u.meta
    meta: list[Any] = [m.broker_id, m.advertised_addr, m.raft_addr, m.rack, m.incarnation_id]
    if m.cluster_id or m.previous_broker_epoch >= 0:
        meta.append(m.cluster_id)
    if m.previous_broker_epoch >= 0:
        meta.append(m.previous_broker_epoch)
    return [u.state, u.name, u.addr, u.incarnation, meta]


def _dec_update(v: Any) -> Update:
    state, name, addr, inc, meta_fields = v
    bid, adv, raft, rack, iid, *rest = meta_fields
    if state not in _STATES:
        raise GossipDecodeError(f"bad state {state!r}")
    # optional, in order: the cluster id, the previous broker epoch; later fields (of a
    # newer version) are ignored
    cid = rest[0] if rest else ""
    prev = rest[1] if len(rest) > 1 else -1
    if not isinstance(cid, str):
        raise GossipDecodeError(f"bad cluster id {cid!r}")
    if not isinstance(prev, int) or isinstance(prev, bool):
        raise GossipDecodeError(f"bad previous broker epoch {prev!r}")
    meta = MemberMeta(int(bid), str(adv), str(raft), None if rack is None else str(rack),
                      str(iid), cid, max(-1, prev))
    return Update(state, str(name), str(addr), int(inc), meta)


def encode_datagram(msg: GossipMessage) -> bytes:
    doc: dict[str, Any] = {"t": _NAMES[type(msg)]}
    for k in msg.__slots__:
        v = getattr(msg, k)
        doc[k] = [_enc_update(u) for u in v] if k == "updates" else v
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_datagram(data: bytes) -> GossipMessage:
    try:
        doc = json.loads(data)
        cls = _TYPES[doc.pop("t")]
        doc["updates"] = tuple(_dec_update(u) for u in doc.get("updates", ()))
        msg: GossipMessage = cls(**doc)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise GossipDecodeError(str(e)) from e
    return msg
