"""KIP-932 share groups: the group coordinator's model of one share group.

This module owns the state of a share group: its members, group epoch, target
assignment (the "simple" share assignor), each member's epoch and assignment, and which
topic partitions have durable share state (initializing / initialized, Kafka's
ShareGroupStatePartitionMetadata). It is pure: every call takes ``now`` (milliseconds)
and the topics as the metadata image shows them, and returns what to answer; the group
shard (``shard.py`` through ``share_service.py``) owns the records and timers, and the
coordinator service initializes share state through the persister.

Rules (Kafka 4.4's GroupMetadataManager.shareGroupHeartbeat)
-----------------------------------------------------------
- A member joins with epoch 0 and the topics it subscribes to, names its own member id
  (ShareGroupHeartbeat v1), heartbeats with the epoch it was given and leaves with -1.
  An epoch newer than the member's, or older than both its epoch and its previous
  epoch, is FENCED_MEMBER_EPOCH; an unknown member with an epoch other than 0 is
  UNKNOWN_MEMBER_ID; a new member of a group holding ``group.share.max.size`` members
  is GROUP_MAX_SIZE_REACHED.
- The group epoch is bumped when a member joins or leaves, a subscription changes, or
  (when the target assignment is up to date) partitions whose share state became
  initialized are not in the target assignment yet. The target assignment is then
  computed again and takes the group epoch, but at most once per
  ``group.share.assignment.interval.ms`` (the group's ``share.assignment.interval.ms``;
  1000, 0: no limit) after the last computation: meanwhile a heartbeat gets the last
  target assignment and its epoch, and a later heartbeat computes the new one (Kafka's
  ``canComputeNextTargetAssignment``).
- No revocation step: a member takes its target partitions at once (a partition may
  be held by several members; records, not partitions, are what members compete for)
  and its member epoch becomes the assignment epoch.
- Only partitions with initialized share state are assigned. A heartbeat that finds
  subscribed partitions with no state (or an initialization older than
  ``group.share.initialize.retry.interval.ms``) marks them initializing and asks for
  their initialization (``InitRequest``); ``initialized`` moves them on.
- Simple assignor (Kafka 4.4's SimpleAssignor), sticky: when every member subscribes
  to the same topics, over all their assignable partitions in (topic, partition) order
  and the members in id order; otherwise topic by topic, over the members subscribing
  to it. Each partition goes to ``ceil(members / partitions)`` members (the sharing),
  and the member at index i gets ``ceil(d*(i+1)) - ceil(d*i)`` partitions, d = sharing
  * partitions / members. A member keeps what the previous target gave it that is
  still assignable, up to its count, and a partition keeps up to the sharing of its
  holders (the first ones in member order); the partitions still short of holders then
  go round-robin to the members short of partitions. So an unchanged group keeps its
  assignment, a member joining or leaving moves only what it must, and a group's
  first assignment is round-robin.
- State: Empty without members, else Stable (a share group has no other states).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jocko_py.broker.group.consumer import TopicInfo, TopicPartition
from jocko_py.protocol.errors import ErrorCode

E = ErrorCode
LEAVE_EPOCH = -1
ASSIGNOR_NAME = "simple"


@dataclass(frozen=True)
class ShareConfig:
    """The broker-level share group settings (Kafka's names and defaults)."""
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    initialize_retry_interval_ms: int = 30000  # group.share.initialize.retry.interval.ms
    assignment_interval_ms: int = 1000  # group.share.assignment.interval.ms


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: frozenset[str] = frozenset()
    assigned: frozenset[TopicPartition] = frozenset()
    last_heartbeat_ms: int = 0


@dataclass(slots=True)
class HeartbeatRequest:
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    # the member's partitions when they are sent (joined or changed), else None
    assignment: frozenset[TopicPartition] | None = None


@dataclass(frozen=True)
class InitRequest:
    """Partitions of a share group whose state must be initialized (``state_epoch`` is
    the group epoch); ``new_partitions`` are partitions added to a topic the group had
    state for already: they start at the log start, as Kafka's start offset 0."""
    group_id: str
    state_epoch: int
    topics: dict[uuid.UUID, tuple[str, frozenset[int]]]
    new_partitions: frozenset[uuid.UUID] = frozenset()


@dataclass(slots=True)
class TopicState:
    name: str
    partitions: frozenset[int]
    since_ms: int = 0  # when initialization was asked for (initializing only)


@dataclass(frozen=True, slots=True)
class MemberRecord:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CurrentRecord:
    member_epoch: int
    previous_epoch: int
    state: int
    assigned: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class StatePartitions:
    initializing: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
    initialized: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
    deleting: tuple[tuple[uuid.UUID, str], ...]


def metadata_hash(topics: dict[str, TopicInfo], names: Iterable[str]) -> int:
    """A 64-bit hash of the subscribed topics as the image shows them (signed)."""
    h = hashlib.blake2b(digest_size=8)
    for n in sorted(set(names)):
        t = topics.get(n)
        if t is not None:
            h.update(f"{n}\0{t.topic_id}\0{t.partitions}\n".encode())
    return int.from_bytes(h.digest(), "big", signed=True)


def desired_counts(n_members: int, n_partitions: int) -> tuple[int, list[int]]:
    """(the sharing: members per partition, partitions per member in member order)."""
    if not n_members or not n_partitions:
        return 0, [0] * n_members
    sharing = -(-n_members // n_partitions)
    total = sharing * n_partitions  # d = total / n_members; ceil(d*i) = -(-total*i // n)

    def ceil_at(i: int) -> int:
        return -(-total * i // n_members)

    return sharing, [ceil_at(i + 1) - ceil_at(i) for i in range(n_members)]


def simple_assign(members: list[str], partitions: list[TopicPartition],
                  previous: Mapping[str, Iterable[TopicPartition]] | None = None
                  ) -> dict[str, frozenset[TopicPartition]]:
    """The simple assignor over `members` (in order) and `partitions` (in order), sticky
    to the `previous` assignment (see the module's rules)."""
    sharing, counts = desired_counts(len(members), len(partitions))
    target = set(partitions)
    prev = previous or {}
    held: dict[str, list[TopicPartition]] = {}
    holders: dict[TopicPartition, list[str]] = {tp: [] for tp in partitions}
    for m, count in zip(members, counts, strict=True):
        keep = sorted(tp for tp in set(prev.get(m, ())) if tp in target)[:count]
        held[m] = keep
        for tp in keep:
            holders[tp].append(m)
    for tp in partitions:  # overshared: the holders past the sharing give it up
        for m in holders[tp][sharing:]:
            held[m].remove(tp)
        del holders[tp][sharing:]
    want = dict(zip(members, counts, strict=True))
    unfilled = [m for m in members if len(held[m]) < want[m]]
    pos = 0
    for tp in partitions:
        need = sharing - len(holders[tp])
        while need > 0 and unfilled:
            for k in range(len(unfilled)):  # the next unfilled member not holding it
                i = (pos + k) % len(unfilled)
                if unfilled[i] not in holders[tp]:
                    break
            else:
                break  # every unfilled member holds it already
            m = unfilled[i]
            held[m].append(tp)
            holders[tp].append(m)
            need -= 1
            if len(held[m]) >= want[m]:
                del unfilled[i]
                pos = i
            else:
                pos = i + 1
            if unfilled:
                pos %= len(unfilled)
    return {m: frozenset(held[m]) for m in members}


def can_compute_target(assignment_timestamp: int, interval_ms: int, now: int) -> bool:
    """Whether the target assignment may be computed again (Kafka's
    canComputeNextTargetAssignment): never computed, no interval, or the interval passed."""
    return assignment_timestamp == 0 or interval_ms == 0 \
        or now >= assignment_timestamp + interval_ms


class ShareGroupModel:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0
        self.metadata_hash = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, frozenset[TopicPartition]] = {}
        self.initializing: dict[uuid.UUID, TopicState] = {}
        self.initialized: dict[uuid.UUID, TopicState] = {}
        self.deleting: dict[uuid.UUID, str] = {}

    # -- views -------------------------------------------------------------------------

    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out |= m.subscribed
        return out

    def state_partitions(self) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
        """Every partition with (or getting) durable share state."""
        out = {tid: (t.name, t.partitions) for tid, t in self.initialized.items()}
        for tid, t in self.initializing.items():
            name, ps = out.get(tid, (t.name, frozenset()))
            out[tid] = (name, ps | t.partitions)
        return out

    # -- heartbeat ---------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, topics: dict[str, TopicInfo], now: int,
                  config: ShareConfig, heartbeat_interval_ms: int | None = None,
                  assignment_interval_ms: int | None = None
                  ) -> tuple[HeartbeatResult, InitRequest | None]:
        interval = heartbeat_interval_ms or config.heartbeat_interval_ms
        if assignment_interval_ms is None:
            assignment_interval_ms = config.assignment_interval_ms
        if req.member_epoch == LEAVE_EPOCH:
            if req.member_id not in self.members:
                return HeartbeatResult(
                    E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                    f"{self.group_id}.", req.member_id), None
            self.remove_member(req.member_id, topics)
            return HeartbeatResult(E.NONE, None, req.member_id, LEAVE_EPOCH, 0), None
        m = self.members.get(req.member_id)
        joining = m is None
        if m is None:
            if req.member_epoch != 0:
                return HeartbeatResult(
                    E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                    f"{self.group_id}.", req.member_id), None
            if len(self.members) >= config.max_size:
                return HeartbeatResult(
                    E.GROUP_MAX_SIZE_REACHED, f"The share group {self.group_id} has reached "
                    f"its maximum capacity of {config.max_size} members.", req.member_id), None
            m = ShareMember(req.member_id)
        elif req.member_epoch != 0:
            if req.member_epoch > m.member_epoch:
                return HeartbeatResult(
                    E.FENCED_MEMBER_EPOCH, f"The share group member has a greater member "
                    f"epoch ({req.member_epoch}) than the one known by the group coordinator "
                    f"({m.member_epoch}). The member must abandon all its partitions and "
                    "rejoin.", req.member_id), None
            if req.member_epoch < m.member_epoch and req.member_epoch != m.previous_epoch:
                return HeartbeatResult(
                    E.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member "
                    f"epoch ({req.member_epoch}) than the one known by the group coordinator "
                    f"({m.member_epoch}). The member must abandon all its partitions and "
                    "rejoin.", req.member_id), None
        before = m.assigned
        bump = joining
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.subscribed is not None and frozenset(req.subscribed) != m.subscribed:
            m.subscribed = frozenset(req.subscribed)
            bump = True
        m.client_id, m.client_host = req.client_id, req.client_host
        m.last_heartbeat_ms = now
        self.members[m.member_id] = m
        if not bump and self.assignment_epoch >= self.group_epoch \
                and self._initialized_assignment_pending():
            bump = True
        if bump:
            self._bump(topics)
        self._maybe_update_target(topics, now, assignment_interval_ms)
        self._reconcile(m)
        send = req.member_epoch == 0 or req.subscribed is not None or m.assigned != before
        result = HeartbeatResult(E.NONE, None, m.member_id, m.member_epoch, interval,
                                 m.assigned if send else None)
        return result, self.maybe_init(topics, now, config)

    def _bump(self, topics: dict[str, TopicInfo]) -> None:
        self.group_epoch += 1
        self.metadata_hash = metadata_hash(topics, self.subscribed_topics())

    def _initialized_assignment_pending(self) -> bool:
        """Initialized partitions of subscribed topics not in the target assignment."""
        if not self.members or not self.initialized:
            return False
        subscribed = self.subscribed_topics()
        assigned: dict[uuid.UUID, set[int]] = {}
        for tps in self.target.values():
            for tid, p in tps:
                assigned.setdefault(tid, set()).add(p)
        return any(t.name in subscribed and set(t.partitions) != assigned.get(tid, set())
                   for tid, t in self.initialized.items())

    def _maybe_update_target(self, topics: dict[str, TopicInfo], now: int,
                             interval_ms: int = 0) -> None:
        if self.assignment_epoch >= self.group_epoch:
            return
        if not can_compute_target(self.assignment_timestamp, interval_ms, now):
            return  # the last target stands until the interval has passed
        self.target = self.compute_target(topics)
        self.assignment_epoch = self.group_epoch
        self.assignment_timestamp = now

    def compute_target(self, topics: dict[str, TopicInfo]) -> dict[str, frozenset[TopicPartition]]:
        """The simple assignor over the initialized partitions, sticky to the current
        target: one pass when every member subscribes to the same topics (homogeneous),
        else one per topic over its subscribers."""
        mids = sorted(self.members)

        def assignable(name: str) -> list[TopicPartition]:
            t = topics.get(name)
            st = self.initialized.get(t.topic_id) if t is not None else None
            if t is None or st is None:
                return []
            return [(t.topic_id, p) for p in sorted(st.partitions) if p < t.partitions]

        subscriptions = {self.members[m].subscribed for m in mids}
        if len(subscriptions) <= 1:
            parts = [tp for name in sorted(next(iter(subscriptions), frozenset()))
                     for tp in assignable(name)]
            return simple_assign(mids, parts, self.target)
        out: dict[str, set[TopicPartition]] = {m: set() for m in mids}
        for name in sorted(self.subscribed_topics()):
            parts = assignable(name)
            tids = {tid for tid, _ in parts}
            subs = [m for m in mids if name in self.members[m].subscribed]
            prev = {m: [tp for tp in self.target.get(m, ()) if tp[0] in tids] for m in subs}
            for m, tps in simple_assign(subs, parts, prev).items():
                out[m] |= tps
        return {m: frozenset(tps) for m, tps in out.items()}

    def _reconcile(self, m: ShareMember) -> None:
        m.assigned = self.target.get(m.member_id, frozenset())
        if m.member_epoch != self.assignment_epoch:
            m.previous_epoch, m.member_epoch = m.member_epoch, self.assignment_epoch

    def remove_member(self, member_id: str, topics: dict[str, TopicInfo]) -> bool:
        if self.members.pop(member_id, None) is None:
            return False
        self.target.pop(member_id, None)
        self._bump(topics)
        if not self.members:  # the last one: nothing to assign, as Kafka records it
            self.assignment_epoch = self.group_epoch
        return True

    def expired(self, now: int, session_timeout_ms: int) -> list[str]:
        return [mid for mid, m in self.members.items()
                if now - m.last_heartbeat_ms >= session_timeout_ms]

    def refresh_topics(self, topics: dict[str, TopicInfo]) -> bool:
        """Follow the image: a subscribed topic appeared, went or grew (a new hash)."""
        if not self.members:
            return False
        h = metadata_hash(topics, self.subscribed_topics())
        if h == self.metadata_hash:
            return False
        self.group_epoch += 1
        self.metadata_hash = h
        return True

    # -- durable share state ------------------------------------------------------------

    def maybe_init(self, topics: dict[str, TopicInfo], now: int, config: ShareConfig
                   ) -> InitRequest | None:
        """Mark subscribed partitions without share state initializing; what to ask."""
        want: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
        grown: set[uuid.UUID] = set()
        for name in sorted(self.subscribed_topics()):
            t = topics.get(name)
            if t is None:
                continue
            done = self.initialized.get(t.topic_id)
            have = set(done.partitions) if done else set()
            pending = self.initializing.get(t.topic_id)
            if pending is not None and now - pending.since_ms < config.initialize_retry_interval_ms:
                have |= pending.partitions
            missing = frozenset(range(t.partitions)) - have
            if missing:
                want[t.topic_id] = (name, missing)
                if done is not None:
                    grown.add(t.topic_id)
        if not want:
            return None
        for tid, (name, ps) in want.items():
            cur = self.initializing.get(tid)
            self.initializing[tid] = TopicState(
                name, ps | (cur.partitions if cur else frozenset()), now)
            self.deleting.pop(tid, None)
        return InitRequest(self.group_id, self.group_epoch, want, frozenset(grown))

    def initialized_(self, parts: dict[uuid.UUID, tuple[str, frozenset[int]]]) -> None:
        """The persister initialized ``parts``: initializing -> initialized."""
        for tid, (name, ps) in parts.items():
            cur = self.initializing.get(tid)
            if cur is not None:
                left = cur.partitions - ps
                if left:
                    self.initializing[tid] = TopicState(cur.name, left, cur.since_ms)
                else:
                    del self.initializing[tid]
            done = self.initialized.get(tid)
            self.initialized[tid] = TopicState(
                name, ps | (done.partitions if done else frozenset()))

    def uninitialize(self, parts: dict[uuid.UUID, tuple[str, frozenset[int]]]) -> None:
        """The initialization failed: the partitions are asked for again next time."""
        for tid, (_name, ps) in parts.items():
            cur = self.initializing.get(tid)
            if cur is None:
                continue
            left = cur.partitions - ps
            if left:
                self.initializing[tid] = TopicState(cur.name, left, cur.since_ms)
            else:
                del self.initializing[tid]

    def drop_deleted_topics(self, topics: dict[str, TopicInfo]) -> bool:
        """Forget the state of topics no longer in the image."""
        live = {t.topic_id for t in topics.values()}
        changed = False
        for d in (self.initialized, self.initializing):
            for tid in [tid for tid in d if tid not in live]:
                del d[tid]
                changed = True
        return changed

    # -- records ------------------------------------------------------------------------

    def records(self) -> dict[tuple[str, str], object]:
        """The group as its records: (kind, member id) -> record."""
        out: dict[tuple[str, str], object] = {
            ("share_metadata", ""): (self.group_epoch, self.metadata_hash),
            ("share_target_metadata", ""): (self.assignment_epoch, self.assignment_timestamp),
        }
        for mid, m in self.members.items():
            out[("share_member", mid)] = MemberRecord(m.rack_id, m.client_id, m.client_host,
                                                     tuple(sorted(m.subscribed)))
            out[("share_target", mid)] = self.target.get(mid, frozenset())
            out[("share_current", mid)] = CurrentRecord(m.member_epoch, m.previous_epoch, 0,
                                                        m.assigned)
        if self.initializing or self.initialized or self.deleting:
            out[("share_state_partitions", "")] = StatePartitions(
                tuple((tid, t.name, tuple(sorted(t.partitions)))
                      for tid, t in sorted(self.initializing.items())),
                tuple((tid, t.name, tuple(sorted(t.partitions)))
                      for tid, t in sorted(self.initialized.items())),
                tuple(sorted(self.deleting.items())))
        return out

    @classmethod
    def restore(cls, group_id: str, recs: dict[tuple[str, str], object], now: int
                ) -> ShareGroupModel:
        g = cls(group_id)
        meta = recs.get(("share_metadata", ""))
        if isinstance(meta, tuple):
            g.group_epoch, g.metadata_hash = int(meta[0]), int(meta[1])
        tmeta = recs.get(("share_target_metadata", ""))
        if isinstance(tmeta, tuple):
            g.assignment_epoch, g.assignment_timestamp = int(tmeta[0]), int(tmeta[1])
        for (kind, mid), rec in recs.items():
            if kind == "share_member" and isinstance(rec, MemberRecord):
                m = g.members.setdefault(mid, ShareMember(mid))
                m.rack_id, m.client_id, m.client_host = rec.rack_id, rec.client_id, rec.client_host
                m.subscribed = frozenset(rec.subscribed)
                m.last_heartbeat_ms = now  # sessions start anew
        for (kind, mid), rec in recs.items():
            if kind == "share_target" and isinstance(rec, frozenset) and mid in g.members:
                g.target[mid] = rec
            elif kind == "share_current" and isinstance(rec, CurrentRecord) and mid in g.members:
                m = g.members[mid]
                m.member_epoch, m.previous_epoch = rec.member_epoch, rec.previous_epoch
                m.assigned = rec.assigned
        sp = recs.get(("share_state_partitions", ""))
        if isinstance(sp, StatePartitions):
            # an initialization in flight when the shard moved is asked for again
            g.initializing = {tid: TopicState(n, frozenset(ps), -(1 << 62))
                              for tid, n, ps in sp.initializing}
            g.initialized = {tid: TopicState(n, frozenset(ps)) for tid, n, ps in sp.initialized}
            g.deleting = dict(sp.deleting)
        return g


def partitions_by_topic(tps: Iterable[TopicPartition]) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for tid, p in sorted(tps):
        out.setdefault(tid, []).append(p)
    return out

