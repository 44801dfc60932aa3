"""StreamsGroupHeartbeat / StreamsGroupDescribe / StreamsGroupTopologyDescriptionUpdate on
the wire against one broker process: missing source and internal topics reported through
the heartbeat status (the broker creates the internal ones), invalid topologies, the
``streams.version`` gate, member-epoch checks on OffsetCommit, and the group replayed
from ``__consumer_offsets`` after a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jocko_py.client import Client
from jocko_py.protocol.errors import ErrorCode as E
from tests.groups.harness import BROKER_OVERRIDES, wait_until
from tests.support.broker import BrokerProcess

TOPOLOGY = {"epoch": 0, "subtopologies": [{
    "subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [],
    "state_changelog_topics": [{"name": "app-store-changelog", "partitions": 0,
                                "replication_factor": 0, "topic_configs": []}],
    "repartition_sink_topics": [], "repartition_source_topics": [],
    "copartition_groups": []}]}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides={
        **BROKER_OVERRIDES, "group.streams.initial.rebalance.delay.ms": "0",
        "group.streams.assignment.interval.ms": "0"})
    b.start()
    try:
        yield b
    finally:
        b.stop()


def coordinator(b: BrokerProcess, group: str) -> Client:
    c = Client(b.bootstrap)
    wait_until(lambda: c.request(10, 3, {"key": group, "key_type": 0}).error_code == 0, 20,
               "a coordinator")
    return c


def heartbeat(c: Client, member: str, epoch: int, topology: dict[str, Any] | None = None,
              owned: list[dict[str, Any]] | None = None, group: str = "app") -> Any:
    body: dict[str, Any] = {
        "group_id": group, "member_id": member, "member_epoch": epoch,
        "endpoint_information_epoch": 0, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
        "topology": topology, "process_id": f"proc-{member}"}
    if owned is not None or epoch == 0:
        body.update(active_tasks=owned or [], standby_tasks=[], warmup_tasks=[])
    return c.request(88, 1, body)


def describe(c: Client, group: str = "app") -> Any:
    return c.request(89, 1, {"group_ids": [group], "include_authorized_operations": False,
                             "include_topology_description": False}).groups[0]


def statuses(r: Any) -> dict[int, str]:
    return {s.status_code: s.status_detail for s in r.status or []}


def tasks(items: Any) -> dict[str, list[int]]:
    return {t.subtopology_id: list(t.partitions) for t in items}


def test_missing_topics_internal_topic_creation_and_describe(broker: BrokerProcess) -> None:
    c = coordinator(broker, "app")
    r = heartbeat(c, "m1", 0, TOPOLOGY)
    assert r.error_code == 0 and r.member_epoch == 1
    assert statuses(r) == {1: "Source topics in are missing."}
    assert r.active_tasks == [] and r.heartbeat_interval_ms == 5000
    d = describe(c)
    assert (d.error_code, d.group_state, d.assignor_name) == (0, "NotReady", "sticky")
    c.create_topic("in", 2, 1)
    r = heartbeat(c, "m1", 1, owned=[])
    # the source topic is there now: the changelog topic is missing, the broker creates it
    assert statuses(r) == {3: "Internal topics are missing: [app-store-changelog]"}
    wait_until(lambda: any(t.name == "app-store-changelog" and len(t.partitions) == 2
                           for t in c.metadata(["app-store-changelog"]).topics), 10,
               "the changelog topic")
    r = heartbeat(c, "m1", r.member_epoch, owned=[])
    assert r.error_code == 0 and not r.status
    assert tasks(r.active_tasks) == {"0": [0, 1]}
    d = describe(c)
    assert (d.group_state, d.group_epoch, d.assignment_epoch) == ("Stable", r.member_epoch,
                                                                  r.member_epoch)
    assert d.topology.epoch == 0 and d.topology.subtopologies[0].source_topics == ["in"]
    [m] = d.members
    assert (m.member_id, m.process_id, m.member_epoch) == ("m1", "proc-m1", r.member_epoch)
    assert tasks(m.assignment.active_tasks) == {"0": [0, 1]}
    assert tasks(m.target_assignment.active_tasks) == {"0": [0, 1]}
    # another kind of group of the same name is refused; describe of a non-streams group
    cg = c.request(68, 1, {"group_id": "app", "member_id": "x", "member_epoch": 0,
                           "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["in"],
                           "topic_partitions": []})
    assert cg.error_code == E.GROUP_ID_NOT_FOUND
    c.request(10, 3, {"key": "plain", "key_type": 0})
    assert describe(c, "plain").error_code == E.GROUP_ID_NOT_FOUND
    # the member commits with its epoch; another epoch is stale
    def commit(epoch: int) -> int:
        res = c.request(8, 9, {"group_id": "app", "generation_id_or_member_epoch": epoch,
                               "member_id": "m1", "group_instance_id": None,
                               "topics": [{"name": "in", "partitions": [{
                                   "partition_index": 0, "committed_offset": 5,
                                   "committed_leader_epoch": -1,
                                   "committed_metadata": ""}]}]})
        return int(res.topics[0].partitions[0].error_code)
    assert commit(r.member_epoch) == 0
    assert commit(r.member_epoch - 1) == E.STALE_MEMBER_EPOCH

    def fetch(epoch: int) -> Any:
        return c.request(9, 9, {"groups": [{
            "group_id": "app", "member_id": "m1", "member_epoch": epoch,
            "topics": [{"name": "in", "partition_indexes": [0]}]}],
            "require_stable": False}).groups[0]
    f = fetch(r.member_epoch)
    assert f.error_code == 0 and f.topics[0].partitions[0].committed_offset == 5
    assert fetch(r.member_epoch + 1).error_code == E.STALE_MEMBER_EPOCH
    # the update of the topology description: the member and the epoch are checked
    up = c.request(93, 0, {"group_id": "app", "member_id": "m1", "topology_epoch": 0,
                           "topology_description": {"subtopologies": [], "global_stores": []}})
    assert up.error_code == 0
    up = c.request(93, 0, {"group_id": "app", "member_id": "nobody", "topology_epoch": 0,
                           "topology_description": {"subtopologies": [], "global_stores": []}})
    assert up.error_code == E.UNKNOWN_MEMBER_ID
    c.close()
    # restart: the group comes back from __consumer_offsets
    broker.stop_gracefully()
    broker.start()
    c = coordinator(broker, "app")
    wait_until(lambda: describe(c).error_code == 0, 20, "the group loaded")
    d2 = describe(c)
    assert (d2.group_epoch, d2.assignment_epoch) == (d.group_epoch, d.assignment_epoch)
    [m2] = d2.members
    assert (m2.member_id, m2.member_epoch, m2.process_id) == ("m1", m.member_epoch, "proc-m1")
    assert tasks(m2.assignment.active_tasks) == {"0": [0, 1]}
    r = heartbeat(c, "m1", m2.member_epoch, owned=[{"subtopology_id": "0",
                                                    "partitions": [0, 1]}])
    assert r.error_code == 0 and r.member_epoch == m2.member_epoch
    # leaving empties the group; an empty group can be deleted (records tombstoned)
    r = heartbeat(c, "m1", -1)
    assert (r.error_code, r.member_epoch) == (0, -1)
    assert describe(c).group_state == "Empty"
    dg = c.request(42, 2, {"groups_names": ["app"]})
    assert dg.results[0].error_code == 0
    assert describe(c).error_code == E.GROUP_ID_NOT_FOUND
    c.close()
    broker.stop_gracefully()
    broker.start()
    c = coordinator(broker, "app")
    assert describe(c).error_code == E.GROUP_ID_NOT_FOUND
    c.close()


def test_invalid_topologies_and_requests(broker: BrokerProcess) -> None:
    c = coordinator(broker, "app")
    bad = dict(TOPOLOGY, subtopologies=[dict(TOPOLOGY["subtopologies"][0],  # type: ignore[call-overload]
                                             source_topics=["__consumer_offsets"])])
    r = heartbeat(c, "m1", 0, bad)
    assert r.error_code == E.STREAMS_INVALID_TOPOLOGY
    assert r.error_message == ("Use of Kafka internal topics __consumer_offsets in a Kafka "
                               "Streams topology is prohibited.")
    sized = dict(TOPOLOGY, subtopologies=[dict(  # type: ignore[call-overload]
        TOPOLOGY["subtopologies"][0], state_changelog_topics=[{  # type: ignore[index]
            "name": "c", "partitions": 3, "replication_factor": 0, "topic_configs": []}])])
    r = heartbeat(c, "m1", 0, sized)
    assert r.error_code == E.STREAMS_INVALID_TOPOLOGY
    r = heartbeat(c, "m1", 0, None)
    assert (r.error_code, r.error_message) == (
        E.INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
    r = heartbeat(c, "", 0, TOPOLOGY)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "MemberId can't be empty.")
    r = heartbeat(c, "m1", 3, group="nope")
    assert r.error_code == E.GROUP_ID_NOT_FOUND
    c.close()


def test_streams_version_zero_turns_the_protocol_off(broker: BrokerProcess) -> None:
    c = coordinator(broker, "app")

    def set_level(level: int) -> None:
        r = c.request(57, 1, {"timeout_ms": 10000, "validate_only": False, "feature_updates": [
            {"feature": "streams.version", "max_version_level": level,
             "upgrade_type": 1 if level else 2}]})
        assert r.error_code == 0, r

    set_level(0)
    av = c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert "streams.version" not in {f.name for f in av.finalized_features}
    wait_until(lambda: heartbeat(c, "m1", 0, TOPOLOGY).error_code == E.UNSUPPORTED_VERSION,
               10, "the protocol off")
    set_level(1)
    wait_until(lambda: heartbeat(c, "m1", 0, TOPOLOGY).error_code == 0, 10, "the protocol on")
    c.close()
