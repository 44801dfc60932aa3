"""Transactions across broker restarts (one broker, SIGKILL or SIGTERM).

What must survive: committed transactions stay visible to read_committed readers
and aborted ones hidden (markers, .txnindex, producer state recovered from the log);
the group's transactional offsets committed before the crash are still committed
(replayed from __consumer_offsets with their markers); a transaction left open by
the crash keeps the LSO at its start until the coordinator, reloaded from
__transaction_state, aborts it when a new producer with the same transactional.id
initialises.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from jocko_py.protocol.errors import ErrorCode as E
from tests.support.broker import BrokerProcess
from tests.transactions.conftest import OVERRIDES
from tests.transactions.test_confluent_transactions import TIMEOUT, _producer, _read_all, _topic


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES)
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.mark.parametrize("hard", [True, False], ids=["sigkill", "sigterm"])
def test_transactions_survive_a_restart(own_broker: BrokerProcess, hard: bool) -> None:
    b = own_broker
    src, dst = _topic(b, 1), _topic(b, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    meta = c.consumer_group_metadata()
    c.close()
    p = _producer(b, tid)
    p.begin_transaction()
    p.produce(dst, value=b"committed", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 7)], meta, TIMEOUT)
    p.commit_transaction(TIMEOUT)
    p.begin_transaction()
    p.produce(dst, value=b"aborted", partition=0)
    p.flush(TIMEOUT)
    p.abort_transaction(TIMEOUT)
    p.begin_transaction()
    p.produce(dst, value=b"in-flight", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 9)], meta, TIMEOUT)
    p.flush(TIMEOUT)
    if hard:
        b.kill()
    else:
        b.stop_gracefully()
    del p  # its transaction is left open
    b.start()

    # the open transaction still holds the LSO back
    assert [v for _, v in _read_all(b, dst, 1, "read_committed", 1, wait=15.0)] == [b"committed"]
    # the group's offset is pending in that transaction: a require_stable OffsetFetch
    # (librdkafka's default) gets UNSTABLE_OFFSET_COMMIT and retries until it gives up
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        with pytest.raises(KafkaException):
            c.committed([TopicPartition(src, 0)], 1.5)
    finally:
        c.close()
    # a new producer instance fences the old one: its transaction is aborted
    p2 = _producer(b, tid)
    p2.begin_transaction()
    p2.produce(dst, value=b"after", partition=0)
    p2.commit_transaction(TIMEOUT)
    got = _read_all(b, dst, 1, "read_committed", 2)
    assert [v for _, v in got] == [b"committed", b"after"]
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        assert c.committed([TopicPartition(src, 0)], TIMEOUT)[0].offset == 7
    finally:
        c.close()
    plain = _read_all(b, dst, 1, "read_uncommitted", 4)
    assert sorted(v for _, v in plain) == [b"aborted", b"after", b"committed", b"in-flight"]


def test_idle_transactional_id_expires(tmp_path: Path) -> None:
    """transactional.id.expiration.ms: an idle id is removed with a tombstone (also
    after a restart) and its next producer gets a fresh producer id."""
    from jocko_py.client import Client
    from tests.transactions.test_protocol_transactions import Txn, _describe

    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES | {
        "transactional.id.expiration.ms": "1000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "100",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    b.start()
    try:
        tid = f"exp-{uuid.uuid4().hex[:6]}"
        with Client(b.bootstrap) as c:
            t = Txn(c, tid)
            assert _describe(c, tid).transaction_state == "Empty"
            deadline = time.monotonic() + 10
            while _describe(c, tid).error_code == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _describe(c, tid).error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        b.stop_gracefully()
        b.start()
        with Client(b.bootstrap) as c:
            r = c.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
            assert r.coordinators[0].error_code == 0
            deadline = time.monotonic() + 10
            while _describe(c, tid).error_code == E.COORDINATOR_LOAD_IN_PROGRESS \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _describe(c, tid).error_code == E.TRANSACTIONAL_ID_NOT_FOUND
            t2 = Txn(c, tid)
            assert t2.pid != t.pid and t2.epoch == 0
    finally:
        b.stop()
