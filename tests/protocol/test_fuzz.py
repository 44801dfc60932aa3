"""Fuzz the request path: the only failure allowed is the project's ProtocolError.

Inputs are random bytes and mutations of valid request frames (bit flips,
byte overwrites, truncation, insertion, corrupted length fields, huge claimed
lengths and counts). Each input goes through `codec.decode_request` directly and
through `FrameDecoder.feed` fed whole, byte by byte and in random chunks (the
h11 approach): all three feedings must yield the same frames, or all raise
ProtocolError. Claimed sizes are checked before anything is allocated, which
tracemalloc verifies for the worst cases.
"""

from __future__ import annotations

import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jocko_py.protocol import codec, messages
from jocko_py.protocol.errors import ProtocolError
from jocko_py.protocol.framing import FrameDecoder, FrameTooLarge, frame
from tests.protocol._codec_strategies import served, values

SERVED_VERSIONS = served()
SERVED: dict[int, tuple[int, int]] = {}
for _key, _v in SERVED_VERSIONS:
    lo, hi = SERVED.get(_key, (_v, _v))
    SERVED[_key] = (min(lo, _v), max(hi, _v))

MAX_FRAME = 1 << 20

FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def valid_request_payload(draw: st.DrawFn) -> bytes:
    """A valid request frame (without its size prefix) of a served API version."""
    key, version = draw(st.sampled_from(SERVED_VERSIONS))
    body = draw(values(messages.request_schema(key, version).struct))
    client_id = draw(st.none() | st.text(max_size=6))
    corr = draw(st.integers(0, 2**31 - 1))
    return bytes(codec.encode_request(key, version, corr, client_id, body))[4:]


_BIG = [0x7FFFFFFF, 0x7FFF, 0xFFFF, 0x80000000, 0xFFFFFFFF, 0x10000, 0x100]


def _mutations(draw: st.DrawFn, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(
            st.sampled_from(["flip", "byte", "truncate", "insert", "int32", "int16", "varint"])
        )
        pos = draw(st.integers(0, max(len(b) - 1, 0)))
        if op == "flip" and b:
            b[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte" and b:
            b[pos] = draw(st.integers(0, 255))
        elif op == "truncate":
            del b[pos:]
        elif op == "insert":
            b[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == "int32":  # a length or count claiming far more than is there
            b[pos : pos + 4] = struct.pack(">I", draw(st.sampled_from(_BIG)))
        elif op == "int16":
            b[pos : pos + 2] = struct.pack(">H", draw(st.sampled_from(_BIG)) & 0xFFFF)
        elif op == "varint":  # a compact length of up to 2^32-1, or a never-ending varint
            b[pos : pos + 1] = draw(st.sampled_from([b"\xff\xff\xff\xff\x0f", b"\xff" * 6]))
    return bytes(b)


@st.composite
def mutated_request_payload(draw: st.DrawFn) -> bytes:
    return _mutations(draw, draw(valid_request_payload()))


def _random_header_payload(draw: st.DrawFn) -> bytes:
    # a plausible header for a served API, then random bytes: reaches the body parsers
    key, version = draw(st.sampled_from(SERVED_VERSIONS))
    head = struct.pack(">hhi", key, version, draw(st.integers(0, 9)))
    return head + draw(st.binary(max_size=64))


payloads = st.one_of(
    st.binary(max_size=64),
    st.composite(lambda draw: _random_header_payload(draw))(),
    mutated_request_payload(),
)


def decode_or_protocol_error(payload: bytes) -> Any:
    """decode_request's result, or the ProtocolError it raised; anything else propagates."""
    try:
        return codec.decode_request(payload, SERVED)
    except ProtocolError as e:
        return e


@FUZZ
@given(payload=payloads)
@example(payload=b"")
@example(payload=b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xff\x7f\xff\xff\xff")
def test_decode_request_raises_only_protocol_error(payload: bytes) -> None:
    decode_or_protocol_error(payload)


@st.composite
def mutated_response(draw: st.DrawFn) -> tuple[int, int, bytes]:
    key, version = draw(st.sampled_from(SERVED_VERSIONS))
    body = draw(values(messages.response_schema(key, version).struct))
    frame = bytes(codec.encode_response(key, version, 1, body))[4:]
    return key, version, _mutations(draw, frame)


@FUZZ
@given(case=mutated_response())
def test_decode_response_raises_only_protocol_error(case: tuple[int, int, bytes]) -> None:
    """The project's own client (and broker-to-broker calls) read peers' responses too."""
    key, version, frame = case
    try:
        codec.decode_response(key, version, frame)
    except ProtocolError:
        pass


def feed_all(chunks: list[bytes], max_frame: int = MAX_FRAME) -> list[bytes] | ProtocolError:
    d = FrameDecoder(max_frame)
    out: list[bytes] = []
    try:
        for c in chunks:
            out.extend(d.feed(c))
    except ProtocolError as e:
        return e
    return out


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    chunks, prev = [], 0
    for p in points:
        chunks.append(data[prev:p])
        prev = p
    chunks.append(data[prev:])
    return chunks


def _same_outcome(a: list[bytes] | ProtocolError, b: list[bytes] | ProtocolError) -> bool:
    if isinstance(a, ProtocolError) or isinstance(b, ProtocolError):
        return type(a) is type(b)
    return a == b


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """Several frames back to back; some well-framed, some with a corrupted size."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        p = draw(payloads)
        framed = frame(p)
        if draw(st.integers(0, 9)) == 0:
            framed = _mutations(draw, framed[:4]) + framed[4:]
        parts.append(framed)
    stream = b"".join(parts)
    if draw(st.booleans()):
        stream = stream[: draw(st.integers(0, len(stream)))]
    return stream


@FUZZ
@given(stream=streams(), cuts=st.lists(st.integers(0, 400), max_size=8))
@example(stream=b"\x7f\xff\xff\xff" + b"\x00" * 16, cuts=[])
@example(stream=b"\xff\xff\xff\xfe", cuts=[1, 2, 3])
def test_frame_decoder_whole_bytewise_and_chunked_agree(stream: bytes, cuts: list[int]) -> None:
    whole = feed_all([stream])
    bytewise = feed_all([stream[i : i + 1] for i in range(len(stream))])
    chunked = feed_all(_split(stream, cuts))
    assert _same_outcome(whole, bytewise), (whole, bytewise)
    assert _same_outcome(whole, chunked), (whole, chunked)
    if not isinstance(whole, ProtocolError):
        for f in whole:
            decode_or_protocol_error(f)


def test_valid_frames_come_out_whole_when_fed_byte_by_byte() -> None:
    reqs = [
        bytes(codec.encode_request(18, 3, 1, "c", {"client_software_name": "x"})),
        bytes(codec.encode_request(3, 12, 2, None, {"topics": None})),
        bytes(codec.encode_request(18, 0, 3, "", {})),
    ]
    stream = b"".join(reqs)
    d = FrameDecoder(MAX_FRAME)
    got: list[bytes] = []
    for i in range(len(stream)):
        got.extend(d.feed(stream[i : i + 1]))
    assert got == [r[4:] for r in reqs]
    assert d.buffered == 0
    decoded = [codec.decode_request(f, SERVED) for f in got]
    assert [r.header.correlation_id for r in decoded] == [1, 2, 3]


# -- huge claimed lengths and counts: rejected at once, nothing allocated -----------


def _metadata_v1(after_client_id: bytes) -> bytes:
    return struct.pack(">hhih", 3, 1, 9, -1) + after_client_id


def _flexible_metadata_v12(after_header: bytes) -> bytes:
    return struct.pack(">hhih", 3, 12, 9, -1) + b"\x00" + after_header


# (what, payload, the ProtocolError message that shows the claim itself was refused)
HUGE_CLAIMS: list[tuple[str, bytes, str]] = [
    ("array count 2^31-1", _metadata_v1(b"\x7f\xff\xff\xff" + b"\x00" * 6), "array of"),
    (
        "compact array count 2^32-2",
        _flexible_metadata_v12(b"\xff\xff\xff\xff\x0f" + b"\x00" * 3),
        "array of",
    ),
    ("string length 32767", _metadata_v1(b"\x00\x00\x00\x01\x7f\xff" + b"ab"), "need 32767"),
    (
        "compact string length 2^32-2",
        _flexible_metadata_v12(b"\x02" + b"\x00" * 16 + b"\xff\xff\xff\xff\x0f"),
        "need 4294967294",
    ),
    ("client id length 32767", struct.pack(">hhih", 3, 1, 9, 0x7FFF) + b"abc", "need 32767"),
    (
        "tagged field count 2^32-1",
        _flexible_metadata_v12(b"\x01\x00\x00" + b"\xff\xff\xff\xff\x0f"),
        "array of 4294967295",
    ),
    (
        "tagged field size 2^32-1",
        _flexible_metadata_v12(b"\x01\x00\x00" + b"\x01\x07" + b"\xff\xff\xff\xff\x0f"),
        "need 4294967295",
    ),
    (
        "produce records length 2^31-1",
        struct.pack(">hhih", 0, 3, 9, -1)
        + struct.pack(">hhi", -1, 1, 1000)
        + struct.pack(">ih", 1, 1)
        + b"t"
        + struct.pack(">iii", 1, 0, 0x7FFFFFFF),
        "need 2147483647",
    ),
]


@pytest.mark.parametrize(
    ("what", "payload", "match"), HUGE_CLAIMS, ids=[w for w, _, _ in HUGE_CLAIMS]
)
def test_huge_claimed_length_raises_protocol_error_without_allocating(
    what: str, payload: bytes, match: str
) -> None:
    assert len(payload) < 64
    head = codec.peek_header(payload)
    messages.request_schema(head.api_key, head.api_version)  # compile (and cache) first
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match=match):
            codec.decode_request(payload, SERVED)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"{what}: peak allocation {peak} bytes"


@pytest.mark.parametrize("size", [0x7FFFFFFF, MAX_FRAME + 1, -1, -(2**31)])
def test_frame_size_is_checked_before_allocating(size: int) -> None:
    tracemalloc.start()
    try:
        d = FrameDecoder(MAX_FRAME)
        with pytest.raises(ProtocolError):
            d.feed(struct.pack(">i", size) + b"\x00" * 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    if size > 0:
        with pytest.raises(FrameTooLarge):
            FrameDecoder(MAX_FRAME).feed(struct.pack(">i", size))


def test_frame_size_one_byte_at_a_time_is_still_checked_first() -> None:
    d = FrameDecoder(MAX_FRAME)
    head = struct.pack(">i", 0x7FFFFFFF)
    assert d.feed(head[:3]) == []
    with pytest.raises(FrameTooLarge):
        d.feed(head[3:])
