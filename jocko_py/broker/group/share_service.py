"""The group shard's side of share groups (KIP-932): routing, records, timers, effects.

``ShareGroups`` is owned by each group shard (``shard.share``, one per
`__consumer_offsets` partition) and runs inside the shard's operations: it finds or
makes the group of a ShareGroupHeartbeat (a group is classic, consumer, streams or
share; an empty classic group with no offsets becomes a share group, anything else
answers GROUP_ID_NOT_FOUND "Group g is not a share group."), calls the pure model
(``share.py``) with the topics of the metadata image and ``now``, and adds the records
that changed to the operation's records. ``tick`` removes members whose session timed
out (the group's ``share.session.timeout.ms``, else ``group.share.session.timeout.ms``)
and follows topic changes; ``restore`` rebuilds the groups from the records replayed when
the shard loads.

Effects (handed to the coordinator service once the records are committed):
``InitRequest`` (initialize the share state of newly subscribed partitions through the
persister, then ``initialized`` records it) and ``MemberLeft`` (a member left or was
expired: the share partitions release what it held).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from jocko_py.broker.group import share_records
from jocko_py.broker.group.consumer import TopicInfo
from jocko_py.broker.group.share import (
    HeartbeatRequest,
    HeartbeatResult,
    InitRequest,
    ShareConfig,
    ShareGroupModel,
)
from jocko_py.broker.group.state import Group, GroupState
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.group.share")
E = ErrorCode
Record = tuple[bytes, bytes | None]


@dataclass(frozen=True)
class MemberLeft:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class GroupTimeouts:
    """A share group's session timeout, heartbeat interval and assignment interval (its
    group configs or the broker's defaults)."""
    session_timeout_ms: int
    heartbeat_interval_ms: int
    assignment_interval_ms: int = 1000


class ShareGroups:
    """The share groups among a shard's ``groups`` (shared with the shard)."""

    def __init__(self, config: ShareConfig, groups: dict[str, Group],
                 topics: Callable[[], dict[str, TopicInfo]],
                 drop_consumer_records: Callable[[Group], list[Record]],
                 timeouts: Callable[[str], GroupTimeouts] | None = None) -> None:
        self.config = config
        self.groups = groups
        self.topics = topics
        self.drop_consumer_records = drop_consumer_records
        self.timeouts = timeouts or (lambda _g: GroupTimeouts(
            config.session_timeout_ms, config.heartbeat_interval_ms,
            config.assignment_interval_ms))
        self._written: dict[str, dict[bytes, bytes | None]] = {}

    # -- heartbeat ---------------------------------------------------------------------

    def heartbeat(self, now: int, group_id: str, req: HeartbeatRequest
                  ) -> tuple[HeartbeatResult, list[Record], list[object]]:
        """The answer, the records to write and the effects."""
        records: list[Record] = []
        g = self.groups.get(group_id)
        if g is None:
            if req.member_epoch != 0:
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND,
                                       f"Share group {group_id} not found."), records, []
            g = self.groups[group_id] = Group(group_id, now)
        if g.is_(GroupState.DEAD):
            return HeartbeatResult(E.COORDINATOR_NOT_AVAILABLE), records, []
        if g.share is None:
            if g.members or g.pending_members or not g.is_(GroupState.EMPTY) \
                    or g.has_consumer_members() or g.streams is not None or g.offsets \
                    or g.pending_txn_offsets or req.member_epoch != 0:
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND,
                                       f"Group {group_id} is not a share group."), records, []
            if g.consumer is not None:  # an empty consumer group: its records go
                records += self.drop_consumer_records(g)
            g.consumer = None
            g.share = ShareGroupModel(group_id)
            log.info("[group=%s] is now a share group", group_id)
        sg = g.share
        before = (sg.group_epoch, len(sg.members))
        topics = self.topics()
        t = self.timeouts(group_id)
        r, init = sg.heartbeat(req, topics, now, self.config, t.heartbeat_interval_ms,
                               t.assignment_interval_ms)
        records += self.persist(g)
        effects: list[object] = []
        if init is not None:
            effects.append(init)
        if r.error == E.NONE and req.member_epoch == -1:
            effects.append(MemberLeft(group_id, req.member_id))
            log.info("[group=%s] member %s left the share group", group_id, req.member_id)
        if (sg.group_epoch, len(sg.members)) != before:
            log.info("[group=%s] member %s epoch %d: group epoch %d, %d member(s)",
                     group_id, req.member_id, r.member_epoch, sg.group_epoch, len(sg.members))
        return r, records, effects

    # -- share state ------------------------------------------------------------------------

    def initialized(self, group_id: str, parts: dict[uuid.UUID, tuple[str, frozenset[int]]],
                    ok: bool) -> list[Record]:
        """The persister's answer to an ``InitRequest``: the records to write."""
        g = self.groups.get(group_id)
        if g is None or g.share is None:
            return []
        if ok:
            g.share.initialized_(parts)
        else:
            g.share.uninitialize(parts)
        return self.persist(g)

    # -- durability -------------------------------------------------------------------------

    def changes(self, group_id: str, model: ShareGroupModel | None) -> list[Record]:
        """Records to write so the log holds ``model`` (None: the group is gone);
        tombstones of members before the group's, as Kafka orders a deletion."""
        before = self._written.get(group_id, {})
        now = {} if model is None else share_records.entries_for(group_id, model.records())
        out: list[Record] = [(k, v) for k, v in now.items() if before.get(k) != v]
        gone = [k for k in before if k not in now]
        order = {share_records.KIND_TYPE[k]: v
                 for k, v in share_records.TOMBSTONE_ORDER.items()}
        gone.sort(key=lambda k: order.get(int.from_bytes(k[:2], "big"), 9))
        out += [(k, None) for k in gone]
        return out

    def persist(self, g: Group) -> list[Record]:
        entries = self.changes(g.group_id, g.share)
        if entries:
            if g.share is None:
                self._written.pop(g.group_id, None)
            else:
                self._written[g.group_id] = share_records.entries_for(
                    g.group_id, g.share.records())
        return entries

    def forget(self, group_id: str) -> None:
        self._written.pop(group_id, None)

    def deletion(self, g: Group) -> list[Record]:
        out = self.changes(g.group_id, None) if g.share is not None else []
        self._written.pop(g.group_id, None)
        return out

    def restore(self, loaded: dict[str, dict[tuple[str, str], object]], now: int) -> None:
        """Attach a ShareGroupModel to every loaded group with share records."""
        for gid, recs in loaded.items():
            g = self.groups.get(gid)
            if g is None or ("share_metadata", "") not in recs:
                continue
            share = {k: v for k, v in recs.items() if share_records.is_share_kind(k[0])}
            g.share = ShareGroupModel.restore(gid, share, now)
            self._written[gid] = share_records.entries_for(gid, share)
            log.info("[group=%s] loaded share group with %d member(s) at epoch %d", gid,
                     len(g.share.members), g.share.group_epoch)

    # -- timers -----------------------------------------------------------------------------

    def tick(self, g: Group, now: int, topics: dict[str, TopicInfo]
             ) -> tuple[list[Record], list[object]]:
        sg = g.share
        if sg is None:
            return [], []
        effects: list[object] = []
        changed = False
        timeout = self.timeouts(g.group_id).session_timeout_ms
        for mid in sg.expired(now, timeout):
            log.info("[group=%s] removing share member %s: its session timed out (%d ms)",
                     g.group_id, mid, timeout)
            sg.remove_member(mid, topics)
            effects.append(MemberLeft(g.group_id, mid))
            changed = True
        if sg.drop_deleted_topics(topics):
            changed = True
        if sg.refresh_topics(topics):
            log.info("[group=%s] group epoch %d (subscribed topics changed)", g.group_id,
                     sg.group_epoch)
            changed = True
        if sg.members:
            init = sg.maybe_init(topics, now, self.config)
            if init is not None:
                effects.append(init)
                changed = True
        return (self.persist(g) if changed else []), effects

    def busy(self, g: Group) -> bool:
        return g.share is not None and bool(g.share.members)


__all__ = ["GroupTimeouts", "InitRequest", "MemberLeft", "ShareGroups"]
