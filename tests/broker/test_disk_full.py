"""A full disk answers KAFKA_STORAGE_ERROR, loses nothing acknowledged, keeps serving.

The data directory lives on a small tmpfs so that the disk really fills up.
Mounting needs root (CI runs as root); elsewhere the test is skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jocko_py.client import Client, KafkaError
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess
from tests.support.tmpfs import small_tmpfs


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", "3m") as mnt:
        yield mnt


def test_full_disk_gets_storage_error_and_broker_keeps_serving(small_disk: Path,
                                                               tmp_path: Path) -> None:
    broker = BrokerProcess(small_disk / "data", log_path=tmp_path / "broker.log",
                           overrides={"log.segment.bytes": "1048576"})
    broker.start()
    try:
        value = os.urandom(60_000)
        acked: list[int] = []
        with Client(broker.bootstrap) as c:
            c.create_topic("fill", 1)
            error = None
            for _ in range(200):
                try:
                    acked.append(c.produce("fill", 0, rb.build_batch(
                        [rb.NewRecord(None, value, (), 1)]), acks=1))
                except KafkaError as e:
                    error = e.code
                    break
            assert error == ErrorCode.KAFKA_STORAGE_ERROR, broker.log_tail()
            assert acked == list(range(len(acked))) and len(acked) > 5
            # every acknowledged record is still readable, over a fresh connection
        with Client(broker.bootstrap) as c:
            offset, seen = 0, 0
            while offset < len(acked):
                p = c.fetch("fill", 0, offset, max_bytes=1 << 20)
                data = memoryview(p.records or b"")
                for pos, h in rb.iter_batches(data, validate_crc=True, allow_partial_tail=True):
                    (rec,) = rb.decode_records(data[pos:pos + h.size])
                    assert rec.value == value
                    seen += 1
                    offset = h.next_offset
            assert seen == len(acked)
            assert c.list_offset("fill", 0, -1)[0] == len(acked)
    finally:
        broker.stop()
