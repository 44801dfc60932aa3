"""Idempotent produce against a real broker: sequence checks, duplicates, fencing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jocko_py.client import Client, KafkaError
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[Client]:
    with Client(broker.bootstrap) as c:
        c.create_topic("idem", 1)
        yield c


def init_pid(c: Client) -> tuple[int, int]:
    r = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                          "producer_id": -1, "producer_epoch": -1})
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def batch(pid: int, epoch: int, seq: int, n: int = 2, tag: str = "") -> bytes:
    recs = [rb.NewRecord(b"k", f"v{seq + i}{tag}".encode(), (), 1000) for i in range(n)]
    return rb.build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_producer_ids_are_unique_and_survive_restart(broker: BrokerProcess) -> None:
    with Client(broker.bootstrap) as c:
        first = {init_pid(c)[0] for _ in range(5)}
    broker.restart()
    with Client(broker.bootstrap) as c:
        after = {init_pid(c)[0] for _ in range(5)}
    assert len(first) == 5 and len(after) == 5 and not first & after


def test_in_order_batches_get_consecutive_offsets(client: Client) -> None:
    pid, epoch = init_pid(client)
    assert client.produce("idem", 0, batch(pid, epoch, 0)) == 0
    assert client.produce("idem", 0, batch(pid, epoch, 2)) == 2


def test_duplicate_batch_is_answered_with_original_offset(client: Client) -> None:
    pid, epoch = init_pid(client)
    client.produce("idem", 0, batch(pid, epoch, 0))
    client.produce("idem", 0, batch(pid, epoch, 2))
    # retry of the first batch: same offsets, nothing appended
    assert client.produce("idem", 0, batch(pid, epoch, 0)) == 0
    assert client.list_offset("idem", 0, -1)[0] == 4


def test_sequence_gap_is_out_of_order(client: Client) -> None:
    pid, epoch = init_pid(client)
    client.produce("idem", 0, batch(pid, epoch, 0))
    with pytest.raises(KafkaError) as e:
        client.produce("idem", 0, batch(pid, epoch, 5))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_old_epoch_is_fenced(client: Client) -> None:
    pid, _ = init_pid(client)
    client.produce("idem", 0, batch(pid, 1, 0))
    with pytest.raises(KafkaError) as e:
        client.produce("idem", 0, batch(pid, 0, 2))
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_epoch_must_restart_sequence(client: Client) -> None:
    pid, _ = init_pid(client)
    client.produce("idem", 0, batch(pid, 0, 0))
    with pytest.raises(KafkaError) as e:
        client.produce("idem", 0, batch(pid, 1, 7))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert client.produce("idem", 0, batch(pid, 1, 0)) == 2


def test_epoch_bump_keeps_producer_id(client: Client) -> None:
    pid, epoch = init_pid(client)
    r = client.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                               "producer_id": pid, "producer_epoch": epoch})
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)


def test_duplicate_detected_after_broker_restart(broker: BrokerProcess) -> None:
    with Client(broker.bootstrap) as c:
        c.create_topic("idem", 1)
        pid, epoch = init_pid(c)
        c.produce("idem", 0, batch(pid, epoch, 0))
        c.produce("idem", 0, batch(pid, epoch, 2))
    broker.kill()  # no clean-shutdown snapshot: state is rebuilt from the log
    broker.start()
    with Client(broker.bootstrap) as c:
        assert c.produce("idem", 0, batch(pid, epoch, 2)) == 2
        assert c.produce("idem", 0, batch(pid, epoch, 4)) == 4
        with pytest.raises(KafkaError) as e:
            c.produce("idem", 0, batch(pid, epoch, 9))
        assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_compacted_topic_refuses_records_without_key(broker: BrokerProcess) -> None:
    with Client(broker.bootstrap) as c:
        c.create_topic("compacted", 1, configs={"cleanup.policy": "compact"})
        with pytest.raises(KafkaError) as e:
            c.produce("compacted", 0, rb.build_batch([rb.NewRecord(b"k", b"v"),
                                                      rb.NewRecord(None, b"v")],
                                                     compression=1))
        assert e.value.code == ErrorCode.INVALID_RECORD
        assert c.produce("compacted", 0, rb.build_batch([rb.NewRecord(b"k", b"v")])) == 0
