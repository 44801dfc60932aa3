"""KIP-848 consumer groups (``group.protocol=consumer``): the coordinator's model.

This module owns the state of a group that uses the consumer group protocol: its group
epoch, the target assignment and each member's epoch, subscription and reconciliation.
It is pure: every call takes ``now`` (milliseconds) and the topics as the metadata image
shows them, and returns what to answer; the coordinator (``coordinator.py``) owns the
groups, their offsets and the timers, and calls in.

Rules
-----
- Epochs. The group epoch is bumped whenever the group's inputs change: a member joins,
  leaves or is removed, a member's subscription (topic names or regular expression) or
  server assignor changes, or a subscribed topic appears, disappears or gains partitions.
  When the target assignment's epoch (the assignment epoch) lags the group epoch, the
  target is computed again by the server assignor and takes the group epoch.
- Assignors (``group.consumer.assignors``, the first is the default; a member may name
  one with ``ServerAssignor``): ``uniform`` spreads the subscribed partitions evenly and
  keeps each member's previous target where balance allows; ``range`` gives each
  subscribed member a contiguous range of every topic, in member id order.
- Reconciliation (each heartbeat). A member moves from its current assignment to its
  target in two steps. If it holds partitions outside its target, it must revoke them
  first: it keeps its member epoch and is told only the partitions it keeps; it has
  revoked them once a heartbeat reports owned partitions without them. Then it takes the
  assignment epoch and every partition of its target that no other member still holds
  (assigned or being revoked); the rest follow on later heartbeats as they are released.
  A partition is never held by two members at once.
- Fencing. A heartbeat from an unknown member gets UNKNOWN_MEMBER_ID. One with an epoch
  other than the member's gets FENCED_MEMBER_EPOCH, except the member's previous epoch
  with owned partitions within its assignment (the answer that moved it was lost). A
  member that does not heartbeat within ``group.consumer.session.timeout.ms``, or does
  not revoke within its rebalance timeout, is removed.
- Static members (``group.instance.id``). Leaving with epoch -2 keeps the member's place
  and assignment until its session times out; joining again (epoch 0) with the same
  instance id takes both over under the new member id, without a rebalance. A join that
  names the instance id of a member still present gets UNRELEASED_INSTANCE_ID.
- Offsets. A member commits with its member epoch: an unknown member gets
  UNKNOWN_MEMBER_ID, another epoch STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic
  member). Commits without a member (epoch -1) are accepted only while the group has no
  members, or, for TxnOffsetCommit, when they name no member, epoch nor instance at all.
  TxnOffsetCommit (KIP-447) is checked like OffsetCommit.

- Durability. ``records()`` is the group as Kafka's ``__consumer_offsets`` record types
  hold it (group epoch, member metadata, target assignment and its epoch, each member's
  current assignment); the coordinator writes what changed, and ``restore`` rebuilds
  the group from them when a broker becomes the coordinator (sessions start anew).

Not implemented: upgrading a classic group with members in place (a classic group is
converted only once it is empty), rack-aware assignment and client-side assignors.
"""

from __future__ import annotations

import enum
import re
import uuid
from dataclasses import dataclass

from jocko_py.protocol.errors import ErrorCode

E = ErrorCode

# (topic id, partition)
TopicPartition = tuple[uuid.UUID, int]
Assignment = dict[uuid.UUID, frozenset[int]]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
ASSIGNORS = ("uniform", "range")


@dataclass(frozen=True)
class TopicInfo:
    topic_id: uuid.UUID
    partitions: int


class MemberState(enum.Enum):
    # values: Kafka's byte in ConsumerGroupCurrentMemberAssignmentValue.State
    STABLE = 1
    UNREVOKED_PARTITIONS = 2
    UNRELEASED_PARTITIONS = 3


class GroupStateName(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(slots=True)
class ClassicInfo:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a
    consumer-protocol group: what it offered and the protocol it was answered with."""

    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    protocol_name: str


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TopicPartition] = frozenset()
    revoking: frozenset[TopicPartition] = frozenset()
    last_heartbeat_ms: int = 0
    revocation_deadline_ms: int = 0
    # what the last answer told the member (epoch, partitions): unchanged -> no assignment
    last_sent: tuple[int, frozenset[TopicPartition]] | None = None
    classic: ClassicInfo | None = None


@dataclass(slots=True)
class HeartbeatRequest:
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_names: list[str] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: list[TopicPartition] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    assignment: Assignment | None = None


def group_assignment(tps: frozenset[TopicPartition]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for tid, p in tps:
        out.setdefault(tid, set()).add(p)
    return {tid: frozenset(ps) for tid, ps in out.items()}


def _flat(a: Assignment) -> frozenset[TopicPartition]:
    return frozenset((tid, p) for tid, ps in a.items() for p in ps)


def compile_regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


class ConsumerGroupModel:
    """One consumer-protocol group (see the module's rules)."""

    def __init__(self, group_id: str, assignors: tuple[str, ...] = ASSIGNORS) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignors = assignors or ASSIGNORS
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, frozenset[TopicPartition]] = {}
        self._subscribed_sig: tuple[tuple[str, uuid.UUID, int], ...] = ()

    # -- views ---------------------------------------------------------------------------

    def state(self) -> GroupStateName:
        if not self.members:
            return GroupStateName.EMPTY
        if self.assignment_epoch < self.group_epoch:
            return GroupStateName.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return GroupStateName.RECONCILING
        return GroupStateName.STABLE

    def assignor(self) -> str:
        named = [m.server_assignor for m in self.members.values() if m.server_assignor]
        return named[0] if named else self.assignors[0]

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    # -- heartbeat -----------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, topics: dict[str, TopicInfo], now: int,
                  session_timeout_ms: int) -> HeartbeatResult:
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            return HeartbeatResult(E.UNSUPPORTED_ASSIGNOR,
                                   f"assignor {req.server_assignor!r} is not one of "
                                   f"{', '.join(self.assignors)}")
        if req.subscribed_regex is not None and compile_regex(req.subscribed_regex) is None:
            return HeartbeatResult(E.INVALID_REGULAR_EXPRESSION,
                                   f"invalid regular expression {req.subscribed_regex!r}")
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        joined = False
        if req.member_epoch == 0:
            res = self._join(req, now)
            if isinstance(res, HeartbeatResult):
                return res
            joined = res
            m = self.members[req.member_id]
        else:
            found = self.members.get(req.member_id)
            if found is None:
                return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"unknown member {req.member_id}")
            m = found
            err = self._check_epoch(m, req)
            if err is not None:
                return err
        m.last_heartbeat_ms = now
        changed = self._update_member(m, req)
        if self._update_subscribed(topics) or changed or joined:
            self.group_epoch += 1  # once, whatever moved
        if self.assignment_epoch < self.group_epoch:
            self._compute_target(topics)
        owned = None if req.owned is None else frozenset(req.owned)
        self._reconcile(m, owned, now)
        return self._answer(m, full=req.member_epoch == 0 or req.owned is not None)

    def _join(self, req: HeartbeatRequest, now: int) -> HeartbeatResult | bool:
        """An error, or whether a member was added (False: a static member returned)."""
        if req.subscribed_names is None and req.subscribed_regex is None:
            return HeartbeatResult(E.INVALID_REQUEST, "a joining member must subscribe")
        if req.rebalance_timeout_ms < 0:
            return HeartbeatResult(E.INVALID_REQUEST,
                                   "a joining member must give its rebalance timeout")
        if req.instance_id is not None:
            old = self.static_member(req.instance_id)
            if old is not None and old.member_id != req.member_id:
                if old.member_epoch != STATIC_LEAVE_EPOCH:
                    return HeartbeatResult(
                        E.UNRELEASED_INSTANCE_ID,
                        f"instance {req.instance_id} is still held by {old.member_id}")
                # the static member is back: it takes over its place and assignment
                old_id = old.member_id
                del self.members[old_id]
                target = self.target.pop(old_id, None)
                old.member_id = req.member_id
                old.member_epoch = old.previous_member_epoch
                old.last_sent = None
                old.client_id, old.client_host = req.client_id, req.client_host
                self.members[req.member_id] = old
                if target is not None:
                    self.target[req.member_id] = target
                return False
        m = self.members.get(req.member_id)
        if m is not None:
            # a member that joins again under the same id starts over
            self._remove(req.member_id)
        self.members[req.member_id] = ConsumerMember(
            member_id=req.member_id, instance_id=req.instance_id, rack_id=req.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms, last_heartbeat_ms=now)
        return True

    def _check_epoch(self, m: ConsumerMember, req: HeartbeatRequest) -> HeartbeatResult | None:
        if m.member_epoch == STATIC_LEAVE_EPOCH:
            return HeartbeatResult(E.FENCED_MEMBER_EPOCH, "the member left the group")
        if req.member_epoch == m.member_epoch:
            return None
        if req.member_epoch == m.previous_member_epoch and req.owned is not None \
                and set(req.owned) <= m.assigned:
            return None  # the answer that moved it on was lost
        return HeartbeatResult(
            E.FENCED_MEMBER_EPOCH,
            f"member epoch {req.member_epoch} is not the member's ({m.member_epoch})")

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        m = self.members.get(req.member_id)
        if m is None and req.instance_id is not None:
            m = self.static_member(req.instance_id)
        if m is None:
            return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"unknown member {req.member_id}")
        if req.member_epoch == STATIC_LEAVE_EPOCH and m.instance_id is not None:
            if m.member_epoch != STATIC_LEAVE_EPOCH:
                m.previous_member_epoch = m.member_epoch
            m.member_epoch = STATIC_LEAVE_EPOCH
            return HeartbeatResult(E.NONE, member_id=m.member_id,
                                   member_epoch=STATIC_LEAVE_EPOCH)
        self._remove(m.member_id)
        self.group_epoch += 1
        return HeartbeatResult(E.NONE, member_id=req.member_id, member_epoch=LEAVE_EPOCH)

    def _remove(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        self.target.pop(member_id, None)

    def remove_member(self, member_id: str) -> None:
        """Session or rebalance timeout: the member is gone, its partitions are free."""
        if member_id in self.members:
            self._remove(member_id)
            self.group_epoch += 1

    def _update_member(self, m: ConsumerMember, req: HeartbeatRequest) -> bool:
        changed = False
        if req.rebalance_timeout_ms >= 0:
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.subscribed_names is not None:
            names = tuple(sorted(set(req.subscribed_names)))
            if names != m.subscribed_names:
                m.subscribed_names, changed = names, True
        if req.subscribed_regex is not None:
            regex = req.subscribed_regex or None
            if regex != m.subscribed_regex:
                m.subscribed_regex, changed = regex, True
        if req.server_assignor is not None and req.server_assignor != m.server_assignor:
            m.server_assignor, changed = req.server_assignor, True
        return changed

    def subscribed_topics(self, m: ConsumerMember, topics: dict[str, TopicInfo]) -> set[str]:
        out = {n for n in m.subscribed_names if n in topics}
        if m.subscribed_regex:
            rx = compile_regex(m.subscribed_regex)
            if rx is not None:
                # As Kafka's coordinator: a full match over every topic name,
                # internal topics (`__consumer_offsets`, ...) included.
                out |= {n for n in topics if rx.fullmatch(n)}
        return out

    def _update_subscribed(self, topics: dict[str, TopicInfo]) -> bool:
        names: set[str] = set()
        for m in self.members.values():
            names |= self.subscribed_topics(m, topics)
        sig = tuple(sorted((n, topics[n].topic_id, topics[n].partitions) for n in names))
        if sig == self._subscribed_sig:
            return False
        self._subscribed_sig = sig
        return True

    def adopt_topics(self, topics: dict[str, TopicInfo]) -> None:
        """After a restore: take the subscribed partitions as they are without a bump."""
        self._update_subscribed(topics)

    def refresh_topics(self, topics: dict[str, TopicInfo]) -> None:
        """Metadata moved on (a topic created, deleted or grown): bump the group epoch if
        the group's subscribed partitions changed."""
        if self.members and self._update_subscribed(topics):
            self.group_epoch += 1
            self._compute_target(topics)

    # -- target assignment -----------------------------------------------------------------

    def _compute_target(self, topics: dict[str, TopicInfo]) -> None:
        subs = {mid: {topics[n].topic_id for n in self.subscribed_topics(m, topics)}
                for mid, m in self.members.items()}
        parts = {topics[n].topic_id: topics[n].partitions for n in topics}
        if self.assignor() == "range":
            self.target = range_assign(subs, parts)
        else:
            self.target = uniform_assign(subs, parts, self.target)
        self.assignment_epoch = self.group_epoch

    # -- reconciliation --------------------------------------------------------------------

    def _held_elsewhere(self, member_id: str) -> set[TopicPartition]:
        held: set[TopicPartition] = set()
        for mid, o in self.members.items():
            if mid != member_id:
                held |= o.assigned | o.revoking
        return held

    def _reconcile(self, m: ConsumerMember, owned: frozenset[TopicPartition] | None,
                   now: int, *, full: bool = False) -> None:
        """Move ``m`` toward its target. ``full`` (a classic member's JoinGroup, which may
        have dropped what it held) skips the shortcut for a member already stable at this
        epoch."""
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & m.revoking:
                return  # still revoking
            m.revoking = frozenset()
        if m.member_epoch == self.assignment_epoch and m.state is MemberState.STABLE \
                and not full:
            return
        target = self.target.get(m.member_id, frozenset())
        revoke = m.assigned - target
        if revoke:
            m.assigned = m.assigned & target
            m.revoking = frozenset(revoke)
            m.state = MemberState.UNREVOKED_PARTITIONS
            m.revocation_deadline_ms = now + m.rebalance_timeout_ms
            return
        free = frozenset(tp for tp in target if tp not in self._held_elsewhere(m.member_id))
        if m.member_epoch != self.assignment_epoch:
            m.previous_member_epoch = m.member_epoch
            m.member_epoch = self.assignment_epoch
        m.assigned = free
        m.state = MemberState.STABLE if free == target else MemberState.UNRELEASED_PARTITIONS

    def _answer(self, m: ConsumerMember, *, full: bool) -> HeartbeatResult:
        sent = (m.member_epoch, m.assigned)
        assignment = None
        if full or m.last_sent != sent:
            assignment = group_assignment(m.assigned)
            m.last_sent = sent
        return HeartbeatResult(E.NONE, member_id=m.member_id, member_epoch=m.member_epoch,
                               assignment=assignment)

    # -- timers ----------------------------------------------------------------------------

    def expired(self, now: int, session_timeout_ms: int) -> list[tuple[str, str]]:
        """Members to remove now: (member id, reason)."""
        out = []
        for m in self.members.values():
            session = m.classic.session_timeout_ms if m.classic else session_timeout_ms
            if now > m.last_heartbeat_ms + session:
                out.append((m.member_id, f"no heartbeat for {session} ms"))
            elif m.state is MemberState.UNREVOKED_PARTITIONS \
                    and now > m.revocation_deadline_ms:
                out.append((m.member_id, f"partitions not revoked within "
                                         f"{m.rebalance_timeout_ms} ms"))
        return out

    # -- classic members (online migration) ----------------------------------------------------

    def classic_join(self, member_id: str, instance_id: str | None, client_id: str,
                     client_host: str, subscribed: list[str], owned: frozenset[TopicPartition],
                     classic: ClassicInfo, rebalance_timeout_ms: int,
                     topics: dict[str, TopicInfo], now: int) -> ConsumerMember:
        """A classic member's JoinGroup: it joins or updates its subscription, and, having
        revoked what it no longer reports as owned, is reconciled at once; SyncGroup then
        hands it ``assigned``. It rejoins (told by its heartbeat) to move further."""
        m = self.members.get(member_id)
        joined = m is None
        if m is None:
            m = ConsumerMember(member_id=member_id, instance_id=instance_id, rack_id=None,
                               client_id=client_id, client_host=client_host,
                               rebalance_timeout_ms=rebalance_timeout_ms)
            self.members[member_id] = m
        m.classic = classic
        m.last_heartbeat_ms = now
        m.rebalance_timeout_ms = rebalance_timeout_ms
        names = tuple(sorted(set(subscribed)))
        changed = names != m.subscribed_names
        m.subscribed_names = names
        # a classic member gives up partitions by rejoining without them
        m.assigned = m.assigned & owned
        m.revoking = m.revoking & owned
        if self._update_subscribed(topics) or changed or joined:
            self.group_epoch += 1
        if self.assignment_epoch < self.group_epoch:
            self._compute_target(topics)
        self._reconcile(m, owned, now, full=True)
        m.last_sent = (m.member_epoch, m.assigned)
        return m

    def classic_heartbeat(self, member_id: str, generation: int, now: int) -> ErrorCode:
        """A classic member's Heartbeat: REBALANCE_IN_PROGRESS when it should rejoin
        (partitions to give up, partitions released for it, or a new assignment epoch)."""
        m = self.members.get(member_id)
        if m is None or m.classic is None:
            return E.UNKNOWN_MEMBER_ID
        if generation != m.member_epoch:
            return E.ILLEGAL_GENERATION
        m.last_heartbeat_ms = now
        target = self.target.get(member_id, frozenset())
        free = target - self._held_elsewhere(member_id)
        if m.revoking or m.assigned - target or free - m.assigned \
                or m.member_epoch != self.assignment_epoch:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def only_classic_members(self) -> bool:
        return bool(self.members) and all(m.classic is not None for m in self.members.values())

    # -- offsets ---------------------------------------------------------------------------

    def check_commit(self, member_id: str, member_epoch: int, *, transactional: bool = False,
                     instance_id: str | None = None) -> ErrorCode:
        """May this commit (OffsetCommit, or TxnOffsetCommit when ``transactional``) be
        taken, as Kafka's ConsumerGroup.validateOffsetCommit: without a member only while
        the group is empty, except a TxnOffsetCommit that names no member, epoch nor
        instance at all (a producer committing for the group outside its management);
        otherwise the member at its epoch (STALE_MEMBER_EPOCH, ILLEGAL_GENERATION for a
        member speaking the classic protocol)."""
        if member_epoch < 0 and (not member_id or not self.members):
            if not self.members:
                return E.NONE
            if transactional and member_epoch == -1 and instance_id is None:
                return E.NONE
            return E.UNKNOWN_MEMBER_ID
        m = self.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            return E.ILLEGAL_GENERATION if m.classic is not None else E.STALE_MEMBER_EPOCH
        return E.NONE


    # -- durability ------------------------------------------------------------------------

    def records(self) -> dict[tuple[str, str], object]:
        """The group as records, keyed by (record type, member id or ""): the
        coordinator's offsets store encodes them with Kafka's coordinator record types
        and writes those that changed (tombstones for keys gone)."""
        out: dict[tuple[str, str], object] = {
            ("metadata", ""): self.group_epoch,
            ("target_metadata", ""): self.assignment_epoch,
        }
        for mid, m in self.members.items():
            out[("member", mid)] = MemberRecord(
                m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_names,
                m.subscribed_regex, m.rebalance_timeout_ms, m.server_assignor,
                None if m.classic is None else (m.classic.session_timeout_ms,
                                                tuple(m.classic.protocols)))
            out[("target", mid)] = self.target.get(mid, frozenset())
            out[("current", mid)] = CurrentRecord(
                m.member_epoch, m.previous_member_epoch, m.state.value, m.assigned, m.revoking)
        return out

    @classmethod
    def restore(cls, group_id: str, recs: dict[tuple[str, str], object], now: int,
                assignors: tuple[str, ...] = ASSIGNORS) -> ConsumerGroupModel:
        g = cls(group_id, assignors)
        ge = recs.get(("metadata", ""))
        g.group_epoch = ge if isinstance(ge, int) else 0
        ae = recs.get(("target_metadata", ""))
        g.assignment_epoch = ae if isinstance(ae, int) else 0
        for (kind, mid), rec in recs.items():
            if kind != "member" or not isinstance(rec, MemberRecord):
                continue
            m = ConsumerMember(
                member_id=mid, instance_id=rec.instance_id, rack_id=rec.rack_id,
                client_id=rec.client_id, client_host=rec.client_host,
                rebalance_timeout_ms=rec.rebalance_timeout_ms,
                subscribed_names=rec.subscribed_names, subscribed_regex=rec.subscribed_regex,
                server_assignor=rec.server_assignor, last_heartbeat_ms=now)
            if rec.classic is not None and rec.classic[1]:
                m.classic = ClassicInfo(list(rec.classic[1]), rec.classic[0],
                                        rec.classic[1][0][0])
            cur = recs.get(("current", mid))
            if isinstance(cur, CurrentRecord):
                m.member_epoch, m.previous_member_epoch = cur.member_epoch, cur.previous_epoch
                m.state = MemberState(cur.state) if cur.state in (1, 2, 3) \
                    else MemberState.STABLE
                m.assigned, m.revoking = cur.assigned, cur.revoking
                m.revocation_deadline_ms = now + m.rebalance_timeout_ms
                m.last_sent = (m.member_epoch, m.assigned)
            g.members[mid] = m
            tgt = recs.get(("target", mid))
            if isinstance(tgt, frozenset):
                g.target[mid] = tgt
        return g


@dataclass(frozen=True, slots=True)
class MemberRecord:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_names: tuple[str, ...]
    subscribed_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # a classic member's session timeout and offered protocols (ClassicMemberMetadata)
    classic: tuple[int, tuple[tuple[str, bytes], ...]] | None = None


@dataclass(frozen=True, slots=True)
class CurrentRecord:
    member_epoch: int
    previous_epoch: int
    state: int
    assigned: frozenset[TopicPartition]
    revoking: frozenset[TopicPartition]


# -- assignors ----------------------------------------------------------------------------


def range_assign(subs: dict[str, set[uuid.UUID]], parts: dict[uuid.UUID, int]
                 ) -> dict[str, frozenset[TopicPartition]]:
    """Each topic's partitions cut into contiguous ranges over its subscribers (by id)."""
    out: dict[str, set[TopicPartition]] = {mid: set() for mid in subs}
    for tid in sorted({t for s in subs.values() for t in s}, key=str):
        members = sorted(mid for mid, s in subs.items() if tid in s)
        n = parts.get(tid, 0)
        base, extra = divmod(n, len(members))
        start = 0
        for i, mid in enumerate(members):
            count = base + (1 if i < extra else 0)
            out[mid] |= {(tid, p) for p in range(start, start + count)}
            start += count
    return {mid: frozenset(tps) for mid, tps in out.items()}


def uniform_assign(subs: dict[str, set[uuid.UUID]], parts: dict[uuid.UUID, int],
                   previous: dict[str, frozenset[TopicPartition]]
                   ) -> dict[str, frozenset[TopicPartition]]:
    """Spread every subscribed partition evenly, keeping previous targets where the
    balance allows (a sticky, balanced assignment)."""
    members = sorted(subs)
    if not members:
        return {}
    wanted = sorted({(tid, p) for s in subs.values() for tid in s
                     for p in range(parts.get(tid, 0))}, key=lambda tp: (str(tp[0]), tp[1]))
    base, extra = divmod(len(wanted), len(members))
    out: dict[str, set[TopicPartition]] = {mid: set() for mid in members}
    taken: set[TopicPartition] = set()
    valid = set(wanted)
    # keep up to the fair share of what each member had, then one more while extras last
    for mid in members:
        keep = sorted((tp for tp in previous.get(mid, frozenset())
                       if tp in valid and tp[0] in subs[mid]), key=lambda tp: (str(tp[0]), tp[1]))
        for tp in keep[:base]:
            out[mid].add(tp)
            taken.add(tp)
    for mid in members:
        if extra <= 0:
            break
        more = [tp for tp in previous.get(mid, frozenset())
                if tp in valid and tp not in taken and tp[0] in subs[mid]]
        if more and len(out[mid]) == base:
            tp = min(more, key=lambda x: (str(x[0]), x[1]))
            out[mid].add(tp)
            taken.add(tp)
            extra -= 1
    # the most constrained partitions first (fewest subscribers), so members with
    # narrower subscriptions are not left short
    eligible_of = {tid: [mid for mid in members if tid in subs[mid]]
                   for tid in {tp[0] for tp in wanted}}
    for tp in sorted(wanted, key=lambda tp: (len(eligible_of[tp[0]]), str(tp[0]), tp[1])):
        if tp in taken:
            continue
        eligible = eligible_of[tp[0]]
        if not eligible:
            continue
        mid = min(eligible, key=lambda x: (len(out[x]), x))
        out[mid].add(tp)
        taken.add(tp)
    return {mid: frozenset(tps) for mid, tps in out.items()}
