"""The coordinator's side of streams groups (KIP-1071): routing, durability, timers.

``StreamsGroups`` is owned by the GroupCoordinator (``gc.streams``). It finds or makes
the group of a StreamsGroupHeartbeat (a group is classic, consumer or streams; an empty
classic group becomes a streams group, anything else answers GROUP_ID_NOT_FOUND "is not a
streams group"), calls the pure model (``streams.py``) with the topics of the metadata
image and ``now``, and writes the records that changed to ``__consumer_offsets`` through
the offsets store (the handler answers once they are replicated). ``tick`` removes
members whose session or revocation timed out and follows topic changes; ``restore``
rebuilds the groups from the records when this broker becomes their coordinator.

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
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from jocko_py.broker.group import streams_records
from jocko_py.broker.group.offsets_store import LoadedState, OffsetsStore
from jocko_py.broker.group.state import Group, GroupState
from jocko_py.broker.group.streams import (
    HeartbeatRequest,
    HeartbeatResult,
    StreamsConfig,
    StreamsGroupModel,
)
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker

log = logging.getLogger("jocko_py.broker.group.streams")
E = ErrorCode


def _now_ms() -> int:
    return int(time.time() * 1000)


def config_from(broker: Broker) -> StreamsConfig:
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
    def __init__(self, broker: Broker, store: OffsetsStore, groups: dict[str, Group],
                 group_error: Callable[[str | None], ErrorCode | None]) -> None:
        self.broker = broker
        self.store = store
        self.groups = groups
        self.group_error = group_error
        self.config = config_from(broker)
        self._written: dict[str, dict[bytes, bytes | None]] = {}

    def topics(self) -> dict[str, int]:
        return {name: len(t.partitions) for name, t in self.broker.topics.image.topics.items()}

    # -- heartbeat ---------------------------------------------------------------------------

    def heartbeat(self, group_id: str, req: HeartbeatRequest) -> HeartbeatResult:
        err = self.group_error(group_id)
        if err is not None:
            return HeartbeatResult(err)
        g = self.groups.get(group_id)
        if g is None:
            if req.member_epoch != 0:
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND,
                                       f"Streams group {group_id} not found.")
            g = self.groups[group_id] = Group(group_id, _now_ms())
        if g.is_(GroupState.DEAD):
            return HeartbeatResult(E.COORDINATOR_NOT_AVAILABLE)
        if g.streams is None:
            if g.members or g.pending_members or not g.is_(GroupState.EMPTY) \
                    or g.has_consumer_members() or req.member_epoch != 0:
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND,
                                       f"Group {group_id} is not a streams group.")
            if g.consumer is not None:  # an empty consumer group: its records go
                self.store.append(group_id, self.store.consumer_changes(group_id, None))
                self.store.consumer_written(group_id, None)
            g.consumer = None
            g.streams = StreamsGroupModel(group_id, self.config)
            log.info("[group=%s] is now a streams group", group_id)
        sg = g.streams
        before = (sg.group_epoch, len(sg.members))
        r = sg.heartbeat(req, self.topics(), _now_ms())
        werr = self.persist(g)
        if werr != E.NONE and r.error == E.NONE:
            return HeartbeatResult(werr, f"could not write the group: {werr.name}")
        if (sg.group_epoch, len(sg.members)) != before:
            log.info("[group=%s] member %s epoch %d: group epoch %d, %d member(s), %s",
                     group_id, req.member_id, r.member_epoch, sg.group_epoch,
                     len(sg.members), sg.state().value)
        return r

    # -- durability -------------------------------------------------------------------------

    def changes(self, group_id: str, model: StreamsGroupModel | None
                ) -> list[tuple[bytes, bytes | None]]:
        """Records to write so the log holds ``model`` (None: the group is gone); member
        tombstones before the group's, as Kafka orders a deletion."""
        before = self._written.get(group_id, {})
        now = {} if model is None else streams_records.entries_for(group_id, model.records())
        out: list[tuple[bytes, bytes | None]] = [
            (k, v) for k, v in now.items() if before.get(k) != v]
        gone = [k for k in before if k not in now]
        gone.sort(key=lambda k: k[:2] in (b"\x00\x11", b"\x00\x17", b"\x00\x14"))
        out += [(k, None) for k in gone]
        return out

    def written(self, group_id: str, model: StreamsGroupModel | None) -> None:
        if model is None:
            self._written.pop(group_id, None)
        else:
            self._written[group_id] = streams_records.entries_for(group_id, model.records())

    def persist(self, g: Group) -> ErrorCode:
        entries = self.changes(g.group_id, g.streams)
        if not entries:
            return E.NONE
        err: ErrorCode = self.store.append(g.group_id, entries)
        if err == E.NONE:
            self.written(g.group_id, g.streams)
        return err

    def deletion(self, g: Group) -> list[tuple[bytes, bytes | None]]:
        return self.changes(g.group_id, None) if g.streams is not None else []

    def forget(self, group_id: str) -> None:
        self._written.pop(group_id, None)

    def restore(self, state: LoadedState) -> None:
        """Attach a StreamsGroupModel to every loaded group with streams records."""
        now = _now_ms()
        topics = self.topics()
        for gid, recs in state.consumer.items():
            g = state.groups.get(gid)
            if g is None or ("streams_metadata", "") not in recs:
                continue
            sg = StreamsGroupModel.restore(gid, recs, now, self.config)
            sg.assignment_configs = self.config.assignment_configs()
            g.streams = sg
            self._written[gid] = streams_records.entries_for(
                gid, {k: v for k, v in recs.items() if streams_records.is_streams_kind(k[0])})
            sg.adopt_topics(topics)

    # -- timers -----------------------------------------------------------------------------

    def tick(self, g: Group, now: int, topics: dict[str, int]) -> None:
        sg = g.streams
        if sg is None:
            return
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
        if changed:
            self.persist(g)

    # -- offsets ----------------------------------------------------------------------------

    def check_commit(self, g: Group, member_id: str, member_epoch: int) -> ErrorCode:
        sg = g.streams
        if sg is None:
            return E.NONE
        err, _ = sg.check_commit(member_id, member_epoch)
        if err == E.NONE:
            m = sg.members.get(member_id)
            if m is not None:
                m.last_heartbeat_ms = _now_ms()
        return err


def new_member_id() -> str:
    return str(uuid.uuid4())
