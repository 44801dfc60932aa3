"""Committed offsets of the groups of one shard, apart from the rebalance protocol.

This module owns the offset decisions of a group shard (Kafka's OffsetMetadataManager):
what an OffsetCommit or TxnOffsetCommit writes, what OffsetFetch answers, OffsetDelete,
expiry under ``offsets.retention.minutes``, and the replay of offset records. Whether a
member may commit (its generation or member epoch) is the group's question and is
asked by the shard (``shard.py``) before it comes here.

Rules
-----
- A commit *is* its records: the offsets change when the runtime replays them once the
  batch is appended (``replay``, the same code that loads the partition), so a refused
  write changes nothing and a loaded coordinator holds exactly what was written.
- Metadata over ``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE for that
  partition; the others are written.
- Transactional offsets (a producer id on the record) are pending until the producer's
  marker reaches the partition (``complete_txn``): a commit moves them into the group's
  offsets, an abort drops them.
- Expiry (Kafka 2.1+): an offset with an explicit expire time (OffsetCommit v2-4
  retention) goes at that time; otherwise in an Empty group ``retention`` after the
  later of its commit and the group becoming Empty (its commit for a group that never
  had members), and in a Stable consumer group only for topics no member subscribes to.
  An Empty group left without offsets is removed (a group tombstone).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from jocko_py.broker.coordinator.runtime import CoordinatorResult, Record
from jocko_py.broker.group.consumer import TopicInfo
from jocko_py.broker.group.offsets_store import (
    decode_offset_value,
    group_key,
    offset_key,
    offset_value,
)
from jocko_py.broker.group.state import Group, GroupState, OffsetAndMetadata
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.group")

E = ErrorCode
S = GroupState
TopicPartitionName = tuple[str, int]
Offsets = dict[TopicPartitionName, ErrorCode]


@dataclass(slots=True)
class CommitRequest:
    offset: int
    leader_epoch: int
    metadata: str | None


class OffsetManager:
    """The offsets of ``groups`` (the shard's groups, shared with it)."""

    def __init__(self, groups: dict[str, Group], metadata_max_bytes: int, retention_ms: int,
                 topics: Callable[[], dict[str, TopicInfo]]) -> None:
        self.groups = groups
        self.metadata_max_bytes = metadata_max_bytes
        self.retention_ms = retention_ms
        self.topics = topics

    # -- writes ----------------------------------------------------------------------------

    def commit(self, now: int, group_id: str, offsets: dict[TopicPartitionName, CommitRequest],
               retention_ms: int, producer: tuple[int, int] | None) -> CoordinatorResult[Offsets]:
        """The records of a commit the group accepted."""
        expire = now + retention_ms if retention_ms >= 0 else -1
        results: Offsets = {}
        records: list[Record] = []
        for tp, c in offsets.items():
            md = c.metadata or ""
            if len(md.encode("utf-8")) > self.metadata_max_bytes:
                results[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            results[tp] = E.NONE
            records.append((offset_key(group_id, *tp), offset_value(OffsetAndMetadata(
                c.offset, c.leader_epoch, md, now, expire))))

        def failed(err: ErrorCode) -> CoordinatorResult[Offsets]:
            return CoordinatorResult({tp: err if e == E.NONE else e for tp, e in results.items()})

        return CoordinatorResult(results, records=records, replay=True, producer=producer,
                                 on_append_error=failed)

    def complete_txn(self, producer_id: int, commit: bool) -> CoordinatorResult[None]:
        """A marker for ``producer_id`` was written to this partition: its transactional
        offsets count (commit) or are dropped (abort)."""
        for g in self.groups.values():
            pending = g.pending_txn_offsets.pop(producer_id, None)
            if pending and commit:
                g.offsets.update(pending)
        return CoordinatorResult(None)

    def delete(self, group_id: str, partitions: list[TopicPartitionName]
               ) -> CoordinatorResult[tuple[ErrorCode, Offsets]]:
        """OffsetDelete: not for topics the group's members subscribe to."""
        g = self.groups.get(group_id)
        if g is None or g.is_(S.DEAD):
            return CoordinatorResult((E.GROUP_ID_NOT_FOUND, {}))
        subscribed: set[str] = set()
        if g.consumer is not None and g.consumer.members:
            topics = self.topics()
            for m in g.consumer.members.values():
                subscribed |= g.consumer.subscribed_topics(m, topics)
        elif not g.is_(S.EMPTY):
            if g.protocol_type != "consumer":
                return CoordinatorResult((E.NON_EMPTY_GROUP, {}))
            subscribed = g.subscribed_topics() or set()
        out: Offsets = {}
        records: list[Record] = []
        for tp in partitions:
            if tp[0] in subscribed:
                out[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            out[tp] = E.NONE
            if tp in g.offsets:
                records.append((offset_key(group_id, *tp), None))
        return CoordinatorResult((E.NONE, out), records=records, replay=True,
                                 on_append_error=lambda err: CoordinatorResult((err, {})))

    def expire(self, now: int) -> CoordinatorResult[int]:
        """Tombstones for the offsets past retention and for the Empty groups they leave
        without offsets; the answer is the count of offsets dropped."""
        retention = self.retention_ms
        removed = 0
        records: list[Record] = []
        for g in list(self.groups.values()):
            if g.is_(S.DEAD) or g.has_consumer_members():
                continue
            subscribed = g.subscribed_topics() if g.is_(S.STABLE) else None
            expired = []
            for tp, om in g.offsets.items():
                if om.expire_timestamp >= 0:
                    if now >= om.expire_timestamp:
                        expired.append(tp)
                elif g.is_(S.EMPTY):
                    base = om.commit_timestamp if g.protocol_type is None \
                        else max(g.state_timestamp, om.commit_timestamp)
                    if now - base >= retention:
                        expired.append(tp)
                elif subscribed is not None and tp[0] not in subscribed:
                    if now - om.commit_timestamp >= retention:
                        expired.append(tp)
            records += [(offset_key(g.group_id, *tp), None) for tp in expired]
            if g.is_(S.EMPTY) and len(expired) == len(g.offsets) \
                    and not g.pending_members and not g.pending_txn_offsets:
                records.append((group_key(g.group_id), None))
                log.info("[group=%s] removed: empty and without offsets", g.group_id)
            removed += len(expired)
            if expired:
                log.info("[group=%s] expired %d offset(s)", g.group_id, len(expired))
        return CoordinatorResult(removed, records=records, replay=True)

    def tombstones(self, g: Group) -> list[Record]:
        return [(offset_key(g.group_id, *tp), None) for tp in g.offsets]

    # -- reads -----------------------------------------------------------------------------

    def fetch(self, group_id: str, partitions: list[TopicPartitionName] | None
              ) -> dict[TopicPartitionName, OffsetAndMetadata | None]:
        g = self.groups.get(group_id)
        if g is None or g.is_(S.DEAD):
            return {} if partitions is None else {tp: None for tp in partitions}
        if partitions is None:
            return dict(g.offsets)
        return {tp: g.offsets.get(tp) for tp in partitions}

    def has_pending(self, group_id: str, tp: TopicPartitionName) -> bool:
        g = self.groups.get(group_id)
        return g is not None and any(tp in p for p in g.pending_txn_offsets.values())

    # -- replay ----------------------------------------------------------------------------

    def replay(self, group: Group | None, tp: TopicPartitionName, value: bytes | None,
               producer_id: int, new_group: Callable[[], Group]) -> None:
        """One offset record: set, a tombstone, or pending in an open transaction."""
        if value is None:
            if group is not None and producer_id < 0:
                group.offsets.pop(tp, None)
            return
        g = group if group is not None else new_group()
        if producer_id >= 0:
            g.pending_txn_offsets.setdefault(producer_id, {})[tp] = decode_offset_value(value)
        else:
            g.offsets[tp] = decode_offset_value(value)
