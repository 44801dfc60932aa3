"""The group coordinator's shard: the groups of one `__consumer_offsets` partition.

This module owns every group's lifecycle (``state.py`` has the classic states and
their transitions, ``consumer.py`` the KIP-848 model) and decides each JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat, OffsetCommit,
TxnOffsetCommit, OffsetDelete and DeleteGroups outcome. It is a shard of the
coordinator runtime (``broker/coordinator/runtime.py``): every operation is
``(shard, now) -> CoordinatorResult`` (the answer, the records to write, timers, and the
answers of requests held earlier); it reads no clock and does no I/O. The service
(``coordinator.py``) routes requests to the shard of the group's partition.

Rules
-----
- JoinGroup and SyncGroup wait (``Held``) until the rebalance phase they belong to
  completes; the operation that completes it answers them (completions).
- Timers: ``tick`` every 100 ms (session and rebalance timeouts, the initial rebalance
  delay, pending members that never came back after MEMBER_ID_REQUIRED, consumer
  members' sessions and revocations, topic changes for consumer groups) and
  ``expire_offsets`` every ``offsets.retention.check.interval.ms``.
- Offsets apart from the rebalance protocol: a commit is checked against the group
  (member, generation or member epoch) and then *is* its records: the offsets change
  only when the runtime replays them (``replay``, the same code that loads the
  partition), so a refused write changes nothing. Offset tombstones and group
  tombstones (DeleteGroups, expiry) too. Group metadata and KIP-848 records are
  written from the state the operation changed; replay of those only happens when
  the partition is loaded.
- Transactional offset commits are held per producer id until their marker reaches
  the partition (``complete_txn``).
- Share groups (KIP-932, ``share_service.py`` inside the shard): ShareGroupHeartbeat and
  the share state's initialization answers (``share_initialized``); a share group is
  refused by the other protocols' requests (GROUP_ID_NOT_FOUND / INCONSISTENT_GROUP_PROTOCOL).
- A group is classic, consumer or streams (KIP-1071, ``streams_service.py`` inside the
  shard); an empty group (offsets only) changes kind when a member of another kind
  joins; a classic group in use is upgraded in place, and a consumer group left with
  classic members only is downgraded (``group.consumer.migration.policy``).
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jocko_py.broker.coordinator.runtime import (
    CoordinatorResult,
    Held,
    LogRecord,
    Record,
    Timer,
)
from jocko_py.broker.group.consumer import (
    ClassicInfo,
    ConsumerGroupModel,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResult,
    TopicInfo,
    TopicPartition,
    group_assignment,
)
from jocko_py.broker.group.offsets import CommitRequest, OffsetManager
from jocko_py.broker.group.offsets_store import (
    consumer_record,
    decode_consumer_value,
    decode_group_value,
    decode_key,
    group_key,
    group_value,
)
from jocko_py.broker.group.share import HeartbeatRequest as ShareHeartbeatRequest
from jocko_py.broker.group.share import HeartbeatResult as ShareHeartbeatResult
from jocko_py.broker.group.share import ShareConfig
from jocko_py.broker.group.share_service import GroupTimeouts, ShareGroups
from jocko_py.broker.group.state import (
    Group,
    GroupState,
    JoinResult,
    Member,
    OffsetAndMetadata,
    SyncResult,
)
from jocko_py.broker.group.streams import HeartbeatRequest as StreamsHeartbeatRequest
from jocko_py.broker.group.streams import HeartbeatResult as StreamsHeartbeatResult
from jocko_py.broker.group.streams import StreamsConfig
from jocko_py.broker.group.streams_service import StreamsGroups
from jocko_py.protocol import messages
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.interfaces import CoordinatorHost

log = logging.getLogger("jocko_py.broker.group")

E = ErrorCode
S = GroupState
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
TICK_MS = 100
Completions = list[tuple[int, object]]


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2147483647
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: disabled, upgrade, downgrade, bidirectional
    migration_policy: str = "bidirectional"

    @classmethod
    def from_broker(cls, broker: CoordinatorHost) -> GroupConfig:
        c = broker.config

        def num(key: str, default: int) -> int:
            raw = c.get(key)
            return int(raw) if raw else default

        return cls(
            min_session_timeout_ms=num("group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=num("group.max.session.timeout.ms", 1800000),
            initial_rebalance_delay_ms=num("group.initial.rebalance.delay.ms", 3000),
            max_size=num("group.max.size", 2147483647),
            offsets_retention_ms=num("offsets.retention.minutes", 10080) * 60000,
            offsets_retention_check_interval_ms=num("offsets.retention.check.interval.ms",
                                                    600000),
            offset_metadata_max_bytes=num("offset.metadata.max.bytes", 4096),
            consumer_session_timeout_ms=num("group.consumer.session.timeout.ms", 45000),
            consumer_heartbeat_interval_ms=num("group.consumer.heartbeat.interval.ms", 5000),
            consumer_assignors=_assignors(c.get("group.consumer.assignors")),
            migration_policy=(c.get("group.consumer.migration.policy")
                              or "bidirectional").lower(),
        )


def _assignors(raw: str | None) -> tuple[str, ...]:
    """Kafka takes class names or short names; the short name is the class name's
    last part without "Assignor" (UniformAssignor -> uniform)."""
    if not raw:
        return ("uniform", "range")
    out = []
    for name in raw.split(","):
        short = name.strip().rsplit(".", 1)[-1]
        if short.endswith("Assignor"):
            short = short[: -len("Assignor")]
        if short.lower() in ("uniform", "range"):
            out.append(short.lower())
    return tuple(out) or ("uniform", "range")


def _uuid() -> str:
    return str(uuid.uuid4())


class GroupShard:
    """The groups of one `__consumer_offsets` partition (see the module's rules).

    ``topics`` gives the topics as the metadata image shows them; ``new_id`` names new
    members (a random UUID; the simulation passes a seeded one)."""

    def __init__(self, partition: int, config: GroupConfig,
                 topics: Callable[[], dict[str, TopicInfo]],
                 new_id: Callable[[], str] = _uuid,
                 streams_config: StreamsConfig | None = None,
                 share_config: ShareConfig | None = None,
                 group_configs: Callable[[str], Mapping[str, str]] | None = None) -> None:
        self.partition = partition
        self.config = config
        self.topics = topics
        self.new_id = new_id
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetManager(self.groups, config.offset_metadata_max_bytes,
                                     config.offsets_retention_ms, topics)
        self.streams = StreamsGroups(
            streams_config or StreamsConfig(), self.groups,
            lambda: {n: t.partitions for n, t in self.topics().items()},
            self._drop_consumer_records)
        # a group's configs (GROUP config resources: overrides of the broker's settings)
        self.group_configs = group_configs or (lambda _g: {})
        self.share_config = share_config or ShareConfig()
        self.share = ShareGroups(self.share_config, self.groups, topics,
                                 self._drop_consumer_records, self._share_timeouts)
        self.loaded = False
        self._next_token = 0
        # the running operation's time, and whether the group tick is scheduled (it runs
        # only while some group has members: an idle shard costs nothing)
        self._now = 0
        self._ticking = False
        # KIP-848 groups: their records as last written (key -> value), to write changes
        self._consumer_written: dict[str, dict[bytes, bytes | None]] = {}
        # while loading: KIP-848 records by group, (kind, member id) -> decoded record
        self._loading_consumer: dict[str, dict[tuple[str, str], object]] = {}
        # what the running operation produces (one operation at a time)
        self._records: list[Record] = []
        # the KIP-848 groups' written records before the running operation changed them,
        # restored if its append is refused (``_undo_written``)
        self._written_before: dict[str, dict[bytes, bytes | None] | None] = {}
        self._done: Completions = []
        self._effects: list[object] = []

    # -- group configs -----------------------------------------------------------------

    def _group_int(self, group_id: str, name: str, default: int) -> int:
        raw = self.group_configs(group_id).get(name)
        try:
            return int(raw) if raw else default
        except ValueError:
            return default

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "consumer.session.timeout.ms",
                               self.config.consumer_session_timeout_ms)

    def _share_timeouts(self, group_id: str) -> GroupTimeouts:
        c = self.share_config
        return GroupTimeouts(
            self._group_int(group_id, "share.session.timeout.ms", c.session_timeout_ms),
            self._group_int(group_id, "share.heartbeat.interval.ms", c.heartbeat_interval_ms),
            self._group_int(group_id, "share.assignment.interval.ms", c.assignment_interval_ms))

    # -- results -----------------------------------------------------------------------

    def _result(self, response: Any, **kw: Any) -> CoordinatorResult[Any]:
        if self._effects:
            kw["effects"] = list(kw.get("effects", [])) + self._effects
        if self._written_before:
            kw["undo"] = self._undo_written(self._written_before)
            self._written_before = {}
        r: CoordinatorResult[Any] = CoordinatorResult(
            response, records=self._records, completions=self._done, **kw)
        self._records, self._done, self._effects = [], [], []
        if not self._ticking and self.loaded:
            # something happened: the tick looks at the groups until they are idle again
            self._ticking = True
            r.timers.append(Timer("tick", self._now + TICK_MS, _tick_op))
        return r

    def _undo_written(self, before: dict[str, dict[bytes, bytes | None] | None]
                      ) -> Callable[[], None]:
        """The append of an operation's records was refused: what the log holds of
        those KIP-848 groups is what it held before, so the next write writes the
        difference to that (not to records that never reached the log; seed 943178995
        of the whole-broker simulation: a member's records lost that way)."""
        def undo() -> None:
            for gid, prev in before.items():
                if prev is None:
                    self._consumer_written.pop(gid, None)
                else:
                    self._consumer_written[gid] = prev
        return undo

    def _remember_written(self, group_id: str) -> None:
        """Before the operation changes what ``group_id``'s records are believed to be."""
        if group_id not in self._written_before:
            self._written_before[group_id] = self._consumer_written.get(group_id)

    def _hold(self) -> int:
        self._next_token += 1
        return self._next_token

    # -- loading (runtime.CoordinatorShard) ----------------------------------------------

    def replay(self, rec: LogRecord) -> None:
        k = decode_key(rec.key)
        if k is None:
            return
        if k.kind == "offset":
            self.offsets.replay(self.groups.get(k.group), (k.topic, k.partition), rec.value,
                                rec.producer_id, lambda: self._group_for_replay(k.group))
            return
        if rec.producer_id >= 0:
            return  # only offsets are written in transactions
        if k.kind == "group":
            g0 = self.groups.get(k.group)
            if rec.value is None:
                if g0 is not None:
                    # the group was deleted; offsets written after this record survive
                    g0.transition_to(S.DEAD, g0.state_timestamp)
                    self.groups.pop(k.group, None)
                    self._consumer_written.pop(k.group, None)
                    self.streams.forget(k.group)
                    self.share.forget(k.group)
                    self._loading_consumer.pop(k.group, None)
                return
            if self.loaded:
                return  # written from the group as it is in memory
            new = decode_group_value(k.group, rec.value, 0)
            if g0 is not None:
                new.offsets = g0.offsets
                new.pending_txn_offsets = g0.pending_txn_offsets
            self.groups[k.group] = new
            return
        # a KIP-848 record
        if self.loaded:
            return
        recs = self._loading_consumer.setdefault(k.group, {})
        if rec.value is None:
            recs.pop((k.kind, k.member_id), None)
            if k.kind in ("metadata", "streams_metadata", "share_metadata"):  # deleted
                self._loading_consumer.pop(k.group, None)
        else:
            recs[(k.kind, k.member_id)] = decode_consumer_value(k.kind, rec.value)
            # (a tombstone makes no group: a deleted group's records follow its own)
            self._group_for_replay(k.group)

    def _group_for_replay(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id, -1)
        return g

    def on_loaded(self, now: int) -> CoordinatorResult[None]:
        topics: dict[str, TopicInfo] | None = None
        for gid, recs in self._loading_consumer.items():
            g = self.groups.get(gid)
            if g is None or ("metadata", "") not in recs:
                continue
            g.consumer = ConsumerGroupModel.restore(gid, recs, now,
                                                    self.config.consumer_assignors)
            self._consumer_written[gid] = self._consumer_entries(gid, g.consumer)
            if topics is None:
                topics = self.topics()
            g.consumer.adopt_topics(topics)
        self.streams.restore(self._loading_consumer, now)
        self.share.restore(self._loading_consumer, now)
        self._loading_consumer = {}
        for g in self.groups.values():
            if g.state_timestamp < 0:
                g.state_timestamp = now
            for m in g.members.values():
                m.last_heartbeat_ms = now  # sessions start anew
        self.loaded = True
        self._ticking = True
        log.info("[partition=__consumer_offsets-%d] %d group(s) loaded", self.partition,
                 len(self.groups))
        return CoordinatorResult(None, timers=[
            Timer("tick", now + TICK_MS, _tick_op),
            Timer("expire-offsets", now + self.config.offsets_retention_check_interval_ms,
                  _expire_op)])

    def on_unloaded(self) -> Completions:
        out: Completions = []
        for g in self.groups.values():
            for m in g.members.values():
                m.complete_join(JoinResult(E.NOT_COORDINATOR, member_id=m.member_id), out)
                m.complete_sync(SyncResult(E.NOT_COORDINATOR), out)
        self.groups.clear()
        return out

    # -- JoinGroup -------------------------------------------------------------------

    def join(
        self, now: int, *, group_id: str, member_id: str, instance_id: str | None,
        client_id: str, client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]],
        require_known_member_id: bool, supports_skip_assignment: bool,
    ) -> CoordinatorResult[JoinResult]:
        self._now = now
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            return self._result(JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=member_id))
        if rebalance_timeout_ms <= 0:
            rebalance_timeout_ms = session_timeout_ms
        g = self.groups.get(group_id)
        created = g is None
        if g is None:
            if member_id:
                return self._result(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))
            g = self.groups[group_id] = Group(group_id, now)
        if g.is_(S.DEAD):
            return self._result(JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
        if g.streams is not None or g.share is not None:
            return self._result(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        if g.has_consumer_members():
            return self._classic_join_consumer_group(
                g, now, member_id, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols, require_known_member_id)
        g.consumer = None  # an empty consumer group becomes classic again
        if not g.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return self._result(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL,
                                           member_id=member_id))
        if g.static_member_id(instance_id) is None and \
                not self._accept_joining_member(g, member_id):
            log.info("[group=%s] member %s turned away: group.max.size %d reached",
                     group_id, member_id or "<new>", self.config.max_size)
            if member_id in g.members:
                self._remove_member_and_update(g, now, member_id, "group.max.size reached")
            g.pending_members.pop(member_id, None)
            return self._result(JoinResult(E.GROUP_MAX_SIZE_REACHED))
        if not member_id:
            result = self._join_unknown(
                g, now, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols, require_known_member_id,
                supports_skip_assignment)
        else:
            result = self._join_known(
                g, now, member_id, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols)
        if isinstance(result.response, JoinResult) and created and not g.members \
                and not g.pending_members:
            # a group this join would have created and did not join: not kept (a group
            # that existed keeps its generation: never handed out twice)
            self.groups.pop(group_id, None)
        return result

    def _accept_joining_member(self, g: Group, member_id: str) -> bool:
        """Kafka's group.max.size rule: while rebalancing, count the members that
        rejoined (so the last ones to rejoin are the ones turned away)."""
        limit = self.config.max_size
        if g.state in (S.EMPTY, S.DEAD):
            return True
        m = g.members.get(member_id)
        if g.is_(S.PREPARING_REBALANCE):
            awaiting = sum(1 for x in g.members.values() if x.awaiting_join)
            return (m is not None and m.awaiting_join) or awaiting < limit
        return m is not None or len(g.members) < limit

    def _join_unknown(
        self, g: Group, now: int, instance_id: str | None, client_id: str, client_host: str,
        session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], require_known: bool, supports_skip: bool,
    ) -> CoordinatorResult[JoinResult]:
        new_id = f"{client_id}-{self.new_id()}"
        if instance_id is not None:
            old_id = g.static_member_id(instance_id)
            if old_id is not None:
                return self._update_static_member(
                    g, now, old_id, new_id, instance_id, protocols, session_timeout_ms,
                    rebalance_timeout_ms, supports_skip)
            return self._add_member_and_rebalance(
                g, now, new_id, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols)
        if require_known:
            # KIP-394: hand out the id first so a client that gives up mid-join
            # does not leave a ghost member behind
            g.pending_members[new_id] = now + session_timeout_ms
            log.info("[group=%s] new member %s must rejoin with its member id",
                     g.group_id, new_id)
            return self._result(JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
        return self._add_member_and_rebalance(
            g, now, new_id, None, client_id, client_host, session_timeout_ms,
            rebalance_timeout_ms, protocol_type, protocols)

    def _join_known(
        self, g: Group, now: int, member_id: str, instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]],
    ) -> CoordinatorResult[JoinResult]:
        if instance_id is not None:
            cur = g.static_member_id(instance_id)
            if cur is not None and cur != member_id:
                return self._result(JoinResult(E.FENCED_INSTANCE_ID, member_id=member_id))
        if member_id in g.pending_members:
            return self._add_member_and_rebalance(
                g, now, member_id, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols)
        m = g.members.get(member_id)
        if m is None:
            return self._result(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))
        m.session_timeout_ms = session_timeout_ms
        m.rebalance_timeout_ms = rebalance_timeout_ms
        if g.is_(S.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(g, now, m, protocols,
                                                     "member rejoining")
        if g.is_(S.COMPLETING_REBALANCE):
            if m.matches(protocols):
                # the JoinGroup response was lost: send the same one again
                return self._result(self._current_join_result(g, m, now))
            return self._update_member_and_rebalance(
                g, now, m, protocols, f"member {member_id} changed its metadata")
        if g.is_(S.STABLE):
            if g.is_leader(member_id) or not m.matches(protocols):
                # a leader rejoin lets it react to changes outside the member
                # metadata (for the consumer: topic metadata)
                return self._update_member_and_rebalance(
                    g, now, m, protocols, f"member {member_id} rejoining a stable group")
            m.last_heartbeat_ms = now
            return self._result(JoinResult(
                E.NONE, member_id=member_id, generation_id=g.generation_id,
                protocol_type=g.protocol_type, protocol_name=g.protocol_name,
                leader_id=g.leader_id or ""))
        return self._result(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _current_join_result(self, g: Group, m: Member, now: int) -> JoinResult:
        m.last_heartbeat_ms = now
        return JoinResult(
            E.NONE, member_id=m.member_id, generation_id=g.generation_id,
            protocol_type=g.protocol_type, protocol_name=g.protocol_name,
            leader_id=g.leader_id or "",
            members=g.current_member_metadata() if g.is_leader(m.member_id) else [])

    def _wait_join(self, m: Member) -> Held:
        if m.join_waiter is not None:
            # a retried JoinGroup replaces the one still waiting
            m.complete_join(JoinResult(E.REBALANCE_IN_PROGRESS, member_id=m.member_id),
                            self._done)
        m.join_waiter = self._hold()
        return Held(m.join_waiter)

    def _add_member_and_rebalance(
        self, g: Group, now: int, member_id: str, instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]],
    ) -> CoordinatorResult[JoinResult]:
        m = Member(
            member_id=member_id, group_instance_id=instance_id, client_id=client_id,
            client_host=client_host, rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms, protocol_type=protocol_type,
            protocols=protocols, last_heartbeat_ms=now)
        held = self._wait_join(m)
        g.add(m)
        if g.is_(S.PREPARING_REBALANCE) and g.initial_delay_limit is not None:
            g.new_member_added = True
        log.info("[group=%s] member %s joined (instance %s, client %s)", g.group_id, member_id,
                 instance_id, client_id)
        self._maybe_prepare_rebalance(g, now, f"adding new member {member_id}")
        self._try_complete_join(g, now)
        return self._result(held)

    def _update_member_and_rebalance(
        self, g: Group, now: int, m: Member, protocols: list[tuple[str, bytes]], reason: str,
    ) -> CoordinatorResult[JoinResult]:
        m.protocols = protocols
        m.last_heartbeat_ms = now
        held = self._wait_join(m)
        self._maybe_prepare_rebalance(g, now, reason)
        self._try_complete_join(g, now)
        return self._result(held)

    def _update_static_member(
        self, g: Group, now: int, old_id: str, new_id: str, instance_id: str,
        protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
        supports_skip: bool,
    ) -> CoordinatorResult[JoinResult]:
        current_leader = g.leader_id
        m = g.replace_static_member(instance_id, old_id, new_id, self._done)
        m.last_heartbeat_ms = now
        m.session_timeout_ms = session_timeout_ms
        m.rebalance_timeout_ms = rebalance_timeout_ms
        old_protocols = m.protocols
        m.protocols = protocols
        log.info("[group=%s] static member %s rejoined as %s (was %s)", g.group_id,
                 instance_id, new_id, old_id)
        if g.is_(S.STABLE):
            if g.protocol_name == g.select_protocol():
                self._store_group(g)
                is_leader = g.is_leader(new_id)
                skip = is_leader and supports_skip

                def undo(err: ErrorCode) -> CoordinatorResult[JoinResult]:
                    # the old incarnation keeps its place
                    m2 = g.replace_static_member(instance_id, new_id, old_id, self._done)
                    m2.protocols = old_protocols
                    return self._result(JoinResult(err, member_id=new_id))

                return self._result(JoinResult(
                    E.NONE, member_id=new_id, generation_id=g.generation_id,
                    protocol_type=g.protocol_type, protocol_name=g.protocol_name,
                    leader_id=current_leader or "",
                    members=g.current_member_metadata() if skip else [],
                    skip_assignment=skip), on_append_error=undo)
            held = self._wait_join(m)
            self._maybe_prepare_rebalance(
                g, now, f"static member {instance_id} changed the selected protocol")
            self._try_complete_join(g, now)
            return self._result(held)
        held = self._wait_join(m)
        if g.is_(S.COMPLETING_REBALANCE):
            # the leader may have assigned to the old id: assign again
            self._prepare_rebalance(g, now,
                                    f"static member {instance_id} rejoined during sync")
        self._try_complete_join(g, now)
        return self._result(held)

    # -- rebalance phases --------------------------------------------------------------

    def _maybe_prepare_rebalance(self, g: Group, now: int, reason: str) -> None:
        if g.can_rebalance():
            self._prepare_rebalance(g, now, reason)

    def _prepare_rebalance(self, g: Group, now: int, reason: str) -> None:
        if g.is_(S.COMPLETING_REBALANCE):
            self._propagate_assignment_error(g, now, E.REBALANCE_IN_PROGRESS)
        if g.is_(S.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            g.join_deadline = now + delay
            g.initial_delay_limit = now + max(g.rebalance_timeout_ms(), delay)
            g.new_member_added = False
        else:
            g.join_deadline = now + g.rebalance_timeout_ms()
            g.initial_delay_limit = None
        g.pending_sync.clear()
        g.sync_deadline = None
        g.transition_to(S.PREPARING_REBALANCE, now)
        log.info("[group=%s] preparing to rebalance (generation %d): %s", g.group_id,
                 g.generation_id, reason)

    def _propagate_assignment_error(self, g: Group, now: int, err: E) -> None:
        for m in g.members.values():
            m.assignment = b""
            if m.complete_sync(SyncResult(err), self._done):
                m.last_heartbeat_ms = now

    def _try_complete_join(self, g: Group, now: int) -> None:
        if g.is_(S.PREPARING_REBALANCE) and g.initial_delay_limit is None and g.all_joined():
            self._complete_join(g, now)

    def _complete_join(self, g: Group, now: int) -> None:
        for m in g.not_yet_rejoined():
            if m.group_instance_id is None:
                log.info("[group=%s] removing member %s: it did not rejoin in time",
                         g.group_id, m.member_id)
                g.remove(m.member_id)
        if g.is_(S.DEAD):
            return
        if not g.maybe_elect_joined_leader() and g.members:
            # only static members that did not rejoin are left; wait for them
            # (or for their session timeouts)
            g.join_deadline = now + g.rebalance_timeout_ms()
            g.initial_delay_limit = None
            return
        g.initial_delay_limit = None
        g.join_deadline = None
        g.init_next_generation(now)
        if g.is_(S.EMPTY):
            log.info("[group=%s] generation %d is empty", g.group_id, g.generation_id)
            self._store_group(g)
            return
        log.info("[group=%s] generation %d formed with %d member(s), protocol %s, leader %s",
                 g.group_id, g.generation_id, len(g.members), g.protocol_name, g.leader_id)
        g.pending_sync = set(g.members)
        g.sync_deadline = now + g.rebalance_timeout_ms()
        for m in g.members.values():
            m.complete_join(JoinResult(
                E.NONE, member_id=m.member_id, generation_id=g.generation_id,
                protocol_type=g.protocol_type, protocol_name=g.protocol_name,
                leader_id=g.leader_id or "",
                members=g.current_member_metadata() if g.is_leader(m.member_id) else []),
                self._done)
            m.last_heartbeat_ms = now
            m.is_new = False

    # -- SyncGroup -------------------------------------------------------------------

    def sync(
        self, now: int, *, group_id: str, generation_id: int, member_id: str,
        instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> CoordinatorResult[SyncResult]:
        self._now = now
        g = self.groups.get(group_id)
        if g is None:
            return self._result(SyncResult(E.UNKNOWN_MEMBER_ID))
        if g.is_(S.DEAD):
            return self._result(SyncResult(E.COORDINATOR_NOT_AVAILABLE))
        if g.consumer is not None:
            return self._result(self._classic_sync_consumer_group(g, member_id, generation_id))
        # Kafka's order: fenced instance, unknown member, generation, then protocol
        err = _member_check(g, member_id, generation_id, instance_id)
        if err != E.NONE:
            return self._result(SyncResult(err))
        m = g.members[member_id]
        if (protocol_type is not None and protocol_type != g.protocol_type) or \
                (protocol_name is not None and protocol_name != g.protocol_name):
            return self._result(SyncResult(E.INCONSISTENT_GROUP_PROTOCOL))
        if g.is_(S.EMPTY):
            return self._result(SyncResult(E.UNKNOWN_MEMBER_ID))
        if g.is_(S.PREPARING_REBALANCE):
            return self._result(SyncResult(E.REBALANCE_IN_PROGRESS))
        m.last_heartbeat_ms = now
        g.pending_sync.discard(member_id)
        if g.is_(S.STABLE):
            return self._result(SyncResult(E.NONE, m.assignment, g.protocol_type,
                                           g.protocol_name))
        # CompletingRebalance: wait for the leader's assignment
        m.complete_sync(SyncResult(E.REBALANCE_IN_PROGRESS), self._done)
        m.sync_waiter = self._hold()
        held = Held(m.sync_waiter)
        if not g.is_leader(member_id):
            return self._result(held)
        full = {mid: assignments.get(mid, b"") for mid in g.members}
        gen = g.generation_id
        self._store_group(g, full)
        for mid, a in full.items():
            g.members[mid].assignment = a
        g.transition_to(S.STABLE, now)
        for mm in g.members.values():
            if mm.complete_sync(SyncResult(E.NONE, mm.assignment, g.protocol_type,
                                           g.protocol_name), self._done):
                mm.last_heartbeat_ms = now
        log.info("[group=%s] generation %d is stable", g.group_id, gen)

        answered = [token for token, _ in self._done]

        def failed(err: ErrorCode) -> CoordinatorResult[SyncResult]:
            # the assignment was not stored: every member that waited learns it, and
            # the group rebalances
            for mm2 in g.members.values():
                mm2.assignment = b""
            self._done = [(token, SyncResult(err)) for token in answered]
            self._prepare_rebalance(g, now, f"storing the group failed: {err.name}")
            return self._result(held)

        return self._result(held, on_append_error=failed)

    # -- Heartbeat / LeaveGroup ------------------------------------------------------------

    def heartbeat(self, now: int, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> CoordinatorResult[ErrorCode]:
        self._now = now
        return self._result(self._heartbeat(now, group_id, member_id, instance_id,
                                            generation_id))

    def _heartbeat(self, now: int, group_id: str, member_id: str, instance_id: str | None,
                   generation_id: int) -> ErrorCode:
        g = self.groups.get(group_id)
        if g is None:
            return E.UNKNOWN_MEMBER_ID
        if g.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if g.consumer is not None:
            return g.consumer.classic_heartbeat(member_id, generation_id, now)
        if g.is_(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        err = _member_check(g, member_id, generation_id, instance_id)
        if err != E.NONE:
            return err
        m = g.members[member_id]
        m.last_heartbeat_ms = now
        if g.is_(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave(self, now: int, group_id: str, members: list[tuple[str, str | None]]
              ) -> CoordinatorResult[tuple[ErrorCode, list[ErrorCode]]]:
        self._now = now
        g = self.groups.get(group_id)
        if g is None:
            return self._result((E.NONE, [E.UNKNOWN_MEMBER_ID for _ in members]))
        if g.is_(S.DEAD):
            return self._result((E.COORDINATOR_NOT_AVAILABLE, []))
        if g.consumer is not None:
            return self._result((E.NONE, [
                self._classic_leave_consumer_group(g, now, mid, iid) for mid, iid in members]))
        out: list[E] = []
        for member_id, instance_id in members:
            if instance_id is not None:
                cur = g.static_member_id(instance_id)
                if cur is None:
                    out.append(E.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and cur != member_id:
                    out.append(E.FENCED_INSTANCE_ID)
                    continue
                member_id = cur
            if member_id in g.pending_members:
                del g.pending_members[member_id]
                out.append(E.NONE)
                continue
            if not g.has(member_id):
                out.append(E.UNKNOWN_MEMBER_ID)
                continue
            log.info("[group=%s] member %s left", g.group_id, member_id)
            self._remove_member_and_update(g, now, member_id, "member left the group")
            out.append(E.NONE)
        return self._result((E.NONE, out))

    def _remove_member_and_update(self, g: Group, now: int, member_id: str,
                                  reason: str) -> None:
        m = g.members.get(member_id)
        if m is None:
            return
        m.complete_join(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id), self._done)
        m.complete_sync(SyncResult(E.UNKNOWN_MEMBER_ID), self._done)
        g.remove(member_id)
        if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(g, now, f"removing member {member_id}: {reason}")
        # the rebalance may be complete at once (e.g. the last member left)
        self._try_complete_join(g, now)

    # -- timers ------------------------------------------------------------------------

    def tick(self, now: int) -> CoordinatorResult[None]:
        self._now = now
        topics: dict[str, TopicInfo] | None = None
        for g in list(self.groups.values()):
            try:
                if g.share is not None:
                    if topics is None:
                        topics = self.topics()
                    recs, effects = self.share.tick(g, now, topics)
                    self._records += recs
                    self._effects += effects
                elif g.streams is not None:
                    if topics is None:
                        topics = self.topics()
                    self._records += self.streams.tick(
                        g, now, {n: t.partitions for n, t in topics.items()})
                elif g.consumer is not None:
                    if topics is None:
                        topics = self.topics()
                    self._tick_consumer_group(g, g.consumer, now, topics)
                else:
                    self._tick_group(g, now)
            except Exception:
                log.exception("[group=%s] timer handling failed", g.group_id)
        busy = any(g.members or g.pending_members or g.has_consumer_members()
                   or (g.streams is not None and g.streams.members)
                   or self.share.busy(g)
                   for g in self.groups.values())
        self._ticking = True  # (re)armed here, or not at all while idle
        r = self._result(None, timers=[Timer("tick", now + TICK_MS, _tick_op)] if busy else [])
        self._ticking = busy
        return r

    def _tick_group(self, g: Group, now: int) -> None:
        for pid, deadline in list(g.pending_members.items()):
            if now >= deadline:
                log.info("[group=%s] pending member %s expired", g.group_id, pid)
                del g.pending_members[pid]
                if g.is_(S.PREPARING_REBALANCE):
                    self._try_complete_join(g, now)
        for m in list(g.members.values()):
            if m.awaiting_join:
                if m.is_new and now > m.last_heartbeat_ms + NEW_MEMBER_JOIN_TIMEOUT_MS:
                    self._remove_member_and_update(g, now, m.member_id,
                                                   "new member join timeout")
                continue
            if m.awaiting_sync:
                continue
            if now > m.last_heartbeat_ms + m.session_timeout_ms:
                log.info("[group=%s] member %s (instance %s) failed: no heartbeat for %d ms",
                         g.group_id, m.member_id, m.group_instance_id, m.session_timeout_ms)
                self._remove_member_and_update(g, now, m.member_id, "session timeout")
        if g.pending_sync and g.sync_deadline is not None and now >= g.sync_deadline \
                and g.state in (S.COMPLETING_REBALANCE, S.STABLE):
            late = sorted(g.pending_sync)
            g.pending_sync.clear()
            for mid in late:
                log.info("[group=%s] removing member %s: no SyncGroup within the rebalance "
                         "timeout", g.group_id, mid)
                self._remove_member_and_update(g, now, mid, "pending sync timeout")
        if g.is_(S.PREPARING_REBALANCE) and g.join_deadline is not None \
                and now >= g.join_deadline:
            if g.initial_delay_limit is not None and g.new_member_added \
                    and now < g.initial_delay_limit:
                g.new_member_added = False
                g.join_deadline = min(now + self.config.initial_rebalance_delay_ms,
                                      g.initial_delay_limit)
                return
            g.initial_delay_limit = None
            self._complete_join(g, now)
        elif g.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(g, now)

    def _tick_consumer_group(self, g: Group, cg: ConsumerGroupModel, now: int,
                             topics: dict[str, TopicInfo]) -> None:
        for mid, reason in cg.expired(now, self.consumer_session_timeout_ms(g.group_id)):
            log.info("[group=%s] removing member %s: %s", g.group_id, mid, reason)
            cg.remove_member(mid)
        before = cg.group_epoch
        cg.refresh_topics(topics)
        if cg.group_epoch != before:
            log.info("[group=%s] group epoch %d (members or subscribed topics changed)",
                     g.group_id, cg.group_epoch)
            self._persist_consumer_group(g)
            self._maybe_downgrade(g, now)

    # -- persistence --------------------------------------------------------------------

    def _store_group(self, g: Group, assignments: dict[str, bytes] | None = None) -> None:
        self._records.append((group_key(g.group_id), group_value(g, assignments)))

    def _consumer_entries(self, group: str, model: ConsumerGroupModel | None
                          ) -> dict[bytes, bytes | None]:
        out: dict[bytes, bytes | None] = {}
        if model is not None:
            for (kind, mid), rec in model.records().items():
                k, v = consumer_record(group, kind, mid, rec)
                out[k] = v
        return out

    def _persist_consumer_group(self, g: Group, model: ConsumerGroupModel | None = None,
                                *, gone: bool = False) -> None:
        """Write the KIP-848 records of ``g`` that changed since the last write
        (``gone``: tombstones for all of them)."""
        self._remember_written(g.group_id)
        before = self._consumer_written.get(g.group_id, {})
        now = {} if gone else self._consumer_entries(g.group_id, model or g.consumer)
        self._records += [(k, v) for k, v in now.items() if before.get(k) != v]
        self._records += [(k, None) for k in before if k not in now]
        if gone:
            self._consumer_written.pop(g.group_id, None)
        else:
            self._consumer_written[g.group_id] = now

    # -- ConsumerGroupHeartbeat (KIP-848) ---------------------------------------------------

    def consumer_heartbeat(self, now: int, group_id: str, req: HeartbeatRequest
                           ) -> CoordinatorResult[HeartbeatResult]:
        self._now = now
        g = self.groups.get(group_id)
        if g is None:
            if req.member_epoch != 0:
                return self._result(HeartbeatResult(E.UNKNOWN_MEMBER_ID,
                                                    f"unknown member {req.member_id}"))
            g = self.groups[group_id] = Group(group_id, now)
        if g.is_(S.DEAD):
            return self._result(HeartbeatResult(E.COORDINATOR_NOT_AVAILABLE))
        if g.streams is not None or g.share is not None:
            return self._result(HeartbeatResult(E.GROUP_ID_NOT_FOUND,
                                                f"Group {group_id} is not a consumer group."))
        if g.consumer is None:
            if g.members or g.pending_members or not g.is_(S.EMPTY):
                upgraded = self._upgrade(g, now) if req.member_epoch == 0 else None
                if upgraded is None:
                    return self._result(HeartbeatResult(
                        E.GROUP_ID_NOT_FOUND,
                        f"group {group_id} is a classic group that cannot be upgraded now "
                        f"({g.state.value}, group.consumer.migration.policy="
                        f"{self.config.migration_policy})"))
                g = upgraded
            else:
                g.consumer = ConsumerGroupModel(group_id, self.config.consumer_assignors)
                log.info("[group=%s] is now a consumer-protocol group", group_id)
        if req.member_epoch == 0 and not req.member_id:
            req.member_id = self.new_id()  # v0: the coordinator names the member
        cg = g.consumer
        if cg is None:
            return self._result(HeartbeatResult(E.GROUP_ID_NOT_FOUND,
                                                f"group {group_id} is not available"))
        before = (cg.group_epoch, len(cg.members))
        r = cg.heartbeat(req, self.topics(), now, self.consumer_session_timeout_ms(group_id))
        if r.error == E.NONE:
            self._persist_consumer_group(g)
        if (cg.group_epoch, len(cg.members)) != before:
            log.info("[group=%s] member %s epoch %d: group epoch %d, %d member(s), %s",
                     group_id, req.member_id, r.member_epoch, cg.group_epoch,
                     len(cg.members), cg.state().value)
        if req.member_epoch < 0:
            self._maybe_downgrade(g, now)

        def failed(err: ErrorCode) -> CoordinatorResult[HeartbeatResult]:
            return self._result(HeartbeatResult(err, f"could not write the group: {err.name}"))

        return self._result(r, on_append_error=failed)

    # -- StreamsGroupHeartbeat (KIP-1071) -------------------------------------------------

    def streams_heartbeat(self, now: int, group_id: str, req: StreamsHeartbeatRequest
                          ) -> CoordinatorResult[StreamsHeartbeatResult]:
        self._now = now
        r, records = self.streams.heartbeat(now, group_id, req)
        self._records += records

        def failed(err: ErrorCode) -> CoordinatorResult[StreamsHeartbeatResult]:
            if r.error != E.NONE:
                return self._result(r)
            return self._result(StreamsHeartbeatResult(
                err, f"could not write the group: {err.name}"))

        return self._result(r, on_append_error=failed)

    # -- ShareGroupHeartbeat (KIP-932) ----------------------------------------------------

    def share_heartbeat(self, now: int, group_id: str, req: ShareHeartbeatRequest
                        ) -> CoordinatorResult[ShareHeartbeatResult]:
        self._now = now
        r, records, effects = self.share.heartbeat(now, group_id, req)
        self._records += records
        self._effects += effects

        def failed(err: ErrorCode) -> CoordinatorResult[ShareHeartbeatResult]:
            if r.error != E.NONE:
                return self._result(r)
            return self._result(ShareHeartbeatResult(
                err, f"could not write the group: {err.name}"))

        return self._result(r, on_append_error=failed)

    def share_initialized(self, now: int, group_id: str,
                          parts: dict[uuid.UUID, tuple[str, frozenset[int]]], ok: bool
                          ) -> CoordinatorResult[None]:
        """The persister initialized (``ok``) or failed to initialize ``parts``."""
        self._now = now
        self._records += self.share.initialized(group_id, parts, ok)
        return self._result(None)

    def _drop_consumer_records(self, g: Group) -> list[Record]:
        """Tombstones for the KIP-848 records of ``g`` (it changes kind)."""
        self._remember_written(g.group_id)
        return [(k, None) for k in self._consumer_written.pop(g.group_id, {})]

    # -- online migration: classic members in a consumer group, upgrade and downgrade ----

    def _upgrade(self, g: Group, now: int) -> Group | None:
        """A consumer-protocol member joins a classic group in use: the group becomes a
        consumer group in place (its members, generation and assignment carried over;
        the classic members go on with JoinGroup/SyncGroup/Heartbeat), as Kafka 4 does
        under ``group.consumer.migration.policy`` upgrade/bidirectional. The classic
        group is replaced by a new (Empty) group holding the consumer model and the
        offsets, as Kafka replaces a ClassicGroup by a ConsumerGroup."""
        if self.config.migration_policy not in ("upgrade", "bidirectional") \
                or g.protocol_type != "consumer" or not g.is_(S.STABLE) \
                or g.protocol_name is None:
            return None
        topics = self.topics()
        ids = {name: t.topic_id for name, t in topics.items()}
        cg = ConsumerGroupModel(g.group_id, self.config.consumer_assignors)
        cg.group_epoch = cg.assignment_epoch = g.generation_id
        for m in g.members.values():
            try:
                subscribed = sorted(_subscription(m.metadata(g.protocol_name))[0])
                assigned = frozenset((ids[t], p) for t, ps in _assignment(m.assignment)
                                     for p in ps if t in ids)
            except (ValueError, KeyError):
                return None
            cg.members[m.member_id] = ConsumerMember(
                member_id=m.member_id, instance_id=m.group_instance_id, rack_id=None,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms, subscribed_names=tuple(subscribed),
                member_epoch=g.generation_id, assigned=assigned, last_heartbeat_ms=now,
                classic=ClassicInfo(list(m.protocols), m.session_timeout_ms, g.protocol_name))
            cg.target[m.member_id] = assigned
        cg.adopt_topics(topics)
        ng = Group(g.group_id, now)
        ng.offsets = g.offsets
        ng.pending_txn_offsets = g.pending_txn_offsets
        ng.consumer = cg
        self.groups[g.group_id] = ng
        log.info("[group=%s] upgraded in place to the consumer protocol: %d classic "
                 "member(s) at epoch %d", g.group_id, len(cg.members), cg.group_epoch)
        return ng

    def _maybe_downgrade(self, g: Group, now: int) -> None:
        """The last consumer-protocol member left and only classic members remain: the
        group becomes classic again (its members rejoin in a classic rebalance)."""
        cg = g.consumer
        if cg is None or not cg.only_classic_members() \
                or self.config.migration_policy not in ("downgrade", "bidirectional"):
            return
        names = {t.topic_id: name for name, t in self.topics().items()}
        ng = Group(g.group_id, now)
        ng.offsets = g.offsets
        ng.pending_txn_offsets = g.pending_txn_offsets
        ng.generation_id = cg.group_epoch
        ng.protocol_type = "consumer"
        for cm in cg.members.values():
            assert cm.classic is not None
            ng.add(Member(
                member_id=cm.member_id, group_instance_id=cm.instance_id,
                client_id=cm.client_id, client_host=cm.client_host,
                rebalance_timeout_ms=cm.rebalance_timeout_ms,
                session_timeout_ms=cm.classic.session_timeout_ms, protocol_type="consumer",
                protocols=list(cm.classic.protocols),
                assignment=_encode_assignment(cm.assigned, names), last_heartbeat_ms=now,
                is_new=False))
        ng.protocol_name = ng.select_protocol()
        ng.resume_stable(now)
        self.groups[g.group_id] = ng
        self._persist_consumer_group(g, gone=True)
        log.info("[group=%s] downgraded to a classic group: %d member(s)", g.group_id,
                 len(ng.members))
        self._prepare_rebalance(ng, now, "downgraded from the consumer protocol")

    def _classic_join_consumer_group(
        self, g: Group, now: int, member_id: str, instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]], require_known: bool,
    ) -> CoordinatorResult[JoinResult]:
        cg = g.consumer
        assert cg is not None
        if protocol_type != "consumer" or not protocols \
                or self.config.migration_policy == "disabled":
            return self._result(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        if not member_id:
            new_id = f"{client_id}-{self.new_id()}"
            if require_known:
                return self._result(JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
            member_id = new_id
        existing = cg.members.get(member_id)
        if existing is not None and existing.classic is None:
            return self._result(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        name, metadata = protocols[0]
        topics = self.topics()
        try:
            subscribed, owned_names = _subscription(metadata)
        except ValueError:
            return self._result(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        owned = frozenset((topics[t].topic_id, p) for t, ps in owned_names for p in ps
                          if t in topics)
        m = cg.classic_join(member_id, instance_id, client_id, client_host, sorted(subscribed),
                            owned, ClassicInfo(list(protocols), session_timeout_ms, name),
                            rebalance_timeout_ms, topics, now)
        self._persist_consumer_group(g)
        log.info("[group=%s] classic member %s joined the consumer group at epoch %d with "
                 "%d partition(s)", g.group_id, member_id, m.member_epoch, len(m.assigned))
        return self._result(JoinResult(E.NONE, member_id=member_id,
                                       generation_id=m.member_epoch, protocol_type="consumer",
                                       protocol_name=name, leader_id=""))

    def _classic_sync_consumer_group(self, g: Group, member_id: str, generation: int
                                     ) -> SyncResult:
        cg = g.consumer
        assert cg is not None
        m = cg.members.get(member_id)
        if m is None or m.classic is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if generation != m.member_epoch:
            return SyncResult(E.ILLEGAL_GENERATION)
        names = {t.topic_id: name for name, t in self.topics().items()}
        return SyncResult(E.NONE, assignment=_encode_assignment(m.assigned, names),
                          protocol_type="consumer", protocol_name=m.classic.protocol_name)

    def _classic_leave_consumer_group(self, g: Group, now: int, member_id: str,
                                      instance_id: str | None) -> E:
        cg = g.consumer
        assert cg is not None
        m = cg.members.get(member_id) if member_id else None
        if m is None and instance_id is not None:
            m = cg.static_member(instance_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        log.info("[group=%s] member %s left", g.group_id, m.member_id)
        cg.remove_member(m.member_id)
        self._persist_consumer_group(g)
        self._maybe_downgrade(g, now)
        return E.NONE

    # -- offsets (decided in offsets.py, validated against the group here) ----------------

    def commit(
        self, now: int, *, group_id: str, generation_id: int, member_id: str,
        instance_id: str | None, retention_ms: int, offsets: dict[tuple[str, int], CommitRequest],
    ) -> CoordinatorResult[dict[tuple[str, int], ErrorCode]]:
        self._now = now
        err = self._validate_commit(now, group_id, generation_id, member_id, instance_id)
        if err is not None:
            return self._result({tp: err for tp in offsets})
        if group_id not in self.groups:
            self.groups[group_id] = Group(group_id, now)
        return self.offsets.commit(now, group_id, offsets, retention_ms, None)

    def _validate_commit(self, now: int, group_id: str, generation_id: int, member_id: str,
                         instance_id: str | None) -> ErrorCode | None:
        """May this member commit for the group (Kafka's validateOffsetCommit)? A member's
        commit counts as a sign of life."""
        g = self.groups.get(group_id)
        if g is None:
            if generation_id >= 0:
                return E.ILLEGAL_GENERATION
            return None
        if g.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if g.share is not None:
            return E.GROUP_ID_NOT_FOUND
        if g.streams is not None:
            serr = self.streams.check_commit(g, member_id, generation_id, now)
            if serr != E.NONE:
                return serr
        elif g.consumer is not None:
            cerr = g.consumer.check_commit(member_id, generation_id)
            if cerr != E.NONE:
                return cerr
            m2 = g.consumer.members.get(member_id)
            if m2 is not None:
                m2.last_heartbeat_ms = now
        elif generation_id < 0 and g.is_(S.EMPTY):
            # a simple commit (admin client, or a consumer that assigns partitions
            # itself): Kafka accepts it into an Empty group whatever the member id
            pass
        elif generation_id >= 0 or member_id or instance_id is not None:
            err = _member_check(g, member_id, generation_id, instance_id)
            if err != E.NONE:
                return err
            m = g.members[member_id]
            if g.is_(S.COMPLETING_REBALANCE):
                return E.REBALANCE_IN_PROGRESS
            m.last_heartbeat_ms = now
        elif not g.is_(S.EMPTY):
            # only members may commit for a group that uses Kafka's group management
            return E.UNKNOWN_MEMBER_ID
        return None

    def txn_commit(
        self, now: int, *, group_id: str, producer_id: int, producer_epoch: int,
        generation_id: int, member_id: str, instance_id: str | None,
        offsets: dict[tuple[str, int], CommitRequest],
    ) -> CoordinatorResult[dict[tuple[str, int], ErrorCode]]:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and
        count once its commit marker reaches the group's partition (`complete_txn`)."""
        self._now = now
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id, now)
        if g.is_(S.DEAD):
            return self._result({tp: E.COORDINATOR_NOT_AVAILABLE for tp in offsets})
        if g.share is not None:
            return self._result({tp: E.GROUP_ID_NOT_FOUND for tp in offsets})
        if g.streams is not None:
            serr = self.streams.check_commit(g, member_id, generation_id, now)
            if serr != E.NONE:
                serr = E.ILLEGAL_GENERATION if serr == E.STALE_MEMBER_EPOCH else serr
                return self._result({tp: serr for tp in offsets})
        elif g.consumer is not None:
            # a KIP-848 group: the member at its member epoch (its members are the
            # model's, not the classic `g.members`)
            cerr = g.consumer.check_commit(member_id, generation_id, transactional=True,
                                           instance_id=instance_id)
            if cerr != E.NONE:
                return self._result({tp: cerr for tp in offsets})
        elif generation_id >= 0 or member_id or instance_id is not None:
            # v3+ (KIP-447): the group's member at its generation, as OffsetCommit
            err: ErrorCode | None = None
            cur = g.static_member_id(instance_id)
            if instance_id is not None and cur is not None and cur != member_id:
                err = E.FENCED_INSTANCE_ID
            elif member_id and member_id not in g.members:
                err = E.UNKNOWN_MEMBER_ID
            elif generation_id >= 0 and generation_id != g.generation_id:
                err = E.ILLEGAL_GENERATION
            if err is not None:
                return self._result({tp: err for tp in offsets})
        return self.offsets.commit(now, group_id, offsets, -1, (producer_id, producer_epoch))

    def complete_txn(self, now: int, producer_id: int, commit: bool) -> CoordinatorResult[None]:
        self._now = now
        return self.offsets.complete_txn(producer_id, commit)

    def has_pending_txn_offset(self, group_id: str, tp: tuple[str, int]) -> bool:
        return self.offsets.has_pending(group_id, tp)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None,
        member: tuple[str, int] | None = None,
    ) -> tuple[E, dict[tuple[str, int], OffsetAndMetadata | None]]:
        g = self.groups.get(group_id)
        if member is not None and member[1] >= 0 and g is not None \
                and g.consumer is not None:
            cerr = g.consumer.check_commit(*member)
            if cerr != E.NONE:
                return cerr, {}
        if member is not None and member[1] >= 0 and g is not None \
                and g.streams is not None:
            serr, _ = g.streams.check_commit(*member)
            if serr != E.NONE:
                return serr, {}
        return E.NONE, self.offsets.fetch(group_id, partitions)

    def delete_offsets(self, now: int, group_id: str, partitions: list[tuple[str, int]]
                       ) -> CoordinatorResult[tuple[E, dict[tuple[str, int], E]]]:
        self._now = now
        return self.offsets.delete(group_id, partitions)

    def expire_offsets(self, now: int) -> CoordinatorResult[int]:
        self._now = now
        r = self.offsets.expire(now)
        r.timers.append(Timer("expire-offsets",
                              now + self.config.offsets_retention_check_interval_ms, _expire_op))
        return r

    # -- DeleteGroups ----------------------------------------------------------------------

    def delete_group(self, now: int, group_id: str) -> CoordinatorResult[ErrorCode]:
        self._now = now
        g = self.groups.get(group_id)
        if g is None or g.is_(S.DEAD):
            return self._result(E.GROUP_ID_NOT_FOUND)
        if not g.is_(S.EMPTY) or g.has_consumer_members() \
                or (g.streams is not None and g.streams.members) or self.share.busy(g):
            return self._result(E.NON_EMPTY_GROUP)
        self._records += self.offsets.tombstones(g)
        self._records.append((group_key(group_id), None))
        self._persist_consumer_group(g, gone=True)
        self._records += self.streams.deletion(g)
        self._records += self.share.deletion(g)
        log.info("[group=%s] deleted", group_id)
        return self._result(E.NONE, replay=True, on_append_error=self._result)


def _tick_op(shard: GroupShard, now: int) -> CoordinatorResult[None]:
    return shard.tick(now)


def _expire_op(shard: GroupShard, now: int) -> CoordinatorResult[None]:
    r = shard.expire_offsets(now)
    return CoordinatorResult(None, records=r.records, replay=r.replay, timers=r.timers,
                             completions=r.completions)


def _subscription(metadata: bytes) -> tuple[set[str], list[tuple[str, list[int]]]]:
    """Topics and owned partitions (v1+) of a ConsumerProtocolSubscription."""
    try:
        (version,) = struct.unpack_from(">h", metadata)
        v = messages.data_schema("ConsumerProtocolSubscription", min(version, 3)).parse_bytes(
            metadata[2:])
    except Exception as e:  # anything a client sent that does not parse
        raise ValueError(f"malformed subscription: {e}") from e
    owned = [(t.topic, list(t.partitions)) for t in (getattr(v, "owned_partitions", None) or [])]
    return set(v.topics), owned


def _assignment(data: bytes) -> list[tuple[str, list[int]]]:
    if len(data) < 2:
        return []
    try:
        (version,) = struct.unpack_from(">h", data)
        v = messages.data_schema("ConsumerProtocolAssignment", min(version, 3)).parse_bytes(
            data[2:])
    except Exception as e:
        raise ValueError(f"malformed assignment: {e}") from e
    return [(t.topic, list(t.partitions)) for t in v.assigned_partitions]


def _encode_assignment(tps: frozenset[TopicPartition], names: dict[uuid.UUID, str]) -> bytes:
    parts = [{"topic": names[tid], "partitions": sorted(ps)}
             for tid, ps in sorted(group_assignment(tps).items(), key=lambda kv: str(kv[0]))
             if tid in names]
    body = messages.data_schema("ConsumerProtocolAssignment", 0).build(
        {"assigned_partitions": parts, "user_data": None})
    return struct.pack(">h", 0) + bytes(body)


def _member_check(g: Group, member_id: str, generation_id: int,
                  instance_id: str | None) -> ErrorCode:
    """A classic member's checks in Kafka's order: a static instance now held by another
    member id (FENCED_INSTANCE_ID), an unknown member, another generation."""
    if instance_id is not None:
        cur = g.static_member_id(instance_id)
        if cur is not None and cur != member_id:
            return E.FENCED_INSTANCE_ID
    if member_id not in g.members:
        return E.UNKNOWN_MEMBER_ID
    if generation_id != g.generation_id:
        return E.ILLEGAL_GENERATION
    return E.NONE
