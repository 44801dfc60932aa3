"""Cross-check record batches and codecs against kafka-python, an independent implementation."""

from __future__ import annotations

import pytest

from jocko_py.protocol.records import (
    NewRecord,
    build_batch,
    decode_records,
    split_batches,
)

kafka_records = pytest.importorskip("kafka.record.default_records")
DefaultRecordBatch = kafka_records.DefaultRecordBatch
DefaultRecordBatchBuilder = kafka_records.DefaultRecordBatchBuilder

CODECS = [0, 1, 2, 3, 4]
RECORDS = [
    NewRecord(b"key-0", b"value " * 40, [("trace", b"abc"), ("empty", b"")], 1_700_000_000_000),
    NewRecord(None, b"no key", [], 1_700_000_000_005),
    NewRecord(b"k2", None, [("n", None)], 1_700_000_000_001),
]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_here(codec: int) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=42,
        producer_epoch=1,
        base_sequence=7,
        batch_size=1 << 20,
    )
    for i, rec in enumerate(RECORDS):
        builder.append(
            i, timestamp=rec.timestamp, key=rec.key, value=rec.value, headers=list(rec.headers)
        )
    data = bytes(builder.build())
    [(h, mv)] = split_batches(data, validate_crc=True)
    assert h.compression == codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 1, 7)
    assert h.records_count == 3 and h.last_offset_delta == 2
    out = decode_records(mv)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == [
        (i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_in_kafka_python(codec: int) -> None:
    data = build_batch(
        RECORDS,
        base_offset=100,
        compression=codec,
        producer_id=9,
        producer_epoch=3,
        base_sequence=11,
    )
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.validate_crc()
    assert batch.base_offset == 100 and batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 3, 11)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [
        (100 + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(RECORDS)
    ]
