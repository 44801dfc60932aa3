"""The hostile-client suite: the controller and inter-broker APIs are served only to
brokers, on one broker and on three, with the default configuration (one PLAINTEXT
listener, no authorizer).

From a plain client connection: AlterPartition (shrinking an ISR), BrokerHeartbeat
(asking to be fenced), AllocateProducerIds (correct broker ids and epochs guessed)
close the connection unanswered, and ApiVersions does not list them; WriteTxnMarkers
(committing and aborting an open transaction), a follower Fetch (replica id set,
v12 and v15) and OffsetForLeaderEpoch with a replica id are refused; a client that
claims the forwarding client id (`jocko-py-forward`) is an ordinary client. Before
and after, the metadata (brokers, controller, leaders, leader epochs, ISRs), the
high watermarks, the records and the open transaction are compared: unchanged.

A connection that proves it knows the cluster secret (JOCKO-CLUSTER, read here from
the broker's own metadata log on disk, as only a broker can) is a broker: it sees the
controller APIs and gets STALE_BROKER_EPOCH for a heartbeat or an AlterPartition with
a wrong broker epoch; a wrong proof or a replayed client nonce is refused. That the
three brokers work at all is the test that a real broker with the secret is accepted.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jocko_py.broker.security.cluster_auth import (
    MECHANISM,
    ClusterAuthClient,
    derive_key,
)
from jocko_py.client import Client
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode
from tests.security.raw import Raw, cluster_secret
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster

pytestmark = pytest.mark.timeout(120)

CONTROLLER_APIS = {56, 63, 67}
FORWARD_CLIENT_ID = "jocko-py-forward"


# --------------------------------------------------------------------------- state


@contextmanager
def leader_of(c: Client, topic: str, partition: int) -> Iterator[Client]:
    lc = c.for_leader(topic, partition)
    try:
        yield lc
    finally:
        if lc is not c:
            lc.close()


def state(addrs: list[str], topic: str) -> dict[str, Any]:
    """What must not change: every broker's view of the cluster and the partitions,
    and each partition's high watermark and records (a digest)."""
    out: dict[str, Any] = {}
    for a in addrs:
        with Client(a, timeout=10) as c:
            md = c.metadata([topic])
            dc = c.request(60, 0, {"include_cluster_authorized_operations": False})
            out[a] = (
                sorted((b.node_id, b.host, b.port) for b in md.brokers), md.controller_id,
                sorted((b.broker_id, b.port) for b in dc.brokers), dc.controller_id,
                sorted((p.partition_index, p.leader_id, p.leader_epoch, sorted(p.replica_nodes),
                        sorted(p.isr_nodes), p.error_code)
                       for t in md.topics for p in t.partitions))
    with Client(addrs[0], timeout=10) as c:
        parts = sorted(p.partition_index for t in c.metadata([topic]).topics
                       for p in t.partitions)
        for p in parts:
            with leader_of(c, topic, p) as lc:
                hw, _ = lc.list_offset(topic, p, -1)
                data = hashlib.sha256()
                offset = 0
                while offset < hw:
                    r = lc.fetch(topic, p, offset, max_wait_ms=0)
                    batches = bytes(r.records or b"")
                    assert batches, f"no records at {offset} below the HW {hw}"
                    data.update(batches)
                    for _, h in rb.iter_batches(batches, validate_crc=False,
                                                allow_partial_tail=True):
                        offset = h.base_offset + h.last_offset_delta + 1
                out[f"{topic}-{p}"] = (hw, data.hexdigest())
    return out


def open_transaction(addr: str, topic: str) -> tuple[int, int]:
    """An open transaction on partition 0 of ``topic`` (a transactional batch with no
    transactional id: nothing but a marker ends it): (producer id, its start offset)."""
    with Client(addr, timeout=10) as c, leader_of(c, topic, 0) as lc:
        r = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                              "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == 0
        batch = rb.build_batch([rb.NewRecord(None, b"in doubt")], producer_id=r.producer_id,
                               producer_epoch=0, base_sequence=0, is_transactional=True)
        err, base, _ = lc.produce_batches(topic, {0: batch})[0]
        assert err == 0
        return r.producer_id, base


def open_transactions(addr: str, topic: str) -> dict[int, int]:
    """DescribeProducers on the leader of partition 0: producer id -> open txn start."""
    with Client(addr, timeout=10) as c, leader_of(c, topic, 0) as lc:
        r = lc.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        p = r.topics[0].partitions[0]
        assert p.error_code == 0
        return {x.producer_id: x.current_txn_start_offset for x in p.active_producers}


# --------------------------------------------------------------------------- attacks


def assert_closed_unanswered(addr: str, api_key: int, version: int, body: dict[str, Any],
                             client_id: str = "hostile") -> None:
    with Raw(addr) as raw:
        raw.client_id = client_id
        assert raw.call(api_key, version, body) is None, \
            f"API {api_key} answered a client"


def forge(addr: str, topic: str, leaders: dict[int, tuple[int, int, list[int]]],
          brokers: list[int], txn: tuple[int, int]) -> None:
    """Every broker-only request a client could forge, sent to ``addr``; each refused.
    ``leaders``: partition -> (leader, leader epoch, ISR)."""
    with Raw(addr) as raw:
        r = raw.call(18, 3, {"client_software_name": "hostile",
                             "client_software_version": "1"})
        keys = {k.api_key for k in r.api_keys}
        assert not keys & CONTROLLER_APIS, sorted(keys & CONTROLLER_APIS)
        assert {1, 23, 27} <= keys  # inter-broker APIs Kafka advertises stay listed
    with Client(addr) as c:
        tid = next(t.topic_id for t in c.metadata([topic]).topics)
    for cid in ("hostile", FORWARD_CLIENT_ID):
        for p, (leader, epoch, _isr) in leaders.items():
            for guess in (-1, 0, 1, 2, 3):  # the leader's broker epoch, guessed
                assert_closed_unanswered(addr, 56, 3, {
                    "broker_id": leader, "broker_epoch": guess, "topics": [{
                        "topic_id": tid, "partitions": [{
                            "partition_index": p, "leader_epoch": epoch,
                            "new_isr_with_epochs": [{"broker_id": leader, "broker_epoch": -1}],
                            "leader_recovery_state": 0, "partition_epoch": pe}
                            for pe in range(0, 6)]}]}, cid)
                assert_closed_unanswered(addr, 56, 2, {
                    "broker_id": leader, "broker_epoch": guess, "topics": [{
                        "topic_id": tid, "partitions": [{
                            "partition_index": p, "leader_epoch": epoch, "new_isr": [leader],
                            "leader_recovery_state": 0, "partition_epoch": 0}]}]}, cid)
        for b in brokers:
            for guess in (-1, 1, 2, 3):
                assert_closed_unanswered(addr, 63, 1, {
                    "broker_id": b, "broker_epoch": guess, "current_metadata_offset": 0,
                    "want_fence": True, "want_shut_down": True, "offline_log_dirs": []}, cid)
                assert_closed_unanswered(addr, 67, 0, {"broker_id": b, "broker_epoch": guess},
                                         cid)
    pid, start = txn
    for commit in (True, False):
        with Raw(addr) as raw:
            r = raw.call(27, 1, {"markers": [{
                "producer_id": pid, "producer_epoch": 0, "transaction_result": commit,
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "coordinator_epoch": 0}]})
            errs = {x.error_code for m in r.markers for t in m.topics for x in t.partitions}
            assert errs == {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}, errs
    parts = sorted(leaders)
    for follower in brokers:
        with Raw(addr) as raw:  # a follower fetch far ahead: would move the HW / the ISR
            for version in (12, 15):
                body: dict[str, Any] = {
                    "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "forgotten_topics_data": [], "rack_id": ""}
                if version >= 15:
                    body["replica_state"] = {"replica_id": follower, "replica_epoch": -1}
                    body["topics"] = [{"topic_id": tid, "partitions": [{
                        "partition": p, "fetch_offset": 0, "current_leader_epoch": -1,
                        "last_fetched_epoch": -1, "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20} for p in parts]}]
                else:
                    body["replica_id"] = follower
                    body["topics"] = [{"topic": topic, "partitions": [{
                        "partition": p, "fetch_offset": 10**9, "current_leader_epoch": -1,
                        "last_fetched_epoch": -1, "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20} for p in parts]}]
                r = raw.call(1, version, body)
                got = [(x.error_code, bytes(x.records or b"")) for t in r.responses
                       for x in t.partitions]
                assert got and all(e == ErrorCode.TOPIC_AUTHORIZATION_FAILED and not recs
                                   for e, recs in got), got
            r = raw.call(23, 4, {"replica_id": follower, "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "leader_epoch": 0}
                for p in parts]}]})
            errs = {x.error_code for t in r.topics for x in t.partitions}
            assert errs == {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}, errs
    assert open_transactions(addr, topic).get(pid) == start


# --------------------------------------------------------------------------- one broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = BrokerProcess(tmp_path_factory.mktemp("hostile") / "data")
    b.start()
    try:
        yield b
    finally:
        b.stop()


def test_one_broker_refuses_broker_only_apis_from_clients(broker: BrokerProcess) -> None:
    topic = "hostile-1"
    with Client(broker.bootstrap) as c:
        c.create_topic(topic, 2, 1)
        for p in (0, 1):
            c.produce_batches(topic, {p: rb.build_batch([rb.NewRecord(b"k", b"v%d" % i)
                                                         for i in range(5)])})
        md = c.metadata([topic])
    leaders = {p.partition_index: (p.leader_id, p.leader_epoch, sorted(p.isr_nodes))
               for t in md.topics for p in t.partitions}
    txn = open_transaction(broker.bootstrap, topic)
    before = state([broker.bootstrap], topic)
    forge(broker.bootstrap, topic, leaders, [broker.broker_id], txn)
    assert state([broker.bootstrap], topic) == before
    assert "Traceback" not in broker.log_path.read_text()


def test_forward_client_id_is_an_ordinary_client(broker: BrokerProcess) -> None:
    """Claiming the forwarding client id skips nothing: the controller mutation quota
    (KIP-599) still throttles the client."""
    with Client(broker.bootstrap, client_id=FORWARD_CLIENT_ID) as c:
        r = c.request(49, 1, {"validate_only": False, "entries": [{
            "entity": [{"entity_type": "client-id", "entity_name": FORWARD_CLIENT_ID}],
            "ops": [{"key": "controller_mutation_rate", "value": 1.0, "remove": False}]}]})
        assert r.entries[0].error_code == 0
        r = c.request(19, 7, {"topics": [{"name": "forward-1", "num_partitions": 20,
                                          "replication_factor": 1}], "timeout_ms": 10000})
        assert r.topics[0].error_code == 0
        assert r.throttle_time_ms > 0, "the mutation quota was skipped"
    # (that connection is muted for the throttle time: ask again on a new one)
    with Client(broker.bootstrap, client_id=FORWARD_CLIENT_ID) as c:
        r = c.request(19, 7, {"topics": [{"name": "forward-2", "num_partitions": 1,
                                          "replication_factor": 1}], "timeout_ms": 10000})
        assert r.topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_cluster_authentication_on_one_broker(broker: BrokerProcess) -> None:
    secret = cluster_secret(broker.data_dir)
    me = broker.broker_id
    with Raw(broker.bootstrap) as raw:  # the right secret: a broker
        raw.broker_login(me, secret)
        r = raw.call(18, 3, {"client_software_name": "b", "client_software_version": "1"})
        assert CONTROLLER_APIS <= {k.api_key for k in r.api_keys}
        r = raw.call(56, 3, {"broker_id": me, "broker_epoch": 12345, "topics": []})
        assert r.error_code == ErrorCode.STALE_BROKER_EPOCH
        r = raw.call(67, 0, {"broker_id": me, "broker_epoch": 12345})
        assert r.error_code == ErrorCode.STALE_BROKER_EPOCH
    with Raw(broker.bootstrap) as raw:  # a wrong secret
        assert raw.handshake(MECHANISM).error_code == 0
        auth = ClusterAuthClient(me, derive_key(b"x" * 32))
        r = raw.authenticate(auth.first())
        assert r.error_code == 0
        r = raw.authenticate(auth.final(bytes(r.auth_bytes)))
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert raw.closed()
    with Raw(broker.bootstrap) as raw:  # a replayed client nonce, right secret
        assert raw.handshake(MECHANISM).error_code == 0
        auth = ClusterAuthClient(me, derive_key(secret), random_bytes=lambda n: b"\1" * n)
        first = auth.first()
        r = raw.authenticate(first)
        assert r.error_code == 0
    with Raw(broker.bootstrap) as raw:
        assert raw.handshake(MECHANISM).error_code == 0
        r = raw.authenticate(first)
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert raw.closed()
    with Raw(broker.bootstrap) as raw:  # not among the mechanisms a client is offered
        r = raw.handshake("NOPE")
        assert MECHANISM not in r.mechanisms


# --------------------------------------------------------------------------- three brokers


@pytest.mark.cluster
def test_three_brokers_refuse_broker_only_apis_from_clients(tmp_path: Path) -> None:
    t0 = time.monotonic()
    c = Cluster(tmp_path)
    try:
        c.start()
        topic = "hostile-3"
        addrs = [b.bootstrap for b in c.brokers.values()]
        with Client(c.bootstrap, timeout=20) as cl:
            cl.create_topic(topic, 3, 3)
        md = c.wait_for("every ISR full", lambda: (m := c.metadata(topics=[topic])) and all(
            len(p.isr_nodes) == 3 and p.leader_id >= 0 for t in m.topics
            for p in t.partitions) and m)
        with Client(c.bootstrap, timeout=20) as cl:
            for p in range(3):
                with leader_of(cl, topic, p) as lc:
                    res = lc.produce_batches(topic, {p: rb.build_batch(
                        [rb.NewRecord(b"k", b"v%d" % i) for i in range(5)])})
                    assert res[p][0] == 0
        leaders = {p.partition_index: (p.leader_id, p.leader_epoch, sorted(p.isr_nodes))
                   for t in md.topics for p in t.partitions}
        txn = open_transaction(c.bootstrap, topic)
        c.wait_for("HW everywhere", lambda: state(addrs, topic))
        before = state(addrs, topic)
        controller = md.controller_id
        other = next(b for b in c.brokers.values() if b.broker_id != controller)
        for b in (c.brokers[controller], other):  # the controller and a broker that forwards
            forge(b.bootstrap, topic, leaders, sorted(c.brokers), txn)
        # a client claiming the forwarding client id is forwarded like any other client
        with Client(other.bootstrap, client_id=FORWARD_CLIENT_ID, timeout=20) as cl:
            r = cl.request(19, 7, {"topics": [{"name": "forward-3", "num_partitions": 1,
                                               "replication_factor": 3}], "timeout_ms": 10000})
            assert r.topics[0].error_code == 0, r.topics[0].error_code
        time.sleep(1.0)  # past a few heartbeats and reconciles: anything forged would show
        assert state(addrs, topic) == before
        # a broker-authenticated connection (the secret from a broker's disk): a heartbeat
        # or an ISR change with a wrong broker epoch is stale
        secret = cluster_secret(c.brokers[controller].data_dir)
        with Raw(c.brokers[controller].bootstrap) as raw:
            raw.broker_login(other.broker_id, secret)
            r = raw.call(63, 1, {"broker_id": other.broker_id, "broker_epoch": 10**9,
                                 "current_metadata_offset": 0, "want_fence": True,
                                 "want_shut_down": False, "offline_log_dirs": []})
            assert r.error_code == ErrorCode.STALE_BROKER_EPOCH
            r = raw.call(56, 3, {"broker_id": other.broker_id, "broker_epoch": 10**9,
                                 "topics": []})
            assert r.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert state(addrs, topic) == before
        for b in c.brokers.values():
            assert "Traceback" not in b.log_path.read_text(), b.log_tail()
    finally:
        c.stop()
    assert time.monotonic() - t0 < 60
