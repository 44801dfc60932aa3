"""Hand-built Kafka frames for the bad-input tests, with `struct` only.

Deliberately independent of jocko_py.protocol: these bytes are written from the Kafka
protocol guide, so a bug shared by the broker's encoder and decoder cannot hide here.
Only non-flexible versions are built (request header v1: api_key, api_version,
correlation_id, client_id), plus ApiVersions v3 for the flexible header v2.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

import crc32c

CLIENT_ID = b"jocko-badinput"

API_PRODUCE = 0
API_METADATA = 3
API_API_VERSIONS = 18
API_CREATE_TOPICS = 19

UNKNOWN_SERVER_ERROR = -1
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
INVALID_RECORD = 87
INVALID_REQUIRED_ACKS = 21


# --------------------------------------------------------------------------- primitives


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | bytes | None) -> bytes:
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def nbytes(b: bytes | None) -> bytes:
    return i32(-1) if b is None else i32(len(b)) + b


def array(items: list[bytes]) -> bytes:
    return i32(len(items)) + b"".join(items)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint(v: int) -> bytes:
    """Zig-zag signed varint (also used for varlong)."""
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s: str) -> bytes:
    b = s.encode()
    return uvarint(len(b) + 1) + b


# --------------------------------------------------------------------------- frames


def header_v1(api_key: int, api_version: int, correlation_id: int) -> bytes:
    return i16(api_key) + i16(api_version) + i32(correlation_id) + string(CLIENT_ID)


def header_v2(api_key: int, api_version: int, correlation_id: int) -> bytes:
    # client_id keeps its int16 length in header v2; then empty tagged fields.
    return header_v1(api_key, api_version, correlation_id) + b"\x00"


def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def api_versions_v0(correlation_id: int) -> bytes:
    return frame(header_v1(API_API_VERSIONS, 0, correlation_id))


def api_versions_flexible(correlation_id: int, version: int) -> bytes:
    """ApiVersions v3+ layout: client_software_name, client_software_version, tags."""
    body = compact_string("jocko-badinput") + compact_string("0.1") + b"\x00"
    return frame(header_v2(API_API_VERSIONS, version, correlation_id) + body)


def metadata_v4(correlation_id: int, topics: list[str] | None, auto_create: bool) -> bytes:
    topics_b = i32(-1) if topics is None else array([string(t) for t in topics])
    body = topics_b + i8(1 if auto_create else 0)
    return frame(header_v1(API_METADATA, 4, correlation_id) + body)


def create_topics_v4(
    correlation_id: int, names: list[str], partitions: int = 1, timeout_ms: int = 10_000
) -> bytes:
    topics = [string(n) + i32(partitions) + i16(1) + array([]) + array([]) for n in names]
    body = array(topics) + i32(timeout_ms) + i8(0)
    return frame(header_v1(API_CREATE_TOPICS, 4, correlation_id) + body)


def produce_v7(
    correlation_id: int,
    topic: str,
    partition: int,
    records: bytes | None,
    acks: int = -1,
    timeout_ms: int = 10_000,
) -> bytes:
    body = (
        string(None)
        + i16(acks)
        + i32(timeout_ms)
        + array([string(topic) + array([i32(partition) + nbytes(records)])])
    )
    return frame(header_v1(API_PRODUCE, 7, correlation_id) + body)


# --------------------------------------------------------------------------- record batch


def record_v2(offset_delta: int, ts_delta: int, key: bytes, value: bytes) -> bytes:
    body = (
        i8(0)
        + varint(ts_delta)
        + varint(offset_delta)
        + varint(len(key))
        + key
        + varint(len(value))
        + value
        + varint(1)
        + varint(len(b"h"))
        + b"h"
        + varint(len(b"v"))
        + b"v"
    )
    return varint(len(body)) + body


def record_batch_v2(
    records: list[tuple[bytes, bytes]],
    base_ts: int,
    *,
    magic: int = 2,
    bad_crc: bool = False,
    codec: int = 0,
    records_blob: bytes | None = None,
) -> bytes:
    """A record batch (magic 2 layout) with a correct CRC-32C unless `bad_crc`. `magic`
    only changes the magic byte (the CRC still covers the rest). `codec` sets the
    compression bits of the attributes; `records_blob` replaces the encoded records
    (e.g. with garbage, which the CRC then covers)."""
    recs = b"".join(record_v2(i, i, k, v) for i, (k, v) in enumerate(records))
    if records_blob is not None:
        recs = records_blob
    after_crc = (
        i16(codec)  # attributes: compression codec, CreateTime, not transactional
        + i32(len(records) - 1)  # lastOffsetDelta
        + i64(base_ts)
        + i64(base_ts + len(records) - 1)
        + i64(-1)  # producerId
        + i16(-1)  # producerEpoch
        + i32(-1)  # baseSequence
        + i32(len(records))
        + recs
    )
    crc = crc32c.crc32c(after_crc)
    if bad_crc:
        crc ^= 0x5A5A5A5A
    # batchLength counts from partitionLeaderEpoch to the end.
    rest = i32(0) + i8(magic) + struct.pack(">I", crc) + after_crc
    return i64(0) + i32(len(rest)) + rest


# --------------------------------------------------------------------------- responses


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"response too short: need {n} bytes at {self.pos}/{len(self.data)}")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def i8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def i16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def array_len(self) -> int:
        return self.i32()

    def remaining(self) -> int:
        return len(self.data) - self.pos


@dataclass
class ApiVersionsV0:
    error_code: int
    ranges: dict[int, tuple[int, int]]


def parse_api_versions_v0(body: bytes) -> ApiVersionsV0:
    r = Reader(body)
    err = r.i16()
    ranges = {}
    for _ in range(r.array_len()):
        key, lo, hi = r.i16(), r.i16(), r.i16()
        ranges[key] = (lo, hi)
    return ApiVersionsV0(err, ranges)


def parse_metadata_v4_topic_errors(body: bytes) -> dict[str, int]:
    r = Reader(body)
    r.i32()  # throttle_time_ms
    for _ in range(r.array_len()):  # brokers
        r.i32()
        r.string()
        r.i32()
        r.string()  # rack
    r.string()  # cluster_id
    r.i32()  # controller_id
    out: dict[str, int] = {}
    for _ in range(r.array_len()):
        err = r.i16()
        name = r.string()
        r.i8()  # is_internal
        for _ in range(r.array_len()):
            r.i16()
            r.i32()
            r.i32()
            for _ in range(r.array_len()):
                r.i32()
            for _ in range(r.array_len()):
                r.i32()
        out[name or ""] = err
    return out


def parse_create_topics_v4(body: bytes) -> dict[str, int]:
    r = Reader(body)
    r.i32()  # throttle_time_ms
    out = {}
    for _ in range(r.array_len()):
        name = r.string()
        err = r.i16()
        r.string()  # error_message
        out[name or ""] = err
    return out


def parse_produce_v7(body: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (error_code, base_offset)."""
    r = Reader(body)
    out = {}
    for _ in range(r.array_len()):
        name = r.string() or ""
        for _ in range(r.array_len()):
            idx = r.i32()
            err = r.i16()
            base_offset = r.i64()
            r.i64()  # log_append_time_ms
            r.i64()  # log_start_offset
            out[(name, idx)] = (err, base_offset)
    r.i32()  # throttle_time_ms
    return out


# --------------------------------------------------------------------------- socket


class Conn:
    """A blocking client connection with bounded reads."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.next_correlation_id = 1

    def cid(self) -> int:
        c = self.next_correlation_id
        self.next_correlation_id += 1
        return c

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"peer closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self.recv_exact(4))
        assert 0 <= size < 64 * 1024 * 1024, f"implausible response size {size}"
        return self.recv_exact(size)

    def request(self, data: bytes, correlation_id: int, header_v1: bool = False) -> bytes:
        """Send one request, read one response with the same correlation id, return the
        body (after the response header: v0 = correlation id; v1 adds tagged fields)."""
        self.send(data)
        resp = self.recv_frame()
        (got,) = struct.unpack(">i", resp[:4])
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        if header_v1:
            assert resp[4] == 0, "unexpected tagged fields in response header"
            return resp[5:]
        return resp[4:]

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True if the peer closes (EOF or reset) within `timeout` without sending any
        more bytes; False if it is still open at the deadline. Bytes from the peer fail."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(min(left, 1.0))
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not data:
                return True
            raise AssertionError(f"expected the connection to close, got {len(data)} bytes")

    def close(self) -> None:
        self.sock.close()
