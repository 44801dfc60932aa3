"""Record batch v2: build/parse, validation, patching, record decoding."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jocko_py.protocol import records as r
from jocko_py.protocol.records import (
    ControlType,
    CorruptRecordError,
    InvalidRecordError,
    NewRecord,
    RecordBatchHeader,
    UnsupportedMagicError,
    build_batch,
    build_control_batch,
    control_type,
    decode_records,
    is_control_batch,
    parse_header,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
    split_batches,
    verify_crc,
)


def _batch(n: int = 3, **kw: object) -> bytes:
    recs = [
        NewRecord(f"k{i}".encode(), f"value-{i}".encode(), [("h", b"x")], 1000 + i)
        for i in range(n)
    ]
    return build_batch(recs, **kw)  # type: ignore[arg-type]


def test_header_is_61_bytes_and_fields_round_trip() -> None:
    b = _batch(
        3,
        base_offset=42,
        producer_id=7,
        producer_epoch=2,
        base_sequence=5,
        is_transactional=True,
        partition_leader_epoch=9,
    )
    h = parse_header(b)
    assert r.HEADER_SIZE == 61
    assert h.base_offset == 42
    assert h.size == len(b)
    assert h.magic == 2
    assert h.records_count == 3
    assert h.last_offset_delta == 2
    assert h.last_offset == 44 and h.next_offset == 45
    assert h.base_timestamp == 1000 and h.max_timestamp == 1002
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 5)
    assert h.is_transactional and not h.is_control
    assert h.partition_leader_epoch == 9
    assert h.compression == 0 and h.timestamp_type == 0
    # CRC is CRC-32C over attributes..end, computed independently here.
    assert h.crc == crc32c.crc32c(b[21:])


def test_parse_header_too_short_raises_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        parse_header(_batch()[:60])


def test_split_batches_returns_each_batch() -> None:
    a, b = _batch(2, base_offset=0), _batch(5, base_offset=2)
    out = split_batches(a + b, validate_crc=True)
    assert [bytes(mv) for _, mv in out] == [a, b]
    assert [h.records_count for h, _ in out] == [2, 5]
    assert split_batches(b"", validate_crc=True) == []


def test_flipped_byte_fails_crc() -> None:
    b = bytearray(_batch())
    b[70] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        split_batches(bytes(b), validate_crc=True)
    # Without validation only the structure is checked.
    assert len(split_batches(bytes(b), validate_crc=False)) == 1
    assert not verify_crc(bytes(b))


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 60, 61, 70])
def test_truncated_input_raises_corrupt(cut: int) -> None:
    b = _batch() + _batch()
    with pytest.raises(CorruptRecordError):
        split_batches(b[: len(b) - cut], validate_crc=False)


def test_huge_claimed_length_is_rejected_without_allocating() -> None:
    b = bytearray(_batch())
    struct.pack_into(">i", b, 8, 2_000_000_000)
    with pytest.raises(CorruptRecordError, match="claims"):
        split_batches(bytes(b), validate_crc=False)


def test_length_below_header_size_is_corrupt() -> None:
    b = bytearray(_batch())
    struct.pack_into(">i", b, 8, 10)
    with pytest.raises(CorruptRecordError):
        split_batches(bytes(b), validate_crc=False)


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_wrong_magic_raises_unsupported(magic: int) -> None:
    b = bytearray(_batch())
    b[16] = magic
    with pytest.raises(UnsupportedMagicError) as info:
        split_batches(bytes(b), validate_crc=False)
    assert info.value.magic == magic
    assert info.value.code == 87


def test_legacy_message_set_is_unsupported_magic() -> None:
    # magic 1 message: offset, size, crc, magic, attributes, timestamp, key, value
    body = struct.pack(">bbqii", 1, 0, 0, -1, 1) + b"v"
    msg = struct.pack(">qiI", 0, len(body) + 4, 0) + body
    with pytest.raises(UnsupportedMagicError):
        split_batches(msg, validate_crc=False)


def test_error_codes() -> None:
    assert CorruptRecordError("x").code == 2
    assert InvalidRecordError("x").code == 87
    assert issubclass(UnsupportedMagicError, r.RecordError)


def test_patching_offset_and_epoch_keeps_crc_valid() -> None:
    buf = bytearray(_batch() + _batch())
    [(_, _), (h2, _)] = split_batches(buf, validate_crc=True)
    patch_base_offset(buf, 0, 1234)
    patch_leader_epoch(buf, 0, 77)
    patch_base_offset(buf, h2.size, 5000)
    out = split_batches(buf, validate_crc=True)
    assert out[0][0].base_offset == 1234 and out[0][0].partition_leader_epoch == 77
    assert out[1][0].base_offset == 5000
    recs = decode_records(out[0][1])
    assert [x.offset for x in recs] == [1234, 1235, 1236]


def test_set_log_append_time_updates_crc_and_timestamps() -> None:
    buf = bytearray(_batch(3))
    set_log_append_time(buf, 0, 99_999)
    [(h, mv)] = split_batches(buf, validate_crc=True)
    assert h.max_timestamp == 99_999 and h.timestamp_type == 1
    assert [x.timestamp for x in decode_records(mv)] == [99_999] * 3


def test_decode_records_round_trip_with_nulls_and_headers() -> None:
    recs = [
        NewRecord(None, None, (), 5),
        NewRecord(b"", b"", [("a", None), ("b", b"")], 6),
        NewRecord(b"k", b"v" * 1000, [("\u00e9", b"\x00\xff")], 4),
    ]
    out = decode_records(build_batch(recs, base_offset=10))
    assert [(x.offset, x.timestamp, x.key, x.value, x.headers) for x in out] == [
        (10, 5, None, None, []),
        (11, 6, b"", b"", [("a", None), ("b", b"")]),
        (12, 4, b"k", b"v" * 1000, [("\u00e9", b"\x00\xff")]),
    ]
    assert parse_header(build_batch(recs)).max_timestamp == 6


def test_decode_rejects_record_length_past_end() -> None:
    b = bytearray(build_batch([NewRecord(b"k", b"v", (), 1)]))
    b[61] = 0x7E  # record length varint (zig-zag 63) now exceeds the batch
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(b))


def test_decode_rejects_overlong_varint() -> None:
    b = bytearray(build_batch([NewRecord(b"k", b"v", (), 1)]))
    b[61:67] = b"\xff\xff\xff\xff\xff\xff"
    with pytest.raises(CorruptRecordError, match="varint"):
        decode_records(bytes(b))


def test_check_produce_batch_rules() -> None:
    h = parse_header(_batch(3))
    r.check_produce_batch(h)
    with pytest.raises(InvalidRecordError):
        r.check_produce_batch(h._replace(records_count=2))
    with pytest.raises(InvalidRecordError):
        r.check_produce_batch(
            parse_header(
                build_control_batch(
                    ControlType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0
                )
            )
        )


@pytest.mark.parametrize("ctype", [ControlType.ABORT, ControlType.COMMIT])
def test_control_batch_round_trip(ctype: ControlType) -> None:
    b = build_control_batch(
        ctype, producer_id=5, producer_epoch=1, coordinator_epoch=3, timestamp=10
    )
    h = parse_header(b)
    assert h.is_control and h.is_transactional and is_control_batch(b)
    assert not is_control_batch(_batch())
    [rec] = decode_records(b)
    assert control_type(rec) is ctype
    assert rec.value == struct.pack(">hi", 0, 3)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batch_round_trip(codec: int) -> None:
    recs = [NewRecord(b"key%d" % i, b"payload " * 50, [("h", b"v")], 100 + i) for i in range(20)]
    b = build_batch(recs, compression=codec)
    [(h, mv)] = split_batches(b, validate_crc=True)
    assert h.compression == codec
    out = decode_records(mv)
    assert [(x.key, x.value, x.timestamp) for x in out] == [
        (x.key, x.value, x.timestamp) for x in recs
    ]


def test_compressed_batch_bomb_limit() -> None:
    b = build_batch([NewRecord(None, b"\x00" * 2_000_000, (), 1)], compression=4)
    assert len(b) < 10_000
    with pytest.raises(r.RecordBatchTooLargeError):
        decode_records(b, max_decompressed=100_000)


def test_header_namedtuple_properties() -> None:
    h = RecordBatchHeader(0, 49, -1, 2, 0, 0x7F, 4, 0, 0, -1, -1, 2147483647, 5)
    assert h.compression == 7 and h.timestamp_type == 1
    assert h.is_transactional and h.is_control and h.has_delete_horizon
    assert h.last_sequence == 3  # wraps to 0 after int32 max, as Kafka does


_header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16)))
_record = st.builds(
    NewRecord,
    st.one_of(st.none(), st.binary(max_size=32)),
    st.one_of(st.none(), st.binary(max_size=64)),
    st.lists(_header, max_size=3),
    st.integers(min_value=0, max_value=2**42),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_record, min_size=1, max_size=8), st.integers(0, 2**40), st.sampled_from([0, 1, 4]))
def test_hypothesis_round_trip(recs: list[NewRecord], base: int, codec: int) -> None:
    b = build_batch(recs, base_offset=base, compression=codec)
    [(h, mv)] = split_batches(b, validate_crc=True)
    out = decode_records(mv)
    assert [(x.offset, x.timestamp, x.key, x.value, x.headers) for x in out] == [
        (base + i, x.timestamp, x.key, x.value, list(x.headers)) for i, x in enumerate(recs)
    ]
    assert h.max_timestamp == max(x.timestamp for x in recs if x.timestamp is not None)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_only_raises_record_errors(data: bytes) -> None:
    try:
        for _, mv in split_batches(data, validate_crc=False):
            decode_records(mv)
    except r.RecordError:
        pass
