"""A live group rides through a broker restart: members reconnect, the group and
its generation were reloaded from `__consumer_offsets`, consumption continues
from the committed offsets with nothing lost.

"Reloaded" is checked on the broker as soon as it is back: DescribeGroups shows
the group Stable with the same member ids, and a raw Heartbeat on behalf of a
member with the generation from before the restart is accepted (a group that
was not reloaded answers UNKNOWN_MEMBER_ID, a wrong generation
ILLEGAL_GENERATION)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jocko_py.client import Client
from jocko_py.protocol.errors import ErrorCode as E
from tests.groups.harness import (
    JAVA,
    Producer,
    Worker,
    coverage_ok,
    create_topic,
    processed,
    wait_until,
)
from tests.support.broker import BrokerProcess


def _describe(b: BrokerProcess, group: str) -> tuple[str, list[str]]:
    with Client(b.bootstrap) as c:
        d = c.request(15, 5, {"groups": [group], "include_authorized_operations": False})
    return d.groups[0].group_state, sorted(m.member_id for m in d.groups[0].members)


def _heartbeat(b: BrokerProcess, group: str, gen: int, member: str) -> int:
    with Client(b.bootstrap, client_id="test-probe") as c:
        return int(c.request(12, 4, {"group_id": group, "generation_id": gen,
                                     "member_id": member,
                                     "group_instance_id": None}).error_code)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["kafka_python", "confluent", "aiokafka", JAVA])
def test_group_survives_broker_restart(kind: str, gbroker: BrokerProcess,
                                       tmp_path: Path) -> None:
    topic, group = f"live-{kind}", f"gl-{kind}"
    create_topic(gbroker.bootstrap, topic, 4)
    prod = Producer(gbroker.bootstrap, topic, 4)
    workers: list[Worker] = []
    try:
        prod.produce(40)
        a, b = (Worker(kind, gbroker.bootstrap, topic, group, tmp_path).start()
                for _ in range(2))
        workers += [a, b]
        wait_until(lambda: coverage_ok([a, b], 4) and bool(a.assignment())
                   and bool(b.assignment()), 60, "2 members sharing 4 partitions")
        wait_until(lambda: set(processed(workers)) == set(prod.values), 30, "first records")
        state, members = _describe(gbroker, group)
        assert state == "Stable" and len(members) == 2, (state, members)
        gen = next(g for g in range(1, 100)
                   if _heartbeat(gbroker, group, g, members[0]) == E.NONE)
        gbroker.restart()
        # reloaded: same group, members and generation, before anyone rejoined
        assert _describe(gbroker, group) == ("Stable", members)
        assert _heartbeat(gbroker, group, gen, members[0]) == E.NONE
        assert _heartbeat(gbroker, group, gen, members[1]) == E.NONE
        prod.client.close()
        prod.client = Client(gbroker.bootstrap)
        prod.produce(40)
        wait_until(lambda: set(processed(workers)) >= set(prod.values), 60,
                   "records produced after the broker restart")
        assert a.alive() and b.alive()
        # a member whose client took longer than the session timeout to reconnect
        # rejoins; either way both end up sharing the partitions again
        wait_until(lambda: coverage_ok([a, b], 4) and bool(a.assignment())
                   and bool(b.assignment()), 30, "both members to share the partitions")
    except AssertionError as ex:
        diag = "\n".join(w.diag() for w in workers)
        raise AssertionError(f"{ex}\n{diag}\n--- broker:\n{gbroker.log_tail(30)}") from None
    finally:
        for w in workers:
            w.kill()
        prod.close()
