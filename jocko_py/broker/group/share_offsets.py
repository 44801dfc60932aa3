"""The share groups' offsets as the admin APIs see them (KIP-932, Kafka 4.4's
GroupCoordinatorService): DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91)
and DeleteShareGroupOffsets (92), answered by the group's coordinator through the
share-state persister (``broker/share/``).

A share group's "offset" of a partition is the start offset of its share-partition
state. Describe reads it with ``read_summary`` (the requested topics, or with no topics
every partition the group has state for); a partition without state answers start
offset -1. Alter and Delete need the group to be a share group with no members
(NON_EMPTY_GROUP): Alter initializes the state of each given partition at the given
start offset (state epoch: the group epoch), creating an empty share group when there
is none, as Kafka does, and then records in the group (ShareGroupStatePartitionMetadata)
the partitions whose state it initialized; Delete deletes the state of every partition
of each given topic the group has state for, then drops those topics from the group's
record. A topic unknown to the metadata, or a partition outside it, gets
UNKNOWN_TOPIC_OR_PARTITION. What the group is (share, other, absent; empty; its epoch;
which partitions have state) comes from the share group model (``group/share.py``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from jocko_py.broker.coordinator.runtime import CoordinatorResult
from jocko_py.broker.group.share import ShareGroupModel
from jocko_py.broker.group.state import Group, GroupState
from jocko_py.broker.share.persister import SharePartitionKey, SharePersister, ShareStateSummary
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.group.coordinator import GroupCoordinator
    from jocko_py.broker.group.shard import GroupShard
    from jocko_py.broker.replica_manager import ReplicaManager
    from jocko_py.cluster.metadata import MetadataImage

E = ErrorCode


class ShareOffsetsHost(Protocol):
    """What the share offsets APIs use of the broker: the metadata image (topic ids
    and partitions) and the group coordinator (the group, its kind and members)."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def groups(self) -> GroupCoordinator: ...

    @property
    def replicas(self) -> ReplicaManager: ...


@dataclass(frozen=True)
class ShareGroupInfo:
    empty: bool
    group_epoch: int
    # topic id -> (name, partitions with share state, initialized or initializing)
    partitions: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupLookup:
    """``error`` NONE with ``info`` None: no group has that id."""
    error: ErrorCode = E.NONE
    message: str | None = None
    info: ShareGroupInfo | None = None


def _info(share: ShareGroupModel) -> ShareGroupInfo:
    return ShareGroupInfo(not share.members, share.group_epoch,
                          dict(share.state_partitions()))


def _lookup(group_id: str, g: Group | None) -> GroupLookup:
    if g is None or g.is_(GroupState.DEAD):
        return GroupLookup()
    if g.share is None:
        return GroupLookup(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    return GroupLookup(info=_info(g.share))


def share_group(broker: ShareOffsetsHost, group_id: str) -> GroupLookup:
    """The share group ``group_id`` as its coordinator (this broker, else
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS) knows it; a group of another type is
    GROUP_ID_NOT_FOUND, as Kafka answers."""
    err, g = broker.groups.describe(group_id)
    if err != E.NONE:
        return GroupLookup(err)
    return _lookup(group_id, g)


def _prepare_alter(group_id: str) -> Callable[[GroupShard, int], CoordinatorResult[GroupLookup]]:
    """The group of an AlterShareGroupOffsets: an empty share group, made when there is
    no group of that id (Kafka's getOrMaybeCreateShareGroup), its records written."""
    def op(s: GroupShard, now: int) -> CoordinatorResult[GroupLookup]:
        g = s.groups.get(group_id)
        if g is not None and not g.is_(GroupState.DEAD):
            return CoordinatorResult(_lookup(group_id, g))
        ng = s.groups[group_id] = Group(group_id, now)
        ng.share = ShareGroupModel(group_id)

        def undo(err: ErrorCode) -> CoordinatorResult[GroupLookup]:
            if s.groups.get(group_id) is ng:
                del s.groups[group_id]
            s.share.forget(group_id)
            return CoordinatorResult(GroupLookup(err))

        return CoordinatorResult(GroupLookup(info=_info(ng.share)), s.share.persist(ng),
                                 on_append_error=undo)
    return op


def _initialized(group_id: str, parts: dict[uuid.UUID, tuple[str, frozenset[int]]]
                 ) -> Callable[[GroupShard, int], CoordinatorResult[None]]:
    def op(s: GroupShard, now: int) -> CoordinatorResult[None]:
        return s.share_initialized(now, group_id, parts, True)
    return op


def _forget_topics(group_id: str, topic_ids: set[uuid.UUID]
                   ) -> Callable[[GroupShard, int], CoordinatorResult[None]]:
    """The group no longer has share state for ``topic_ids`` (DeleteShareGroupOffsets
    done): its ShareGroupStatePartitionMetadata record says so."""
    def op(s: GroupShard, now: int) -> CoordinatorResult[None]:
        g = s.groups.get(group_id)
        if g is None or g.share is None:
            return CoordinatorResult(None)
        for tid in topic_ids:
            g.share.initialized.pop(tid, None)
            g.share.initializing.pop(tid, None)
        return CoordinatorResult(None, s.share.persist(g))
    return op


def _topic(broker: ShareOffsetsHost, name: str) -> tuple[uuid.UUID, int] | None:
    t = broker.image.topics.get(name)
    return None if t is None else (t.topic_id, len(t.partitions))


# -- DescribeShareGroupOffsets ------------------------------------------------------------

async def describe(broker: ShareOffsetsHost, persister: SharePersister, group_id: str,
                   topics: list[tuple[str, list[int]]] | None,
                   denied: set[str]) -> dict[str, Any]:
    """One group's entry of the response (``topics`` None: every partition with
    state)."""
    if topics is None:
        look = share_group(broker, group_id)
        if look.error != E.NONE or look.info is None:
            err = look.error if look.error != E.NONE else E.GROUP_ID_NOT_FOUND
            return {"group_id": group_id, "topics": [], "error_code": err,
                    "error_message": look.message or f"Group {group_id} not found."}
        topics = [(name, sorted(ps)) for _tid, (name, ps) in
                  sorted(look.info.partitions.items(), key=lambda kv: kv[1][0])
                  if name not in denied]
    else:
        status = share_group(broker, group_id).error
        if status in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS):
            return {"group_id": group_id, "topics": [], "error_code": status,
                    "error_message": None}
    out_topics: list[dict[str, Any]] = []
    jobs: list[tuple[dict[str, Any], str, Any]] = []
    for name, parts in topics:
        t = _topic(broker, name)
        entries: list[dict[str, Any]] = []
        out_topics.append({"topic_name": name,
                           "topic_id": t[0] if t else uuid.UUID(int=0),
                           "partitions": entries})
        for p in parts:
            e = _desc_error(p, E.NONE)
            entries.append(e)
            if name in denied:
                e["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
            elif t is None or not 0 <= p < t[1]:
                e["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                jobs.append((e, name, persister.read_summary(
                    SharePartitionKey(group_id, t[0], p), -1)))
    for (e, name, _), s in zip(jobs, await asyncio.gather(*(j for _, _, j in jobs)),
                               strict=True):
        if s.error == E.NONE:
            e["start_offset"], e["leader_epoch"] = s.start_offset, s.leader_epoch
            e["lag"] = _lag(broker, name, e["partition_index"], s)
        elif s.error != E.UNKNOWN_TOPIC_OR_PARTITION:  # no state: start offset -1
            e["error_code"] = s.error
    return {"group_id": group_id, "topics": out_topics, "error_code": E.NONE,
            "error_message": None}


def _lag(broker: ShareOffsetsHost, topic: str, partition: int, s: ShareStateSummary
         ) -> int:
    """Kafka's lag (KIP-1226): the partition's end offset (high watermark) - the start
    offset - the records above it already delivered; -1 when the start offset or that
    count is unknown, or the partition has no replica on this broker."""
    if s.start_offset < 0 or s.delivery_complete_count < 0:
        return -1
    p = broker.replicas.get(topic, partition)
    if p is None:
        return -1
    return p.high_watermark - s.start_offset - s.delivery_complete_count


def _desc_error(p: int, err: ErrorCode) -> dict[str, Any]:
    return {"partition_index": p, "start_offset": -1, "leader_epoch": -1, "lag": -1,
            "error_code": err, "error_message": None}


# -- AlterShareGroupOffsets ---------------------------------------------------------------

async def alter(broker: ShareOffsetsHost, persister: SharePersister, group_id: str,
                topics: list[tuple[str, list[tuple[int, int]]]], denied: set[str]
                ) -> tuple[ErrorCode, str | None, list[dict[str, Any]]]:
    look = await broker.groups._write(group_id, _prepare_alter(group_id),
                                      lambda err, _r: GroupLookup(err))
    if look.error != E.NONE:
        return look.error, look.message, []
    info = look.info or ShareGroupInfo(True, 0)
    if not info.empty:
        return E.NON_EMPTY_GROUP, f"The group {group_id} is not empty.", []
    out: list[dict[str, Any]] = []
    jobs: list[tuple[dict[str, Any], Any]] = []
    for name, parts in topics:
        t = _topic(broker, name)
        entries: list[dict[str, Any]] = []
        out.append({"topic_name": name, "topic_id": t[0] if t else uuid.UUID(int=0),
                    "partitions": entries})
        for p, start in parts:
            e: dict[str, Any] = {"partition_index": p, "error_code": E.NONE,
                                 "error_message": None}
            entries.append(e)
            if name in denied:
                e["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
            elif t is None or not 0 <= p < t[1]:
                e["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                jobs.append((e, persister.initialize(SharePartitionKey(group_id, t[0], p),
                                                     info.group_epoch, start)))
    done: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
    for (e, _), err in zip(jobs, await asyncio.gather(*(j for _, j in jobs)), strict=True):
        e["error_code"] = err
    for resp in out:
        ok = frozenset(x["partition_index"] for x in resp["partitions"]
                       if x["error_code"] == E.NONE)
        if ok:
            done[resp["topic_id"]] = (resp["topic_name"], ok)
    if done:  # the group has share state for them now
        await broker.groups._write(group_id, _initialized(group_id, done),
                                   lambda _err, _r: None)
    return E.NONE, None, out


# -- DeleteShareGroupOffsets --------------------------------------------------------------

async def delete(broker: ShareOffsetsHost, persister: SharePersister, group_id: str,
                 topics: list[str], denied: set[str]
                 ) -> tuple[ErrorCode, str | None, list[dict[str, Any]]]:
    look = share_group(broker, group_id)
    if look.error != E.NONE:
        return look.error, look.message, []
    if look.info is None:
        return E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", []
    if not look.info.empty:
        return E.NON_EMPTY_GROUP, f"The group {group_id} is not empty.", []
    out: list[dict[str, Any]] = []
    jobs: list[tuple[dict[str, Any], Any]] = []
    for name in topics:
        t = _topic(broker, name)
        e: dict[str, Any] = {"topic_name": name, "topic_id": t[0] if t else uuid.UUID(int=0),
                             "error_code": E.NONE, "error_message": None}
        out.append(e)
        if name in denied:
            e["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
            continue
        held = look.info.partitions.get(t[0]) if t is not None else None
        if t is None or held is None:
            e["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
            continue
        keys = [SharePartitionKey(group_id, t[0], p) for p in sorted(held[1])]
        jobs.append((e, asyncio.gather(*(persister.delete(k) for k in keys))))
    gone: set[uuid.UUID] = set()
    for (e, _), errs in zip(jobs, await asyncio.gather(*(j for _, j in jobs)), strict=True):
        bad = [x for x in errs if x != E.NONE]
        if bad:
            e["error_code"] = bad[0]
        else:
            gone.add(e["topic_id"])
    if gone:
        await broker.groups._write(group_id, _forget_topics(group_id, gone),
                                   lambda _err, _r: None)
    return E.NONE, None, out
