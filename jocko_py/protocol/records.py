"""Kafka record batches (magic 2): header view, validation, patching, encode/decode.

This module owns the byte layout of a record batch and nothing else: it does no
I/O.  The broker validates produced batches with :func:`split_batches`, the
commit log patches offsets with :func:`patch_base_offset` /
:func:`patch_leader_epoch`, and tools build batches with :func:`build_batch`.

Batch layout (big-endian), 61 header bytes then the records::

    offset  size  field
         0     8  baseOffset
         8     4  batchLength          (bytes after this field: size = batchLength + 12)
        12     4  partitionLeaderEpoch
        16     1  magic                (2)
        17     4  crc                  (CRC-32C of bytes [21, end))
        21     2  attributes           (bits 0-2 codec, 3 timestamp type,
                                        4 transactional, 5 control, 6 delete horizon)
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61     .  records (compressed as a whole when codec != 0)

baseOffset and partitionLeaderEpoch lie outside the CRC, so the log can assign
them without re-encoding; maxTimestamp and attributes lie inside it.

Each record: length varint, attributes int8, timestampDelta varlong,
offsetDelta varint, keyLength varint + key, valueLength varint + value,
headerCount varint, then per header keyLength varint + key (UTF-8),
valueLength varint + value.  Varints are zig-zag encoded; -1 lengths mean null.
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, TypeAlias

import crc32c

from jocko_py.protocol.record_errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchTooLargeError,
    RecordError,
    UnsupportedMagicError,
)

__all__ = [
    "ATTR_OFFSET",
    "CURRENT_MAGIC",
    "DEFAULT_DECOMPRESS_LIMIT",
    "BATCH_LENGTH_OFFSET",
    "CRC_OFFSET",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "ControlType",
    "CorruptRecordError",
    "InvalidRecordError",
    "NewRecord",
    "Record",
    "RecordBatchHeader",
    "RecordBatchTooLargeError",
    "RecordError",
    "UnsupportedMagicError",
    "build_batch",
    "build_control_batch",
    "check_produce_batch",
    "compute_crc",
    "control_marker",
    "control_type",
    "decode_records",
    "is_control_batch",
    "iter_batches",
    "parse_header",
    "patch_base_offset",
    "patch_leader_epoch",
    "set_log_append_time",
    "split_batches",
    "verify_crc",
]

# --- errors -------------------------------------------------------------------

# RecordError and its kinds are in record_errors.py (the codecs in compression.py raise
# them without importing this module) and are this module's names too (see __all__).


# --- layout -------------------------------------------------------------------

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength precede what batchLength counts
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49

BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTR_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_HDR_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_CTRL = struct.Struct(">hh")
_CTRL_VALUE = struct.Struct(">hi")

CURRENT_MAGIC = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

#: Default cap on decompressed records of one batch: a tiny compressed batch must
#: not be allowed to expand into gigabytes in memory.
DEFAULT_DECOMPRESS_LIMIT = 64 * 1024 * 1024

Buffer = bytes | bytearray | memoryview


class RecordBatchHeader(NamedTuple):
    """The 61-byte header of a v2 batch.  NamedTuple keeps parsing one C call."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, or -1.  Kafka wraps sequences past int32 max to 0."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        seq = self.base_sequence + self.last_offset_delta
        return seq - 0x7FFFFFFF - 1 if seq > 0x7FFFFFFF else seq


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class Record(NamedTuple):
    """A decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class NewRecord(NamedTuple):
    """A record to encode; ``timestamp=None`` means now."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None


# --- header, validation, splitting ----------------------------------------------


def parse_header(buf: Buffer, pos: int = 0) -> RecordBatchHeader:
    """Parse the batch header at ``pos``; raises CorruptRecordError if it is cut short."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch header needs {HEADER_SIZE} bytes, {max(0, len(buf) - pos)} left"
        )
    return RecordBatchHeader._make(_HEADER.unpack_from(buf, pos))


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of the batch at ``pos`` of total ``size`` bytes (attributes to end)."""
    mv = memoryview(buf)
    return int(crc32c.crc32c(mv[pos + ATTR_OFFSET : pos + size]))


def verify_crc(buf: Buffer, pos: int = 0) -> bool:
    """True when the stored CRC of the batch at ``pos`` matches its bytes."""
    header = parse_header(buf, pos)
    if len(buf) - pos < header.size:
        return False
    return compute_crc(buf, pos, header.size) == header.crc


def iter_batches(
    buf: Buffer, *, validate_crc: bool, allow_partial_tail: bool = False
) -> Iterable[tuple[int, RecordBatchHeader]]:
    """Yield ``(position, header)`` for each batch in ``buf``.

    With ``allow_partial_tail`` a cut-off last batch ends the iteration quietly
    (as in a fetch response); otherwise it is a CorruptRecordError.
    """
    n = len(buf)
    pos = 0
    while pos < n:
        remaining = n - pos
        if remaining < LOG_OVERHEAD:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"{remaining} trailing bytes at position {pos}")
        _, batch_length = _HDR_PREFIX.unpack_from(buf, pos)
        # Checked before anything is sized from the claimed length.
        if batch_length < MIN_BATCH_LENGTH:
            if remaining > MAGIC_OFFSET and buf[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
                raise UnsupportedMagicError(buf[pos + MAGIC_OFFSET])
            raise CorruptRecordError(f"record batch length {batch_length} at position {pos}")
        size = batch_length + LOG_OVERHEAD
        if remaining > MAGIC_OFFSET and buf[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
            raise UnsupportedMagicError(buf[pos + MAGIC_OFFSET])
        if size > remaining:
            if allow_partial_tail:
                return
            raise CorruptRecordError(
                f"record batch at position {pos} claims {size} bytes, only {remaining} present"
            )
        header = RecordBatchHeader._make(_HEADER.unpack_from(buf, pos))
        if validate_crc and compute_crc(buf, pos, size) != header.crc:
            raise CorruptRecordError(
                f"record batch at position {pos} (base offset {header.base_offset}) "
                "fails its CRC-32C check"
            )
        if header.records_count < 0:
            raise CorruptRecordError(f"negative record count {header.records_count}")
        yield pos, header
        pos += size


def split_batches(buf: Buffer, *, validate_crc: bool) -> list[tuple[RecordBatchHeader, memoryview]]:
    """Split a ``records`` blob into whole batches.

    Raises CorruptRecordError for truncated or garbled lengths or a bad CRC and
    UnsupportedMagicError for any magic other than 2.  An empty blob yields [].
    """
    mv = memoryview(buf)
    return [(h, mv[pos : pos + h.size]) for pos, h in iter_batches(mv, validate_crc=validate_crc)]


def check_produce_batch(header: RecordBatchHeader) -> None:
    """Rules Kafka applies to batches a producer sends (beyond length/CRC).

    Stored batches may legally break the count rule (compaction removes
    records), so this is only for the produce path.
    """
    if header.last_offset_delta < 0:
        raise InvalidRecordError("record batch has a negative last offset delta")
    if header.records_count <= 0:
        raise InvalidRecordError(f"invalid reported record count {header.records_count}")
    if header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record count {header.records_count} does not match offset range "
            f"{header.last_offset_delta + 1}"
        )
    if header.is_control:
        raise InvalidRecordError("clients may not produce control batches")
    if header.compression > 4:
        raise InvalidRecordError(f"unknown compression codec {header.compression}")


# --- patching -----------------------------------------------------------------


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's base offset in place (outside the CRC)."""
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, pos: int, leader_epoch: int) -> None:
    """Stamp the partition leader epoch in place (outside the CRC)."""
    _I32.pack_into(buf, pos + LEADER_EPOCH_OFFSET, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp`` and recompute its CRC.

    Both maxTimestamp and attributes are covered by the CRC, unlike the offset.
    """
    (batch_length,) = _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)
    (attrs,) = _I16.unpack_from(buf, pos + ATTR_OFFSET)
    _I16.pack_into(buf, pos + ATTR_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    crc = compute_crc(buf, pos, batch_length + LOG_OVERHEAD)
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)


# --- varints --------------------------------------------------------------------


def _read_varint(buf: Buffer, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Zig-zag varint at ``pos``; at most ``max_bytes`` (5 for int32, 10 for int64)."""
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)  # zig-zag (64-bit covers int32 too)
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


# --- decoding records -------------------------------------------------------------


def _read_bytes(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos, end, 5)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"invalid length {length}")
        return None, pos
    if length > end - pos:
        raise CorruptRecordError(f"length {length} exceeds the {end - pos} bytes left")
    return bytes(buf[pos : pos + length]), pos + length


def validate_record_structure(
    batch: Buffer,
    header: RecordBatchHeader,
    *,
    max_decompressed: int = DEFAULT_DECOMPRESS_LIMIT,
    require_keys: bool = False,
) -> None:
    """Check that the batch body is ``recordsCount`` length-delimited records.

    The produce path's check (Kafka decodes every produced batch): it walks
    only the record length prefixes, after decompressing, so a garbage body or
    a count that disagrees with the records is refused before it is stored,
    at a fraction of the cost of decoding every field. With ``require_keys``
    (compacted topics) a record without a key is refused too, as Kafka does.
    """
    mv = memoryview(batch)[HEADER_SIZE : header.size]
    data: Buffer
    if header.compression:
        from jocko_py.protocol import compression  # noqa: PLC0415 - keeps import cost lazy

        data = compression.decompress(header.compression, mv, limit=max_decompressed)
    else:
        data = mv
    status, n, bad_length, remaining = _walk(data, require_keys)
    if status == 1:
        raise CorruptRecordError(f"record {n}: a varint runs past the end of the record")
    if status == 2:
        raise CorruptRecordError(f"record {n}: a varint is too long")
    if status == 3:
        raise CorruptRecordError(f"record {n} claims {bad_length} bytes, {remaining} left")
    if status == 4:
        raise InvalidRecordError("Compacted topic cannot accept message without key")
    if n != header.records_count:
        raise InvalidRecordError(
            f"batch says {header.records_count} records but holds {n}"
        )


def walk_records_py(data: Buffer, require_keys: bool) -> tuple[int, int, int, int]:
    """The pure-Python walk, used when the C extension (`_recwalk.c`, same
    contract: see there) is not built: ``(err, n, bad_length, remaining)``."""
    pos, end, n = 0, len(memoryview(data)), 0
    while pos < end:
        # the record length is a zig-zag varint; the one- and two-byte forms
        # (records under 8 KiB) are decoded inline
        b0 = data[pos]
        if b0 < 0x80:
            length = (b0 >> 1) ^ -(b0 & 1)
            pos += 1
        elif pos + 1 < end and data[pos + 1] < 0x80:
            z = (b0 & 0x7F) | (data[pos + 1] << 7)
            length = (z >> 1) ^ -(z & 1)
            pos += 2
        else:
            try:
                length, pos = _read_varint(data, pos, end, 5)
            except CorruptRecordError as e:
                return (1 if "past the end" in str(e) else 2), n, 0, 0
        if length <= 0 or length > end - pos:
            return 3, n, length, end - pos
        if require_keys:
            # attributes int8, timestampDelta varlong, offsetDelta varint, keyLength
            rec_end = pos + length
            try:
                _, p = _read_varint(data, pos + 1, rec_end, 10)
                _, p = _read_varint(data, p, rec_end, 5)
                key_length, _ = _read_varint(data, p, rec_end, 5)
            except CorruptRecordError as e:
                return (1 if "past the end" in str(e) else 2), n, 0, end - pos
            if key_length < 0:
                return 4, n, 0, end - pos
        pos += length
        n += 1
    return 0, n, 0, 0


WalkFn: TypeAlias = Callable[[Buffer, bool], tuple[int, int, int, int]]
walk_records_native: WalkFn | None
try:  # the C form of the walk (setup.py builds it; optional)
    from jocko_py.protocol._recwalk import walk as walk_records_native
except ImportError:  # pragma: no cover - depends on the build
    walk_records_native = None

_walk: WalkFn = walk_records_native if walk_records_native is not None else walk_records_py


def decode_records(
    batch: Buffer,
    header: RecordBatchHeader | None = None,
    *,
    max_decompressed: int = DEFAULT_DECOMPRESS_LIMIT,
) -> list[Record]:
    """Decode every record of one batch (decompressing if needed).

    ``batch`` holds exactly one batch, header included.  For LogAppendTime
    batches every record takes the batch's maxTimestamp, as Kafka specifies.
    """
    if header is None:
        header = parse_header(batch)
    if header.magic != CURRENT_MAGIC:
        raise UnsupportedMagicError(header.magic)
    if header.size > len(batch):
        raise CorruptRecordError("record batch is cut short")
    mv = memoryview(batch)[HEADER_SIZE : header.size]
    codec = header.compression
    data: Buffer
    if codec:
        from jocko_py.protocol import compression  # noqa: PLC0415 - keeps import cost lazy

        data = compression.decompress(codec, mv, limit=max_decompressed)
    else:
        data = mv
    records: list[Record] = []
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.timestamp_type == 1
    pos = 0
    end = len(data)
    count = header.records_count
    for _ in range(count):
        length, pos = _read_varint(data, pos, end, 5)
        if length < 0 or length > end - pos:
            raise CorruptRecordError(f"record length {length} exceeds the {end - pos} bytes left")
        rec_end = pos + length
        pos += 1  # record attributes: unused in v2
        ts_delta, pos = _read_varint(data, pos, rec_end, 10)
        off_delta, pos = _read_varint(data, pos, rec_end, 5)
        key, pos = _read_bytes(data, pos, rec_end)
        value, pos = _read_bytes(data, pos, rec_end)
        n_headers, pos = _read_varint(data, pos, rec_end, 5)
        if n_headers < 0 or n_headers > rec_end - pos:
            raise CorruptRecordError(f"invalid header count {n_headers}")
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(n_headers):
            hkey, pos = _read_bytes(data, pos, rec_end)
            if hkey is None:
                raise CorruptRecordError("record header key is null")
            hval, pos = _read_bytes(data, pos, rec_end)
            try:
                headers.append((hkey.decode("utf-8"), hval))
            except UnicodeDecodeError as exc:
                raise CorruptRecordError("record header key is not UTF-8") from exc
        if pos != rec_end:
            raise CorruptRecordError("record length does not match its fields")
        ts = header.max_timestamp if log_append else base_ts + ts_delta
        records.append(Record(base_offset + off_delta, ts, key, value, headers))
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} bytes left after {count} records in batch at offset {base_offset}"
        )
    return records


# --- encoding -------------------------------------------------------------------


def _encode_record(
    out: bytearray, offset_delta: int, ts_delta: int, rec: NewRecord | Record
) -> None:
    body = bytearray()
    body.append(0)
    _write_varint(body, ts_delta)
    _write_varint(body, offset_delta)
    for blob in (rec.key, rec.value):
        if blob is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(blob))
            body += blob
    _write_varint(body, len(rec.headers))
    for hkey, hval in rec.headers:
        kb = hkey.encode("utf-8")
        _write_varint(body, len(kb))
        body += kb
        if hval is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(hval))
            body += hval
    _write_varint(out, len(body))
    out += body


def _assemble(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
    payload: bytes | bytearray,
) -> bytes:
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        batch_length,
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    out += payload
    _U32.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return bytes(out)


def build_batch(
    records: Sequence[NewRecord | Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Encode ``records`` as one v2 batch with a valid CRC.

    Offset deltas are the records' positions in the sequence (a decoded
    ``Record``'s own offset is ignored).  At least one record is required.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if not 0 <= compression <= 4:
        raise ValueError(f"unknown compression codec {compression}")
    now = int(time.time() * 1000)
    stamps = [now if r.timestamp is None else r.timestamp for r in records]
    base_ts = stamps[0]
    max_ts = max(stamps)
    body = bytearray()
    for i, (rec, ts) in enumerate(zip(records, stamps, strict=True)):
        _encode_record(body, i, ts - base_ts, rec)
    payload: bytes | bytearray = body
    if compression:
        from jocko_py.protocol import compression as codecs  # noqa: PLC0415

        payload = codecs.compress(compression, bytes(body))
    attributes = compression
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    return _assemble(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=len(records) - 1,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        count=len(records),
        payload=payload,
    )


# --- control batches --------------------------------------------------------------


def is_control_batch(buf: Buffer, pos: int = 0) -> bool:
    """True when the batch at ``pos`` has the control attribute set."""
    if len(buf) - pos < ATTR_OFFSET + 2:
        raise CorruptRecordError("record batch header is cut short")
    (attrs,) = _I16.unpack_from(buf, pos + ATTR_OFFSET)
    return bool(attrs & CONTROL_MASK)


def control_type(record: Record) -> ControlType:
    """The marker type (abort/commit) from a control record's key."""
    if record.key is None or len(record.key) < _CTRL.size:
        raise CorruptRecordError("control record key is missing or too short")
    version, ctype = _CTRL.unpack_from(record.key, 0)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    try:
        return ControlType(ctype)
    except ValueError as exc:
        raise CorruptRecordError(f"unknown control record type {ctype}") from exc


def control_marker(batch: Buffer, header: RecordBatchHeader | None = None
                   ) -> tuple[ControlType, int]:
    """(marker type, coordinator epoch) of a control batch (one control record)."""
    recs = decode_records(batch, header)
    if not recs:
        raise CorruptRecordError("control batch without a record")
    ctype = control_type(recs[0])
    value = recs[0].value
    epoch = _CTRL_VALUE.unpack_from(value, 0)[1] if value and len(value) >= _CTRL_VALUE.size \
        else -1
    return ctype, epoch


def build_control_batch(
    ctype: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker batch (one control record), as the coordinator writes."""
    key = _CTRL.pack(0, int(ctype))
    value = _CTRL_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [NewRecord(key, value, (), timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
