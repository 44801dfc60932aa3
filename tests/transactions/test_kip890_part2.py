"""KIP-890 part 2 on the wire (raw requests, one broker at transaction.version 2).

Produce v12 and TxnOffsetCommit v5 add their partition to the transaction themselves
(no AddPartitionsToTxn / AddOffsetsToTxn), EndTxn v5 bumps the epoch at every
transaction's end, so nothing of an ended transaction (a delayed Produce, a delayed
EndTxn) can land in a later one; WriteTxnMarkers v2 refuses a transaction version 2
marker that does not carry a newer epoch; Produce v13 and TxnOffsetCommit v6 name
topics by id. Below transaction.version 2 (a `kafka-features downgrade`) the new
versions keep their older meaning. An exhausted epoch rolls the producer id, and the
new id is in `__transaction_state` before it is answered (a restart keeps it).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jocko_py.broker.txn.state import TXN_TOPIC, decode_key, decode_value
from jocko_py.client import Client
from jocko_py.embedded import EmbeddedBroker
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode as E
from tests.security.raw import Raw, cluster_secret
from tests.support.broker import BrokerProcess
from tests.transactions.test_protocol_transactions import _describe, _lso, _topic, _txn_batch


class Txn2:
    """A transaction version 2 producer spoken by hand: no AddPartitionsToTxn."""

    def __init__(self, c: Client, tid: str) -> None:
        self.c, self.tid = c, tid
        r = c.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
        assert r.coordinators[0].error_code == 0, r
        r = c.request(22, 5, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                              "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == 0, r
        self.pid, self.epoch = r.producer_id, r.producer_epoch
        self.seq: dict[tuple[str, int], int] = {}

    def produce(self, topic: str, partition: int, value: bytes = b"v", *, version: int = 12,
                epoch: int | None = None, seq: int | None = None,
                topic_id: uuid.UUID | None = None) -> Any:
        key = (topic, partition)
        s = self.seq.get(key, 0) if seq is None else seq
        td: dict[str, Any] = {"topic_id": topic_id} if version >= 13 else {"name": topic}
        td["partition_data"] = [{"index": partition, "records": _txn_batch(
            self.pid, self.epoch if epoch is None else epoch, s, value)}]
        r = self.c.request(0, version, {"transactional_id": self.tid, "acks": -1,
                                        "timeout_ms": 10000, "topic_data": [td]})
        p = r.responses[0].partition_responses[0]
        if p.error_code == E.NONE and seq is None:
            self.seq[key] = s + 1
        return p

    def produce_retrying(self, topic: str, partition: int, value: bytes = b"v") -> Any:
        """As a client does: NOT_ENOUGH_REPLICAS (the previous transaction's markers
        still being written) is retried."""
        deadline = time.monotonic() + 10
        while True:
            p = self.produce(topic, partition, value)
            if p.error_code != E.NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
                return p
            time.sleep(0.05)

    def end(self, commit: bool, epoch: int | None = None, pid: int | None = None,
            version: int = 5) -> tuple[int, int, int]:
        r = self.c.request(26, version, {
            "transactional_id": self.tid, "producer_id": self.pid if pid is None else pid,
            "producer_epoch": self.epoch if epoch is None else epoch, "committed": commit})
        return int(r.error_code), int(r.producer_id), int(r.producer_epoch)

    def next_transaction(self, pid: int, epoch: int) -> None:
        """What the client does with EndTxn v5's answer: a new epoch, sequences from 0."""
        self.pid, self.epoch = pid, epoch
        self.seq = {}


def _read_committed(c: Client, topic: str, partition: int = 0) -> list[bytes]:
    f = c.request(1, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 1, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "fetch_offset": 0, "current_leader_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    p = f.responses[0].partitions[0]
    aborted = {(a.producer_id, a.first_offset) for a in p.aborted_transactions}
    out: list[bytes] = []
    data = bytes(p.records or b"")
    skip: set[int] = set()
    pos = 0
    while pos + rb.HEADER_SIZE <= len(data):
        h = rb.parse_header(memoryview(data)[pos:])
        end = pos + h.size
        if end > len(data) or h.base_offset >= p.last_stable_offset:
            break
        if h.is_control:
            skip.discard(h.producer_id)
        else:
            if (h.producer_id, h.base_offset) in aborted:
                skip.add(h.producer_id)
            if h.producer_id not in skip:
                out += [r.value or b"" for r in rb.decode_records(data[pos:end], h)]
        pos = end
    return out


def _wait_state(c: Client, tid: str, state: str) -> Any:
    deadline = time.monotonic() + 10
    d = _describe(c, tid)
    while d.transaction_state != state and time.monotonic() < deadline:
        time.sleep(0.02)
        d = _describe(c, tid)
    assert d.transaction_state == state, d
    return d


def _features(c: Client) -> dict[str, int]:
    av = c.request(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    return {f.name: int(f.max_version_level) for f in av.finalized_features}


def test_a_new_cluster_finalizes_transaction_version_2(txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        assert _features(c)["transaction.version"] == 2


def test_produce_v12_adds_its_partition_and_end_txn_v5_bumps_the_epoch(
        txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        c.create_topic(other := _topic(c) + "b", 1, 1)
        tid = f"p2-{uuid.uuid4().hex[:6]}"
        t = Txn2(c, tid)
        e0 = t.epoch
        assert t.produce(topic, 0, b"a").error_code == E.NONE   # no AddPartitionsToTxn
        assert t.produce(other, 0, b"b").error_code == E.NONE
        d = _describe(c, tid)
        assert d.transaction_state == "Ongoing"
        assert {(x.topic, tuple(x.partitions)) for x in d.topics} == {(topic, (0,)),
                                                                      (other, (0,))}
        assert _lso(c, topic) == 0                              # open
        assert t.end(True) == (E.NONE, t.pid, e0 + 1)           # the epoch is bumped
        _wait_state(c, tid, "CompleteCommit")
        assert _read_committed(c, topic) == [b"a"] and _read_committed(c, other) == [b"b"]
        # every transaction gets its own epoch
        t.next_transaction(t.pid, e0 + 1)
        assert t.produce_retrying(topic, 0, b"c").error_code == E.NONE
        assert t.end(False) == (E.NONE, t.pid, e0 + 2)
        _wait_state(c, tid, "CompleteAbort")
        t.next_transaction(t.pid, e0 + 2)
        assert t.produce_retrying(topic, 0, b"d").error_code == E.NONE
        assert t.end(True) == (E.NONE, t.pid, e0 + 3)
        _wait_state(c, tid, "CompleteCommit")
        assert _read_committed(c, topic) == [b"a", b"d"]


def test_a_delayed_produce_or_end_of_an_earlier_transaction_never_lands_in_a_later_one(
        txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        c.create_topic(fresh := _topic(c) + "f", 1, 1)
        tid = f"late-{uuid.uuid4().hex[:6]}"
        t = Txn2(c, tid)
        e0 = t.epoch
        assert t.produce(topic, 0, b"t1").error_code == E.NONE
        assert t.end(True) == (E.NONE, t.pid, e0 + 1)
        _wait_state(c, tid, "CompleteCommit")
        # a produce of the first transaction delayed past its end: fenced, both where the
        # first transaction wrote and on a partition it never reached (there the leader
        # asks the coordinator to add it, which knows the epoch has moved on)
        assert t.produce(topic, 0, b"late", seq=1).error_code == E.INVALID_PRODUCER_EPOCH
        assert t.produce(fresh, 0, b"late", seq=0).error_code == E.INVALID_PRODUCER_EPOCH
        assert _describe(c, tid).transaction_state == "CompleteCommit"  # nothing opened
        # the second transaction
        t.next_transaction(t.pid, e0 + 1)
        assert t.produce_retrying(topic, 0, b"t2").error_code == E.NONE
        # the first transaction's commit, delayed into the second: fenced; the second
        # is still open (a retry is recognised only while nothing newer started)
        assert t.end(True, epoch=e0)[0] == E.PRODUCER_FENCED
        assert t.end(True, epoch=e0, version=4)[0] == E.PRODUCER_FENCED
        assert _describe(c, tid).transaction_state == "Ongoing"
        # and its produce, delayed into the second: fenced by the epoch
        assert t.produce(topic, 0, b"late2", epoch=e0, seq=2).error_code == \
            E.INVALID_PRODUCER_EPOCH
        assert t.produce(fresh, 0, b"late3", epoch=e0, seq=0).error_code == \
            E.INVALID_PRODUCER_EPOCH
        assert t.end(False) == (E.NONE, t.pid, e0 + 2)
        _wait_state(c, tid, "CompleteAbort")
        # a retry of that abort gets the same answer; its other end does not
        assert t.end(False) == (E.NONE, t.pid, e0 + 2)
        assert t.end(True)[0] == E.INVALID_TXN_STATE
        assert _read_committed(c, topic) == [b"t1"]
        assert _read_committed(c, fresh) == []


def test_an_end_without_the_bump_writes_markers_of_its_own_version(
        txn_broker: BrokerProcess) -> None:
    """A transaction whose partition Produce v12 added, ended by EndTxn v4 (no epoch
    bump): its markers carry the batches' epoch, so they are written as transaction
    version 0 markers (the end decides, as Kafka's prepareAbortOrCommit) and the
    transaction completes instead of staying open on the partition."""
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        t = Txn2(c, f"v4end-{uuid.uuid4().hex[:6]}")
        e0 = t.epoch
        assert t.produce(topic, 0, b"a").error_code == E.NONE
        assert t.end(True, version=4)[0] == E.NONE
        d = _wait_state(c, t.tid, "CompleteCommit")
        assert d.producer_epoch == e0
        deadline = time.monotonic() + 10
        while _lso(c, topic) != 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _lso(c, topic) == 2
        assert _read_committed(c, topic) == [b"a"]


def test_txn_offset_commit_v5_adds_the_offsets_partition(txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        group = f"g5-{uuid.uuid4().hex[:6]}"
        r = c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
        assert r.coordinators[0].error_code == 0
        t = Txn2(c, f"o5-{uuid.uuid4().hex[:6]}")

        def commit_offset(offset: int, version: int = 5, epoch: int | None = None) -> int:
            r = c.request(28, version, {
                "transactional_id": t.tid, "group_id": group, "producer_id": t.pid,
                "producer_epoch": t.epoch if epoch is None else epoch,
                "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": topic, "partitions": [{
                    "partition_index": 0, "committed_offset": offset,
                    "committed_leader_epoch": -1, "committed_metadata": None}]}]})
            return int(r.topics[0].partitions[0].error_code)

        def fetched() -> int:
            r = c.request(9, 7, {"group_id": group, "require_stable": False,
                                 "topics": [{"name": topic, "partition_indexes": [0]}]})
            return int(r.topics[0].partitions[0].committed_offset)

        # v4 still needs AddOffsetsToTxn; v5 adds the group's partition itself
        assert commit_offset(5, version=4) == E.TRANSACTION_ABORTABLE
        assert commit_offset(5) == E.NONE
        assert _describe(c, t.tid).transaction_state == "Ongoing"
        assert fetched() == -1                                  # only once committed
        e0 = t.epoch
        assert t.end(True) == (E.NONE, t.pid, e0 + 1)
        deadline = time.monotonic() + 10
        while fetched() != 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fetched() == 5
        # a commit delayed from the ended transaction: fenced, nothing changes
        assert commit_offset(9, epoch=e0) == E.INVALID_PRODUCER_EPOCH
        assert _describe(c, t.tid).transaction_state == "CompleteCommit"
        assert fetched() == 5


def test_a_kip848_member_commits_offsets_in_its_transaction(txn_broker: BrokerProcess) -> None:
    """A consume-transform-produce member of a consumer-protocol group (KIP-848) commits
    with its member id and member epoch (franz-go's GroupTransactSession, Java's
    sendOffsetsToTransaction): accepted at its epoch, a stale epoch is ILLEGAL_GENERATION
    (STALE_MEMBER_EPOCH from v6), an unknown member UNKNOWN_MEMBER_ID; the offset counts
    once the transaction commits."""
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        group = f"g848-{uuid.uuid4().hex[:6]}"
        assert c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}) \
            .coordinators[0].error_code == 0
        mid = str(uuid.uuid4())
        hb = c.request(68, 1, {
            "group_id": group, "member_id": mid, "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
        assert hb.error_code == 0 and hb.member_epoch > 0, hb
        epoch = int(hb.member_epoch)
        t = Txn2(c, f"o848-{uuid.uuid4().hex[:6]}")

        def commit_offset(offset: int, member: str, member_epoch: int, version: int = 5) -> int:
            r = c.request(28, version, {
                "transactional_id": t.tid, "group_id": group, "producer_id": t.pid,
                "producer_epoch": t.epoch, "generation_id_or_member_epoch": member_epoch,
                "member_id": member, "group_instance_id": None, "topics": [{
                    "name": topic, "partitions": [{
                        "partition_index": 0, "committed_offset": offset,
                        "committed_leader_epoch": -1, "committed_metadata": None}]}]})
            return int(r.topics[0].partitions[0].error_code)

        assert commit_offset(3, mid, epoch + 1) == E.ILLEGAL_GENERATION
        assert commit_offset(3, "nobody", epoch) == E.UNKNOWN_MEMBER_ID
        assert commit_offset(7, mid, epoch) == E.NONE
        assert t.end(True)[0] == E.NONE
        deadline = time.monotonic() + 10
        while True:
            r = c.request(9, 7, {"group_id": group, "require_stable": True,
                                 "topics": [{"name": topic, "partition_indexes": [0]}]})
            p = r.topics[0].partitions[0]
            if (p.error_code, p.committed_offset) == (E.NONE, 7) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert (p.error_code, p.committed_offset) == (E.NONE, 7)
        c.request(68, 1, {"group_id": group, "member_id": mid, "member_epoch": -1,
                          "instance_id": None, "rack_id": None, "rebalance_timeout_ms": -1,
                          "subscribed_topic_names": None, "subscribed_topic_regex": None,
                          "server_assignor": None, "topic_partitions": None})


def test_produce_v13_and_txn_offset_commit_v6_name_topics_by_id(
        txn_broker: BrokerProcess) -> None:
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        md = c.request(3, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
                               "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        topic_id = md.topics[0].topic_id
        t = Txn2(c, f"id-{uuid.uuid4().hex[:6]}")
        p = t.produce(topic, 0, b"x", version=13, topic_id=topic_id)
        assert p.error_code == E.NONE
        r = c.request(0, 13, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                              "topic_data": [{"topic_id": uuid.uuid4(), "partition_data": [{
                                  "index": 0, "records": rb.build_batch(
                                      [rb.NewRecord(None, b"y")])}]}]})
        assert r.responses[0].partition_responses[0].error_code == E.UNKNOWN_TOPIC_ID
        group = f"g6-{uuid.uuid4().hex[:6]}"
        assert c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}) \
            .coordinators[0].error_code == 0
        bogus = uuid.uuid4()
        r = c.request(28, 6, {
            "transactional_id": t.tid, "group_id": group, "producer_id": t.pid,
            "producer_epoch": t.epoch, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [
                {"topic_id": topic_id, "partitions": [{
                    "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                    "committed_metadata": None}]},
                {"topic_id": bogus, "partitions": [{
                    "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                    "committed_metadata": None}]}]})
        assert [(x.topic_id, x.partitions[0].error_code) for x in r.topics] == [
            (topic_id, E.NONE), (bogus, E.UNKNOWN_TOPIC_ID)]
        assert t.end(True)[0] == E.NONE
        _wait_state(c, t.tid, "CompleteCommit")
        assert _read_committed(c, topic) == [b"x"]


def test_write_txn_markers_v2_needs_a_newer_epoch_for_a_tv2_marker(
        txn_broker: BrokerProcess) -> None:
    """KIP-1228: a transaction version 2 marker at the epoch of the open transaction's
    batches is a stale one (its transaction's end bumped the epoch); a TV0 marker at
    that epoch is what a transaction version 0 end writes."""
    with Client(txn_broker.bootstrap) as c:
        topic = _topic(c)
        t = Txn2(c, f"m2-{uuid.uuid4().hex[:6]}")
        assert t.produce(topic, 0, b"open").error_code == E.NONE

        def marker(epoch: int, tv: int) -> int:
            with Raw(txn_broker.bootstrap) as raw:
                raw.broker_login(txn_broker.broker_id, cluster_secret(txn_broker.data_dir))
                r = raw.call(27, 2, {"markers": [{
                    "producer_id": t.pid, "producer_epoch": epoch, "transaction_result": False,
                    "topics": [{"name": topic, "partition_indexes": [0]}],
                    "coordinator_epoch": 1 << 20, "transaction_version": tv}]})
            return int(r.markers[0].topics[0].partitions[0].error_code)

        assert marker(t.epoch, 2) == E.INVALID_PRODUCER_EPOCH
        assert _lso(c, topic) == 0                              # still open
        assert marker(t.epoch + 1, 2) == E.NONE                 # the bumped one ends it
        assert _lso(c, topic) == 2
        assert marker(t.epoch + 1, 2) == E.NONE                 # a retried marker
        assert marker(t.epoch, 0) == E.INVALID_PRODUCER_EPOCH   # older than the producer's


def test_below_transaction_version_2_the_new_versions_keep_their_older_meaning(
        txn_broker: BrokerProcess) -> None:
    """`kafka-features downgrade --feature transaction.version=1` (UpdateFeatures): a
    Produce v12 is only verified (no AddPartitionsToTxn: refused) and EndTxn v5 ends
    without an epoch bump; an upgrade back to 2 turns KIP-890 part 2 on again."""
    with Client(txn_broker.bootstrap) as c:
        def set_tv(level: int, kind: int) -> None:
            r = c.request(57, 1, {"timeout_ms": 10000, "validate_only": False,
                                  "feature_updates": [{"feature": "transaction.version",
                                                       "max_version_level": level,
                                                       "upgrade_type": kind}]})
            assert r.error_code == 0, r
            assert _features(c).get("transaction.version", 0) == level

        topic = _topic(c)
        set_tv(1, 2)  # SAFE_DOWNGRADE
        try:
            t = Txn2(c, f"tv1-{uuid.uuid4().hex[:6]}")
            e0 = t.epoch
            assert t.produce(topic, 0, b"x").error_code == E.TRANSACTION_ABORTABLE
            r = c.request(24, 3, {
                "v3_and_below_transactional_id": t.tid, "v3_and_below_producer_id": t.pid,
                "v3_and_below_producer_epoch": t.epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
            assert r.results_by_topic_v3_and_below[0].results_by_partition[0] \
                .partition_error_code == E.NONE
            assert t.produce(topic, 0, b"y").error_code == E.NONE
            assert t.end(True) == (E.NONE, t.pid, e0)            # no bump
            _wait_state(c, t.tid, "CompleteCommit")
        finally:
            set_tv(2, 1)
        t = Txn2(c, f"tv2-{uuid.uuid4().hex[:6]}")
        assert t.produce(topic, 0, b"z").error_code == E.NONE
        assert t.end(True) == (E.NONE, t.pid, t.epoch + 1)
        _wait_state(c, t.tid, "CompleteCommit")
        assert _read_committed(c, topic) == [b"y", b"z"]


# -- an exhausted epoch, across a restart ------------------------------------------------


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(tmp_path / "data")
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _on_loop(b: EmbeddedBroker, coro: Any) -> Any:
    assert b._loop is not None
    return asyncio.run_coroutine_threadsafe(coro, b._loop).result(15)


def _records(b: EmbeddedBroker, tid: str) -> list[Any]:
    """Every `__transaction_state` record of ``tid`` in this broker's log, in order."""
    tc = b.broker.transactions
    p = b.broker.replicas.get(TXN_TOPIC, tc.partition_for(tid))
    out = []
    for seg in list(p.log.segments):
        for pos, h in seg.iter_headers():
            if h.is_control:
                continue
            for rec in rb.decode_records(seg.read_batch_at(pos, h), h):
                if rec.key is not None and rec.value is not None and decode_key(rec.key) == tid:
                    out.append(decode_value(tid, rec.value))
    return out


def test_an_exhausted_epoch_rolls_the_producer_id_durably(embedded: EmbeddedBroker) -> None:
    tid = f"ex-{uuid.uuid4().hex[:6]}"
    with Client(embedded.bootstrap_servers) as c:
        topic = _topic(c)
        t = Txn2(c, tid)
        tc = embedded.broker.transactions

        async def near_exhaustion() -> None:
            # the epoch 32765 (as after that many transactions), written as any transition
            m = tc.txns[tid]
            new = m.copy()
            new.producer_epoch = 32765
            answer, err = await tc.shell.write(tc.partition_for(tid),
                                               lambda s, now: s.put(now, new))
            assert (err, answer.error) == (E.NONE, E.NONE)

        _on_loop(embedded, near_exhaustion())
        old = t.pid
        t.next_transaction(old, 32765)
        assert t.produce(topic, 0, b"a").error_code == E.NONE
        assert t.end(True) == (E.NONE, old, 32766)
        _wait_state(c, tid, "CompleteCommit")
        t.next_transaction(old, 32766)
        assert t.produce_retrying(topic, 0, b"b").error_code == E.NONE
        err, new_pid, new_epoch = t.end(True)                   # exhausted: a new id
        assert err == E.NONE and new_pid != old and new_epoch == 0
        d = _wait_state(c, tid, "CompleteCommit")
        assert (d.producer_id, d.producer_epoch) == (new_pid, 0)
        # the prepare record named the next producer id before EndTxn was answered
        prepared = [m for m in _records(embedded, tid) if m.state.name == "PREPARE_COMMIT"]
        assert (prepared[-1].producer_id, prepared[-1].producer_epoch,
                prepared[-1].next_producer_id, prepared[-1].client_tv) == (
            old, 32767, new_pid, 2)
        assert _read_committed(c, topic) == [b"a", b"b"]
    embedded.stop()
    embedded.start()
    with Client(embedded.bootstrap_servers) as c:
        deadline = time.monotonic() + 15
        while True:
            r = c.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
            if r.coordinators[0].error_code == 0:
                d = _describe(c, tid)
                if d.error_code == 0:
                    break
            assert time.monotonic() < deadline, r
            time.sleep(0.1)
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == (
            "CompleteCommit", new_pid, 0)
        t.c = c
        # a retry of that EndTxn, after the restart: recognised (the previous producer
        # id is in the log), the same answer
        assert t.end(True, epoch=32766, pid=old) == (E.NONE, new_pid, 0)
        # and the old producer id is fenced for good
        t.next_transaction(old, 32766)
        assert t.produce(topic, 0, b"zombie", seq=5).error_code in (
            E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_ID_MAPPING, E.INVALID_TXN_STATE)
        t.next_transaction(new_pid, 0)
        assert t.produce(topic, 0, b"c").error_code == E.NONE
        assert t.end(True) == (E.NONE, new_pid, 1)
        _wait_state(c, tid, "CompleteCommit")
        assert _read_committed(c, topic) == [b"a", b"b", b"c"]
