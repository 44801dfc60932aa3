"""KIP-848 consumer groups (`group.protocol=consumer`) with the real Java 4.x consumer.

Three kafka-clients 4.4.0 consumers on the consumer protocol share a 6-partition topic
through the broker's server-side assignor; a clean leave and a SIGKILL are taken over
(the latter after `group.consumer.session.timeout.ms`); commits carry member epochs;
a restarted member resumes from the committed offsets; ConsumerGroupDescribe and
ListGroups show the group; a classic member joins and leaves the consumer group. A
regular-expression subscription picks up a topic created later; the group survives a
broker restart; a classic group in use is upgraded in place and back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jocko_py.client import Client
from tests.clients.test_go_clients import Member as GoMember
from tests.clients.test_go_clients import go_args, gokafka  # noqa: F401
from tests.groups.harness import (
    BROKER_OVERRIDES,
    Producer,
    Worker,
    committed_offsets,
    coverage_ok,
    create_topic,
    end_offsets,
    java_available,
    processed,
    wait_until,
)
from tests.groups.test_cli import cli
from tests.support.broker import REPO, BrokerProcess
from tests.support.prereq import missing

JAVA_JARS_4 = REPO / ".cache" / "java-test-jars-4"
SESSION_MS = 6000
OVERRIDES = {
    **BROKER_OVERRIDES,
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.heartbeat.interval.ms": "500",
}


@pytest.fixture
def cbroker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=dict(OVERRIDES))
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _member(b: BrokerProcess, topic: str, group: str, work: Path, *extra: str,
            kind: str = "java") -> Worker:
    return Worker(kind, b.bootstrap, topic, group, work, java_jars=JAVA_JARS_4,
                  extra=["--protocol", "consumer", *extra])


def _describe(b: BrokerProcess, group: str) -> object:
    with Client(b.bootstrap) as c:
        r = c.request(69, 0, {"group_ids": [group], "include_authorized_operations": False})
    return r.groups[0]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", ["java", "confluent"])
def test_consumer_protocol_group(kind: str, cbroker: BrokerProcess, tmp_path: Path) -> None:
    """Java kafka-clients 4.4.0 and librdkafka (confluent-kafka 2.16) on KIP-848."""
    if kind == "java" and (not java_available()
                           or not any(JAVA_JARS_4.glob("kafka-clients-4*.jar"))):
        missing("java or kafka-clients 4.x missing (make -C tests/java jars)")
    topic, group, parts = f"kip848-{kind}", f"g-kip848-{kind}", 6
    work = tmp_path / "work"
    work.mkdir()
    create_topic(cbroker.bootstrap, topic, parts)
    prod = Producer(cbroker.bootstrap, topic, parts)
    workers: list[Worker] = []

    def diag() -> str:
        return "\n".join(w.diag() for w in workers) + "\n--- broker:\n" + \
            cbroker.log_tail(40)
    try:
        prod.produce(120)
        a, b, c = (_member(cbroker, topic, group, work, kind=kind).start()
                   for _ in range(3))
        workers += [a, b, c]
        wait_until(lambda: coverage_ok([a, b, c], parts) and all(
            w.assignment() for w in (a, b, c)), 90, "3 consumers to share 6 partitions")
        wait_until(lambda: set(processed(workers)) == set(prod.values), 30, "120 records")
        counts = processed(workers)
        assert all(n == 1 for n in counts.values()), counts.most_common(3)
        # the members own their partitions; the group is Stable once each has said so in
        # a heartbeat (a loaded machine may not have sent it yet)
        wait_until(lambda: _describe(cbroker, group).group_state == "Stable",  # type: ignore[attr-defined]
                   30, "the group Stable")
        d = _describe(cbroker, group)
        assert d.error_code == 0 and d.group_state == "Stable", d  # type: ignore[attr-defined]
        assert len(d.members) == 3 and d.assignor_name == "uniform", d  # type: ignore[attr-defined]
        with Client(cbroker.bootstrap) as cl:
            lg = cl.request(16, 5, {"states_filter": [], "types_filter": ["consumer"]})
        assert [(g.group_id, g.group_type) for g in lg.groups] == [(group, "consumer")]
        out = cli(cbroker, "describe", group)
        assert out.returncode == 0, out.stderr
        assert f"Group {group}: consumer protocol, state Stable" in out.stdout, out.stdout
        owned = [ln.split()[1:3] for ln in out.stdout.splitlines()[2:]]
        assert sorted(owned) == sorted([topic, str(p)] for p in range(parts)), out.stdout
        assert all(ln.split()[6] != "-" for ln in out.stdout.splitlines()[2:]), out.stdout

        # a classic member joins the consumer group (online migration) and gets a share;
        # it leaves cleanly again
        classic = Worker("kafka_python", cbroker.bootstrap, topic, group, work).start()
        workers.append(classic)
        wait_until(lambda: coverage_ok([a, b, c, classic], parts)
                   and bool(classic.assignment()), 60, "a classic member in the group")
        assert classic.stop_cleanly(), classic.diag()
        wait_until(lambda: coverage_ok([a, b, c], parts), 30, "its partitions back")

        # a clean leave: the others take over without waiting for a timeout
        t0 = time.monotonic()
        assert a.stop_cleanly(), diag()
        wait_until(lambda: coverage_ok([b, c], parts), SESSION_MS / 1000, "takeover after "
                   "a clean leave")
        leave_s = time.monotonic() - t0
        prod.produce(120)
        wait_until(lambda: set(processed(workers)) == set(prod.values), 30,
                   "records after the leave")

        # a crash: c takes over once b's session times out on the broker
        t0 = time.monotonic()
        b.kill()
        prod.produce(120)
        wait_until(lambda: coverage_ok([c], parts), SESSION_MS / 1000 + 15,
                   "c to take over after b was killed", interval=0.05)
        kill_s = time.monotonic() - t0
        wait_until(lambda: set(processed(workers)) >= set(prod.values), 30,
                   "every record after the crash")
        assert c.stop_cleanly(), diag()
        assert committed_offsets(cbroker.bootstrap, group, topic, parts) == \
            end_offsets(cbroker.bootstrap, topic, parts)

        # a new member resumes from the committed offsets: nothing is read twice
        prod.produce(60)
        d2 = _member(cbroker, topic, group, work, kind=kind).start()
        workers.append(d2)
        wait_until(lambda: len(d2.records()) >= 60, 60, "the new member's records", )
        assert {v for _, _, v in d2.records()} == set(prod.values[-60:]), diag()
        assert d2.stop_cleanly(), diag()
        print(f"{kind} consumer protocol: clean leave takeover {leave_s:.1f}s, "
              f"crash takeover {kill_s:.1f}s")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diag()}") from None
    finally:
        for w in workers:
            w.kill()
        prod.close()


@pytest.mark.timeout(180)
def test_java_consumer_protocol_regex_picks_up_new_topic(cbroker: BrokerProcess,
                                                         tmp_path: Path) -> None:
    if not java_available() or not any(JAVA_JARS_4.glob("kafka-clients-4*.jar")):
        missing("java or kafka-clients 4.x missing (make -C tests/java jars)")
    work = tmp_path / "work"
    work.mkdir()
    create_topic(cbroker.bootstrap, "rx-a", 2)
    w = _member(cbroker, "unused", "g-rx", work, "--topic-pattern", "rx-.*",
                "--remote-assignor", "range").start()
    try:
        wait_until(lambda: w.assignment() == {0, 1}, 90, "rx-a's partitions")
        create_topic(cbroker.bootstrap, "rx-b", 3)
        pa = Producer(cbroker.bootstrap, "rx-b", 3)
        pa.produce(30)
        pa.close()
        wait_until(lambda: {v for _, _, v in w.records()} >= set(pa.values), 90,
                   "records of rx-b, created after the member subscribed")
        d = _describe(cbroker, "g-rx")
        assert d.assignor_name == "range", d  # type: ignore[attr-defined]
    except AssertionError as e:
        raise AssertionError(f"{e}\n{w.diag()}\n{cbroker.log_tail(30)}") from None
    finally:
        w.kill()


@pytest.mark.timeout(180)
def test_consumer_group_survives_a_broker_restart(cbroker: BrokerProcess,
                                                  tmp_path: Path) -> None:
    """The group (epochs, members, assignments) is stored in __consumer_offsets with
    Kafka's record types and loaded back: after a restart the members carry on at their
    epochs instead of joining again, and keep consuming."""
    work = tmp_path / "work"
    work.mkdir()
    topic, group, parts = "kip848-restart", "g-kip848-restart", 4
    create_topic(cbroker.bootstrap, topic, parts)
    prod = Producer(cbroker.bootstrap, topic, parts)
    a, b = (_member(cbroker, topic, group, work, kind="confluent").start() for _ in range(2))
    try:
        prod.produce(40)
        wait_until(lambda: coverage_ok([a, b], parts) and bool(a.assignment())
                   and bool(b.assignment()), 60, "2 members share 4 partitions")
        wait_until(lambda: set(processed([a, b])) == set(prod.values), 30, "40 records")
        wait_until(lambda: _describe(cbroker, group).group_state == "Stable",  # type: ignore[attr-defined]
                   30, "the group Stable")
        before = _describe(cbroker, group)
        assert before.group_state == "Stable", before  # type: ignore[attr-defined]
        members = {m.member_id: m.member_epoch for m in before.members}  # type: ignore[attr-defined]
        cbroker.stop()
        cbroker.start()
        after = _describe(cbroker, group)
        assert after.error_code == 0, after  # type: ignore[attr-defined]
        assert after.group_epoch == before.group_epoch, (before, after)  # type: ignore[attr-defined]
        assert {m.member_id: m.member_epoch for m in after.members} == members  # type: ignore[attr-defined]
        prod.close()
        prod = Producer(cbroker.bootstrap, topic, parts)
        prod.produce(40)
        wait_until(lambda: set(processed([a, b])) >= set(prod.values), 60,
                   "records produced after the restart")
        final = _describe(cbroker, group)
        # nobody had to join again: same members, no new group epoch
        assert {m.member_id for m in final.members} == set(members), final  # type: ignore[attr-defined]
        assert final.group_epoch == before.group_epoch, final  # type: ignore[attr-defined]
    except AssertionError as e:
        raise AssertionError(f"{e}\n{a.diag()}\n{b.diag()}\n{cbroker.log_tail(40)}") from None
    finally:
        a.kill()
        b.kill()
        prod.close()


@pytest.mark.timeout(240)
def test_classic_group_upgraded_in_place_and_back(cbroker: BrokerProcess,
                                                  tmp_path: Path) -> None:
    """Online migration (group.consumer.migration.policy=bidirectional, Kafka 4's
    default): a classic group in use (kafka-python and Java classic members) is joined by a
    Java 4.4.0 member on the consumer protocol; the group becomes a consumer group in place,
    the classic members keep consuming through JoinGroup/SyncGroup/Heartbeat and share the
    partitions with the new member; when it leaves, the group goes back to classic."""
    if not java_available() or not any(JAVA_JARS_4.glob("kafka-clients-4*.jar")):
        missing("java or kafka-clients 4.x missing (make -C tests/java jars)")
    work = tmp_path / "work"
    work.mkdir()
    topic, group, parts = "migrate", "g-migrate", 6
    create_topic(cbroker.bootstrap, topic, parts)
    prod = Producer(cbroker.bootstrap, topic, parts)
    workers: list[Worker] = []

    def kinds() -> list[tuple[str, str]]:
        with Client(cbroker.bootstrap) as cl:
            lg = cl.request(16, 5, {"states_filter": [], "types_filter": []})
        return [(g.group_id, g.group_type) for g in lg.groups]
    try:
        a = Worker("kafka_python", cbroker.bootstrap, topic, group, work).start()
        b = Worker("java", cbroker.bootstrap, topic, group, work).start()
        workers += [a, b]
        prod.produce(60)
        wait_until(lambda: coverage_ok([a, b], parts) and bool(a.assignment())
                   and bool(b.assignment()), 90, "2 classic members share 6 partitions")
        wait_until(lambda: set(processed(workers)) == set(prod.values), 30, "60 records")
        assert kinds() == [(group, "classic")]

        c = _member(cbroker, topic, group, work).start()
        workers.append(c)
        wait_until(lambda: kinds() == [(group, "consumer")], 60, "the group upgraded")
        wait_until(lambda: coverage_ok([a, b, c], parts) and all(
            w.assignment() for w in (a, b, c)), 90,
            "2 classic members and 1 consumer-protocol member share 6 partitions")
        d = _describe(cbroker, group)
        assert d.error_code == 0 and len(d.members) == 3, d  # type: ignore[attr-defined]
        prod.produce(60)
        wait_until(lambda: set(processed(workers)) >= set(prod.values), 30,
                   "records after the upgrade")

        assert c.stop_cleanly(), c.diag()
        wait_until(lambda: kinds() == [(group, "classic")], 30, "the group downgraded")
        wait_until(lambda: coverage_ok([a, b], parts), 60, "the classic members own all")
        prod.produce(60)
        wait_until(lambda: set(processed(workers)) >= set(prod.values), 30,
                   "records after the downgrade")
        for w in (a, b):
            assert w.stop_cleanly(), w.diag()
        assert committed_offsets(cbroker.bootstrap, group, topic, parts) == \
            end_offsets(cbroker.bootstrap, topic, parts)
        log = cbroker.log_tail(400)
        assert "upgraded in place to the consumer protocol: 2 classic member(s)" in log
        assert "downgraded to a classic group: 2 member(s)" in log
    except AssertionError as e:
        raise AssertionError(f"{e}\n" + "\n".join(w.diag() for w in workers) + "\n"
                             + cbroker.log_tail(40)) from None
    finally:
        for w in workers:
            w.kill()
        prod.close()


@pytest.mark.timeout(180)
def test_franz_go_server_side_balancer(cbroker: BrokerProcess, gokafka: Path,  # noqa: F811
                                       tmp_path: Path) -> None:
    """franz-go 1.22 with kgo.ServerSideBalancer (KIP-848, ConsumerGroupHeartbeat v1): two
    members share 4 partitions through the broker's assignor, every record is processed
    and committed, and the group is a consumer-protocol group."""
    topic, group, parts = "kip848-franz", "g-kip848-franz", 4
    create_topic(cbroker.bootstrap, topic, parts)
    members = []
    try:
        for i in range(2):
            cmd = go_args(gokafka, "franz", "group", cbroker.bootstrap, topic, "-group", group,
                          "-server-side")
            cmd[cmd.index("-timeout") + 1] = "150s"
            members.append(GoMember("franz", cmd, tmp_path / f"franz-{i}.stderr"))

        def state() -> str:
            return "\n".join(m.describe(f"member {i}") for i, m in enumerate(members)) + \
                "\n" + cbroker.log_tail(30)

        def two_members_share() -> bool:
            d = _describe(cbroker, group)
            owned = [p for m in getattr(d, "members", []) for tp in m.assignment.topic_partitions
                     for p in tp.partitions]
            return d.error_code == 0 and len(d.members) == 2 and sorted(owned) == \
                list(range(parts)) and all(m.assignment.topic_partitions for m in d.members)
        wait_until(two_members_share, 60, "two franz-go members sharing 4 partitions")
        prod = Producer(cbroker.bootstrap, topic, parts)
        prod.produce(200)
        prod.close()
        wait_until(lambda: {r.value for m in members for r in m.records()}
                   >= {v.encode() for v in prod.values}, 60, "every record processed")
        assert all(m.records() for m in members), state()
        for m in members:
            assert m.terminate() == 0 and m.of_type("done"), state()
        assert committed_offsets(cbroker.bootstrap, group, topic, parts) == \
            end_offsets(cbroker.bootstrap, topic, parts), state()
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.proc.kill()
