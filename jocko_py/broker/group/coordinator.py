"""The group coordinator service: requests routed to the shard of the group's partition.

This module owns the entry points the handlers call (Kafka's GroupCoordinatorService):
it checks the group id, finds the group's `__consumer_offsets` partition and runs the
request as an operation of that partition's ``GroupShard`` (``shard.py``, where every
decision is) on the coordinator runtime (``broker/coordinator/``). The runtime answers
once the operation's records are committed (acks=all, ``offsets.commit.timeout.ms``),
NOT_COORDINATOR when this broker does not lead the partition and
COORDINATOR_LOAD_IN_PROGRESS while it loads it; this module turns those errors into
each API's answer. Reads (OffsetFetch, DescribeGroups, ListGroups) look at the shard's
state directly. Share groups (KIP-932): ``gc.share`` (``ShareEntry``) serves
ShareGroupHeartbeat and ShareGroupDescribe, initializes the share state of newly
assigned partitions through the persister (``broker.share_persister``, the
one persister of this broker) once the shard's records saying so are committed, deletes
it with the group, and tells the share partitions when a member leaves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from jocko_py.broker.coordinator.runtime import CoordinatorResult, CoordinatorRuntime
from jocko_py.broker.coordinator.shell import CoordinatorShell, ReplicaLog, SystemClock
from jocko_py.broker.group import group_configs
from jocko_py.broker.group.consumer import HeartbeatRequest, HeartbeatResult, TopicInfo
from jocko_py.broker.group.offsets import CommitRequest
from jocko_py.broker.group.offsets_store import OFFSETS_TOPIC, OffsetsStore
from jocko_py.broker.group.shard import GroupConfig, GroupShard
from jocko_py.broker.group.share import HeartbeatRequest as ShareHeartbeatRequest
from jocko_py.broker.group.share import HeartbeatResult as ShareHeartbeatResult
from jocko_py.broker.group.share import InitRequest, ShareConfig
from jocko_py.broker.group.share_service import MemberLeft
from jocko_py.broker.group.state import Group, GroupState, JoinResult, OffsetAndMetadata, SyncResult
from jocko_py.broker.group.streams import HeartbeatRequest as StreamsHeartbeatRequest
from jocko_py.broker.group.streams import HeartbeatResult as StreamsHeartbeatResult
from jocko_py.broker.group.streams_service import config_from
from jocko_py.broker.share.persister import SharePartitionKey, SharePersister
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.interfaces import CoordinatorHost, GroupHost

__all__ = ["CommitRequest", "GroupConfig", "GroupCoordinator"]

log = logging.getLogger("jocko_py.broker.group")

E = ErrorCode
S = GroupState
R = TypeVar("R")
Offsets = dict[tuple[str, int], ErrorCode]


class GroupCoordinator:
    def __init__(self, broker: GroupHost, config: GroupConfig | None = None) -> None:
        self.broker = broker
        self.config = config or GroupConfig.from_broker(broker)
        self.store = OffsetsStore(broker)
        self.loaded = False
        # KIP-1071 streams groups: their settings and their heartbeat (streams_service.py)
        self.streams = StreamsEntry(self)
        # KIP-932 share groups: their settings, heartbeat and share state (ShareEntry)
        self.share = ShareEntry(self)
        log_ = ReplicaLog(broker.replicas, OFFSETS_TOPIC)
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            "group", self._new_shard, log_)
        self.runtime.on_effect = self.share.on_effect
        self.shell = CoordinatorShell(
            self.runtime, log_, lambda wanted: self.store.read(log_, wanted), SystemClock(),
            lambda: broker.config.int("offsets.commit.timeout.ms"))

    def _new_shard(self, partition: int) -> GroupShard:
        return GroupShard(partition, self.config, self._topics,
                          streams_config=self.streams.config, share_config=self.share.config,
                          group_configs=self.group_overrides)

    def group_overrides(self, group_id: str) -> dict[str, str]:
        """The group configs set on ``group_id`` (GROUP config resources, type 32)."""
        return self.broker.image.configs(group_configs.GROUP_RESOURCE, group_id)

    def _topics(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(t.topic_id, len(t.partitions))
                for name, t in self.broker.image.topics.items()}

    # -- lifecycle -------------------------------------------------------------------

    def load(self) -> None:
        """Groups are loaded per `__consumer_offsets` partition as this broker becomes
        its leader (the shell's role listener); nothing to read up front."""
        self.loaded = True

    def on_partition_role(self, p: Any, leader: bool) -> None:
        self.shell.on_partition_role(p, leader)

    def is_active(self) -> bool:
        """Coordinator duties start once `__consumer_offsets` exists (first FindCoordinator)."""
        return self.loaded and self.store.topic_exists()

    async def ensure_active(self) -> None:
        await self.store.ensure_topic()

    def _partition(self, group_id: str | None, *, allow_empty: bool = False
                   ) -> tuple[int, E]:
        if group_id is None or (not group_id and not allow_empty):
            return -1, E.INVALID_GROUP_ID
        if not self.loaded:
            return -1, E.COORDINATOR_LOAD_IN_PROGRESS
        if not self.store.topic_exists():
            return -1, E.NOT_COORDINATOR
        idx = self.store.partition_for(group_id)
        return idx, self.runtime.status(idx)

    async def _write(self, group_id: str, op: Callable[[GroupShard, int], CoordinatorResult[R]],
                     error: Callable[[E, R | None], R]) -> R:
        idx, err = self._partition(group_id)
        if err != E.NONE:
            return error(err, None)
        out = await self.shell.write(idx, op)
        resp, err = out
        if err != E.NONE or resp is None:
            return error(err if err != E.NONE else E.UNKNOWN_SERVER_ERROR, resp)
        return resp

    def _shard(self, group_id: str, allow_empty: bool = False) -> tuple[GroupShard | None, E]:
        idx, err = self._partition(group_id, allow_empty=allow_empty)
        if err != E.NONE:
            return None, err
        return self.runtime.shard(idx), E.NONE

    # -- classic groups ----------------------------------------------------------------

    async def join(
        self, *, group_id: str, member_id: str, instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]],
        require_known_member_id: bool, supports_skip_assignment: bool,
    ) -> JoinResult:
        def op(s: GroupShard, now: int) -> CoordinatorResult[JoinResult]:
            return s.join(
                now, group_id=group_id, member_id=member_id, instance_id=instance_id,
                client_id=client_id, client_host=client_host,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type,
                protocols=protocols, require_known_member_id=require_known_member_id,
                supports_skip_assignment=supports_skip_assignment)

        def error(err: E, r: JoinResult | None) -> JoinResult:
            return JoinResult(err, member_id=r.member_id if r is not None else member_id)

        return await self._write(group_id, op, error)

    async def sync(
        self, *, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
    ) -> SyncResult:
        def op(s: GroupShard, now: int) -> CoordinatorResult[SyncResult]:
            return s.sync(now, group_id=group_id, generation_id=generation_id,
                          member_id=member_id, instance_id=instance_id,
                          protocol_type=protocol_type, protocol_name=protocol_name,
                          assignments=assignments)

        return await self._write(group_id, op, lambda err, _r: SyncResult(err))

    async def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                        generation_id: int) -> E:
        return await self._write(
            group_id, lambda s, now: s.heartbeat(now, group_id, member_id, instance_id,
                                                 generation_id),
            lambda err, _r: err)

    async def leave(self, group_id: str, members: list[tuple[str, str | None]]
                    ) -> tuple[E, list[E]]:
        return await self._write(group_id, lambda s, now: s.leave(now, group_id, members),
                                 lambda err, _r: (err, []))

    # -- KIP-848 --------------------------------------------------------------------------

    async def consumer_heartbeat(self, group_id: str, req: HeartbeatRequest
                                 ) -> HeartbeatResult:
        def error(err: E, r: HeartbeatResult | None) -> HeartbeatResult:
            if r is not None:
                return HeartbeatResult(
                    err, f"the group's records were not replicated: {err.name}")
            return HeartbeatResult(err)

        return await self._write(group_id, lambda s, now: s.consumer_heartbeat(now, group_id,
                                                                               req), error)

    # -- offsets --------------------------------------------------------------------------

    async def commit(
        self, *, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        retention_ms: int, offsets: dict[tuple[str, int], CommitRequest],
    ) -> Offsets:
        def op(s: GroupShard, now: int) -> CoordinatorResult[Offsets]:
            return s.commit(now, group_id=group_id, generation_id=generation_id,
                            member_id=member_id, instance_id=instance_id,
                            retention_ms=retention_ms, offsets=offsets)

        return await self._write(group_id, op, _offsets_error(offsets))

    async def txn_commit(
        self, *, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
        member_id: str, instance_id: str | None, offsets: dict[tuple[str, int], CommitRequest],
    ) -> Offsets:
        def op(s: GroupShard, now: int) -> CoordinatorResult[Offsets]:
            return s.txn_commit(now, group_id=group_id, producer_id=producer_id,
                                producer_epoch=producer_epoch, generation_id=generation_id,
                                member_id=member_id, instance_id=instance_id, offsets=offsets)

        return await self._write(group_id, op, _offsets_error(offsets))

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker for ``producer_id`` was written to our `__consumer_offsets`
        partition: its transactional offsets count (commit) or are dropped (abort)."""
        if self.runtime.shard(partition) is not None:
            self.shell.write_nowait(
                partition, lambda s, now: s.complete_txn(now, producer_id, commit))

    def has_pending_txn_offset(self, group_id: str, tp: tuple[str, int]) -> bool:
        shard, _ = self._shard(group_id, allow_empty=True)
        return shard is not None and shard.has_pending_txn_offset(group_id, tp)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None,
        member: tuple[str, int] | None = None,
    ) -> tuple[E, dict[tuple[str, int], OffsetAndMetadata | None]]:
        shard, err = self._shard(group_id, allow_empty=True)
        if shard is None:
            return err if err != E.NONE else E.NOT_COORDINATOR, {}
        return shard.fetch_offsets(group_id, partitions, member)

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                             ) -> tuple[E, dict[tuple[str, int], E]]:
        return await self._write(
            group_id, lambda s, now: s.delete_offsets(now, group_id, partitions),
            lambda err, _r: (err, {}))

    # -- admin ---------------------------------------------------------------------------

    @property
    def groups(self) -> dict[str, Group]:
        """Every group coordinated here (a snapshot over the loaded shards)."""
        out: dict[str, Group] = {}
        for idx in list(self.runtime.contexts):
            shard = self.runtime.shard(idx)
            if shard is not None:
                out.update(shard.groups)
        return out

    def list_groups(self) -> list[Group]:
        out: list[Group] = []
        for idx in list(self.runtime.contexts):
            shard = self.runtime.shard(idx)
            if shard is not None:
                out += [g for g in shard.groups.values() if not g.is_(S.DEAD)]
        return out

    def describe(self, group_id: str) -> tuple[E, Group | None]:
        shard, err = self._shard(group_id, allow_empty=True)
        if shard is None:
            return err if err != E.NONE else E.NOT_COORDINATOR, None
        return E.NONE, shard.groups.get(group_id)

    async def delete_group(self, group_id: str) -> E:
        shard, err = self._shard(group_id)
        g = shard.groups.get(group_id) if shard is not None else None
        if g is not None and g.share is not None and not g.share.members:
            # an empty share group: its share state goes first (Kafka deletes it through
            # the persister before the group's records)
            err = await self.share.delete_state(group_id, g.share.state_partitions())
            if err != E.NONE:
                return err
        return await self._write(group_id, lambda s, now: s.delete_group(now, group_id),
                                 lambda err, _r: err)


class StreamsEntry:
    """``gc.streams``: the streams groups' settings and StreamsGroupHeartbeat."""

    def __init__(self, gc: GroupCoordinator) -> None:
        self.gc = gc
        self.config = config_from(gc.broker)

    async def heartbeat(self, group_id: str, req: StreamsHeartbeatRequest
                        ) -> StreamsHeartbeatResult:
        def error(err: E, r: StreamsHeartbeatResult | None) -> StreamsHeartbeatResult:
            if r is not None:
                return StreamsHeartbeatResult(
                    err, f"the group's records were not replicated: {err.name}")
            return StreamsHeartbeatResult(err)

        return await self.gc._write(
            group_id, lambda s, now: s.streams_heartbeat(now, group_id, req), error)


def share_config_from(broker: CoordinatorHost) -> ShareConfig:
    c = broker.config

    def num(key: str, default: int) -> int:
        raw = c.get(key)
        try:
            return int(raw) if raw else default
        except ValueError:
            return default

    lo_s = num("group.share.min.session.timeout.ms", 45000)
    hi_s = num("group.share.max.session.timeout.ms", 60000)
    lo_h = num("group.share.min.heartbeat.interval.ms", 5000)
    hi_h = num("group.share.max.heartbeat.interval.ms", 15000)
    lo_a = num("group.share.min.assignment.interval.ms", 0)
    hi_a = num("group.share.max.assignment.interval.ms", 15000)
    return ShareConfig(
        session_timeout_ms=min(max(num("group.share.session.timeout.ms", 45000), lo_s), hi_s),
        heartbeat_interval_ms=min(max(num("group.share.heartbeat.interval.ms", 5000), lo_h),
                                  hi_h),
        max_size=max(1, num("group.share.max.size", 200)),
        initialize_retry_interval_ms=num("group.share.initialize.retry.interval.ms", 30000),
        assignment_interval_ms=min(max(num("group.share.assignment.interval.ms", 1000), lo_a),
                                   hi_a))


class ShareEntry:
    """``gc.share``: share groups' settings, ShareGroupHeartbeat, and their share state."""

    def __init__(self, gc: GroupCoordinator) -> None:
        self.gc = gc
        self.config = share_config_from(gc.broker)
        self._tasks: set[asyncio.Task[None]] = set()
        self._wired = False

    @property
    def persister(self) -> SharePersister:
        return self.gc.broker.share_persister

    def wire(self) -> None:
        """Hand the share partitions (``broker.share_partitions``, installed
        after the group coordinator) the group configs they read (lock duration,
        delivery count limit, isolation, auto offset reset); once."""
        if self._wired:
            return
        m = self.gc.broker.share_partitions
        if m is not None:
            m.group_config = self.gc.group_overrides
            self._wired = True

    def group_config(self, group_id: str) -> group_configs.ShareGroupConfig:
        """A share group's settings (its group configs over the broker's)."""
        return group_configs.share_group_config(self.gc.broker.config.get,
                                                self.gc.group_overrides(group_id))

    async def heartbeat(self, group_id: str, req: ShareHeartbeatRequest
                        ) -> ShareHeartbeatResult:
        def error(err: E, r: ShareHeartbeatResult | None) -> ShareHeartbeatResult:
            if r is not None:
                return ShareHeartbeatResult(
                    err, f"the group's records were not replicated: {err.name}")
            return ShareHeartbeatResult(err)

        self.wire()
        return await self.gc._write(
            group_id, lambda s, now: s.share_heartbeat(now, group_id, req), error)

    # -- effects of committed share-group records ---------------------------------------

    def on_effect(self, partition: int, effect: object) -> None:
        if isinstance(effect, InitRequest):
            self._spawn(self._initialize(effect))
        elif isinstance(effect, MemberLeft):
            self._member_left(effect)

    def _spawn(self, coro: Any) -> None:
        try:
            t = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:  # no loop (a unit test driving the runtime by hand)
            coro.close()
            return
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def _member_left(self, effect: MemberLeft) -> None:
        # HOOK (share-part): the share partitions release the records the member held
        m = self.gc.broker.share_partitions
        if m is not None:
            try:
                m.member_left(effect.group_id, effect.member_id)
            except Exception:
                log.exception("[group=%s] share partitions: member_left(%s) failed",
                              effect.group_id, effect.member_id)

    def _start_offset(self, name: str, partition: int, reset: str, new_partition: bool) -> int:
        """Where a partition's share state starts: the log start for ``earliest`` (and
        for a partition added to a topic the group had state for), the high watermark
        for ``latest``; -1 (the share partition resolves the reset itself when it loads)
        when this broker does not lead the partition or for ``by_duration``."""
        p = self.gc.broker.replicas.get(name, partition)
        if p is None or not p.is_leader:
            return 0 if new_partition else -1
        if new_partition or reset == "earliest":
            return int(p.log.log_start_offset)
        if reset == "latest":
            return int(p.high_watermark)
        return -1

    async def _initialize(self, req: InitRequest) -> None:
        reset = self.group_config(req.group_id).auto_offset_reset
        ok = True
        for tid, (name, parts) in req.topics.items():
            for part in sorted(parts):
                key = SharePartitionKey(req.group_id, tid, part)
                start = self._start_offset(name, part, reset, tid in req.new_partitions)
                try:
                    err = await self.persister.initialize(key, req.state_epoch, start)
                except Exception as exc:
                    log.warning("[group=%s] share state of %s-%d not initialized: %r",
                                req.group_id, name, part, exc)
                    err = E.COORDINATOR_NOT_AVAILABLE
                if err != E.NONE:
                    log.warning("[group=%s] share state of %s-%d not initialized: %s",
                                req.group_id, name, part, err.name)
                    ok = False
        if ok:
            log.info("[group=%s] share state initialized for %s", req.group_id,
                     {n: sorted(ps) for n, ps in req.topics.values()})
        await self.gc._write(
            req.group_id,
            lambda s, now: s.share_initialized(now, req.group_id, req.topics, ok),
            lambda _err, _r: None)

    async def delete_state(self, group_id: str,
                           parts: dict[Any, tuple[str, frozenset[int]]]) -> E:
        for tid, (name, ps) in parts.items():
            for part in sorted(ps):
                try:
                    err = await self.persister.delete(SharePartitionKey(group_id, tid, part))
                except Exception as exc:
                    log.warning("[group=%s] share state of %s-%d not deleted: %r",
                                group_id, name, part, exc)
                    err = E.COORDINATOR_NOT_AVAILABLE
                if err != E.NONE:
                    return err
        return E.NONE


def _offsets_error(offsets: dict[tuple[str, int], CommitRequest]
                   ) -> Callable[[E, Offsets | None], Offsets]:
    def error(err: E, r: Offsets | None) -> Offsets:
        if r is None:
            return {tp: err for tp in offsets}
        return {tp: err if e == E.NONE else e for tp, e in r.items()}
    return error
