"""The group shard's side of streams groups (KIP-1071): routing, records, timers.

``StreamsGroups`` is owned by each group shard (``shard.streams``, one per
`__consumer_offsets` partition) and runs inside the shard's operations: it finds or
makes the group of a StreamsGroupHeartbeat (a group is classic, consumer or streams; an
empty classic group becomes a streams group, anything else answers GROUP_ID_NOT_FOUND
"is not a streams group"), calls the pure model (``streams.py``) with the topics of the
metadata image and ``now``, and adds the records that changed to the operation's
records (the runtime answers once they are replicated). ``tick`` removes members whose
session or revocation timed out and follows topic changes; ``restore`` rebuilds the
groups from the records replayed when the shard loads.

Configuration (Kafka's names, defaults and limits): ``group.streams.session.timeout.ms``
(45000, within ``group.streams.min/max.session.timeout.ms`` 45000-60000),
``group.streams.heartbeat.interval.ms`` (5000, within 5000-15000),
``group.streams.max.size`` (2147483647), ``group.streams.num.standby.replicas`` (0, at
most ``group.streams.max.standby.replicas``, 2), ``group.streams.initial.rebalance.delay.ms``
(3000), ``group.streams.assignment.interval.ms`` (1000, within
``group.streams.min/max.assignment.interval.ms`` 0-15000), ``group.streams.task.offset.interval.ms``
(60000), ``group.streams.acceptable.recovery.lag`` (10000).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from jocko_py.broker.group import streams_records
from jocko_py.broker.group.state import Group, GroupState
from jocko_py.broker.group.streams import (
    HeartbeatRequest,
    HeartbeatResult,
    StreamsConfig,
    StreamsGroupModel,
)
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.interfaces import CoordinatorHost

log = logging.getLogger("jocko_py.broker.group.streams")
E = ErrorCode
Record = tuple[bytes, bytes | None]


def config_from(broker: CoordinatorHost) -> StreamsConfig:
    c = broker.config

    def num(key: str, default: int) -> int:
        raw = c.get(key)
        try:
            return int(raw) if raw else default
        except ValueError:
            return default

    lo_s = num("group.streams.min.session.timeout.ms", 45000)
    hi_s = num("group.streams.max.session.timeout.ms", 60000)
    lo_h = num("group.streams.min.heartbeat.interval.ms", 5000)
    hi_h = num("group.streams.max.heartbeat.interval.ms", 15000)
    standby_max = num("group.streams.max.standby.replicas", 2)
    lo_a = num("group.streams.min.assignment.interval.ms", 0)
    hi_a = num("group.streams.max.assignment.interval.ms", 15000)
    return StreamsConfig(
        initial_rebalance_delay_ms=max(0, num("group.streams.initial.rebalance.delay.ms",
                                              3000)),
        assignment_interval_ms=min(max(num("group.streams.assignment.interval.ms", 1000),
                                       lo_a), hi_a),
        session_timeout_ms=min(max(num("group.streams.session.timeout.ms", 45000), lo_s), hi_s),
        heartbeat_interval_ms=min(max(num("group.streams.heartbeat.interval.ms", 5000), lo_h),
                                  hi_h),
        max_size=max(1, num("group.streams.max.size", 2147483647)),
        num_standby_replicas=min(max(0, num("group.streams.num.standby.replicas", 0)),
                                 standby_max),
        task_offset_interval_ms=max(num("group.streams.task.offset.interval.ms", 60000),
                                    num("group.streams.min.task.offset.interval.ms", 15000)),
        acceptable_recovery_lag=num("group.streams.acceptable.recovery.lag", 10000),
    )


class StreamsGroups:
    """The streams groups among a shard's ``groups`` (shared with the shard)."""

    def __init__(self, config: StreamsConfig, groups: dict[str, Group],
                 topics: Callable[[], dict[str, int]],
                 drop_consumer_records: Callable[[Group], list[Record]]) -> None:
        self.config = config
        self.groups = groups
        self.topics = topics
        self.drop_consumer_records = drop_consumer_records
        self._written: dict[str, dict[bytes, bytes | None]] = {}

    # -- heartbeat ---------------------------------------------------------------------------

    def heartbeat(self, now: int, group_id: str, req: HeartbeatRequest
                  ) -> tuple[HeartbeatResult, list[Record]]:
        """The answer and the records to write."""
        records: list[Record] = []
        g = self.groups.get(group_id)
        if g is None:
            if req.member_epoch != 0:
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND,
                                       f"Streams group {group_id} not found."), records
            g = self.groups[group_id] = Group(group_id, now)
        if g.is_(GroupState.DEAD):
            return HeartbeatResult(E.COORDINATOR_NOT_AVAILABLE), records
        if g.streams is None:
            if g.members or g.pending_members or not g.is_(GroupState.EMPTY) \
                    or g.has_consumer_members() or g.share is not None \
                    or req.member_epoch != 0:
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND,
                                       f"Group {group_id} is not a streams group."), records
            if g.consumer is not None:  # an empty consumer group: its records go
                records += self.drop_consumer_records(g)
            g.consumer = None
            g.streams = StreamsGroupModel(group_id, self.config)
            log.info("[group=%s] is now a streams group", group_id)
        sg = g.streams
        before = (sg.group_epoch, len(sg.members))
        r = sg.heartbeat(req, self.topics(), now)
        records += self.persist(g)
        if (sg.group_epoch, len(sg.members)) != before:
            log.info("[group=%s] member %s epoch %d: group epoch %d, %d member(s), %s",
                     group_id, req.member_id, r.member_epoch, sg.group_epoch,
                     len(sg.members), sg.state().value)
        return r, records

    # -- durability -------------------------------------------------------------------------

    def changes(self, group_id: str, model: StreamsGroupModel | None) -> list[Record]:
        """Records to write so the log holds ``model`` (None: the group is gone); member
        tombstones before the group's, as Kafka orders a deletion."""
        before = self._written.get(group_id, {})
        now = {} if model is None else streams_records.entries_for(group_id, model.records())
        out: list[Record] = [(k, v) for k, v in now.items() if before.get(k) != v]
        gone = [k for k in before if k not in now]
        gone.sort(key=lambda k: k[:2] in (b"\x00\x11", b"\x00\x17", b"\x00\x14"))
        out += [(k, None) for k in gone]
        return out

    def persist(self, g: Group) -> list[Record]:
        """The records of ``g`` that changed since the last write (counted as written)."""
        entries = self.changes(g.group_id, g.streams)
        if entries:
            if g.streams is None:
                self._written.pop(g.group_id, None)
            else:
                self._written[g.group_id] = streams_records.entries_for(
                    g.group_id, g.streams.records())
        return entries

    def forget(self, group_id: str) -> None:
        self._written.pop(group_id, None)

    def deletion(self, g: Group) -> list[Record]:
        out = self.changes(g.group_id, None) if g.streams is not None else []
        self._written.pop(g.group_id, None)
        return out

    def restore(self, loaded: dict[str, dict[tuple[str, str], object]], now: int) -> None:
        """Attach a StreamsGroupModel to every loaded group with streams records."""
        topics: dict[str, int] | None = None
        for gid, recs in loaded.items():
            g = self.groups.get(gid)
            if g is None or ("streams_metadata", "") not in recs:
                continue
            sg = StreamsGroupModel.restore(gid, recs, now, self.config)
            sg.assignment_configs = self.config.assignment_configs()
            g.streams = sg
            self._written[gid] = streams_records.entries_for(
                gid, {k: v for k, v in recs.items() if streams_records.is_streams_kind(k[0])})
            if topics is None:
                topics = self.topics()
            sg.adopt_topics(topics)

    # -- timers -----------------------------------------------------------------------------

    def tick(self, g: Group, now: int, topics: dict[str, int]) -> list[Record]:
        sg = g.streams
        if sg is None:
            return []
        changed = False
        for mid, reason in sg.expired(now):
            log.info("[group=%s] removing member %s: %s", g.group_id, mid, reason)
            sg.remove_member(mid)
            changed = True
        if sg.refresh_topics(topics, now):
            log.info("[group=%s] group epoch %d (the topology's topics changed)",
                     g.group_id, sg.group_epoch)
            changed = True
        if sg.assignment_due(now):
            log.info("[group=%s] delayed target assignment computed at epoch %d",
                     g.group_id, sg.assignment_epoch)
            changed = True
        return self.persist(g) if changed else []

    # -- offsets ----------------------------------------------------------------------------

    def check_commit(self, g: Group, member_id: str, member_epoch: int, now: int) -> ErrorCode:
        sg = g.streams
        if sg is None:
            return E.NONE
        err, _ = sg.check_commit(member_id, member_epoch)
        if err == E.NONE:
            m = sg.members.get(member_id)
            if m is not None:
                m.last_heartbeat_ms = now
        return err


def new_member_id() -> str:
    return str(uuid.uuid4())
