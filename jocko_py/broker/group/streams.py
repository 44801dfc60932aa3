"""KIP-1071 streams groups (``group.protocol=streams``): the coordinator's model.

This module owns the state of one streams group: its topology (as the first member
initialized it), the topology as configured against the cluster's topics (tasks per
subtopology, internal topics to create), the group epoch, the target assignment of
active, standby and warm-up tasks with its epoch, and each member's epoch, state and
current tasks. It is pure: ``heartbeat(request, topics, now)`` takes the topics as the
metadata image shows them (name -> partitions) and the time in milliseconds, changes
the group and returns the answer plus the internal topics the caller should create;
``records()`` is the group as ``__consumer_offsets`` records (the caller writes what
changed) and ``expired(now)`` the members whose session or revocation timed out.

Rules (Kafka 4.4's GroupMetadataManager.streamsGroupHeartbeat)
---------------------------------------------------------------
- Joining (member epoch 0) needs the topology, a rebalance timeout, no owned tasks; a
  group at ``group.streams.max.size`` members refuses a new one (GROUP_MAX_SIZE_REACHED).
  A heartbeat of an unknown member gets UNKNOWN_MEMBER_ID; of a group that does not exist
  GROUP_ID_NOT_FOUND.
- Topology. The first member's topology becomes the group's (a StreamsGroupTopology
  record). A joining member with a lower topology epoch gets the STALE_TOPOLOGY status;
  one with the same or a higher epoch and a different topology INVALID_REQUEST ("Topology
  updates are not supported yet.").
- Configuration against the topics. Missing source topics: status MISSING_SOURCE_TOPICS
  and no tasks. Repartition topics without a partition count take the largest task count
  of the subtopologies writing to them, copartitioned topics must agree (else
  INCORRECTLY_PARTITIONED_TOPICS), changelog topics have one partition per task. Internal
  topics that do not exist are returned to be created and reported with
  MISSING_INTERNAL_TOPICS; an existing one with another partition count is
  INCORRECTLY_PARTITIONED_TOPICS. Until the topology is configured without a problem the
  group is NotReady and assigns nothing.
- Epochs. The group epoch is bumped when a member joins, leaves, is fenced or changes its
  metadata (process, endpoint, tags, rack, topology epoch, rebalance timeout), when the
  topics of the topology change (created, deleted, partition count), when the topology
  becomes valid, or when ``group.streams.num.standby.replicas`` changed. The target
  assignment is recomputed (``streams_assignor``) when its epoch lags the group epoch.
- Reconciliation (Kafka's CurrentAssignmentBuilder). A member first revokes the tasks
  it holds outside its target (it keeps its epoch and is told only the tasks it keeps;
  they are revoked once a heartbeat reports owned tasks without them); then it takes the
  assignment epoch and every target task not still held by another member: an active
  task while another member holds it active (or its own process holds it as standby or
  warm-up), a standby or warm-up task while its own process holds it in any role.
- Fencing. An epoch greater than the member's, or smaller other than its previous epoch
  with owned tasks within its assignment, is FENCED_MEMBER_EPOCH. A member without a
  heartbeat for ``group.streams.session.timeout.ms``, or that does not revoke within its
  rebalance timeout, is removed.
- Static members (instance id): leaving with epoch -2 keeps the member and its tasks until
  its session ends; joining again with the instance id takes them over. Joining with an
  instance id held by a live member is UNRELEASED_INSTANCE_ID.
- Delays (Kafka 4.4). When the first member joins an empty group the target waits
  ``group.streams.initial.rebalance.delay.ms`` (3000) for others to join, and a target is
  computed at most once per ``group.streams.assignment.interval.ms`` (1000); meanwhile
  heartbeats carry the ASSIGNMENT_DELAYED status and the timer computes the target when
  the delay is over (``assignment_due``).
- A member that asks for the application's shutdown makes every member's next answer
  carry SHUTDOWN_APPLICATION.
- Offsets. A member commits with its member epoch: unknown member UNKNOWN_MEMBER_ID,
  another epoch STALE_MEMBER_EPOCH; without a member only while the group is empty.

As Kafka 4.4.0: source topic regular expressions are refused (INVALID_REQUEST,
"Regular expressions for source topics are not supported yet."), warm-up tasks are
carried but never created (Kafka 4.4's AssignmentRefiner returns the target as it is)
and standbys are placed without rack tags (its sticky assignor reads none). Not
implemented: topology description plug-ins.
"""

from __future__ import annotations

import enum
import hashlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from jocko_py.broker.group.streams_assignor import AssignorMember, Task, assign
from jocko_py.protocol.errors import ErrorCode

E = ErrorCode
log = logging.getLogger("jocko_py.broker.group.streams")

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class Status(enum.IntEnum):
    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6


class MemberState(enum.Enum):
    # values: Kafka's byte in StreamsGroupCurrentMemberAssignmentValue.State
    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3


class GroupStateName(enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class StreamsConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2147483647
    num_standby_replicas: int = 0
    task_offset_interval_ms: int = 60000
    acceptable_recovery_lag: int = 10000
    initial_rebalance_delay_ms: int = 3000
    assignment_interval_ms: int = 1000

    def assignment_configs(self) -> tuple[tuple[str, str], ...]:
        return (("num.standby.replicas", str(self.num_standby_replicas)),)


# -- topology ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]  # sorted by id

    @classmethod
    def of(cls, epoch: int, subs: Iterable[Subtopology]) -> Topology:
        return cls(epoch, tuple(sorted(subs, key=lambda s: s.subtopology_id)))

    def same_as(self, other: Topology) -> bool:
        return self.epoch == other.epoch and self.subtopologies == other.subtopologies

    def required_topics(self) -> set[str]:
        out: set[str] = set()
        for s in self.subtopologies:
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return out


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """The topology against the topics: tasks per subtopology when it could be configured,
    the internal topics to create, and the problem to report (status, detail)."""

    epoch: int
    num_tasks: dict[str, int] | None
    to_create: tuple[TopicInfo, ...] = ()
    problem: tuple[Status, str] | None = None
    # subtopology -> its input topics (sources and repartition sources), for IQ endpoints
    inputs: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return self.num_tasks is not None and self.problem is None


class _ConfigError(Exception):
    def __init__(self, status: Status, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def configure(topology: Topology, topics: Mapping[str, int]) -> ConfiguredTopology:
    """Kafka's InternalTopicManager.configureTopics, against ``topics`` (name ->
    partitions)."""
    try:
        missing = sorted({t for s in topology.subtopologies for t in s.source_topics
                          if t not in topics})
        if missing:
            raise _ConfigError(Status.MISSING_SOURCE_TOPICS,
                               f"Source topics {', '.join(missing)} are missing.")
        decided = _decide_partitions(topology, topics)

        def count(name: str) -> int:
            return topics[name] if name in topics else decided.get(name, 0)

        num_tasks: dict[str, int] = {}
        inputs: dict[str, tuple[str, ...]] = {}
        for s in topology.subtopologies:
            names = list(s.source_topics) + [t.name for t in s.repartition_source_topics]
            inputs[s.subtopology_id] = tuple(names)
            n = max((count(t) for t in names), default=0)
            if n <= 0:
                raise _ConfigError(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                   f"No partition count for subtopology {s.subtopology_id}")
            num_tasks[s.subtopology_id] = n
        to_create: dict[str, TopicInfo] = {}
        for s in topology.subtopologies:
            for t in s.repartition_source_topics:
                to_create[t.name] = replace(t, partitions=count(t.name))
            for t in s.state_changelog_topics:
                to_create[t.name] = replace(t, partitions=num_tasks[s.subtopology_id])
        for name in sorted(topology.required_topics()):
            want = to_create.get(name)
            if name in topics and want is not None:
                del to_create[name]
                if topics[name] != want.partitions:
                    raise _ConfigError(
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Existing topic {name} has different number of partitions: "
                        f"expected {want.partitions}, found {topics[name]}")
        problem = None
        if to_create:
            problem = (Status.MISSING_INTERNAL_TOPICS,
                       f"Internal topics are missing: [{', '.join(sorted(to_create))}]")
        return ConfiguredTopology(topology.epoch, num_tasks,
                                  tuple(to_create[n] for n in sorted(to_create)), problem,
                                  inputs)
    except _ConfigError as e:
        return ConfiguredTopology(topology.epoch, None, (), (e.status, e.detail))


def _decide_partitions(topology: Topology, topics: Mapping[str, int]) -> dict[str, int]:
    decided: dict[str, int] = {}

    def count(name: str) -> int | None:
        if name in topics:
            return topics[name]
        return decided.get(name)

    # repartition topics: a fixed count, else the largest input of the writers
    fixed = {t.name: t.partitions for s in topology.subtopologies
             for t in s.repartition_source_topics if t.partitions > 0}
    decided.update(fixed)
    flexible = {t.name for s in topology.subtopologies
                for t in s.repartition_source_topics if t.partitions <= 0}
    for _ in range(len(topology.subtopologies) + 1):
        progress = False
        for s in topology.subtopologies:
            names = list(s.source_topics) + [t.name for t in s.repartition_source_topics]
            known = [c for c in (count(n) for n in names) if c is not None]
            if not known:
                continue
            most = max(known)
            for sink in s.repartition_sink_topics:
                if sink in flexible and sink not in topics and decided.get(sink, 0) < most:
                    decided[sink] = most
                    progress = True
        if not progress:
            break
    for name in flexible:
        if count(name) is None:
            raise _ConfigError(Status.INCORRECTLY_PARTITIONED_TOPICS,
                               f"Unable to determine the number of partitions of "
                               f"repartition topic {name}")
    # copartitioning (Kafka's CopartitionedTopicsEnforcer)
    for s in topology.subtopologies:
        repart = [t.name for t in s.repartition_source_topics]
        for g in s.copartition_groups:
            names = [s.source_topics[i] for i in g.source_topics if i < len(s.source_topics)]
            names += [repart[i] for i in g.repartition_source_topics if i < len(repart)]
            external = [n for n in names if n not in flexible or n in topics]
            external_counts = {n: count(n) for n in external}
            values = {c for c in external_counts.values() if c is not None}
            if len(values) > 1:
                raise _ConfigError(
                    Status.INCORRECTLY_PARTITIONED_TOPICS,
                    "Following topics do not have the same number of partitions: ["
                    + ", ".join(f"{n}={external_counts[n]}" for n in sorted(external)) + "]")
            target = values.pop() if values else max(
                (decided.get(n, 0) for n in names), default=0)
            for name in names:
                if name in flexible and name not in topics:
                    decided[name] = target
    return decided


# -- tasks ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Tasks:
    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()

    def empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def all(self) -> frozenset[Task]:
        return self.active | self.standby | self.warmup


NO_TASKS = Tasks()


def task_ids(tasks: frozenset[Task]) -> dict[str, list[int]]:
    """Tasks as Kafka's TaskIds lists: subtopology -> sorted partitions."""
    out: dict[str, list[int]] = {}
    for sid, p in sorted(tasks):
        out.setdefault(sid, []).append(p)
    return out


# -- members --------------------------------------------------------------------------------

@dataclass(slots=True)
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Tasks = NO_TASKS
    revoking: Tasks = NO_TASKS
    task_offsets: tuple[tuple[str, int, int], ...] = ()
    task_end_offsets: tuple[tuple[str, int, int], ...] = ()
    last_heartbeat_ms: int = 0
    revocation_deadline_ms: int = 0

    def metadata(self) -> MemberRecord:
        return MemberRecord(self.instance_id, self.rack_id, self.client_id, self.client_host,
                            self.rebalance_timeout_ms, self.topology_epoch, self.process_id,
                            self.user_endpoint, self.client_tags)


@dataclass(slots=True)
class HeartbeatRequest:
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    active: frozenset[Task] | None = None
    standby: frozenset[Task] | None = None
    warmup: frozenset[Task] | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets: tuple[tuple[str, int, int], ...] | None = None
    task_end_offsets: tuple[tuple[str, int, int], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""

    def owned(self) -> Tasks | None:
        if self.active is None and self.standby is None and self.warmup is None:
            return None
        return Tasks(self.active or frozenset(), self.standby or frozenset(),
                     self.warmup or frozenset())


@dataclass(slots=True)
class EndpointPartitions:
    endpoint: tuple[str, int]
    active: dict[str, list[int]]   # topic -> partitions
    standby: dict[str, list[int]]


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    status: list[tuple[int, str]] = field(default_factory=list)
    assignment: Tasks | None = None
    endpoint_information_epoch: int = 0
    endpoints: list[EndpointPartitions] | None = None
    to_create: tuple[TopicInfo, ...] = ()


def validate(req: HeartbeatRequest) -> str | None:
    """Kafka's request checks before the group is looked at (INVALID_REQUEST)."""
    if req.member_id == "":
        return "MemberId can't be empty."
    if req.instance_id == "":
        return "InstanceId can't be empty."
    if req.rack_id == "":
        return "RackId can't be empty."
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if req.active:
            return "ActiveTasks must be empty when (re-)joining."
        if req.standby:
            return "StandbyTasks must be empty when (re-)joining."
        if req.warmup:
            return "WarmupTasks must be empty when (re-)joining."
        if req.topology is None:
            return "Topology must be non-null when (re-)joining."
        for s in req.topology.subtopologies:
            if s.source_topic_regex:
                return "Regular expressions for source topics are not supported yet."
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            return "InstanceId can't be null."
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        return f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2."
    if (req.active is None or req.standby is None or req.warmup is None) and not (
            req.active is None and req.standby is None and req.warmup is None):
        return "If one task-type is non-null, all must be non-null."
    if req.member_epoch != 0 and req.topology is not None:
        return "Topology can only be provided when (re-)joining."
    return None


def invalid_topology(topology: Topology) -> str | None:
    """STREAMS_INVALID_TOPOLOGY: what Kafka refuses in a topology."""
    for s in topology.subtopologies:
        for t in s.state_changelog_topics:
            if t.partitions != 0:
                return (f"Changelog topic {t.name} must have an undefined partition count, "
                        f"but it is set to {t.partitions}.")
    return None


# -- records ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class GroupRecord:
    epoch: int
    metadata_hash: int
    validated_topology_epoch: int
    assignment_configs: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class MemberRecord:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class CurrentRecord:
    member_epoch: int
    previous_epoch: int
    state: int
    assigned: Tasks
    revoking: Tasks


# -- the group ----------------------------------------------------------------------------------

class StreamsGroupModel:
    """One streams group (see the module's rules)."""

    def __init__(self, group_id: str, config: StreamsConfig | None = None) -> None:
        self.group_id = group_id
        self.config = config or StreamsConfig()
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.topology: Topology | None = None
        self.configured: ConfiguredTopology | None = None
        self.validated_topology_epoch = -1
        self.metadata_hash = 0
        self.assignment_configs: tuple[tuple[str, str], ...] = ()
        self.members: dict[str, StreamsMember] = {}
        self.target: dict[str, Tasks] = {}
        self.endpoint_information_epoch = 0
        self.shutdown_requested_by: str | None = None
        self.missing_standbys = 0
        # the initial rebalance delay's end (in memory, as Kafka's timer), and when the
        # target was last computed (kept in the target assignment metadata record)
        self.initial_delay_until: int | None = None
        self.assignment_timestamp = 0
        self._placeholder = False  # the target is the empty one of the initial delay
        # what each member was last told (epoch, tasks): unchanged -> no assignment sent
        self._last_sent: dict[str, tuple[int, Tasks]] = {}

    # -- views ---------------------------------------------------------------------------

    def state(self) -> GroupStateName:
        if not self.members:
            return GroupStateName.EMPTY
        if self.topology is None or self.configured is None or not self.configured.ready:
            return GroupStateName.NOT_READY
        if self.assignment_epoch < self.group_epoch:
            return GroupStateName.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return GroupStateName.RECONCILING
        return GroupStateName.STABLE

    def static_member(self, instance_id: str) -> StreamsMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    # -- heartbeat -------------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, topics: Mapping[str, int],
                  now: int) -> HeartbeatResult:
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        bump = False
        was_empty = not self.members
        if req.member_epoch == 0:
            joined = self._join(req, now)
            if isinstance(joined, HeartbeatResult):
                return joined
            bump = joined
        m = self.members.get(req.member_id)
        if m is None:
            return HeartbeatResult(E.UNKNOWN_MEMBER_ID,
                                   f"Member {req.member_id} is not a member of group "
                                   f"{self.group_id}.")
        old_sent = self._last_sent.get(m.member_id)
        if req.member_epoch != 0:
            err = self._check_epoch(m, req)
            if err is not None:
                return err
        m.last_heartbeat_ms = now
        status: list[tuple[int, str]] = []
        before = m.metadata()
        self._update_member(m, req)
        if m.metadata() != before:
            bump = True
        # the topology
        if req.topology is not None:
            if self.topology is None:
                self.topology = req.topology
                log.info("[group=%s member=%s] initialized the topology with epoch %d",
                         self.group_id, m.member_id, req.topology.epoch)
            elif self.topology.epoch > req.topology.epoch:
                log.info("[group=%s member=%s] joined with stale topology epoch %d",
                         self.group_id, m.member_id, req.topology.epoch)
            elif not self.topology.same_as(req.topology):
                if bump and req.member_epoch == 0:
                    self._remove(m.member_id)
                return HeartbeatResult(E.INVALID_REQUEST,
                                       "Topology updates are not supported yet.")
        if self.topology is None:
            return HeartbeatResult(E.INVALID_REQUEST,
                                   "The topology is null and the group topology is also null.")
        if m.topology_epoch < self.topology.epoch:
            status.append((Status.STALE_TOPOLOGY,
                           f"The member's topology epoch {m.topology_epoch} is behind the "
                           f"group's topology epoch {self.topology.epoch}."))
        bump |= self._configure(topics)
        configured = self.configured
        assert configured is not None
        owned = req.owned()
        if configured.ready and owned is not None:
            bad = _invalid_tasks(configured, owned)
            if bad is not None:
                return HeartbeatResult(E.INVALID_REQUEST, bad)
        if self.assignment_configs != self.config.assignment_configs():
            bump = True
        if bump:
            self.group_epoch += 1
            self.assignment_configs = self.config.assignment_configs()
            if was_empty and self.config.initial_rebalance_delay_ms > 0 \
                    and self.initial_delay_until is None:
                self.initial_delay_until = now + self.config.initial_rebalance_delay_ms
        delayed = self._maybe_compute_target(now)
        if delayed is not None:
            status.append((Status.ASSIGNMENT_DELAYED, delayed))
        self._reconcile(m, owned, now)
        if req.shutdown_application:
            self.shutdown_requested_by = m.member_id
        return self._answer(m, req, old_sent, status, configured)

    def _join(self, req: HeartbeatRequest, now: int) -> HeartbeatResult | bool:
        """An error, or whether a member was added (False: a known member returned)."""
        if req.instance_id is not None:
            old = self.static_member(req.instance_id)
            if old is not None and old.member_id != req.member_id:
                if old.member_epoch != STATIC_LEAVE_EPOCH:
                    return HeartbeatResult(
                        E.UNRELEASED_INSTANCE_ID,
                        f"Static member {req.member_id} with instance id {req.instance_id} "
                        f"cannot join the group because the instance id is owned by member "
                        f"{old.member_id}.")
                # the static member is back: it takes over its place and tasks
                del self.members[old.member_id]
                target = self.target.pop(old.member_id, None)
                self._last_sent.pop(old.member_id, None)
                old.member_id = req.member_id
                old.member_epoch = old.previous_member_epoch
                self.members[req.member_id] = old
                if target is not None:
                    self.target[req.member_id] = target
                return False
        m = self.members.get(req.member_id)
        if m is not None:
            if m.member_epoch == 0:
                return False  # joined before and never got an answer with an epoch
            # a member that joins again under the same id starts over
            self._remove(req.member_id)
        elif len(self.members) >= self.config.max_size:
            return HeartbeatResult(
                E.GROUP_MAX_SIZE_REACHED,
                f"The streams group has reached its maximum capacity of "
                f"{self.config.max_size} members.")
        self.members[req.member_id] = StreamsMember(
            member_id=req.member_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
            last_heartbeat_ms=now)
        log.info("[group=%s member=%s] joins the streams group", self.group_id, req.member_id)
        return True

    def _check_epoch(self, m: StreamsMember, req: HeartbeatRequest) -> HeartbeatResult | None:
        if req.member_epoch > m.member_epoch:
            return HeartbeatResult(
                E.FENCED_MEMBER_EPOCH,
                f"The streams group member has a greater member epoch ({req.member_epoch}) "
                f"than the one known by the group coordinator ({m.member_epoch}). The member "
                "must abandon all its partitions and rejoin.")
        if req.member_epoch < m.member_epoch:
            owned = req.owned()
            if req.member_epoch != m.previous_member_epoch or owned is None or not (
                    owned.active <= m.assigned.active and owned.standby <= m.assigned.standby
                    and owned.warmup <= m.assigned.warmup):
                return HeartbeatResult(
                    E.FENCED_MEMBER_EPOCH,
                    f"The streams group member has a smaller member epoch "
                    f"({req.member_epoch}) than the one known by the group coordinator "
                    f"({m.member_epoch}). The member must abandon all its partitions and "
                    "rejoin.")
        return None

    def _update_member(self, m: StreamsMember, req: HeartbeatRequest) -> None:
        if req.instance_id is not None:
            m.instance_id = req.instance_id
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.rebalance_timeout_ms >= 0:
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.topology is not None:
            m.topology_epoch = req.topology.epoch
        m.client_id, m.client_host = req.client_id, req.client_host
        if req.process_id is not None:
            m.process_id = req.process_id
        if req.client_tags is not None:
            m.client_tags = tuple(sorted(req.client_tags))
        if req.user_endpoint is not None:
            m.user_endpoint = req.user_endpoint
        if req.task_offsets is not None:
            m.task_offsets = req.task_offsets
        if req.task_end_offsets is not None:
            m.task_end_offsets = req.task_end_offsets

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        m = self.members.get(req.member_id)
        if m is None and req.instance_id is not None:
            m = self.static_member(req.instance_id)
        if m is None:
            return HeartbeatResult(E.UNKNOWN_MEMBER_ID,
                                   f"Member {req.member_id} is not a member of group "
                                   f"{self.group_id}.")
        if req.shutdown_application:
            self.shutdown_requested_by = m.member_id
        if req.member_epoch == STATIC_LEAVE_EPOCH and m.instance_id is not None:
            if m.member_epoch != STATIC_LEAVE_EPOCH:
                m.previous_member_epoch = m.member_epoch
            m.member_epoch = STATIC_LEAVE_EPOCH
            m.revoking = NO_TASKS
            return HeartbeatResult(E.NONE, member_id=m.member_id,
                                   member_epoch=STATIC_LEAVE_EPOCH)
        log.info("[group=%s member=%s] left the streams group", self.group_id, m.member_id)
        self.remove_member(m.member_id)
        return HeartbeatResult(E.NONE, member_id=req.member_id, member_epoch=req.member_epoch)

    def _remove(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        self._last_sent.pop(member_id, None)
        if self.shutdown_requested_by == member_id and not self.members:
            self.shutdown_requested_by = None

    def remove_member(self, member_id: str) -> None:
        """Leave, session or rebalance timeout: the member is gone, its tasks are free."""
        if member_id in self.members:
            self._remove(member_id)
            self.group_epoch += 1
            if not self.members:
                self.shutdown_requested_by = None
                self.initial_delay_until = None
                self._placeholder = False

    # -- topics --------------------------------------------------------------------------

    def _topics_hash(self, topics: Mapping[str, int]) -> int:
        if self.topology is None:
            return 0
        # stable across processes (the hash is kept in the group's metadata record)
        sig = ";".join(f"{n}={topics.get(n, -1)}"
                       for n in sorted(self.topology.required_topics()))
        digest = hashlib.blake2b(sig.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") & 0x7FFFFFFFFFFFFFFF or 1

    def _configure(self, topics: Mapping[str, int]) -> bool:
        """Configure the topology against ``topics`` if they changed; whether the group
        epoch must move (the topics moved, or the topology became valid)."""
        if self.topology is None:
            return False
        h = self._topics_hash(topics)
        bump = False
        if self.configured is None or h != self.metadata_hash \
                or self.configured.epoch != self.topology.epoch:
            bump = h != self.metadata_hash
            self.metadata_hash = h
            self.configured = configure(self.topology, topics)
        validated = self.topology.epoch if self.configured.ready else -1
        if validated != self.validated_topology_epoch:
            self.validated_topology_epoch = validated
            bump = True
        return bump

    def refresh_topics(self, topics: Mapping[str, int], now: int) -> bool:
        """Metadata moved on: bump the group epoch (and assign again) if the topology's
        topics changed. Whether it did."""
        if not self.members or self.topology is None:
            return False
        if self._configure(topics):
            self.group_epoch += 1
            self._maybe_compute_target(now)
            return True
        return False

    # -- target assignment -------------------------------------------------------------------

    def _maybe_compute_target(self, now: int) -> str | None:
        """Compute the target if it lags the group epoch and no delay holds it back;
        the ASSIGNMENT_DELAYED detail when one does (Kafka 4.4: the initial rebalance
        delay after the first member joins an empty group, and at most one assignment
        per ``group.streams.assignment.interval.ms``)."""
        if self.initial_delay_until is not None:
            if now < self.initial_delay_until:
                if self.assignment_epoch == 0:
                    # nothing was ever assigned: an empty target at the group epoch, so
                    # members get an epoch (Kafka Streams cannot heartbeat at epoch 0
                    # once it has joined); the real one follows the delay at a new epoch
                    self.target = {mid: NO_TASKS for mid in self.members}
                    self.assignment_epoch = self.group_epoch
                    self._placeholder = True
                return "Assignment delayed due to the configured initial rebalance delay."
            self.initial_delay_until = None
            if self._placeholder:
                self._placeholder = False
                self.group_epoch += 1
        if self.assignment_epoch >= self.group_epoch:
            return None
        interval = self.config.assignment_interval_ms
        if interval > 0 and now < self.assignment_timestamp + interval:
            return "Assignment delayed due to the configured assignment interval."
        self._compute_target()
        self.assignment_timestamp = now
        return None

    def assignment_due(self, now: int) -> bool:
        """The timer's part: compute a delayed target once its delay is over. Whether
        the target moved."""
        if not self.members:
            return False
        before = self.assignment_epoch
        if self.initial_delay_until is not None and now >= self.initial_delay_until:
            self._maybe_compute_target(now)  # ends the delay (and a placeholder target)
        elif self.assignment_epoch < self.group_epoch:
            self._maybe_compute_target(now)
        return self.assignment_epoch != before

    def _compute_target(self) -> None:
        configured = self.configured
        if configured is None or not configured.ready or configured.num_tasks is None:
            self.target = {mid: NO_TASKS for mid in self.members}
        else:
            members = {
                mid: AssignorMember(m.process_id or mid, m.assigned.active | m.revoking.active,
                                    m.assigned.standby | m.revoking.standby,
                                    m.assigned.warmup | m.revoking.warmup)
                for mid, m in self.members.items()}
            targets, missing = assign(members, configured.num_tasks,
                                      self.config.num_standby_replicas)
            if missing and missing != self.missing_standbys:
                log.warning("[group=%s] %d standby task(s) could not be placed: too few "
                            "processes for %d standby replica(s)", self.group_id, missing,
                            self.config.num_standby_replicas)
            self.missing_standbys = missing
            self.target = {mid: Tasks(frozenset(t.active), frozenset(t.standby),
                                      frozenset(t.warmup)) for mid, t in targets.items()}
        self.assignment_epoch = self.group_epoch

    # -- reconciliation -------------------------------------------------------------------------

    def _holders(self, member_id: str) -> tuple[dict[Task, str], dict[Task, set[str]]]:
        """Tasks held by the other members: active task -> process; standby or warm-up
        task -> processes."""
        active: dict[Task, str] = {}
        other: dict[Task, set[str]] = {}
        for mid, o in self.members.items():
            if mid == member_id:
                continue
            pid = o.process_id or mid
            for t in o.assigned.active | o.revoking.active:
                active[t] = pid
            for t in o.assigned.standby | o.assigned.warmup | o.revoking.standby \
                    | o.revoking.warmup:
                other.setdefault(t, set()).add(pid)
        return active, other

    def _reconcile(self, m: StreamsMember, owned: Tasks | None, now: int) -> None:
        if m.state is MemberState.UNREVOKED_TASKS:
            if owned is None or owned.all() & m.revoking.all():
                return  # still revoking
            m.revoking = NO_TASKS
            next_epoch = m.member_epoch + 1
        elif m.state is MemberState.STABLE and m.member_epoch == self.assignment_epoch:
            return
        else:
            next_epoch = m.member_epoch
        target = self.target.get(m.member_id, NO_TASKS)
        active_at, other_at = self._holders(m.member_id)
        pid = m.process_id or m.member_id

        def diff(cur: frozenset[Task], tgt: frozenset[Task], unreleased: set[Task]
                 ) -> tuple[frozenset[Task], frozenset[Task], frozenset[Task], bool]:
            keep = cur & tgt
            revoke = cur - keep
            pending = tgt - keep
            blocked = frozenset(t for t in pending if t in unreleased)
            return keep, revoke, pending - blocked, bool(blocked)

        unrel_active = {t for t in target.active
                        if t in active_at or pid in other_at.get(t, set())}
        unrel_other = {t for t in target.standby | target.warmup
                       if active_at.get(t) == pid or pid in other_at.get(t, set())}
        ka, ra, pa, ba = diff(m.assigned.active, target.active, unrel_active)
        ks, rs, ps, bs = diff(m.assigned.standby, target.standby, unrel_other)
        kw, rw, pw, bw = diff(m.assigned.warmup, target.warmup, unrel_other)
        revoke = Tasks(ra, rs, rw)
        keep = Tasks(ka, ks, kw)
        unreleased = ba or bs or bw
        if not revoke.empty() and (owned is None or owned.all() & revoke.all()):
            m.state = MemberState.UNREVOKED_TASKS
            self._set_epoch(m, next_epoch)
            m.assigned, m.revoking = keep, revoke
            m.revocation_deadline_ms = now + max(0, m.rebalance_timeout_ms)
            return
        self._set_epoch(m, self.assignment_epoch)
        m.assigned = Tasks(ka | pa, ks | ps, kw | pw)
        m.revoking = NO_TASKS
        m.state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE

    @staticmethod
    def _set_epoch(m: StreamsMember, epoch: int) -> None:
        if epoch != m.member_epoch:
            m.previous_member_epoch = m.member_epoch
            m.member_epoch = epoch

    def _answer(self, m: StreamsMember, req: HeartbeatRequest,
                old_sent: tuple[int, Tasks] | None, status: list[tuple[int, str]],
                configured: ConfiguredTopology) -> HeartbeatResult:
        r = HeartbeatResult(E.NONE, member_id=m.member_id, member_epoch=m.member_epoch,
                            status=status)
        sent = (m.member_epoch, m.assigned)
        if req.member_epoch == 0 or old_sent is None or old_sent[1] != m.assigned:
            r.assignment = m.assigned
            if req.member_epoch != 0 or not m.assigned.empty():
                self.endpoint_information_epoch += 1
        self._last_sent[m.member_id] = sent
        if self.endpoint_information_epoch != req.endpoint_information_epoch:
            r.endpoints = self._endpoints(configured)
        r.endpoint_information_epoch = self.endpoint_information_epoch
        if configured.problem is not None:
            r.status.append((configured.problem[0], configured.problem[1]))
            if configured.problem[0] is Status.MISSING_INTERNAL_TOPICS:
                r.to_create = configured.to_create
        if self.shutdown_requested_by is not None:
            r.status.append((Status.SHUTDOWN_APPLICATION,
                             f"Streams group member {self.shutdown_requested_by} encountered "
                             "a fatal error and requested a shutdown for the entire "
                             "application."))
        return r

    def _endpoints(self, configured: ConfiguredTopology) -> list[EndpointPartitions] | None:
        out = []
        for m in self.members.values():
            if m.user_endpoint is None:
                continue

            def parts(tasks: frozenset[Task]) -> dict[str, list[int]]:
                res: dict[str, set[int]] = {}
                for sid, p in tasks:
                    for topic in configured.inputs.get(sid, ()):
                        res.setdefault(topic, set()).add(p)
                return {t: sorted(ps) for t, ps in sorted(res.items())}

            out.append(EndpointPartitions(m.user_endpoint, parts(m.assigned.active),
                                          parts(m.assigned.standby | m.assigned.warmup)))
        return out or None

    # -- timers ----------------------------------------------------------------------------

    def expired(self, now: int) -> list[tuple[str, str]]:
        """Members to remove now: (member id, reason)."""
        out = []
        session = self.config.session_timeout_ms
        for m in self.members.values():
            if now > m.last_heartbeat_ms + session:
                out.append((m.member_id, f"no heartbeat for {session} ms"))
            elif m.state is MemberState.UNREVOKED_TASKS and now > m.revocation_deadline_ms:
                out.append((m.member_id,
                            f"tasks not revoked within {m.rebalance_timeout_ms} ms"))
        return out

    def next_deadline(self) -> int | None:
        """The earliest time ``expired`` or ``assignment_due`` may have something to do
        (for a runtime's timer)."""
        times = [m.last_heartbeat_ms + self.config.session_timeout_ms + 1
                 for m in self.members.values()]
        times += [m.revocation_deadline_ms + 1 for m in self.members.values()
                  if m.state is MemberState.UNREVOKED_TASKS]
        if self.members and self.initial_delay_until is not None:
            times.append(self.initial_delay_until)
        elif self.members and self.assignment_epoch < self.group_epoch:
            times.append(self.assignment_timestamp + self.config.assignment_interval_ms)
        return min(times) if times else None

    # -- offsets ---------------------------------------------------------------------------

    def check_commit(self, member_id: str, member_epoch: int) -> tuple[ErrorCode, str | None]:
        if member_epoch < 0 and not member_id:
            if not self.members:
                return E.NONE, None
            return E.UNKNOWN_MEMBER_ID, None
        m = self.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID, (f"Member {member_id} is not a member of group "
                                         f"{self.group_id}.")
        if member_epoch != m.member_epoch:
            return E.STALE_MEMBER_EPOCH, (f"The received member epoch {member_epoch} does not "
                                          f"match the expected member epoch {m.member_epoch}.")
        return E.NONE, None

    # -- durability ------------------------------------------------------------------------

    def records(self) -> dict[tuple[str, str], object]:
        """The group as records, keyed by (record kind, member id or ""): the offsets
        store encodes them with Kafka's StreamsGroup* coordinator record types and writes
        those that changed (tombstones for keys gone)."""
        out: dict[tuple[str, str], object] = {
            ("streams_metadata", ""): GroupRecord(
                self.group_epoch, self.metadata_hash, self.validated_topology_epoch,
                self.assignment_configs),
            ("streams_target_metadata", ""): (self.assignment_epoch,
                                              self.assignment_timestamp),
        }
        if self.topology is not None:
            out[("streams_topology", "")] = self.topology
        for mid, m in self.members.items():
            out[("streams_member", mid)] = m.metadata()
            out[("streams_target", mid)] = self.target.get(mid, NO_TASKS)
            out[("streams_current", mid)] = CurrentRecord(
                m.member_epoch, m.previous_member_epoch, m.state.value, m.assigned, m.revoking)
        return out

    @classmethod
    def restore(cls, group_id: str, recs: Mapping[tuple[str, str], object], now: int,
                config: StreamsConfig | None = None) -> StreamsGroupModel:
        g = cls(group_id, config)
        meta = recs.get(("streams_metadata", ""))
        if isinstance(meta, GroupRecord):
            g.group_epoch = meta.epoch
            g.metadata_hash = meta.metadata_hash
            g.validated_topology_epoch = meta.validated_topology_epoch
            g.assignment_configs = meta.assignment_configs
        ae = recs.get(("streams_target_metadata", ""))
        if isinstance(ae, tuple):
            g.assignment_epoch, g.assignment_timestamp = ae
        topo = recs.get(("streams_topology", ""))
        if isinstance(topo, Topology):
            g.topology = topo
        for (kind, mid), rec in recs.items():
            if kind != "streams_member" or not isinstance(rec, MemberRecord):
                continue
            m = StreamsMember(
                member_id=mid, instance_id=rec.instance_id, rack_id=rec.rack_id,
                client_id=rec.client_id, client_host=rec.client_host,
                rebalance_timeout_ms=rec.rebalance_timeout_ms,
                topology_epoch=rec.topology_epoch, process_id=rec.process_id,
                user_endpoint=rec.user_endpoint, client_tags=rec.client_tags,
                last_heartbeat_ms=now)
            cur = recs.get(("streams_current", mid))
            if isinstance(cur, CurrentRecord):
                m.member_epoch, m.previous_member_epoch = cur.member_epoch, cur.previous_epoch
                m.state = MemberState(cur.state) if cur.state in (1, 2, 3) \
                    else MemberState.STABLE
                m.assigned, m.revoking = cur.assigned, cur.revoking
                m.revocation_deadline_ms = now + max(0, m.rebalance_timeout_ms)
                g._last_sent[mid] = (m.member_epoch, m.assigned)
            g.members[mid] = m
            tgt = recs.get(("streams_target", mid))
            if isinstance(tgt, Tasks):
                g.target[mid] = tgt
        if g.members and all(t.empty() for t in g.target.values()) \
                and g.assignment_epoch >= g.group_epoch:
            # possibly the empty target of an initial delay that the restart cut short
            g.group_epoch += 1
        return g

    def adopt_topics(self, topics: Mapping[str, int]) -> None:
        """After a restore: configure the topology against the topics as they are; the
        epoch moves only if they differ from what the group last saw."""
        if self.topology is not None:
            self.refresh_topics(topics, 0)
            if self.configured is None:
                self.configured = configure(self.topology, topics)


def _invalid_tasks(configured: ConfiguredTopology, owned: Tasks) -> str | None:
    num = configured.num_tasks or {}
    for sid, p in sorted(owned.all()):
        if sid not in num:
            return f"Subtopology {sid} does not exist in the topology."
        if not 0 <= p < num[sid]:
            return (f"Task {p} for subtopology {sid} is invalid. Number of tasks for this "
                    f"subtopology: {num[sid]}")
    return None
