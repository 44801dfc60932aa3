"""The share coordinator of real broker processes, reached as a broker reaches it: the
RPC persister (broker/share/rpc_persister.py) over an inter-broker channel that proves
the cluster secret (read from the broker's metadata log, as only a broker can).

A plain client is refused the state RPCs 83-87 and FindCoordinator key type 2
(CLUSTER_AUTHORIZATION_FAILED, nothing written); the state written survives a broker
restart; on three brokers it moves with the leadership of its `__share_group_state`
partition (the leader is stopped: the persister finds the new one and reads the same
state); the offsets admin APIs (90-92) through the broker's own persister, before and
after a restart."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from jocko_py.broker.inter_broker import BrokerChannel, ClientSecurity
from jocko_py.broker.security.cluster_auth import derive_key
from jocko_py.broker.share.coordinator import partition_for
from jocko_py.broker.share.persister import DeliveryState as D
from jocko_py.broker.share.persister import SharePartitionKey, StateBatch
from jocko_py.broker.share.rpc_persister import RpcPersister
from jocko_py.client import Client
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode as E
from tests.security.raw import cluster_secret
from tests.support.broker import BrokerProcess
from tests.support.cluster import running_cluster

pytestmark = pytest.mark.timeout(120)

STATE_TOPIC = "__share_group_state"


def _security(broker_id: int, data_dir: Path) -> ClientSecurity:
    key = derive_key(cluster_secret(data_dir))
    return ClientSecurity(cluster_broker_id=broker_id, cluster_key=lambda: key)


def persister_for(addrs: list[tuple[str, int]], security: ClientSecurity) -> RpcPersister:
    """A persister that finds coordinators as any broker's client would: FindCoordinator
    (v6, key type 2) to whichever of ``addrs`` answers."""

    async def locate(key: str) -> tuple[E, tuple[str, int] | None]:
        for host, port in addrs:
            ch = BrokerChannel(host, port, "test-locate", security=security)
            try:
                r = await ch.request(10, 6, {"key_type": 2, "coordinator_keys": [key]}, 5)
            except (ConnectionError, TimeoutError, OSError):
                continue
            finally:
                await ch.close()
            c = r.coordinators[0]
            if c.error_code:
                return E.of(c.error_code), None
            return E.NONE, (c.host, c.port)
        return E.COORDINATOR_NOT_AVAILABLE, None

    return RpcPersister(locate, security, "test-persister", deadline_ms=30000,
                        request_timeout_ms=5000)


def _topic(c: Client, name: str, partitions: int = 2, rf: int = 1) -> uuid.UUID:
    c.create_topic(name, partitions, rf)
    md = c.metadata([name])
    return uuid.UUID(str(md.topics[0].topic_id))


BATCHES = (StateBatch(5, 9, D.ACKNOWLEDGED, 1), StateBatch(10, 10, D.ARCHIVED, 5),
           StateBatch(11, 12, D.AVAILABLE, 2))


async def _write_state(p: RpcPersister, key: SharePartitionKey) -> None:
    assert await p.initialize(key, 1, 5) == E.NONE
    r = await p.read(key, 3)
    assert (r.error, r.state_epoch, r.start_offset, r.batches) == (E.NONE, 1, 5, ())
    assert await p.write(key, 1, 3, 5, BATCHES[:2], 6) == E.NONE
    assert await p.write(key, 1, 3, -1, BATCHES[2:]) == E.NONE


async def _check_state(p: RpcPersister, key: SharePartitionKey, leader_epoch: int) -> None:
    r = await p.read(key, leader_epoch)
    assert (r.error, r.state_epoch, r.start_offset, r.batches) == (E.NONE, 1, 5, BATCHES)
    s = await p.read_summary(key, leader_epoch)
    assert (s.error, s.state_epoch, s.start_offset, s.leader_epoch) == \
        (E.NONE, 1, 5, leader_epoch)


def _refused(c: Client, tid: uuid.UUID) -> None:
    part = {"partition": 0}
    bodies: dict[int, tuple[int, dict[str, Any]]] = {
        83: (0, {"state_epoch": 9, "start_offset": 0}),
        84: (0, {"leader_epoch": 99}),
        85: (1, {"state_epoch": 9, "leader_epoch": 99, "start_offset": 0,
                 "delivery_complete_count": -1, "state_batches": []}),
        86: (0, {}),
        87: (1, {"leader_epoch": 99}),
    }
    for api_key, (version, extra) in bodies.items():
        r = c.request(api_key, version, {"group_id": "g", "topics": [
            {"topic_id": tid, "partitions": [part | extra]}]})
        assert r.results[0].partitions[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED, \
            api_key
    r = c.request(10, 6, {"key_type": 2, "coordinator_keys": [f"g:{tid}:0"]})
    assert r.coordinators[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED


def test_state_rpcs_and_offsets_admin_on_one_broker_across_a_restart(tmp_path: Path
                                                                     ) -> None:
    """Clients refused the state RPCs; a broker's persister initializing, reading,
    writing (fenced when stale) and deleting state; the offsets admin APIs; all of it
    read back after a restart."""
    b = BrokerProcess(tmp_path / "b", overrides={
        "share.coordinator.state.topic.num.partitions": "3",
        "offsets.topic.num.partitions": "2"}).start()
    try:
        with Client(b.bootstrap, timeout=10) as c:
            tid = _topic(c, "orders")
            _refused(c, tid)
            # a client's attempts wrote nothing (and created no state topic)
            assert not [t for t in c.metadata([STATE_TOPIC]).topics if not t.error_code]
        key = SharePartitionKey("g", tid, 1)
        addr = [("127.0.0.1", b.port)]

        async def before() -> None:
            p = persister_for(addr, _security(b.broker_id, b.data_dir))
            try:
                await _write_state(p, key)
                await _check_state(p, key, 3)
                # a stale share-partition leader is fenced; reads of unknown state are
                # the contract's UNKNOWN_TOPIC_OR_PARTITION
                assert await p.write(key, 1, 2, 5, ()) == E.FENCED_LEADER_EPOCH
                assert await p.write(key, 0, 3, 5, ()) == E.FENCED_STATE_EPOCH
                other = SharePartitionKey("g", tid, 0)
                assert (await p.read(other, 0)).error == E.UNKNOWN_TOPIC_OR_PARTITION
                # no group id: no answer to retry
                assert await p.initialize(SharePartitionKey("", tid, 0), 0, 0) \
                    == E.INVALID_REQUEST
                # a broker asking for the coordinator of a malformed key
                ch = BrokerChannel("127.0.0.1", b.port, "t",
                                   security=_security(b.broker_id, b.data_dir))
                try:
                    r = await ch.request(10, 6, {"key_type": 2, "coordinator_keys": [
                        "g:nope:0", f"g:{tid}:1", key.coordinator_key()]}, 5)
                finally:
                    await ch.close()
                # Python's str(uuid) is not Kafka's Uuid form: malformed too
                assert [x.error_code for x in r.coordinators] == \
                    [E.INVALID_REQUEST, E.INVALID_REQUEST, E.NONE]
            finally:
                await p.close()

        asyncio.run(before())
        with Client(b.bootstrap, timeout=10) as c:
            md = c.metadata([STATE_TOPIC]).topics[0]
            assert md.is_internal and len(md.partitions) == 3
            # the state went to the partition of Kafka's key ("g:<base64url id>:1"),
            # Utils.abs(hashCode) % 3, and only there
            ends = [c.list_offset(STATE_TOPIC, i, -1)[0] for i in range(3)]
            idx = partition_for(key.coordinator_key(), 3)
            assert ends[idx] > 0 and sum(ends) == ends[idx], (idx, ends)
        _admin_before(b)
        b.restart()
        _admin_after(b)

        async def after() -> None:
            p = persister_for(addr, _security(b.broker_id, b.data_dir))
            try:
                await _check_state(p, key, 3)
                assert await p.delete(key) == E.NONE
                assert (await p.read(key, 3)).error == E.UNKNOWN_TOPIC_OR_PARTITION
            finally:
                await p.close()

        asyncio.run(after())
    finally:
        b.stop()


def test_state_moves_with_the_state_partition_leader(tmp_path: Path) -> None:
    with running_cluster(tmp_path, 3, {
            "share.coordinator.state.topic.num.partitions": "1"}) as cl:
        b1 = cl.brokers[1]
        with Client(b1.bootstrap, timeout=10) as c:
            tid = _topic(c, "jobs", 1, 3)
        key = SharePartitionKey("workers", tid, 0)
        sec = _security(1, b1.data_dir)

        async def write() -> None:
            p = persister_for([("127.0.0.1", b.port) for b in cl.brokers.values()], sec)
            try:
                await _write_state(p, key)
                await _check_state(p, key, 3)
            finally:
                await p.close()

        asyncio.run(write())
        leader, isr, _ = cl.wait_for("the state partition fully replicated", lambda: (
            (s := cl.partition_state(STATE_TOPIC, 0)) and len(s[1]) == 3 and s))
        assert leader in cl.brokers
        cl.brokers[leader].stop()
        survivors = [b for i, b in cl.brokers.items() if i != leader]
        cl.wait_for("a new state partition leader", lambda: cl.partition_state(
            STATE_TOPIC, 0, survivors[0])[0] not in (-1, leader))

        async def read() -> None:
            p = persister_for([("127.0.0.1", b.port) for b in survivors],
                              _security(survivors[0].broker_id, survivors[0].data_dir))
            try:
                # the new leader replayed the partition: same state, same fencing
                await _check_state(p, key, 3)
                assert await p.write(key, 1, 2, 5, ()) == E.FENCED_LEADER_EPOCH
            finally:
                await p.close()

        asyncio.run(read())


def _describe(c: Client, group: str, topics: list[tuple[str, list[int]]] | None,
              version: int = 1) -> Any:
    r = c.request(90, version, {"groups": [{"group_id": group, "topics": None if topics is None
                                            else [{"topic_name": n, "partitions": ps}
                                                  for n, ps in topics]}]})
    return r.groups[0]


def _admin_before(b: BrokerProcess) -> None:
    """DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets from
    a plain client, through the broker's own RPC persister."""
    with Client(b.bootstrap, timeout=20) as c:
        tid = _topic(c, "events", 2)
        for part in (0, 1):  # 50 records in each partition
            c.produce("events", part, rb.build_batch(
                [rb.NewRecord(None, b"v", (), None) for _ in range(50)]))
        # the group's coordinator (FindCoordinator key type 0) is this broker, once its
        # `__consumer_offsets` partition is loaded (bounded wait)
        deadline = time.monotonic() + 30
        while c.request(10, 6, {"key_type": 0, "coordinator_keys": ["sg"]}
                        ).coordinators[0].error_code != 0 \
                or _describe(c, "sg", [("events", [0])]).error_code != 0:
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.1)
        # no state yet: start offset -1
        g = _describe(c, "sg", [("events", [0, 1])])
        assert g.error_code == 0
        assert [(p.partition_index, p.start_offset, p.error_code)
                for p in g.topics[0].partitions] == [(0, -1, 0), (1, -1, 0)]
        # Alter: no group yet, so an empty share group's offsets are set
        r = c.request(91, 0, {"group_id": "sg", "topics": [
            {"topic_name": "events", "partitions": [
                {"partition_index": 0, "start_offset": 42},
                {"partition_index": 1, "start_offset": 7},
                {"partition_index": 5, "start_offset": 7}]},
            {"topic_name": "nope", "partitions": [
                {"partition_index": 0, "start_offset": 1}]}]})
        assert r.error_code == 0
        got = {(t.topic_name, p.partition_index): p.error_code
               for t in r.responses for p in t.partitions}
        assert got == {("events", 0): 0, ("events", 1): 0,
                       ("events", 5): E.UNKNOWN_TOPIC_OR_PARTITION,
                       ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert uuid.UUID(str(r.responses[0].topic_id)) == tid
        g = _describe(c, "sg", [("events", [0, 1]), ("nope", [0])])
        assert [(p.partition_index, p.start_offset, p.lag)
                for p in g.topics[0].partitions] == [(0, 42, 8), (1, 7, 43)]
        assert g.topics[1].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        # v0 has no lag; the answer is the same otherwise
        g0 = _describe(c, "sg", [("events", [0])], version=0)
        assert g0.topics[0].partitions[0].start_offset == 42
        # a consumer group is not a share group
        c.request(8, 8, {"group_id": "cg", "generation_id_or_member_epoch": -1,
                         "member_id": "", "group_instance_id": None,
                         "retention_time_ms": -1, "topics": [
                             {"name": "events", "partitions": [{
                                 "partition_index": 0, "committed_offset": 3,
                                 "committed_leader_epoch": -1,
                                 "committed_metadata": ""}]}]})
        r = c.request(91, 0, {"group_id": "cg", "topics": [
            {"topic_name": "events", "partitions": [
                {"partition_index": 0, "start_offset": 1}]}]})
        assert r.error_code == E.GROUP_ID_NOT_FOUND
        r = c.request(92, 0, {"group_id": "nobody", "topics": [{"topic_name": "events"}]})
        assert r.error_code == E.GROUP_ID_NOT_FOUND
        r = c.request(91, 0, {"group_id": "", "topics": []})
        assert r.error_code == E.INVALID_GROUP_ID


def _admin_after(b: BrokerProcess) -> None:
    """After the restart: the offsets, and the group's record of its share partitions,
    are back; a share group with a member refuses Alter and Delete (NON_EMPTY_GROUP);
    once it left, Delete removes the state of the topic."""
    with Client(b.bootstrap, timeout=20) as c:
        deadline = time.monotonic() + 30
        while (g := _describe(c, "sg", [("events", [0, 1])])).error_code != 0:
            assert time.monotonic() < deadline, f"no group coordinator: {g.error_code}"
            time.sleep(0.1)
        assert [p.start_offset for p in g.topics[0].partitions] == [42, 7]
        g = _describe(c, "sg", None)  # every partition the group has state for
        assert g.error_code == 0
        assert [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
                for t in g.topics] == [("events", [(0, 42), (1, 7)])]
        member = str(uuid.uuid4())
        hb = c.request(76, 1, {"group_id": "sg", "member_id": member, "member_epoch": 0,
                               "rack_id": None, "subscribed_topic_names": ["events"]})
        assert hb.error_code == 0
        alter = {"group_id": "sg", "topics": [{"topic_name": "events", "partitions": [
            {"partition_index": 0, "start_offset": 1}]}]}
        assert c.request(91, 0, alter).error_code == E.NON_EMPTY_GROUP
        delete = {"group_id": "sg", "topics": [{"topic_name": "events"}]}
        assert c.request(92, 0, delete).error_code == E.NON_EMPTY_GROUP
        hb = c.request(76, 1, {"group_id": "sg", "member_id": member, "member_epoch": -1,
                               "rack_id": None, "subscribed_topic_names": None})
        assert hb.error_code == 0
        r = c.request(92, 0, delete)
        assert (r.error_code, [(t.topic_name, t.error_code) for t in r.responses]) == \
            (0, [("events", 0)])
        assert _describe(c, "sg", None).topics == []
        g = _describe(c, "sg", [("events", [0, 1])])
        assert [p.start_offset for p in g.topics[0].partitions] == [-1, -1]
        # a topic the group has no state for
        r = c.request(92, 0, delete)
        assert r.responses[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        # a new share group's member: the group coordinator initializes the share state
        # of its partitions through the broker's persister (the state RPCs), and the
        # offsets show it
        m2 = str(uuid.uuid4())
        assert c.request(76, 1, {"group_id": "sg2", "member_id": m2, "member_epoch": 0,
                                 "rack_id": None, "subscribed_topic_names": ["events"]}
                         ).error_code == 0
        deadline = time.monotonic() + 30
        while [(t.topic_name, sorted(p.partition_index for p in t.partitions
                                     if p.start_offset >= 0))
               for t in _describe(c, "sg2", None).topics] != [("events", [0, 1])]:
            assert time.monotonic() < deadline, _describe(c, "sg2", None)
            time.sleep(0.2)
