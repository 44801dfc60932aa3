"""The group coordinator: Kafka's classic group protocol on one node.

This module owns every group's lifecycle (see `state.py` for the states and
transitions) and decides each JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit and OffsetFetch outcome. Durable effects go through
`OffsetsStore` (`__consumer_offsets`); timers are driven by `tick()`, which the
broker runs every 100 ms: session timeouts, rebalance timeouts, the initial
rebalance delay and expiry of members that never came back after
MEMBER_ID_REQUIRED. JoinGroup and SyncGroup wait on asyncio futures until the
rebalance phase they belong to completes.

KIP-848 consumer-protocol groups (ConsumerGroupHeartbeat) keep their model in
`consumer.py` (epochs, target assignment, reconciliation); this module routes
their heartbeats, removes members whose session or revocation timed out, follows
topic changes for them, and checks member epochs on their offset commits. A group
is one kind or the other; an empty group (offsets only) changes kind when a member
of the other kind joins. Transactional offset commits (TxnOffsetCommit) are held per
producer id until their transaction's marker reaches the group's partition
(`complete_txn`). Not implemented: share groups.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
from jocko_py.broker.group.offsets_store import (
    OFFSETS_TOPIC,
    OffsetsStore,
    group_key,
    group_value,
    offset_key,
    offset_value,
)
from jocko_py.broker.group.state import (
    Group,
    GroupState,
    JoinResult,
    Member,
    OffsetAndMetadata,
    SyncResult,
)
from jocko_py.broker.group.streams_service import StreamsGroups
from jocko_py.broker.purgatory import before_park, parked
from jocko_py.protocol import messages
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker

log = logging.getLogger("jocko_py.broker.group")

E = ErrorCode
S = GroupState
NEW_MEMBER_JOIN_TIMEOUT_S = 300.0


def now_ms() -> int:
    return int(time.time() * 1000)


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
    def from_broker(cls, broker: Broker) -> GroupConfig:
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


@dataclass(slots=True)
class CommitRequest:
    offset: int
    leader_epoch: int
    metadata: str | None


class GroupCoordinator:
    def __init__(self, broker: Broker, config: GroupConfig | None = None) -> None:
        self.broker = broker
        self.config = config or GroupConfig.from_broker(broker)
        self.store = OffsetsStore(broker)
        self.groups: dict[str, Group] = {}
        self.loaded = False
        self._to_load: set[int] = set()
        # KIP-1071 streams groups (streams_service.py)
        self.streams = StreamsGroups(broker, self.store, self.groups,
                                     lambda gid: self._group_error(gid))

    # -- lifecycle -------------------------------------------------------------------

    def load(self) -> None:
        """Groups are loaded per `__consumer_offsets` partition as this broker becomes
        its leader (`on_partition_role`); nothing to read up front."""
        self.loaded = True

    def on_partition_role(self, p: Any, leader: bool) -> None:
        """Elected: load the partition's groups from the local replica. Resigned: drop
        them (their members learn NOT_COORDINATOR and look the coordinator up again)."""
        if p.topic != OFFSETS_TOPIC:
            return
        idx = p.partition
        if leader:
            # One load for every partition elected by the same metadata batch (all of
            # them at start-up); until it runs, their groups get
            # COORDINATOR_LOAD_IN_PROGRESS.
            if not self._to_load:
                asyncio.get_running_loop().call_soon(self._load_elected)
            self._to_load.add(idx)
            return
        self._to_load.discard(idx)
        dropped = [gid for gid in self.groups if self.store.partition_for(gid) == idx]
        for gid in dropped:
            g = self.groups.pop(gid)
            self.store.consumer_written(gid, None)
            self.streams.forget(gid)
            for m in g.members.values():
                m.complete_join(JoinResult(E.NOT_COORDINATOR, member_id=m.member_id))
                m.complete_sync(SyncResult(E.NOT_COORDINATOR))
        if dropped:
            log.info("[partition=%s] resigned as coordinator of %d group(s)", p.name,
                     len(dropped))

    def _load_elected(self) -> None:
        wanted, self._to_load = self._to_load, set()
        wanted = {i for i in wanted if self.store.is_leader_for_partition(i)}
        if not wanted:
            return
        # every local replica is read (merged by timestamp, see offsets_store): a group
        # may have records in two partitions after __consumer_offsets grew
        state = self.store.load()
        self.store.restore_consumer_groups(state, self.config.consumer_assignors)
        self.streams.restore(state)
        topics = self._topics()
        n = 0
        for gid, g in state.groups.items():
            if self.store.partition_for(gid) in wanted:
                self.groups[gid] = g
                if g.consumer is not None:
                    g.consumer.adopt_topics(topics)
                n += 1
        log.info("elected coordinator for %d partition(s) of %s: %d group(s) loaded",
                 len(wanted), OFFSETS_TOPIC, n)

    def is_active(self) -> bool:
        """Coordinator duties start once `__consumer_offsets` exists (first FindCoordinator)."""
        return self.loaded and self.store.topic_exists()

    async def ensure_active(self) -> None:
        await self.store.ensure_topic()

    def _group_error(self, group_id: str | None, *, allow_empty: bool = False) -> E | None:
        if group_id is None or (not group_id and not allow_empty):
            return E.INVALID_GROUP_ID
        if not self.loaded:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if not self.store.topic_exists():
            return E.NOT_COORDINATOR
        if self.store.partition_for(group_id) in self._to_load:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if not self.store.is_leader_for(group_id):
            return E.NOT_COORDINATOR
        return None

    # -- JoinGroup -------------------------------------------------------------------

    async def join(
        self, *, group_id: str, member_id: str, instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]],
        require_known_member_id: bool, supports_skip_assignment: bool,
    ) -> JoinResult:
        err = self._group_error(group_id)
        if err is not None:
            return JoinResult(err, member_id=member_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms <= 0:
            rebalance_timeout_ms = session_timeout_ms
        g = self.groups.get(group_id)
        if g is None:
            if member_id:
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)
            g = self.groups[group_id] = Group(group_id, now_ms())
        if g.is_(S.DEAD):
            return JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if g.streams is not None:
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if g.has_consumer_members():
            return self._classic_join_consumer_group(
                g, member_id, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols, require_known_member_id)
        g.consumer = None  # an empty consumer group becomes classic again
        if not g.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if g.static_member_id(instance_id) is None and \
                not self._accept_joining_member(g, member_id):
            log.info("[group=%s] member %s turned away: group.max.size %d reached",
                     group_id, member_id or "<new>", self.config.max_size)
            if member_id in g.members:
                self._remove_member_and_update(g, member_id, "group.max.size reached")
            g.pending_members.pop(member_id, None)
            return JoinResult(E.GROUP_MAX_SIZE_REACHED)
        if not member_id:
            result = self._join_unknown(
                g, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols, require_known_member_id,
                supports_skip_assignment)
        else:
            result = self._join_known(
                g, member_id, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols)
        if isinstance(result, JoinResult):
            if g.is_(S.EMPTY) and not g.members and not g.offsets and not g.pending_members:
                self.groups.pop(group_id, None)
            return result
        before_park()
        with parked():
            return await result

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
        self, g: Group, instance_id: str | None, client_id: str, client_host: str,
        session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], require_known: bool, supports_skip: bool,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        new_id = f"{client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = g.static_member_id(instance_id)
            if old_id is not None:
                return self._update_static_member(
                    g, old_id, new_id, instance_id, protocols, session_timeout_ms,
                    rebalance_timeout_ms, supports_skip)
            return self._add_member_and_rebalance(
                g, new_id, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols)
        if require_known:
            # KIP-394: hand out the id first so a client that gives up mid-join
            # does not leave a ghost member behind
            g.pending_members[new_id] = time.monotonic() + session_timeout_ms / 1000
            log.info("[group=%s] new member %s must rejoin with its member id",
                     g.group_id, new_id)
            return JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id)
        return self._add_member_and_rebalance(
            g, new_id, None, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
            protocol_type, protocols)

    def _join_known(
        self, g: Group, member_id: str, instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        if instance_id is not None:
            cur = g.static_member_id(instance_id)
            if cur is not None and cur != member_id:
                return JoinResult(E.FENCED_INSTANCE_ID, member_id=member_id)
        if member_id in g.pending_members:
            return self._add_member_and_rebalance(
                g, member_id, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols)
        m = g.members.get(member_id)
        if m is None:
            return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)
        m.session_timeout_ms = session_timeout_ms
        m.rebalance_timeout_ms = rebalance_timeout_ms
        if g.is_(S.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(g, m, protocols, "member rejoining")
        if g.is_(S.COMPLETING_REBALANCE):
            if m.matches(protocols):
                # the JoinGroup response was lost: send the same one again
                return self._current_join_result(g, m)
            return self._update_member_and_rebalance(
                g, m, protocols, f"member {member_id} changed its metadata")
        if g.is_(S.STABLE):
            if g.is_leader(member_id) or not m.matches(protocols):
                # a leader rejoin lets it react to changes outside the member
                # metadata (for the consumer: topic metadata)
                return self._update_member_and_rebalance(
                    g, m, protocols, f"member {member_id} rejoining a stable group")
            m.last_heartbeat = time.monotonic()
            return JoinResult(
                E.NONE, member_id=member_id, generation_id=g.generation_id,
                protocol_type=g.protocol_type, protocol_name=g.protocol_name,
                leader_id=g.leader_id or "")
        return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)

    def _current_join_result(self, g: Group, m: Member) -> JoinResult:
        m.last_heartbeat = time.monotonic()
        return JoinResult(
            E.NONE, member_id=m.member_id, generation_id=g.generation_id,
            protocol_type=g.protocol_type, protocol_name=g.protocol_name,
            leader_id=g.leader_id or "",
            members=g.current_member_metadata() if g.is_leader(m.member_id) else [])

    def _new_future(self, m: Member) -> asyncio.Future[JoinResult]:
        if m.join_future is not None and not m.join_future.done():
            # a retried JoinGroup replaces the one still waiting
            m.join_future.set_result(JoinResult(E.REBALANCE_IN_PROGRESS, member_id=m.member_id))
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        m.join_future = fut
        return fut

    def _add_member_and_rebalance(
        self, g: Group, member_id: str, instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]],
    ) -> asyncio.Future[JoinResult]:
        m = Member(
            member_id=member_id, group_instance_id=instance_id, client_id=client_id,
            client_host=client_host, rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms, protocol_type=protocol_type,
            protocols=protocols, last_heartbeat=time.monotonic())
        fut = self._new_future(m)
        g.add(m)
        if g.is_(S.PREPARING_REBALANCE) and g.initial_delay_limit is not None:
            g.new_member_added = True
        log.info("[group=%s] member %s joined (instance %s, client %s)", g.group_id, member_id,
                 instance_id, client_id)
        self._maybe_prepare_rebalance(g, f"adding new member {member_id}")
        self._try_complete_join(g)
        return fut

    def _update_member_and_rebalance(
        self, g: Group, m: Member, protocols: list[tuple[str, bytes]], reason: str,
    ) -> asyncio.Future[JoinResult]:
        m.protocols = protocols
        m.last_heartbeat = time.monotonic()
        fut = self._new_future(m)
        self._maybe_prepare_rebalance(g, reason)
        self._try_complete_join(g)
        return fut

    def _update_static_member(
        self, g: Group, old_id: str, new_id: str, instance_id: str,
        protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
        supports_skip: bool,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        current_leader = g.leader_id
        m = g.replace_static_member(instance_id, old_id, new_id)
        m.last_heartbeat = time.monotonic()
        m.session_timeout_ms = session_timeout_ms
        m.rebalance_timeout_ms = rebalance_timeout_ms
        old_protocols = m.protocols
        m.protocols = protocols
        log.info("[group=%s] static member %s rejoined as %s (was %s)", g.group_id,
                 instance_id, new_id, old_id)
        if g.is_(S.STABLE):
            if g.protocol_name == g.select_protocol():
                err = self._store_group(g)
                if err != E.NONE:
                    # undo: the old incarnation keeps its place
                    m2 = g.replace_static_member(instance_id, new_id, old_id)
                    m2.protocols = old_protocols
                    return JoinResult(err, member_id=new_id)
                is_leader = g.is_leader(new_id)
                skip = is_leader and supports_skip
                return JoinResult(
                    E.NONE, member_id=new_id, generation_id=g.generation_id,
                    protocol_type=g.protocol_type, protocol_name=g.protocol_name,
                    leader_id=current_leader or "",
                    members=g.current_member_metadata() if skip else [],
                    skip_assignment=skip)
            fut = self._new_future(m)
            self._maybe_prepare_rebalance(
                g, f"static member {instance_id} changed the selected protocol")
            self._try_complete_join(g)
            return fut
        fut = self._new_future(m)
        if g.is_(S.COMPLETING_REBALANCE):
            # the leader may have assigned to the old id: assign again
            self._prepare_rebalance(g, f"static member {instance_id} rejoined during sync")
        self._try_complete_join(g)
        return fut

    # -- rebalance phases --------------------------------------------------------------

    def _maybe_prepare_rebalance(self, g: Group, reason: str) -> None:
        if g.can_rebalance():
            self._prepare_rebalance(g, reason)

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        if g.is_(S.COMPLETING_REBALANCE):
            self._propagate_assignment_error(g, E.REBALANCE_IN_PROGRESS)
        mono = time.monotonic()
        if g.is_(S.EMPTY):
            delay = self.config.initial_rebalance_delay_ms / 1000
            g.join_deadline = mono + delay
            g.initial_delay_limit = mono + max(g.rebalance_timeout_ms() / 1000, delay)
            g.new_member_added = False
        else:
            g.join_deadline = mono + g.rebalance_timeout_ms() / 1000
            g.initial_delay_limit = None
        g.pending_sync.clear()
        g.sync_deadline = None
        g.transition_to(S.PREPARING_REBALANCE, now_ms())
        log.info("[group=%s] preparing to rebalance (generation %d): %s", g.group_id,
                 g.generation_id, reason)

    def _propagate_assignment_error(self, g: Group, err: E) -> None:
        for m in g.members.values():
            m.assignment = b""
            if m.complete_sync(SyncResult(err)):
                m.last_heartbeat = time.monotonic()

    def _try_complete_join(self, g: Group) -> None:
        if g.is_(S.PREPARING_REBALANCE) and g.initial_delay_limit is None and g.all_joined():
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
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
            g.join_deadline = time.monotonic() + g.rebalance_timeout_ms() / 1000
            g.initial_delay_limit = None
            return
        g.initial_delay_limit = None
        g.join_deadline = None
        g.init_next_generation(now_ms())
        if g.is_(S.EMPTY):
            log.info("[group=%s] generation %d is empty", g.group_id, g.generation_id)
            self._store_group(g)
            return
        log.info("[group=%s] generation %d formed with %d member(s), protocol %s, leader %s",
                 g.group_id, g.generation_id, len(g.members), g.protocol_name, g.leader_id)
        mono = time.monotonic()
        g.pending_sync = set(g.members)
        g.sync_deadline = mono + g.rebalance_timeout_ms() / 1000
        for m in g.members.values():
            m.complete_join(JoinResult(
                E.NONE, member_id=m.member_id, generation_id=g.generation_id,
                protocol_type=g.protocol_type, protocol_name=g.protocol_name,
                leader_id=g.leader_id or "",
                members=g.current_member_metadata() if g.is_leader(m.member_id) else []))
            m.last_heartbeat = mono
            m.is_new = False

    # -- SyncGroup -------------------------------------------------------------------

    async def sync(
        self, *, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
    ) -> SyncResult:
        err = self._group_error(group_id)
        if err is not None:
            return SyncResult(err)
        g = self.groups.get(group_id)
        if g is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if g.is_(S.DEAD):
            return SyncResult(E.COORDINATOR_NOT_AVAILABLE)
        if g.consumer is not None:
            return self._classic_sync_consumer_group(g, member_id, generation_id)
        # Kafka's order: fenced instance, unknown member, generation, then protocol
        if instance_id is not None:
            cur = g.static_member_id(instance_id)
            if cur is not None and cur != member_id:
                return SyncResult(E.FENCED_INSTANCE_ID)
        m = g.members.get(member_id)
        if m is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if generation_id != g.generation_id:
            return SyncResult(E.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != g.protocol_type) or \
                (protocol_name is not None and protocol_name != g.protocol_name):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if g.is_(S.EMPTY):
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if g.is_(S.PREPARING_REBALANCE):
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        m.last_heartbeat = time.monotonic()
        g.pending_sync.discard(member_id)
        if g.is_(S.STABLE):
            return SyncResult(E.NONE, m.assignment, g.protocol_type, g.protocol_name)
        # CompletingRebalance: wait for the leader's assignment
        if m.sync_future is not None and not m.sync_future.done():
            m.sync_future.set_result(SyncResult(E.REBALANCE_IN_PROGRESS))
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        m.sync_future = fut
        if g.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in g.members}
            gen = g.generation_id
            err = self._store_group(g, full)
            if g.is_(S.COMPLETING_REBALANCE) and g.generation_id == gen:
                if err != E.NONE:
                    self._propagate_assignment_error(g, err)
                    self._prepare_rebalance(g, f"storing the group failed: {err.name}")
                else:
                    for mid, a in full.items():
                        g.members[mid].assignment = a
                    g.transition_to(S.STABLE, now_ms())
                    mono = time.monotonic()
                    for mm in g.members.values():
                        if mm.complete_sync(SyncResult(E.NONE, mm.assignment, g.protocol_type,
                                                       g.protocol_name)):
                            mm.last_heartbeat = mono
                    log.info("[group=%s] generation %d is stable", g.group_id, gen)
        before_park()
        with parked():
            return await fut

    # -- Heartbeat / LeaveGroup ------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> E:
        err = self._group_error(group_id)
        if err is not None:
            return err
        g = self.groups.get(group_id)
        if g is None:
            return E.UNKNOWN_MEMBER_ID
        if g.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if g.consumer is not None:
            return g.consumer.classic_heartbeat(member_id, generation_id, now_ms())
        if g.is_(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            cur = g.static_member_id(instance_id)
            if cur is not None and cur != member_id:
                return E.FENCED_INSTANCE_ID
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != g.generation_id:
            return E.ILLEGAL_GENERATION
        m.last_heartbeat = time.monotonic()
        if g.is_(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave(self, group_id: str, members: list[tuple[str, str | None]]
              ) -> tuple[E, list[E]]:
        err = self._group_error(group_id)
        if err is not None:
            return err, []
        g = self.groups.get(group_id)
        if g is None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID for _ in members]
        if g.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        if g.consumer is not None:
            return E.NONE, [self._classic_leave_consumer_group(g, mid, iid)
                            for mid, iid in members]
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
            self._remove_member_and_update(g, member_id, "member left the group")
            out.append(E.NONE)
        return E.NONE, out

    def _remove_member_and_update(self, g: Group, member_id: str, reason: str) -> None:
        m = g.members.get(member_id)
        if m is None:
            return
        m.complete_join(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))
        m.complete_sync(SyncResult(E.UNKNOWN_MEMBER_ID))
        g.remove(member_id)
        if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(g, f"removing member {member_id}: {reason}")
        # the rebalance may be complete at once (e.g. the last member left)
        self._try_complete_join(g)

    # -- timers ------------------------------------------------------------------------

    def tick(self) -> None:
        mono = time.monotonic()
        now = now_ms()
        topics: dict[str, TopicInfo] | None = None
        stopics: dict[str, int] | None = None
        for g in list(self.groups.values()):
            try:
                if g.streams is not None:
                    if stopics is None:
                        stopics = self.streams.topics()
                    self.streams.tick(g, now, stopics)
                elif g.consumer is not None:
                    if topics is None:
                        topics = self._topics()
                    self._tick_consumer_group(g, g.consumer, now, topics)
                else:
                    self._tick_group(g, mono)
            except Exception:
                log.exception("[group=%s] timer handling failed", g.group_id)

    def _tick_consumer_group(self, g: Group, cg: ConsumerGroupModel, now: int,
                             topics: dict[str, TopicInfo]) -> None:
        for mid, reason in cg.expired(now, self.config.consumer_session_timeout_ms):
            log.info("[group=%s] removing member %s: %s", g.group_id, mid, reason)
            cg.remove_member(mid)
        before = cg.group_epoch
        cg.refresh_topics(topics)
        if cg.group_epoch != before:
            log.info("[group=%s] group epoch %d (members or subscribed topics changed)",
                     g.group_id, cg.group_epoch)
            self.persist_consumer_group(g)
            self._maybe_downgrade(g)

    def persist_consumer_group(self, g: Group) -> E:
        """Write the KIP-848 records of ``g`` that changed since the last write
        (``store.wait_durable`` then waits for the ISR)."""
        entries = self.store.consumer_changes(g.group_id, g.consumer)
        if not entries:
            return E.NONE
        err = self.store.append(g.group_id, entries)
        if err == E.NONE:
            self.store.consumer_written(g.group_id, g.consumer)
        return err

    # -- ConsumerGroupHeartbeat (KIP-848) ---------------------------------------------------

    def _topics(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(t.topic_id, len(t.partitions))
                for name, t in self.broker.topics.image.topics.items()}

    def consumer_heartbeat(self, group_id: str, req: HeartbeatRequest) -> HeartbeatResult:
        err = self._group_error(group_id)
        if err is not None:
            return HeartbeatResult(err)
        g = self.groups.get(group_id)
        if g is None:
            if req.member_epoch != 0:
                return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"unknown member {req.member_id}")
            g = self.groups[group_id] = Group(group_id, now_ms())
        if g.is_(S.DEAD):
            return HeartbeatResult(E.COORDINATOR_NOT_AVAILABLE)
        if g.streams is not None:
            return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if g.consumer is None:
            if g.members or g.pending_members or not g.is_(S.EMPTY):
                if req.member_epoch != 0 or not self._upgrade(g):
                    return HeartbeatResult(
                        E.GROUP_ID_NOT_FOUND,
                        f"group {group_id} is a classic group that cannot be upgraded now "
                        f"({g.state.value}, group.consumer.migration.policy="
                        f"{self.config.migration_policy})")
            else:
                g.consumer = ConsumerGroupModel(group_id, self.config.consumer_assignors)
                log.info("[group=%s] is now a consumer-protocol group", group_id)
        if req.member_epoch == 0 and not req.member_id:
            req.member_id = str(uuid.uuid4())  # v0: the coordinator names the member
        cg = g.consumer
        if cg is None:
            return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"group {group_id} is not available")
        before = (cg.group_epoch, len(cg.members))
        r = cg.heartbeat(req, self._topics(), now_ms(), self.config.consumer_session_timeout_ms)
        if r.error == E.NONE:
            werr = self.persist_consumer_group(g)
            if werr != E.NONE:
                return HeartbeatResult(werr, f"could not write the group: {werr.name}")
        if (cg.group_epoch, len(cg.members)) != before:
            log.info("[group=%s] member %s epoch %d: group epoch %d, %d member(s), %s",
                     group_id, req.member_id, r.member_epoch, cg.group_epoch,
                     len(cg.members), cg.state().value)
        if req.member_epoch < 0:
            self._maybe_downgrade(g)
        return r

    # -- online migration: classic members in a consumer group, upgrade and downgrade ----

    def _upgrade(self, g: Group) -> bool:
        """A consumer-protocol member joins a classic group in use: the group becomes a
        consumer group in place (its members, generation and assignment carried over;
        the classic members go on with JoinGroup/SyncGroup/Heartbeat), as Kafka 4 does
        under ``group.consumer.migration.policy`` upgrade/bidirectional."""
        if self.config.migration_policy not in ("upgrade", "bidirectional") \
                or g.protocol_type != "consumer" or not g.is_(S.STABLE) \
                or g.protocol_name is None:
            return False
        topics = self._topics()
        ids = {name: t.topic_id for name, t in topics.items()}
        cg = ConsumerGroupModel(g.group_id, self.config.consumer_assignors)
        cg.group_epoch = cg.assignment_epoch = g.generation_id
        now = now_ms()
        for m in g.members.values():
            try:
                subscribed = sorted(_subscription(m.metadata(g.protocol_name))[0])
                assigned = frozenset((ids[t], p) for t, ps in _assignment(m.assignment)
                                     for p in ps if t in ids)
            except (ValueError, KeyError):
                return False
            cg.members[m.member_id] = ConsumerMember(
                member_id=m.member_id, instance_id=m.group_instance_id, rack_id=None,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms, subscribed_names=tuple(subscribed),
                member_epoch=g.generation_id, assigned=assigned, last_heartbeat_ms=now,
                classic=ClassicInfo(list(m.protocols), m.session_timeout_ms, g.protocol_name))
            cg.target[m.member_id] = assigned
        cg.adopt_topics(topics)
        g.members.clear()
        g.static_members.clear()
        g.pending_sync.clear()
        g.state = S.EMPTY
        g.consumer = cg
        log.info("[group=%s] upgraded in place to the consumer protocol: %d classic "
                 "member(s) at epoch %d", g.group_id, len(cg.members), cg.group_epoch)
        return True

    def _maybe_downgrade(self, g: Group) -> None:
        """The last consumer-protocol member left and only classic members remain: the
        group becomes classic again (its members rejoin in a classic rebalance)."""
        cg = g.consumer
        if cg is None or not cg.only_classic_members() \
                or self.config.migration_policy not in ("downgrade", "bidirectional"):
            return
        names = {t.topic_id: name for name, t in self._topics().items()}
        mono = time.monotonic()
        g.consumer = None
        g.generation_id = cg.group_epoch
        g.protocol_type = "consumer"
        for cm in cg.members.values():
            assert cm.classic is not None
            g.add(Member(
                member_id=cm.member_id, group_instance_id=cm.instance_id,
                client_id=cm.client_id, client_host=cm.client_host,
                rebalance_timeout_ms=cm.rebalance_timeout_ms,
                session_timeout_ms=cm.classic.session_timeout_ms, protocol_type="consumer",
                protocols=list(cm.classic.protocols),
                assignment=_encode_assignment(cm.assigned, names), last_heartbeat=mono,
                is_new=False))
        g.protocol_name = g.select_protocol()
        g.state = S.STABLE
        self.store.append(g.group_id, self.store.consumer_changes(g.group_id, None))
        self.store.consumer_written(g.group_id, None)
        log.info("[group=%s] downgraded to a classic group: %d member(s)", g.group_id,
                 len(g.members))
        self._prepare_rebalance(g, "downgraded from the consumer protocol")

    def _classic_join_consumer_group(
        self, g: Group, member_id: str, instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]], require_known: bool,
    ) -> JoinResult:
        cg = g.consumer
        assert cg is not None
        if protocol_type != "consumer" or not protocols \
                or self.config.migration_policy == "disabled":
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if require_known:
                return JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id)
            member_id = new_id
        existing = cg.members.get(member_id)
        if existing is not None and existing.classic is None:
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        name, metadata = protocols[0]
        topics = self._topics()
        try:
            subscribed, owned_names = _subscription(metadata)
        except ValueError:
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        owned = frozenset((topics[t].topic_id, p) for t, ps in owned_names for p in ps
                          if t in topics)
        m = cg.classic_join(member_id, instance_id, client_id, client_host, sorted(subscribed),
                            owned, ClassicInfo(list(protocols), session_timeout_ms, name),
                            rebalance_timeout_ms, topics, now_ms())
        self.persist_consumer_group(g)
        log.info("[group=%s] classic member %s joined the consumer group at epoch %d with "
                 "%d partition(s)", g.group_id, member_id, m.member_epoch, len(m.assigned))
        return JoinResult(E.NONE, member_id=member_id, generation_id=m.member_epoch,
                          protocol_type="consumer", protocol_name=name, leader_id="")

    def _classic_sync_consumer_group(self, g: Group, member_id: str, generation: int
                                     ) -> SyncResult:
        cg = g.consumer
        assert cg is not None
        m = cg.members.get(member_id)
        if m is None or m.classic is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if generation != m.member_epoch:
            return SyncResult(E.ILLEGAL_GENERATION)
        names = {t.topic_id: name for name, t in self._topics().items()}
        return SyncResult(E.NONE, assignment=_encode_assignment(m.assigned, names),
                          protocol_type="consumer", protocol_name=m.classic.protocol_name)

    def _classic_leave_consumer_group(self, g: Group, member_id: str,
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
        self.persist_consumer_group(g)
        self._maybe_downgrade(g)
        return E.NONE

    def _tick_group(self, g: Group, mono: float) -> None:
        for pid, deadline in list(g.pending_members.items()):
            if mono >= deadline:
                log.info("[group=%s] pending member %s expired", g.group_id, pid)
                del g.pending_members[pid]
                if g.is_(S.PREPARING_REBALANCE):
                    self._try_complete_join(g)
        for m in list(g.members.values()):
            if m.awaiting_join:
                if m.is_new and mono > m.last_heartbeat + NEW_MEMBER_JOIN_TIMEOUT_S:
                    self._remove_member_and_update(g, m.member_id, "new member join timeout")
                continue
            if m.awaiting_sync:
                continue
            if mono > m.last_heartbeat + m.session_timeout_ms / 1000:
                log.info("[group=%s] member %s (instance %s) failed: no heartbeat for %d ms",
                         g.group_id, m.member_id, m.group_instance_id, m.session_timeout_ms)
                self._remove_member_and_update(g, m.member_id, "session timeout")
        if g.pending_sync and g.sync_deadline is not None and mono >= g.sync_deadline \
                and g.state in (S.COMPLETING_REBALANCE, S.STABLE):
            late = sorted(g.pending_sync)
            g.pending_sync.clear()
            for mid in late:
                log.info("[group=%s] removing member %s: no SyncGroup within the rebalance "
                         "timeout", g.group_id, mid)
                self._remove_member_and_update(g, mid, "pending sync timeout")
        if g.is_(S.PREPARING_REBALANCE) and g.join_deadline is not None \
                and mono >= g.join_deadline:
            if g.initial_delay_limit is not None and g.new_member_added \
                    and mono < g.initial_delay_limit:
                g.new_member_added = False
                g.join_deadline = min(
                    mono + self.config.initial_rebalance_delay_ms / 1000, g.initial_delay_limit)
                return
            g.initial_delay_limit = None
            self._complete_join(g)
        elif g.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(g)

    # -- persistence --------------------------------------------------------------------

    def _store_group(self, g: Group, assignments: dict[str, bytes] | None = None) -> E:
        return self.store.append(g.group_id, [(group_key(g.group_id), group_value(g, assignments))])

    # -- OffsetCommit / OffsetFetch ----------------------------------------------------------

    def commit(
        self, *, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        retention_ms: int, offsets: dict[tuple[str, int], CommitRequest],
    ) -> dict[tuple[str, int], E]:
        def all_(err: E) -> dict[tuple[str, int], E]:
            return {tp: err for tp in offsets}

        err = self._group_error(group_id)
        if err is not None:
            return all_(err)
        g = self.groups.get(group_id)
        if g is None:
            if generation_id >= 0:
                return all_(E.ILLEGAL_GENERATION)
            g = self.groups[group_id] = Group(group_id, now_ms())
        if g.is_(S.DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        if g.streams is not None:
            serr = self.streams.check_commit(g, member_id, generation_id)
            if serr != E.NONE:
                return all_(serr)
        elif g.consumer is not None:
            cerr = g.consumer.check_commit(member_id, generation_id)
            if cerr != E.NONE:
                return all_(cerr)
            m2 = g.consumer.members.get(member_id)
            if m2 is not None:
                m2.last_heartbeat_ms = now_ms()
        elif generation_id < 0 and g.is_(S.EMPTY):
            # a simple commit (admin client, or a consumer that assigns partitions
            # itself): Kafka accepts it into an Empty group whatever the member id
            pass
        elif generation_id >= 0 or member_id or instance_id is not None:
            if instance_id is not None:
                cur = g.static_member_id(instance_id)
                if cur is not None and cur != member_id:
                    return all_(E.FENCED_INSTANCE_ID)
            m = g.members.get(member_id)
            if m is None:
                return all_(E.UNKNOWN_MEMBER_ID)
            if generation_id != g.generation_id:
                return all_(E.ILLEGAL_GENERATION)
            if g.is_(S.COMPLETING_REBALANCE):
                return all_(E.REBALANCE_IN_PROGRESS)
            m.last_heartbeat = time.monotonic()
        elif not g.is_(S.EMPTY):
            # only members may commit for a group that uses Kafka's group management
            return all_(E.UNKNOWN_MEMBER_ID)
        ts = now_ms()
        expire = ts + retention_ms if retention_ms >= 0 else -1
        results: dict[tuple[str, int], E] = {}
        entries: list[tuple[bytes, bytes | None]] = []
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, c in offsets.items():
            md = c.metadata or ""
            if len(md.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            om = OffsetAndMetadata(c.offset, c.leader_epoch, md, ts, expire)
            accepted[tp] = om
            entries.append((offset_key(group_id, *tp), offset_value(om)))
        err2 = self.store.append(group_id, entries)
        for tp, om in accepted.items():
            results[tp] = err2
            if err2 == E.NONE:
                g.offsets[tp] = om
        return results

    def txn_commit(
        self, *, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
        member_id: str, instance_id: str | None, offsets: dict[tuple[str, int], CommitRequest],
    ) -> dict[tuple[str, int], E]:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and
        count once its commit marker reaches the group's partition (`complete_txn`)."""
        def all_(err: E) -> dict[tuple[str, int], E]:
            return {tp: err for tp in offsets}

        err = self._group_error(group_id)
        if err is not None:
            return all_(err)
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id, now_ms())
        if g.is_(S.DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        if g.streams is not None:
            serr = self.streams.check_commit(g, member_id, generation_id)
            if serr != E.NONE:
                return all_(E.ILLEGAL_GENERATION if serr == E.STALE_MEMBER_EPOCH else serr)
        elif generation_id >= 0 or member_id or instance_id is not None:
            # v3+ (KIP-447): the group's member at its generation, as OffsetCommit
            if instance_id is not None:
                cur = g.static_member_id(instance_id)
                if cur is not None and cur != member_id:
                    return all_(E.FENCED_INSTANCE_ID)
            if member_id and member_id not in g.members:
                return all_(E.UNKNOWN_MEMBER_ID)
            if generation_id >= 0 and generation_id != g.generation_id:
                return all_(E.ILLEGAL_GENERATION)
        ts = now_ms()
        results: dict[tuple[str, int], E] = {}
        entries: list[tuple[bytes, bytes | None]] = []
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, c in offsets.items():
            md = c.metadata or ""
            if len(md.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            om = OffsetAndMetadata(c.offset, c.leader_epoch, md, ts, -1)
            accepted[tp] = om
            entries.append((offset_key(group_id, *tp), offset_value(om)))
        err2 = self.store.append(group_id, entries, (producer_id, producer_epoch))
        for tp, om in accepted.items():
            results[tp] = err2
            if err2 == E.NONE:
                g.pending_txn_offsets.setdefault(producer_id, {})[tp] = om
        return results

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker for ``producer_id`` was written to our `__consumer_offsets`
        partition: its transactional offsets count (commit) or are dropped (abort)."""
        for g in self.groups.values():
            if self.store.partition_for(g.group_id) != partition:
                continue
            pending = g.pending_txn_offsets.pop(producer_id, None)
            if pending and commit:
                g.offsets.update(pending)

    def has_pending_txn_offset(self, group_id: str, tp: tuple[str, int]) -> bool:
        g = self.groups.get(group_id)
        return g is not None and any(tp in p for p in g.pending_txn_offsets.values())

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None,
        member: tuple[str, int] | None = None,
    ) -> tuple[E, dict[tuple[str, int], OffsetAndMetadata | None]]:
        err = self._group_error(group_id, allow_empty=True)
        if err is not None:
            return err, {}
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
        if g is None or g.is_(S.DEAD):
            if partitions is None:
                return E.NONE, {}
            return E.NONE, {tp: None for tp in partitions}
        if partitions is None:
            return E.NONE, dict(g.offsets)
        return E.NONE, {tp: g.offsets.get(tp) for tp in partitions}

    # -- admin ---------------------------------------------------------------------------

    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if not g.is_(S.DEAD)]

    def describe(self, group_id: str) -> tuple[E, Group | None]:
        err = self._group_error(group_id, allow_empty=True)
        if err is not None:
            return err, None
        return E.NONE, self.groups.get(group_id)

    def delete_group(self, group_id: str) -> E:
        err = self._group_error(group_id)
        if err is not None:
            return err
        g = self.groups.get(group_id)
        if g is None or g.is_(S.DEAD):
            return E.GROUP_ID_NOT_FOUND
        if not g.is_(S.EMPTY) or g.has_consumer_members() \
                or (g.streams is not None and g.streams.members):
            return E.NON_EMPTY_GROUP
        entries: list[tuple[bytes, bytes | None]] = [
            (offset_key(group_id, *tp), None) for tp in g.offsets]
        entries.append((group_key(group_id), None))
        entries += self.store.consumer_changes(group_id, None)
        entries += self.streams.deletion(g)
        werr = self.store.append(group_id, entries)
        if werr != E.NONE:
            return werr
        self.store.consumer_written(group_id, None)
        self.streams.forget(group_id)
        g.transition_to(S.DEAD, now_ms())
        self.groups.pop(group_id, None)
        log.info("[group=%s] deleted", group_id)
        return E.NONE

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                       ) -> tuple[E, dict[tuple[str, int], E]]:
        err = self._group_error(group_id)
        if err is not None:
            return err, {}
        g = self.groups.get(group_id)
        if g is None or g.is_(S.DEAD):
            return E.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if g.consumer is not None and g.consumer.members:
            topics = self._topics()
            for m in g.consumer.members.values():
                subscribed |= g.consumer.subscribed_topics(m, topics)
        elif not g.is_(S.EMPTY):
            if g.protocol_type != "consumer":
                return E.NON_EMPTY_GROUP, {}
            subscribed = g.subscribed_topics() or set()
        out: dict[tuple[str, int], E] = {}
        entries: list[tuple[bytes, bytes | None]] = []
        for tp in partitions:
            if tp[0] in subscribed:
                out[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            out[tp] = E.NONE
            if tp in g.offsets:
                entries.append((offset_key(group_id, *tp), None))
        werr = self.store.append(group_id, entries)
        if werr != E.NONE:
            return werr, {}
        for tp, e in out.items():
            if e == E.NONE:
                g.offsets.pop(tp, None)
        return E.NONE, out

    def expire_offsets(self, now: int | None = None) -> int:
        """Drop offsets past `offsets.retention.minutes` (Kafka 2.1+ rules); returns count."""
        ts = now_ms() if now is None else now
        retention = self.config.offsets_retention_ms
        removed = 0
        for g in list(self.groups.values()):
            if g.is_(S.DEAD) or g.has_consumer_members():
                continue
            subscribed = g.subscribed_topics() if g.is_(S.STABLE) else None
            expired = []
            for tp, om in g.offsets.items():
                if om.expire_timestamp >= 0:
                    if ts >= om.expire_timestamp:
                        expired.append(tp)
                elif g.is_(S.EMPTY):
                    base = om.commit_timestamp if g.protocol_type is None \
                        else max(g.state_timestamp, om.commit_timestamp)
                    if ts - base >= retention:
                        expired.append(tp)
                elif subscribed is not None and tp[0] not in subscribed:
                    if ts - om.commit_timestamp >= retention:
                        expired.append(tp)
            entries: list[tuple[bytes, bytes | None]] = [
                (offset_key(g.group_id, *tp), None) for tp in expired]
            drop_group = g.is_(S.EMPTY) and len(expired) == len(g.offsets) \
                and not g.pending_members and not g.pending_txn_offsets
            if drop_group:
                entries.append((group_key(g.group_id), None))
            if not entries:
                continue
            if self.store.append(g.group_id, entries) != E.NONE:
                continue
            for tp in expired:
                g.offsets.pop(tp, None)
            removed += len(expired)
            if expired:
                log.info("[group=%s] expired %d offset(s)", g.group_id, len(expired))
            if drop_group:
                g.transition_to(S.DEAD, ts)
                self.groups.pop(g.group_id, None)
                log.info("[group=%s] removed: empty and without offsets", g.group_id)
        return removed


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
