"""The group coordinator service: requests routed to the shard of the group's partition.

This module owns the entry points the handlers call (Kafka's GroupCoordinatorService):
it checks the group id, finds the group's `__consumer_offsets` partition and runs the
request as an operation of that partition's ``GroupShard`` (``shard.py``, where every
decision is) on the coordinator runtime (``broker/coordinator/``). The runtime answers
once the operation's records are committed (acks=all, ``offsets.commit.timeout.ms``),
NOT_COORDINATOR when this broker does not lead the partition and
COORDINATOR_LOAD_IN_PROGRESS while it loads it; this module turns those errors into
each API's answer. Reads (OffsetFetch, DescribeGroups, ListGroups) look at the shard's
state directly. Not implemented: share groups.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from jocko_py.broker.coordinator.runtime import CoordinatorResult, CoordinatorRuntime
from jocko_py.broker.coordinator.shell import CoordinatorShell, ReplicaLog, SystemClock
from jocko_py.broker.group.consumer import HeartbeatRequest, HeartbeatResult, TopicInfo
from jocko_py.broker.group.offsets import CommitRequest
from jocko_py.broker.group.offsets_store import OFFSETS_TOPIC, OffsetsStore
from jocko_py.broker.group.shard import GroupConfig, GroupShard
from jocko_py.broker.group.state import Group, GroupState, JoinResult, OffsetAndMetadata, SyncResult
from jocko_py.broker.group.streams import HeartbeatRequest as StreamsHeartbeatRequest
from jocko_py.broker.group.streams import HeartbeatResult as StreamsHeartbeatResult
from jocko_py.broker.group.streams_service import config_from
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.interfaces import CoordinatorHost

__all__ = ["CommitRequest", "GroupConfig", "GroupCoordinator"]

log = logging.getLogger("jocko_py.broker.group")

E = ErrorCode
S = GroupState
R = TypeVar("R")
Offsets = dict[tuple[str, int], ErrorCode]


class GroupCoordinator:
    def __init__(self, broker: CoordinatorHost, config: GroupConfig | None = None) -> None:
        self.broker = broker
        self.config = config or GroupConfig.from_broker(broker)
        self.store = OffsetsStore(broker)
        self.loaded = False
        # KIP-1071 streams groups: their settings and their heartbeat (streams_service.py)
        self.streams = StreamsEntry(self)
        log_ = ReplicaLog(broker.replicas, OFFSETS_TOPIC)
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            "group", self._new_shard, log_)
        self.shell = CoordinatorShell(
            self.runtime, log_, lambda wanted: self.store.read(log_, wanted), SystemClock(),
            lambda: broker.config.int("offsets.commit.timeout.ms"))

    def _new_shard(self, partition: int) -> GroupShard:
        return GroupShard(partition, self.config, self._topics,
                          streams_config=self.streams.config)

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


def _offsets_error(offsets: dict[tuple[str, int], CommitRequest]
                   ) -> Callable[[E, Offsets | None], Offsets]:
    def error(err: E, r: Offsets | None) -> Offsets:
        if r is None:
            return {tp: err for tp in offsets}
        return {tp: err if e == E.NONE else e for tp, e in r.items()}
    return error
