"""A classic consumer group's state: members, generation, protocol and offsets.

This module owns the in-memory model of one group and the rules of its state
machine; it does no I/O (the group shard, ``shard.py``, decides and persists). Every
state change goes through ``transition_to`` (the guard below), including a group loaded
from the log (``resume_stable``, as Kafka's ``ClassicGroup.fromRecord``). Times are
milliseconds on the coordinator runtime's clock. A member waiting in JoinGroup or
SyncGroup holds a waiter token: its answer is a completion of a later operation.

States and transitions (Kafka's classic group protocol)::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
      ^                 ^      |                                              |
      |                 |      +--no member left----------------> Empty       | leader's SyncGroup
      |                 |                                                     v
      |                 +---- join / leave / session expiry -------------- Stable
      |                 +---- join / leave / session expiry (from CompletingRebalance)
      +--- last member leaves or expires (via PreparingRebalance)
    Empty / any --DeleteGroups, offsets all expired--> Dead (terminal; the group is dropped)

* Empty: no members; the group may still hold committed offsets.
* PreparingRebalance: members are (re)joining; JoinGroup responses are held
  until every known member has rejoined or the rebalance timeout passes
  (members that did not rejoin are removed, except static ones).
* CompletingRebalance: a new generation was formed and JoinGroup answered; the
  members wait in SyncGroup for the leader's assignment.
* Stable: the assignment was handed out; members heartbeat.
* Dead: the group was deleted or expired; requests get COORDINATOR_NOT_AVAILABLE
  so clients look it up again.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Any

from jocko_py.broker.group.consumer import ConsumerGroupModel
from jocko_py.broker.group.share import ShareGroupModel
from jocko_py.broker.group.streams import StreamsGroupModel
from jocko_py.protocol.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({
        GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY,
    }),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset({
        GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
        GroupState.EMPTY, GroupState.DEAD,
    }),
}


class IllegalStateTransition(Exception):
    pass


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # tokens of the JoinGroup / SyncGroup this member is waiting in (runtime.Held)
    join_waiter: int | None = None
    sync_waiter: int | None = None
    last_heartbeat_ms: int = 0
    is_new: bool = True

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return [n for n, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for n, m in self.protocols:
            if n == protocol:
                return m
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for n, _ in self.protocols:
            if n in candidates:
                return n
        raise ValueError("member does not support any candidate protocol")

    def complete_join(self, result: JoinResult, out: list[tuple[int, object]]) -> bool:
        """Answer the JoinGroup this member waits in (a completion added to ``out``)."""
        token, self.join_waiter = self.join_waiter, None
        if token is not None:
            out.append((token, result))
            return True
        return False

    def complete_sync(self, result: SyncResult, out: list[tuple[int, object]]) -> bool:
        token, self.sync_waiter = self.sync_waiter, None
        if token is not None:
            out.append((token, result))
            return True
        return False


class Group:
    """One classic group. Member order is join order (the first one leads)."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # member id -> expiry (ms)
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # TxnOffsetCommit: producer id -> offsets written in its open transaction,
        # materialised into `offsets` by its commit marker, dropped by an abort
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.new_member_added = False
        # rebalance bookkeeping (ms)
        self.join_deadline: int | None = None
        self.initial_delay_limit: int | None = None
        # members of the new generation that have not sent SyncGroup yet, and until when
        # they may (the rebalance timeout): Kafka's pending-sync check
        self.pending_sync: set[str] = set()
        self.sync_deadline: int | None = None
        # a KIP-848 consumer-protocol group (group/consumer.py): its members, epochs and
        # assignments; None for a classic group. Offsets stay here for both kinds.
        self.consumer: ConsumerGroupModel | None = None
        # a KIP-1071 streams group (group/streams.py); None for the other kinds
        self.streams: StreamsGroupModel | None = None
        # a KIP-932 share group (group/share.py); None for the other kinds
        self.share: ShareGroupModel | None = None

    @property
    def group_type(self) -> str:
        if self.streams is not None:
            return "streams"
        if self.share is not None:
            return "share"
        return "classic" if self.consumer is None else "consumer"

    def has_consumer_members(self) -> bool:
        return self.consumer is not None and bool(self.consumer.members)

    # -- state ---------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {state.value} is not allowed")
        self.state = state
        self.state_timestamp = now_ms

    def resume_stable(self, now_ms: int) -> None:
        """A group read back with members (the log, or a consumer group downgraded):
        Stable at its generation, through the transitions a rebalance takes."""
        self.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        self.transition_to(GroupState.STABLE, now_ms)

    # -- members -------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        if m.group_instance_id is not None and \
                self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_sync.discard(member_id)
        return m

    def static_member_id(self, instance_id: str | None) -> str | None:
        if instance_id is None:
            return None
        return self.static_members.get(instance_id)

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str,
                              out: list[tuple[int, object]]) -> Member:
        m = self.members.pop(old_id)
        # the old incarnation's waiting requests learn they were fenced
        m.complete_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id), out)
        m.complete_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID), out)
        m.member_id = new_id
        self.members[new_id] = m
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return m

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did."""
        if self.leader_id is not None:
            cur = self.members.get(self.leader_id)
            if cur is not None and cur.awaiting_join:
                return True
        for mid, m in self.members.items():
            if m.awaiting_join:
                self.leader_id = mid
                return True
        return False

    # -- protocols -----------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        if not sets:
            return set()
        return set.intersection(*sets)

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(
            self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id} has no common protocol")
        votes: dict[str, int] = {}
        for m in self.members.values():
            v = m.vote(candidates)
            votes[v] = votes.get(v, 0) + 1
        first = next(iter(self.members.values())).protocol_names()
        return max(votes, key=lambda p: (votes[p], -first.index(p)))

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        out: set[str] = set()
        for m in self.members.values():
            try:
                topics = parse_subscription_topics(m.metadata(self.protocol_name))
            except (KeyError, ValueError):
                return None
            out |= topics
        return out

    def summary(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "state": self.state.value,
                "generation": self.generation_id, "members": len(self.members)}


def parse_subscription_topics(metadata: bytes) -> set[str]:
    """Topics in a ConsumerProtocolSubscription (version int16 then the struct)."""
    try:
        return _parse_subscription_topics(metadata)
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"malformed subscription: {e}") from e


def _parse_subscription_topics(metadata: bytes) -> set[str]:
    if len(metadata) < 2:
        raise ValueError("subscription too short")
    # every version starts with the topics array: int32 count, then int16-length strings
    pos = 2
    (n,) = struct.unpack_from(">i", metadata, pos)
    pos += 4
    if n < 0 or n > len(metadata):
        raise ValueError("bad topic count")
    topics = set()
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", metadata, pos)
        pos += 2
        if ln < 0 or pos + ln > len(metadata):
            raise ValueError("bad topic name")
        topics.add(metadata[pos:pos + ln].decode("utf-8"))
        pos += ln
    return topics
