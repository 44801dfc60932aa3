"""Fetch long polling and size limits, ListOffsets specials, against a real broker."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess


@pytest.fixture(scope="module")
def mod_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("fetch") / "data")
    b.start()
    try:
        with Client(b.bootstrap) as c:
            c.create_topic("f", 3)
        yield b
    finally:
        b.stop()


def batch(n: int, size: int = 100, ts: int = 1000) -> bytes:
    return rb.build_batch([rb.NewRecord(None, b"x" * size, (), ts + i) for i in range(n)])


def fetch(c: Client, parts: list[tuple[int, int, int]], *, max_wait_ms: int = 0,
          min_bytes: int = 0, max_bytes: int = 50 << 20, isolation: int = 0) -> Any:
    return c.request(1, 12, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
        "max_bytes": max_bytes, "isolation_level": isolation, "session_id": 0,
        "session_epoch": -1, "topics": [{"topic": "f", "partitions": [
            {"partition": p, "fetch_offset": off, "current_leader_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": pmax}
            for p, off, pmax in parts]}], "forgotten_topics_data": [], "rack_id": ""})


def sizes(resp: Any) -> list[int]:
    return [len(p.records or b"") for p in resp.responses[0].partitions]


def test_long_poll_returns_when_data_arrives(mod_broker: BrokerProcess) -> None:
    with Client(mod_broker.bootstrap) as c, Client(mod_broker.bootstrap) as producer:
        end = c.list_offset("f", 0, -1)[0]
        timer = threading.Timer(0.5, lambda: producer.produce("f", 0, batch(1)))
        t0 = time.monotonic()
        timer.start()
        try:
            r = fetch(c, [(0, end, 1 << 20)], max_wait_ms=10_000, min_bytes=1)
        finally:
            timer.join(10)
        waited = time.monotonic() - t0
        assert sizes(r)[0] > 0
        assert 0.3 < waited < 8, waited


def test_long_poll_times_out_after_max_wait(mod_broker: BrokerProcess) -> None:
    with Client(mod_broker.bootstrap) as c:
        end = c.list_offset("f", 2, -1)[0]
        t0 = time.monotonic()
        r = fetch(c, [(2, end, 1 << 20)], max_wait_ms=600, min_bytes=1)
        waited = time.monotonic() - t0
        assert sizes(r) == [0] and r.responses[0].partitions[0].error_code == 0
        assert 0.5 < waited < 5, waited


def test_partition_and_response_limits_with_first_batch_rule(mod_broker: BrokerProcess) -> None:
    with Client(mod_broker.bootstrap) as c:
        for _ in range(5):
            c.produce("f", 1, batch(10, 1000))  # ~10 KB batches
        start = c.list_offset("f", 1, -2)[0]
        one = len(batch(10, 1000))
        # a partition limit below one batch still returns that one whole batch
        r = fetch(c, [(1, start, 100)])
        assert sizes(r) == [one]
        # partition limit of 2.5 batches: two whole batches
        r = fetch(c, [(1, start, int(one * 2.5))])
        assert sizes(r) == [2 * one]
        # response limit is shared: the second partition gets what is left
        r = fetch(c, [(1, start, 1 << 20), (1, start, 1 << 20)], max_bytes=int(one * 3.5))
        got = sizes(r)
        assert got[0] == 3 * one and got[1] == 0


def test_fetch_inside_a_batch_returns_that_batch(mod_broker: BrokerProcess) -> None:
    with Client(mod_broker.bootstrap) as c:
        base = c.produce("f", 2, batch(5))
        r = fetch(c, [(2, base + 3, 1 << 20)])
        data = r.responses[0].partitions[0].records
        h = rb.parse_header(data)
        assert h.base_offset == base and h.last_offset == base + 4


def test_out_of_range_and_unknown_partition(mod_broker: BrokerProcess) -> None:
    with Client(mod_broker.bootstrap) as c:
        end = c.list_offset("f", 0, -1)[0]
        r = fetch(c, [(0, end + 100, 1 << 20), (9, 0, 1 << 20)])
        codes = [p.error_code for p in r.responses[0].partitions]
        assert codes == [ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_list_offsets_earliest_latest_timestamp_and_max(mod_broker: BrokerProcess) -> None:
    with Client(mod_broker.bootstrap) as c:
        c.create_topic("ts", 1)
        c.produce("ts", 0, rb.build_batch([rb.NewRecord(None, b"a", (), 100),
                                           rb.NewRecord(None, b"b", (), 300)]))
        c.produce("ts", 0, rb.build_batch([rb.NewRecord(None, b"c", (), 200),
                                           rb.NewRecord(None, b"d", (), 500)]))
        assert c.list_offset("ts", 0, -2)[0] == 0
        assert c.list_offset("ts", 0, -1)[0] == 4
        assert c.list_offset("ts", 0, 250) == (1, 300)  # first record with ts >= 250
        assert c.list_offset("ts", 0, 301) == (3, 500)
        assert c.list_offset("ts", 0, 501) == (-1, -1)
        assert c.list_offset("ts", 0, -3) == (3, 500)  # max timestamp (v7)


def test_max_timestamp_needs_v7(mod_broker: BrokerProcess) -> None:
    with Client(mod_broker.bootstrap) as c:
        r = c.request(2, 6, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "f", "partitions": [{"partition_index": 0, "timestamp": -3}]}]})
        p = r.topics[0].partitions[0]
        assert (p.error_code, p.offset) == (ErrorCode.UNSUPPORTED_VERSION, -1)


def test_tiered_storage_timestamps_as_kafka_44_answers_without_it(
        mod_broker: BrokerProcess) -> None:
    """Probed on Apache Kafka 4.4.0 (no remote storage): -5 latest tiered (v9+) and -6
    earliest pending upload (v11+, KIP-1023) find nothing (offset, timestamp and leader
    epoch -1); below those versions they are UNSUPPORTED_VERSION; -4 is the log start."""
    with Client(mod_broker.bootstrap) as c:
        c.create_topic("tiered", 1)
        c.produce("tiered", 0, batch(3))

        def ask(version: int, ts: int) -> tuple[int, int, int, int]:
            r = c.request(2, version, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                                       "topics": [{"name": "tiered", "partitions": [
                                           {"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": ts}]}]})
            p = r.topics[0].partitions[0]
            return int(p.error_code), int(p.offset), int(p.timestamp), int(p.leader_epoch)
        for version, ts in [(11, -6), (11, -5), (10, -5), (9, -5)]:
            assert ask(version, ts) == (0, -1, -1, -1), (version, ts)
        for version, ts in [(10, -6), (9, -6), (8, -5)]:
            assert ask(version, ts)[0] == ErrorCode.UNSUPPORTED_VERSION, (version, ts)
        assert ask(11, -4) == (0, 0, -1, 0)
        assert ask(11, -1)[:2] == (0, 3)


def test_newer_leader_epoch_than_ours_is_unknown(mod_broker: BrokerProcess) -> None:
    with Client(mod_broker.bootstrap) as c:
        r = c.request(1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "f", "partitions": [
                {"partition": 0, "fetch_offset": 0, "current_leader_epoch": 5,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        assert r.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        lo = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "f", "partitions": [{"partition_index": 0, "current_leader_epoch": 5,
                                          "timestamp": -1}]}]})
        assert lo.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_error_partitions_carry_empty_not_null_records(mod_broker: BrokerProcess) -> None:
    """Regression (fault campaign, partition nemesis): a partition answered with an error
    (here OFFSET_OUT_OF_RANGE and UNKNOWN_TOPIC_OR_PARTITION; in the campaign
    NOT_LEADER_OR_FOLLOWER from a deposed leader) carried null records, which librdkafka
    rejects ("Protocol parse failure for Fetch v12 ... invalid MessageSetSize -1") and so
    drops the whole response. Kafka sends empty records."""
    with Client(mod_broker.bootstrap) as c:
        end = c.list_offset("f", 0, -1)[0]
        r = fetch(c, [(0, end + 100, 1 << 20), (9, 0, 1 << 20)])
        assert [p.records for p in r.responses[0].partitions] == [b"", b""]
