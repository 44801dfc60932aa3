"""Transaction APIs on the wire, deterministic (raw requests, one broker).

KIP-890 part 1: a transactional produce to a partition not added to the producer's
ongoing transaction is refused, including a produce delayed past the end of its
transaction (without the check it would open a transaction no coordinator knows,
holding the LSO back for good). Also: the coordinator's answers for the state
machine's edges (EndTxn retried and crossed, fencing, unknown producer ids),
read_committed Fetch's aborted-transaction list and LSO, and WriteTxnMarkers' epoch
checks. KIP-890 part 2 (EndTxn v5): the epoch is bumped at every transaction end, so
a commit delayed past the start of the next transaction, and a produce delayed into
it, are both fenced, while a plain retry of the end gets the same answer.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode as E
from tests.security.raw import Raw, cluster_secret
from tests.support.broker import BrokerProcess


def _txn_batch(pid: int, epoch: int, seq: int, value: bytes = b"v") -> bytes:
    return rb.build_batch([rb.NewRecord(None, value)], producer_id=pid, producer_epoch=epoch,
                          base_sequence=seq, is_transactional=True)


class Txn:
    """A transactional producer spoken by hand."""

    def __init__(self, c: Client, tid: str) -> None:
        self.c, self.tid = c, tid
        r = c.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
        assert r.coordinators[0].error_code == 0, r
        r = c.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                              "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == 0, r
        self.pid, self.epoch = r.producer_id, r.producer_epoch

    def add(self, topic: str, partition: int, epoch: int | None = None) -> int:
        r = self.c.request(24, 3, {
            "v3_and_below_transactional_id": self.tid, "v3_and_below_producer_id": self.pid,
            "v3_and_below_producer_epoch": self.epoch if epoch is None else epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [partition]}]})
        return int(r.results_by_topic_v3_and_below[0].results_by_partition[0]
                   .partition_error_code)

    def produce(self, topic: str, partition: int, seq: int, value: bytes = b"v",
                version: int = 9) -> Any:
        r = self.c.request(0, version, {"transactional_id": self.tid, "acks": -1, "timeout_ms": 10000,
                                  "topic_data": [{"name": topic, "partition_data": [{
                                      "index": partition,
                                      "records": _txn_batch(self.pid, self.epoch, seq, value)}]}]})
        return r.responses[0].partition_responses[0]

    def end(self, commit: bool, epoch: int | None = None) -> int:
        r = self.c.request(26, 3, {"transactional_id": self.tid, "producer_id": self.pid,
                                   "producer_epoch": self.epoch if epoch is None else epoch,
                                   "committed": commit})
        return int(r.error_code)


    def end5(self, commit: bool, epoch: int | None = None) -> tuple[int, int, int]:
        """EndTxn v5 (KIP-890 part 2): (error, next producer id, next epoch)."""
        r = self.c.request(26, 5, {"transactional_id": self.tid, "producer_id": self.pid,
                                   "producer_epoch": self.epoch if epoch is None else epoch,
                                   "committed": commit})
        return int(r.error_code), int(r.producer_id), int(r.producer_epoch)


def _describe(c: Client, tid: str) -> Any:
    return c.request(65, 0, {"transactional_ids": [tid]}).transaction_states[0]


def _lso(c: Client, topic: str, partition: int = 0) -> int:
    r = c.request(2, 7, {"replica_id": -1, "isolation_level": 1, "topics": [{
        "name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
    return int(r.topics[0].partitions[0].offset)


def _wait_lso(c: Client, topic: str, want: int) -> None:
    deadline = time.monotonic() + 10
    while _lso(c, topic) != want and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _lso(c, topic) == want


def _topic(c: Client) -> str:
    name = f"p-{uuid.uuid4().hex[:8]}"
    c.create_topic(name, 1, 1)
    return name


def test_produce_outside_the_transaction_is_refused(txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        t = Txn(c, f"v-{uuid.uuid4().hex[:6]}")
        # never added: refused, nothing written
        assert t.produce(topic, 0, 0).error_code == E.INVALID_TXN_STATE
        assert c.list_offset(topic, 0, -1)[0] == 0
        assert t.add(topic, 0) == E.NONE
        assert t.produce(topic, 0, 0).error_code == E.NONE
        assert t.produce(topic, 0, 1).error_code == E.NONE  # transaction open here now
        assert t.end(True) == E.NONE
        _wait_lso(c, topic, 3)  # two records and the commit marker
        # a produce delayed past the end of its transaction: refused, the LSO stays free
        assert t.produce(topic, 0, 2).error_code == E.INVALID_TXN_STATE
        assert c.list_offset(topic, 0, -1)[0] == 3
        assert _lso(c, topic) == 3
        # the producer goes on with its next transaction
        assert t.add(topic, 0) == E.NONE
        assert t.produce(topic, 0, 2).error_code == E.NONE
        assert t.end(False) == E.NONE
        _wait_lso(c, topic, 5)


def test_a_partition_not_in_the_transaction_as_kafka_44_answers(
        txn_broker: BrokerProcess) -> None:
    """Probed on Apache Kafka 4.4.0: Produce v9-10 INVALID_TXN_STATE, v11+
    TRANSACTION_ABORTABLE (with no message); a broker's AddPartitionsToTxn VerifyOnly
    TRANSACTION_ABORTABLE at v4 and v5 alike."""
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        t = Txn(c, f"na-{uuid.uuid4().hex[:6]}")
        for version in (9, 10):
            assert t.produce(topic, 0, 0, version=version).error_code == E.INVALID_TXN_STATE
        p = t.produce(topic, 0, 0, version=11)
        assert (p.error_code, p.error_message) == (E.TRANSACTION_ABORTABLE, None)
        # VerifyOnly is a partition leader's question: asked as a broker (JOCKO-CLUSTER)
        peer = Raw(txn_broker.bootstrap).broker_login(0, cluster_secret(txn_broker.data_dir))
        for version in (4, 5):
            r = peer.call(24, version, {"transactions": [{
                "transactional_id": t.tid, "producer_id": t.pid, "producer_epoch": t.epoch,
                "verify_only": True, "topics": [{"name": topic, "partitions": [0]}]}]})
            [tr] = r.results_by_transaction
            assert tr.topic_results[0].results_by_partition[0].partition_error_code == \
                E.TRANSACTION_ABORTABLE
        assert c.list_offset(topic, 0, -1)[0] == 0, "nothing was written"
        assert t.add(topic, 0) == E.NONE
        assert t.produce(topic, 0, 0, version=11).error_code == E.NONE
        r = peer.call(24, 5, {"transactions": [{
            "transactional_id": t.tid, "producer_id": t.pid, "producer_epoch": t.epoch,
            "verify_only": True, "topics": [{"name": topic, "partitions": [0]}]}]})
        assert r.results_by_transaction[0].topic_results[0].results_by_partition[0] \
            .partition_error_code == E.NONE
        peer.close()
        assert t.end(False) == E.NONE


def test_end_txn_edges_and_fencing(txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        tid = f"e-{uuid.uuid4().hex[:6]}"
        t = Txn(c, tid)
        assert t.end(True) == E.INVALID_TXN_STATE           # Empty: nothing to end
        assert t.add(topic, 0) == E.NONE
        assert t.produce(topic, 0, 0).error_code == E.NONE
        assert t.end(True) == E.NONE
        _wait_lso(c, topic, 2)
        assert t.end(True) == E.NONE                        # a retry: same answer
        assert t.end(False) == E.INVALID_TXN_STATE          # the other outcome: refused
        # a second instance fences the first (epoch bump)
        t2 = Txn(c, tid)
        assert (t2.pid, t2.epoch) == (t.pid, t.epoch + 1)
        assert t.add(topic, 0) == E.PRODUCER_FENCED
        assert t.end(True) == E.PRODUCER_FENCED
        r = c.request(24, 1, {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": t.pid,
            "v3_and_below_producer_epoch": t.epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        # before v2 clients know INVALID_PRODUCER_EPOCH only
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == E.INVALID_PRODUCER_EPOCH
        t2.pid += 1
        assert t2.add(topic, 0) == E.INVALID_PRODUCER_ID_MAPPING
        r = c.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 10**9,
                              "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == E.INVALID_TRANSACTION_TIMEOUT


def test_init_fences_an_open_transaction(txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        tid = f"f-{uuid.uuid4().hex[:6]}"
        t = Txn(c, tid)
        assert t.add(topic, 0) == E.NONE
        assert t.produce(topic, 0, 0).error_code == E.NONE
        r = c.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                              "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == E.CONCURRENT_TRANSACTIONS   # aborting the open one first
        deadline = time.monotonic() + 10
        while r.error_code == E.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline:
            time.sleep(0.02)
            r = c.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                  "producer_id": -1, "producer_epoch": -1})
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, t.pid, t.epoch + 2)
        assert _lso(c, topic) == 2                           # aborted: record + marker
        f = c.request(1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "fetch_offset": 0, "current_leader_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        p = f.responses[0].partitions[0]
        assert p.last_stable_offset == 2
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(t.pid, 0)]
        # the fenced epoch can no longer write there
        assert t.produce(topic, 0, 1).error_code == E.INVALID_PRODUCER_EPOCH
        # nor can a marker from it (the coordinator's WriteTxnMarkers epoch check), sent
        # as a broker would (WriteTxnMarkers is served to brokers only)
        with Raw(txn_broker.bootstrap) as raw:
            raw.broker_login(txn_broker.broker_id, cluster_secret(txn_broker.data_dir))
            r = raw.call(27, 1, {"markers": [{
                "producer_id": t.pid, "producer_epoch": t.epoch, "transaction_result": True,
                "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0}]})
        assert r.markers[0].topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH


def test_epoch_bump_per_transaction_fences_late_requests(txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        tid = f"k2-{uuid.uuid4().hex[:6]}"
        t = Txn(c, tid)
        e0 = t.epoch
        assert t.add(topic, 0) == E.NONE
        assert t.produce(topic, 0, 0, b"t1").error_code == E.NONE
        assert t.end5(True) == (E.NONE, t.pid, e0 + 1)       # ended with the epoch bumped
        _wait_lso(c, topic, 2)
        assert t.end5(True, epoch=e0) == (E.NONE, t.pid, e0 + 1)   # a retry: same answer
        # the next transaction, at the new epoch (its sequences start again at 0)
        t.epoch = e0 + 1
        assert t.add(topic, 0) == E.NONE
        assert t.produce(topic, 0, 0, b"t2").error_code == E.NONE
        # a commit of the first transaction delayed past the start of the second: fenced,
        # and the second transaction is still open
        assert t.end5(True, epoch=e0)[0] == E.PRODUCER_FENCED
        assert t.end(True, epoch=e0) == E.PRODUCER_FENCED
        assert _describe(c, tid).transaction_state == "Ongoing"
        assert _lso(c, topic) == 2
        # a produce of the first transaction delayed into the second: fenced by epoch
        t.epoch = e0
        assert t.produce(topic, 0, 1, b"late").error_code == E.INVALID_PRODUCER_EPOCH
        t.epoch = e0 + 1
        assert t.end5(False) == (E.NONE, t.pid, e0 + 2)
        _wait_lso(c, topic, 4)
        # v5 may abort an empty transaction: it only bumps the epoch
        t.epoch = e0 + 2
        assert t.end5(False) == (E.NONE, t.pid, e0 + 3)
        assert t.end5(True, epoch=e0 + 3)[0] == E.INVALID_TXN_STATE  # nothing to commit
        d = _describe(c, tid)
        assert (d.transaction_state, d.producer_epoch) == ("CompleteAbort", e0 + 3)


def test_txn_offset_commit_needs_add_offsets(txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        group = f"vg-{uuid.uuid4().hex[:6]}"
        r = c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
        assert r.coordinators[0].error_code == 0
        t = Txn(c, f"vo-{uuid.uuid4().hex[:6]}")

        def commit_offset(offset: int, version: int = 3) -> int:
            r = c.request(28, version, {
                "transactional_id": t.tid, "group_id": group, "producer_id": t.pid,
                "producer_epoch": t.epoch, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": topic, "partitions": [{
                    "partition_index": 0, "committed_offset": offset,
                    "committed_leader_epoch": -1, "committed_metadata": None}]}]})
            return int(r.topics[0].partitions[0].error_code)

        def fetched() -> int:
            r = c.request(9, 7, {"group_id": group, "require_stable": False,
                                 "topics": [{"name": topic, "partition_indexes": [0]}]})
            return int(r.topics[0].partitions[0].committed_offset)

        assert commit_offset(5) == E.INVALID_TXN_STATE      # no AddOffsetsToTxn
        # v4 knows TRANSACTION_ABORTABLE (as Apache Kafka 4.4.0 answers, probed)
        assert commit_offset(5, version=4) == E.TRANSACTION_ABORTABLE
        assert t.add(topic, 0) == E.NONE
        r = c.request(25, 3, {"transactional_id": t.tid, "producer_id": t.pid,
                              "producer_epoch": t.epoch, "group_id": group})
        assert r.error_code == E.NONE
        assert commit_offset(5) == E.NONE
        assert fetched() == -1                               # only once committed
        assert t.end(True) == E.NONE
        deadline = time.monotonic() + 10
        while fetched() != 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fetched() == 5
        assert commit_offset(6) == E.INVALID_TXN_STATE      # that transaction is over


def test_list_transactions_v2_filters_by_a_pattern_of_the_whole_id(
        txn_broker: BrokerProcess) -> None:
    """KIP-1152, as Apache Kafka 4.4.0 answers: the pattern must match the whole
    transactional id; null or empty filters nothing; one that does not compile is
    INVALID_REGULAR_EXPRESSION."""
    run = uuid.uuid4().hex[:6]
    a, b = f"lt-{run}-a1", f"lt-{run}-b2"
    with Client(txn_broker.bootstrap) as c:
        Txn(c, a)
        Txn(c, b)

        def listed(version: int, pattern: str | None) -> tuple[int, list[str]]:
            body: dict[str, Any] = {"state_filters": [], "producer_id_filters": [],
                                    "duration_filter": -1}
            if version >= 2:
                body["transactional_id_pattern"] = pattern
            r = c.request(66, version, body)
            return int(r.error_code), sorted(
                t.transactional_id for t in r.transaction_states if run in t.transactional_id)
        assert listed(1, None) == (0, [a, b])
        assert listed(2, None) == (0, [a, b])
        assert listed(2, "") == (0, [a, b])
        assert listed(2, f"lt-{run}-a") == (0, [])
        assert listed(2, f"lt-{run}-a.*") == (0, [a])
        assert listed(2, r".*-(a|b)\d") == (0, [a, b])
        assert listed(2, f"^lt-{run}-b2$") == (0, [b])
        assert listed(2, "LT-.*") == (0, [])
        assert listed(2, "[") == (E.INVALID_REGULAR_EXPRESSION, [])
