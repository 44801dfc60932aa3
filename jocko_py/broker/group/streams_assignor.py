"""The streams group's server-side task assignor (KIP-1071): Kafka's ``sticky`` assignor.

Pure: given the members (their process and the tasks they hold now), the number of tasks
of every subtopology and the number of standby replicas, it returns each member's
target: active, standby and warm-up tasks. A task is (subtopology id, partition).

Rules (those of Kafka's StickyTaskAssignor):
- Active tasks. Every task is assigned to exactly one member. Each member may take at
  most ``ceil(tasks / members)``; a task stays with the member that holds it now while
  that member is under its quota (stickiness, tasks taken by partition then
  subtopology so a member keeps the same partitions of every subtopology), then goes to
  a member that holds it as a standby (its state is there), else (by subtopology then
  partition: ranges) to the least loaded member, the load of its process (tasks per
  member) first, then its own.
- Standby tasks. ``num_standby`` copies of every task, each on a process that holds
  neither the task's active copy nor another copy of it; a copy stays where it is when
  it can, else goes to the least loaded member. When too few processes exist, the
  missing copies are left out (Kafka logs it; so do we, through the caller).
- Warm-up tasks are not produced, as Kafka 4.4.0 produces none: its
  ``AssignmentRefiner.refine`` (the step meant to turn lagging actives into warm-ups,
  ``group.streams.num.warmup.replicas``) returns the target unchanged. Nor does its
  sticky assignor read ``group.streams.rack.aware.assignment.tags``: standbys are not
  rack-aware there either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Task = tuple[str, int]


@dataclass(frozen=True, slots=True)
class AssignorMember:
    process_id: str
    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()


@dataclass(slots=True)
class MemberTarget:
    active: set[Task] = field(default_factory=set)
    standby: set[Task] = field(default_factory=set)
    warmup: set[Task] = field(default_factory=set)


def all_tasks(num_tasks: Mapping[str, int]) -> list[Task]:
    return [(sid, p) for sid in sorted(num_tasks) for p in range(num_tasks[sid])]


def assign(members: Mapping[str, AssignorMember], num_tasks: Mapping[str, int],
           num_standby: int) -> tuple[dict[str, MemberTarget], int]:
    """Targets by member id, and the number of standby copies that could not be placed."""
    out = {mid: MemberTarget() for mid in members}
    if not members:
        return out, 0
    tasks = all_tasks(num_tasks)
    order = sorted(members)
    by_process: dict[str, list[str]] = {}
    for mid in order:
        by_process.setdefault(members[mid].process_id, []).append(mid)

    def process_load(pid: str) -> float:
        mids = by_process[pid]
        return sum(len(out[m].active) + len(out[m].standby) for m in mids) / len(mids)

    # -- active tasks ----------------------------------------------------------------------
    quota = -(-len(tasks) // len(members))
    prev_owner: dict[Task, str] = {}
    for mid in order:
        for t in members[mid].active:
            prev_owner.setdefault(t, mid)
    # stickiness first, by partition then subtopology (a member keeps the same partitions
    # of every subtopology together), as Kafka's assignor does
    by_partition = sorted(tasks, key=lambda t: (t[1], t[0]))
    unassigned: list[Task] = []
    for t in by_partition:
        owner = prev_owner.get(t)
        if owner is not None and len(out[owner].active) < quota:
            out[owner].active.add(t)
        else:
            unassigned.append(t)
    # then a member that held the task as a standby (its state is there)
    rest: list[Task] = []
    for t in unassigned:
        had = [m for m in order if (t in members[m].standby or t in members[m].warmup)
               and len(out[m].active) < quota]
        if had:
            out[min(had, key=lambda m: (len(out[m].active) + len(out[m].standby), m))
                ].active.add(t)
        else:
            rest.append(t)
    # the rest by subtopology then partition (ranges), to the least loaded process
    for t in sorted(rest):
        under = [m for m in order if len(out[m].active) < quota]
        best = min(under, key=lambda m: (process_load(members[m].process_id),
                                         len(out[m].active), m))
        out[best].active.add(t)

    # -- standby tasks ---------------------------------------------------------------------
    missing = 0
    if num_standby > 0:
        prev_standby: dict[Task, list[str]] = {}
        for mid in order:
            for t in members[mid].standby | members[mid].warmup:
                prev_standby.setdefault(t, []).append(mid)
        active_process = {t: members[m].process_id for m in order for t in out[m].active}
        for t in tasks:
            used = {active_process[t]}
            for _ in range(num_standby):
                candidates = [m for m in order if members[m].process_id not in used]
                if not candidates:
                    missing += 1
                    continue
                sticky = [m for m in prev_standby.get(t, []) if m in candidates]
                pool = sticky or candidates
                best = min(pool, key=lambda m: (process_load(members[m].process_id),
                                                len(out[m].active) + len(out[m].standby), m))
                out[best].standby.add(t)
                used.add(members[best].process_id)
    return out, missing
