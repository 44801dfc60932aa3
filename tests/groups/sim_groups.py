"""Seeded simulation of the group coordinator on the coordinator runtime.

The real ``CoordinatorRuntime`` and ``GroupShard`` (``jocko_py/broker/coordinator/``,
``jocko_py/broker/group/shard.py``) run on one simulated clock with an in-memory
``__consumer_offsets`` log whose high watermark follows the (simulated) replication
with a delay. Simulated consumers of a classic group (range assignment computed by the
leader, eager rebalancing) and of a KIP-848 consumer group join, sync, heartbeat,
process records, commit what they processed, leave, crash, and pause for longer than
their session (a zombie that comes back believing it still owns its partitions). The
coordinator fails over: its shard is unloaded, the log loses what was not committed
(the tail past the high watermark, or part of it), and a new shard loads from the log
after a delay, as on a new leader.

One checker per invariant, each looking at what a user would see:

- ``offsets``: committed offsets never go backwards. Every acknowledged commit raises
  the floor of its partition; the offset the coordinator serves (OffsetFetch, and what
  a new owner starts from) must never be below it. A fenced or stale member's commit
  that lands, or an acknowledged commit lost in a failover, breaks it.
- ``owners``: no partition is owned by two members of one generation: the SyncGroup
  assignments handed out for one generation of a classic group are disjoint, and so are
  the latest assignments handed out at one member epoch of a consumer group.
- ``live_owners``: no partition of a consumer group is owned by two live members at
  once. A member is live while its last successful heartbeat was sent less than a
  session timeout ago (the coordinator cannot have removed it yet); a member paused
  for longer (a zombie) may still believe it owns partitions, as in Kafka.

Seeds: ``run_schedule(seed)``; a failure raises ``InvariantViolation`` naming the seed,
the checker and the last events.
"""

from __future__ import annotations

import random
import struct
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jocko_py.broker.coordinator.runtime import CoordinatorRuntime, LogRecord, Record
from jocko_py.broker.group.consumer import HeartbeatRequest, HeartbeatResult, TopicInfo
from jocko_py.broker.group.offsets import CommitRequest
from jocko_py.broker.group.shard import GroupConfig, GroupShard
from jocko_py.broker.group.state import JoinResult, SyncResult
from jocko_py.protocol import messages
from jocko_py.protocol.errors import ErrorCode as E

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=7)
PARTITIONS = 6
SESSION_MS = 1000
REBALANCE_MS = 1500
HEARTBEAT_MS = 200
CHECKS = ("offsets", "owners", "live_owners")


class InvariantViolation(AssertionError):
    pass


@dataclass
class SimParams:
    steps: int = 1500
    classic_members: int = 4
    consumer_members: int = 3
    replication_delay_ms: tuple[int, int] = (0, 60)
    p_crash: float = 0.002
    p_pause: float = 0.003
    p_leave: float = 0.002
    p_failover: float = 0.003
    p_static: float = 0.4  # a classic member with a group.instance.id
    p_replace: float = 0.5  # a paused static member replaced by a new process
    checks: tuple[str, ...] = CHECKS


def schedule_params(seed: int) -> SimParams:
    rnd = random.Random(seed * 7919 + 1)
    return SimParams(
        classic_members=rnd.randint(2, 5), consumer_members=rnd.randint(0, 4),
        replication_delay_ms=(0, rnd.choice((0, 30, 120))),
        p_failover=rnd.choice((0.0, 0.002, 0.006)),
        p_pause=rnd.choice((0.0, 0.003, 0.008)))


# -- the log ------------------------------------------------------------------------------


@dataclass
class SimLog:
    """One `__consumer_offsets` partition: records, the high watermark moving after a
    replication delay, and truncation of the uncommitted tail on failover."""

    rnd: random.Random
    delay: tuple[int, int]
    entries: list[tuple[Record, int]] = field(default_factory=list)  # (record, producer)
    batch_ends: list[int] = field(default_factory=list)
    hw: int = 0
    now: int = 0
    up: bool = True
    # (time the replicas have it, log end then)
    replicating: deque[tuple[int, int]] = field(default_factory=deque)

    def append(self, partition: int, records: list[Record], producer: tuple[int, int] | None,
               now: int) -> tuple[E, int]:
        if not self.up:
            return E.NOT_LEADER_OR_FOLLOWER, -1
        for r in records:
            self.entries.append((r, producer[0] if producer else -1))
        self.batch_ends.append(len(self.entries))
        self.replicating.append((now + self.rnd.randint(*self.delay), len(self.entries)))
        return E.NONE, len(self.entries) - 1

    def advance(self, now: int) -> bool:
        moved = False
        while self.replicating and self.replicating[0][0] <= now:
            _, end = self.replicating.popleft()
            if end > self.hw:
                self.hw, moved = end, True
        return moved

    def fail_over(self) -> None:
        """The leader is gone: the new one has the committed records and perhaps some of
        the rest (whole batches), never less than the high watermark."""
        tail = [e for e in self.batch_ends if e > self.hw]
        keep = self.hw if not tail or self.rnd.random() < 0.5 else self.rnd.choice(tail)
        del self.entries[keep:]
        self.batch_ends = [e for e in self.batch_ends if e <= keep]
        self.hw = keep  # the new leader's replicas have it all
        self.replicating.clear()

    def records(self) -> list[LogRecord]:
        # open transactions are not simulated: every record is plain
        return [LogRecord(k, v) for (k, v), _ in self.entries]


# -- encodings of the consumer protocol ---------------------------------------------------------


def subscription() -> bytes:
    body = messages.data_schema("ConsumerProtocolSubscription", 0).build(
        {"topics": [TOPIC], "user_data": None})
    return struct.pack(">h", 0) + bytes(body)


def encode_assignment(parts: list[int]) -> bytes:
    body = messages.data_schema("ConsumerProtocolAssignment", 0).build(
        {"assigned_partitions": [{"topic": TOPIC, "partitions": sorted(parts)}],
         "user_data": None})
    return struct.pack(">h", 0) + bytes(body)


def decode_assignment(data: bytes) -> frozenset[int]:
    if len(data) < 2:
        return frozenset()
    (version,) = struct.unpack_from(">h", data)
    v = messages.data_schema("ConsumerProtocolAssignment", min(version, 3)).parse_bytes(data[2:])
    return frozenset(p for t in v.assigned_partitions if t.topic == TOPIC for p in t.partitions)


# -- members -------------------------------------------------------------------------------------


@dataclass
class Member:
    """A consumer: what it believes (its id, generation, partitions and positions)."""

    name: str
    group: str
    kind: str  # "classic" or "consumer"
    instance: str | None = None  # group.instance.id of a static member
    member_id: str = ""
    generation: int = -1
    owned: frozenset[int] = frozenset()
    positions: dict[int, int] = field(default_factory=dict)
    waiting: bool = False  # a request in flight
    stable: bool = False
    next_heartbeat: int = 0
    paused_until: int = -1
    crashed_until: int = -1
    want_rejoin: bool = True
    left: bool = False
    incarnation: int = 0
    last_ok_heartbeat: int = -(10**9)  # when the last successful heartbeat was sent


class GroupSim:
    def __init__(self, seed: int, params: SimParams) -> None:
        self.seed = seed
        self.p = params
        self.rnd = random.Random(seed)
        self.now = 1_000_000
        self.log = SimLog(random.Random(seed + 1), params.replication_delay_ms)
        self.config = GroupConfig(
            min_session_timeout_ms=100, initial_rebalance_delay_ms=100,
            consumer_session_timeout_ms=SESSION_MS, offsets_retention_check_interval_ms=60_000)
        ids = random.Random(seed + 2)
        self.new_id = lambda: str(uuid.UUID(int=ids.getrandbits(128)))
        self.topics = {TOPIC: TopicInfo(TOPIC_ID, PARTITIONS)}
        self.epoch = 0
        self.runtime = self._new_runtime()
        self.events: deque[str] = deque(maxlen=60)
        self.members: list[Member] = []
        for i in range(params.classic_members):
            static = self.rnd.random() < params.p_static
            self.members.append(Member(f"c{i}", "classic-group", "classic",
                                       instance=f"c{i}-instance" if static else None))
        for i in range(params.consumer_members):
            self.members.append(Member(f"k{i}", "consumer-group", "consumer",
                                       member_id=f"k{i}-{self.new_id()}", generation=0))
        # checkers' memory
        self.floor: dict[tuple[str, int], int] = {}
        self.assigned: dict[tuple[str, int], dict[str, frozenset[int]]] = {}
        self.down_until = -1
        self.stats: dict[str, int] = {k: 0 for k in (
            "commits", "fenced_commits", "failovers", "generations", "crashes", "pauses",
            "replacements", "fenced_instances")}

    def _new_runtime(self) -> CoordinatorRuntime[GroupShard]:
        rt: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            "group", lambda p: GroupShard(p, self.config, lambda: self.topics, self.new_id),
            self.log)
        return rt

    def note(self, what: str) -> None:
        self.events.append(f"t={self.now} {what}")

    def fail(self, check: str, what: str) -> None:
        raise InvariantViolation(
            f"seed={self.seed} check={check}: {what}\nlast events:\n  "
            + "\n  ".join(self.events))

    # -- the coordinator ------------------------------------------------------------------

    def write(self, m: Member, op: Callable[[GroupShard, int], Any],
              then: Callable[[Any, E], None]) -> None:
        m.waiting = True
        incarnation = m.incarnation

        def deliver(resp: Any, err: E) -> None:
            if m.incarnation != incarnation:
                return  # an answer to a process that crashed since
            m.waiting = False
            then(resp, err)

        self.runtime.write(0, op, deliver, self.now)

    def failover(self) -> None:
        self.stats["failovers"] += 1
        self.note("coordinator fails over")
        self.runtime.unload(0)
        self.log.up = False
        self.log.fail_over()
        self.down_until = self.now + self.rnd.randint(50, 800)

    def maybe_elect(self) -> None:
        if self.runtime.status(0) != E.NOT_COORDINATOR or self.now < self.down_until:
            return
        self.epoch += 1
        self.log.up = True
        self.runtime = self._new_runtime() if self.rnd.random() < 0.5 else self.runtime
        self.runtime.schedule_load(0, self.epoch)
        self.runtime.load(0, self.epoch, self.log.records(), self.now, self.log.hw)
        self.note(f"coordinator elected (epoch {self.epoch}, {len(self.log.entries)} records)")

    # -- checkers -------------------------------------------------------------------------

    def check_offsets(self) -> None:
        if "offsets" not in self.p.checks:
            return
        shard = self.runtime.shard(0)
        if shard is None:
            return
        for (gid, part), floor in self.floor.items():
            _, got = shard.fetch_offsets(gid, [(TOPIC, part)])
            om = got.get((TOPIC, part))
            cur = -1 if om is None else om.offset
            if cur < floor:
                self.fail("offsets", f"group {gid} partition {part}: the coordinator serves "
                          f"offset {cur}, below the acknowledged commit {floor}")

    def check_live_owners(self) -> None:
        if "live_owners" not in self.p.checks:
            return
        seen: dict[int, str] = {}
        for m in self.members:
            if m.kind != "consumer" or m.crashed_until >= 0 \
                    or self.now >= m.last_ok_heartbeat + SESSION_MS:
                continue
            for part in m.owned:
                if part in seen:
                    self.fail("live_owners", f"partition {part} of {m.group} owned by "
                              f"{seen[part]} and {m.name} at once")
                seen[part] = m.name

    def on_assignment(self, m: Member, generation: int, parts: frozenset[int]) -> None:
        if "owners" not in self.p.checks:
            return
        # a static member's replacement takes its place (and assignment) in the same
        # generation, the old process being fenced: one owner, the instance
        who = m.instance or m.member_id
        gen = self.assigned.setdefault((m.group, generation), {})
        for other, theirs in gen.items():
            if other != who and parts & theirs:
                self.fail("owners", f"group {m.group} generation {generation}: partitions "
                          f"{sorted(parts & theirs)} handed to {who} and {other}")
        gen[who] = parts

    # -- a member's turn ------------------------------------------------------------------

    def act(self, m: Member) -> None:
        if m.waiting or self.now < m.paused_until or self.now < m.crashed_until or m.left:
            return
        if m.crashed_until >= 0:  # back from a crash: a new incarnation
            m.crashed_until = -1
            self.reset(m, forget_id=True)
        if m.kind == "classic":
            self.act_classic(m)
        else:
            self.act_consumer(m)

    def reset(self, m: Member, forget_id: bool) -> None:
        m.owned, m.positions, m.stable = frozenset(), {}, False
        m.want_rejoin = True
        if forget_id:
            m.member_id = "" if m.kind == "classic" else f"{m.name}-{self.new_id()}"
            m.generation = -1 if m.kind == "classic" else 0

    def fenced_instance(self, m: Member) -> None:
        """Another process holds this member's group.instance.id: this one stops (the
        Java consumer's fatal FencedInstanceIdException)."""
        self.stats["fenced_instances"] += 1
        self.note(f"{m.name} fenced: instance {m.instance} taken over; it stops")
        m.owned, m.positions, m.stable, m.left = frozenset(), {}, False, True

    def process(self, m: Member) -> None:
        for part in m.owned:
            if self.rnd.random() < 0.3:
                m.positions[part] = m.positions.get(part, 0) + self.rnd.randint(1, 4)

    def start_from_committed(self, m: Member) -> None:
        shard = self.runtime.shard(0)
        if shard is None:
            m.owned, m.stable = frozenset(), False
            m.want_rejoin = True
            return
        _, got = shard.fetch_offsets(m.group, [(TOPIC, p) for p in m.owned])
        m.positions = {p: max(0, om.offset) if (om := got.get((TOPIC, p))) else 0
                       for p in m.owned}

    def commit(self, m: Member, then: Callable[[], None] | None = None) -> None:
        if not m.positions:
            if then:
                then()
            return
        offsets = {(TOPIC, p): CommitRequest(off, -1, "") for p, off in m.positions.items()}
        gen, mid, group, inst = m.generation, m.member_id, m.group, m.instance

        def op(s: GroupShard, now: int) -> Any:
            return s.commit(now, group_id=group, generation_id=gen, member_id=mid,
                            instance_id=inst, retention_ms=-1, offsets=offsets)

        def done(resp: Any, err: E) -> None:
            if err == E.NONE and resp is not None:
                for (_, part), e in resp.items():
                    if e == E.NONE:
                        self.stats["commits"] += 1
                        key = (group, part)
                        self.floor[key] = max(self.floor.get(key, -1), offsets[(TOPIC, part)].offset)
                    elif e in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.STALE_MEMBER_EPOCH,
                               E.FENCED_MEMBER_EPOCH, E.FENCED_INSTANCE_ID):
                        self.stats["fenced_commits"] += 1
                self.note(f"{m.name} commit gen {gen}: "
                          f"{sorted((p, o.offset) for (_, p), o in offsets.items())} -> "
                          f"{sorted({e.name for e in resp.values()})}")
                if any(e == E.FENCED_INSTANCE_ID for e in resp.values()):
                    self.fenced_instance(m)
                    return
                fenced = any(e in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID) for e in resp.values())
                if fenced and m.kind == "classic":
                    self.reset(m, forget_id=any(e == E.UNKNOWN_MEMBER_ID for e in resp.values()))
            if then:
                then()

        self.write(m, op, done)

    # classic: JoinGroup, SyncGroup, Heartbeat, OffsetCommit, LeaveGroup

    def act_classic(self, m: Member) -> None:
        if m.want_rejoin:
            self.join(m)
            return
        if not m.stable:
            return
        r = self.rnd.random()
        if r < self.p.p_leave:
            self.leave(m)
        elif r < 0.3:
            self.process(m)
        elif r < 0.45:
            self.commit(m)
        elif self.now >= m.next_heartbeat:
            self.heartbeat(m)

    def join(self, m: Member) -> None:
        mid, group = m.member_id, m.group

        def op(s: GroupShard, now: int) -> Any:
            return s.join(now, group_id=group, member_id=mid, instance_id=m.instance,
                          client_id=m.name, client_host="/sim", session_timeout_ms=SESSION_MS,
                          rebalance_timeout_ms=REBALANCE_MS, protocol_type="consumer",
                          protocols=[("range", subscription())], require_known_member_id=True,
                          supports_skip_assignment=False)

        def done(resp: JoinResult | None, err: E) -> None:
            e = resp.error if err == E.NONE and resp is not None else err
            if e == E.MEMBER_ID_REQUIRED and resp is not None:
                m.member_id = resp.member_id
                return
            if e == E.UNKNOWN_MEMBER_ID:
                m.member_id = ""
                return
            if e == E.FENCED_INSTANCE_ID:
                self.fenced_instance(m)
                return
            if e != E.NONE or resp is None:
                return  # retried on a later turn
            m.want_rejoin = False
            m.generation = resp.generation_id
            self.note(f"{m.name} joined generation {resp.generation_id} "
                      f"(leader {resp.leader_id == m.member_id})")
            assignments: dict[str, bytes] = {}
            if resp.leader_id == m.member_id:
                ids = sorted(mid2 for mid2, _, _ in resp.members)
                for i, mid2 in enumerate(ids):
                    assignments[mid2] = encode_assignment(
                        [p for p in range(PARTITIONS) if p % len(ids) == i])
            self.sync(m, resp.generation_id, assignments)

        self.write(m, op, done)

    def sync(self, m: Member, generation: int, assignments: dict[str, bytes]) -> None:
        mid, group = m.member_id, m.group

        def op(s: GroupShard, now: int) -> Any:
            return s.sync(now, group_id=group, generation_id=generation, member_id=mid,
                          instance_id=m.instance, protocol_type="consumer",
                          protocol_name="range",
                          assignments=assignments)

        def done(resp: SyncResult | None, err: E) -> None:
            e = resp.error if err == E.NONE and resp is not None else err
            if e == E.FENCED_INSTANCE_ID:
                self.fenced_instance(m)
                return
            if e != E.NONE or resp is None:
                m.want_rejoin = True
                if e == E.UNKNOWN_MEMBER_ID:
                    m.member_id = ""
                return
            m.owned = decode_assignment(resp.assignment)
            m.stable = True
            m.next_heartbeat = self.now + HEARTBEAT_MS
            self.on_assignment(m, generation, m.owned)
            self.start_from_committed(m)
            self.note(f"{m.name} owns {sorted(m.owned)} in generation {generation} "
                      f"from {sorted(m.positions.items())}")

        self.write(m, op, done)

    def heartbeat(self, m: Member) -> None:
        mid, group, gen = m.member_id, m.group, m.generation
        m.next_heartbeat = self.now + HEARTBEAT_MS

        def op(s: GroupShard, now: int) -> Any:
            return s.heartbeat(now, group, mid, m.instance, gen)

        def done(resp: E | None, err: E) -> None:
            e = resp if err == E.NONE and resp is not None else err
            if e == E.REBALANCE_IN_PROGRESS:
                # eager: commit what was processed, give everything up, rejoin
                self.commit(m, lambda: self.reset(m, forget_id=False))
            elif e in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID):
                self.reset(m, forget_id=e == E.UNKNOWN_MEMBER_ID)
            elif e == E.FENCED_INSTANCE_ID:
                self.fenced_instance(m)

        self.write(m, op, done)

    def leave(self, m: Member) -> None:
        mid, group = m.member_id, m.group

        def op(s: GroupShard, now: int) -> Any:
            return s.leave(now, group, [(mid, m.instance)])

        def done(resp: Any, err: E) -> None:
            self.reset(m, forget_id=True)

        self.note(f"{m.name} leaves")
        self.commit(m, lambda: self.write(m, op, done))

    # KIP-848: ConsumerGroupHeartbeat and OffsetCommit with the member epoch

    def act_consumer(self, m: Member) -> None:
        r = self.rnd.random()
        if m.stable and r < 0.3:
            self.process(m)
        elif m.stable and r < 0.45:
            self.commit(m)
        elif self.now >= m.next_heartbeat or m.want_rejoin:
            self.consumer_heartbeat(m)

    def consumer_heartbeat(self, m: Member) -> None:
        m.next_heartbeat = self.now + HEARTBEAT_MS
        joining = m.generation == 0 or m.want_rejoin
        req = HeartbeatRequest(
            member_id=m.member_id, member_epoch=0 if joining else m.generation,
            rebalance_timeout_ms=REBALANCE_MS,
            subscribed_names=[TOPIC] if joining else None,
            owned=[(TOPIC_ID, p) for p in m.owned], client_id=m.name, client_host="/sim")
        group = m.group
        sent = self.now

        def op(s: GroupShard, now: int) -> Any:
            return s.consumer_heartbeat(now, group, req)

        def done(resp: HeartbeatResult | None, err: E) -> None:
            e = resp.error if err == E.NONE and resp is not None else err
            if e in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
                self.reset(m, forget_id=False)
                m.generation = 0
                return
            if e != E.NONE or resp is None:
                return
            m.want_rejoin = False
            m.generation = resp.member_epoch
            m.last_ok_heartbeat = sent
            if resp.assignment is not None:
                new = frozenset(p for ps in resp.assignment.values() for p in ps)
                gained = new - m.owned
                for p in m.owned - new:
                    m.positions.pop(p, None)
                m.owned = new
                if gained:
                    shard = self.runtime.shard(0)
                    if shard is not None:
                        _, got = shard.fetch_offsets(group, [(TOPIC, p) for p in gained])
                        for p in gained:
                            om = got.get((TOPIC, p))
                            m.positions[p] = max(0, om.offset) if om else 0
                self.on_assignment(m, m.generation, m.owned)
                self.note(f"{m.name} epoch {m.generation} owns {sorted(m.owned)}")
            m.stable = True

        self.write(m, op, done)

    # -- the schedule ---------------------------------------------------------------------

    def faults(self) -> None:
        for m in self.members:
            if m.crashed_until >= 0 or m.paused_until > self.now:
                continue
            r = self.rnd.random()
            if r < self.p.p_crash:
                self.stats["crashes"] += 1
                m.crashed_until = self.now + self.rnd.randint(100, 3000)
                m.waiting = False
                m.incarnation += 1
                self.note(f"{m.name} crashes")
            elif r < self.p.p_crash + self.p.p_pause:
                self.stats["pauses"] += 1
                m.paused_until = self.now + self.rnd.randint(SESSION_MS, 3 * SESSION_MS)
                self.note(f"{m.name} pauses until {m.paused_until}")
                if m.instance is not None and self.rnd.random() < self.p.p_replace \
                        and len(self.members) < 12:
                    # the orchestrator starts a new process with the same instance id;
                    # the paused one comes back a zombie and must be fenced
                    self.stats["replacements"] += 1
                    self.members.append(Member(f"{m.name}r", m.group, m.kind,
                                               instance=m.instance))
                    self.note(f"{m.name}r replaces {m.name} (instance {m.instance})")
        if self.runtime.status(0) == E.NONE and self.rnd.random() < self.p.p_failover:
            self.failover()

    def run(self) -> GroupSim:
        self.runtime.schedule_load(0, self.epoch)
        self.runtime.load(0, self.epoch, [], self.now, 0)
        for _ in range(self.p.steps):
            self.now += self.rnd.randint(1, 40)
            if self.log.up and self.log.advance(self.now):
                self.runtime.committed(0, self.log.hw)
            self.runtime.fire_due(self.now)
            self.maybe_elect()
            self.faults()
            for m in self.rnd.sample(self.members, len(self.members)):
                self.act(m)
            self.check_offsets()
            self.check_live_owners()
        shard = self.runtime.shard(0)
        if shard is not None:
            g = shard.groups.get("classic-group")
            if g is not None:
                self.stats["generations"] = g.generation_id
        return self


def run_schedule(seed: int, params: SimParams | None = None) -> GroupSim:
    return GroupSim(seed, params or schedule_params(seed)).run()
