"""Static membership and cooperative (incremental) rebalancing with real clients.

Static: three members with `group.instance.id`; one is killed and restarted
with the same instance id within its session timeout: it gets its partitions
back and the other two see no rebalance. "No rebalance" is checked over the
whole window, until well after the killed incarnation's session timeout would
have expired: the group's generation never changes (a raw Heartbeat with the
generation taken before the kill, on behalf of another member, keeps answering
NONE, never REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION), the other members'
assignment callbacks never fire again and the broker logs no rebalance.

Cooperative-sticky: two members own the six partitions; a third joins; the
first two never give up the partitions they keep (their assignment never goes
empty or loses a kept partition), and all three end up with two partitions.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jocko_py.client import Client
from jocko_py.protocol.errors import ErrorCode as E
from tests.groups.harness import (
    JAVA,
    SESSION_MS,
    Producer,
    Worker,
    coverage_ok,
    create_topic,
    processed,
    wait_until,
)
from tests.support.broker import BrokerProcess


def _members(b: BrokerProcess, group: str) -> tuple[str, dict[str, str]]:
    """(state, instance id -> member id) from DescribeGroups."""
    with Client(b.bootstrap) as c:
        d = c.request(15, 5, {"groups": [group], "include_authorized_operations": False})
    g = d.groups[0]
    return g.group_state, {m.group_instance_id: m.member_id for m in g.members}


def _heartbeat(b: BrokerProcess, group: str, gen: int, member: str, instance: str) -> int:
    with Client(b.bootstrap, client_id="test-probe") as c:
        return int(c.request(12, 4, {"group_id": group, "generation_id": gen,
                                     "member_id": member,
                                     "group_instance_id": instance}).error_code)


def _generation(b: BrokerProcess, group: str, member: str, instance: str) -> int:
    """The group's current generation: the one a member's heartbeat is accepted with."""
    for gen in range(1, 100):
        if _heartbeat(b, group, gen, member, instance) == E.NONE:
            return gen
    raise AssertionError(f"no generation accepted for {member} in {group}")


def _a_lines(w: Worker) -> list[set[int]]:
    return [{int(p) for p in line[1:].strip().split(",") if p}
            for line in w.lines() if line.startswith("A")]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("kind", ["confluent", "kafka_python", "aiokafka", JAVA])
def test_static_member_restart_keeps_partitions(kind: str, gbroker: BrokerProcess,
                                               tmp_path: Path) -> None:
    topic, group = f"static-{kind}", f"gs-{kind}"
    create_topic(gbroker.bootstrap, topic, 6)
    prod = Producer(gbroker.bootstrap, topic, 6)
    workers: list[Worker] = []
    try:
        prod.produce(60)
        s1, s2, s3 = (Worker(kind, gbroker.bootstrap, topic, group, tmp_path,
                             instance_id=f"inst-{i}", name=f"{kind}-s{i}").start()
                      for i in (1, 2, 3))
        workers += [s1, s2, s3]
        wait_until(lambda: coverage_ok([s1, s2, s3], 6)
                   and all(w.assignment() for w in (s1, s2, s3)), 60, "3 static members")
        wait_until(lambda: set(processed(workers)) == set(prod.values), 30, "records")
        time.sleep(1.0)
        before = {w.name: len(_a_lines(w)) for w in (s1, s3)}
        owned = s2.assignment()
        assert owned
        state, ids = _members(gbroker, group)
        assert state == "Stable" and set(ids) == {"inst-1", "inst-2", "inst-3"}, (state, ids)
        gen = _generation(gbroker, group, ids["inst-1"], "inst-1")
        rebalances_before = gbroker.log_tail(2000).count(f"[group={group}] preparing to rebalance")
        t0 = time.monotonic()
        s2.kill()
        s2b = Worker(kind, gbroker.bootstrap, topic, group, tmp_path, instance_id="inst-2",
                     name=f"{kind}-s2b").start()
        workers.append(s2b)
        wait_until(lambda: s2b.assignment() == owned, SESSION_MS / 1000,
                   "the restarted static member to get its partitions back")
        took = time.monotonic() - t0
        prod.produce(60)
        wait_until(lambda: set(processed(workers)) >= set(prod.values), 30, "new records")
        # keep watching until the killed incarnation's session timeout (counted from
        # its last heartbeat, before t0) is 2 s past: a coordinator that still expired
        # the old member would rebalance everyone by then
        horizon = t0 + SESSION_MS / 1000 + 2.0
        while True:
            for inst in ("inst-1", "inst-3"):
                hb = _heartbeat(gbroker, group, gen, ids[inst], inst)
                assert hb == E.NONE, \
                    f"heartbeat of {inst} with generation {gen} got {E(hb).name} " \
                    f"{time.monotonic() - t0:.1f}s after the kill: the group rebalanced"
            if time.monotonic() >= horizon:
                break
            time.sleep(0.5)
        after = {w.name: len(_a_lines(w)) for w in (s1, s3)}
        assert after == before, "the other static members were rebalanced"
        state, ids_after = _members(gbroker, group)
        assert state == "Stable", state
        assert {i: ids_after[i] for i in ("inst-1", "inst-3")} == \
            {i: ids[i] for i in ("inst-1", "inst-3")}
        assert ids_after["inst-2"] != ids["inst-2"], "the restart did not replace the member"
        assert gbroker.log_tail(2000).count(f"[group={group}] preparing to rebalance") == \
            rebalances_before, "the broker logged a rebalance after the kill"
        assert (s1.assignment() or set()) | (s3.assignment() or set()) | owned == set(range(6))
        print(f"[{kind}] static member back with its partitions in {took:.1f}s")
    except AssertionError as ex:
        diag = "\n".join(w.diag() for w in workers)
        raise AssertionError(f"{ex}\n{diag}\n--- broker:\n{gbroker.log_tail(30)}") from None
    finally:
        for w in workers:
            w.kill()
        prod.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["confluent", "kafka_python", JAVA])
def test_cooperative_sticky_rebalances_incrementally(kind: str, gbroker: BrokerProcess,
                                                    tmp_path: Path) -> None:
    topic, group = f"coop-{kind}", f"gc-{kind}"
    create_topic(gbroker.bootstrap, topic, 6)
    workers: list[Worker] = []
    try:
        a, b = (Worker(kind, gbroker.bootstrap, topic, group, tmp_path,
                       assignor="cooperative").start() for _ in range(2))
        workers += [a, b]
        wait_until(lambda: coverage_ok([a, b], 6) and len(a.assignment() or ()) == 3,
                   60, "2 cooperative members with 3 partitions each")
        first = {w.name: len(_a_lines(w)) for w in (a, b)}
        c = Worker(kind, gbroker.bootstrap, topic, group, tmp_path,
                   assignor="cooperative").start()
        workers.append(c)
        wait_until(lambda: coverage_ok([a, b, c], 6)
                   and all(len(w.assignment() or ()) == 2 for w in (a, b, c)),
                   60, "3 cooperative members with 2 partitions each")
        for w in (a, b):
            history = _a_lines(w)[first[w.name] - 1:]
            final = history[-1]
            assert all(final <= h for h in history), \
                f"{w.name} lost a partition it kept: {history}"
            assert all(h for h in history), f"{w.name} was fully revoked: {history}"
    except AssertionError as ex:
        diag = "\n".join(w.diag() for w in workers)
        raise AssertionError(f"{ex}\n{diag}\n--- broker:\n{gbroker.log_tail(30)}") from None
    finally:
        for w in workers:
            w.kill()
