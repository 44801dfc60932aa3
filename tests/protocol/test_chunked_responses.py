"""Fetch responses keep big record blobs out of line, with the same bytes on the wire."""

from __future__ import annotations

from typing import Any

import pytest

from jocko_py.protocol import codec, messages
from jocko_py.protocol.records import NewRecord, build_batch


def fetch_body(blobs: list[bytes | None]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 5,
             "last_stable_offset": 5, "log_start_offset": 0, "aborted_transactions": [],
             "preferred_read_replica": -1, "records": b}
            for i, b in enumerate(blobs)]}]}


@pytest.mark.parametrize("version", [4, 11, 12])
def test_chunked_fetch_response_equals_contiguous_encoding(version: int) -> None:
    big = build_batch([NewRecord(b"k", b"v" * 40_000)])
    small = build_batch([NewRecord(b"k", b"v")])
    body = fetch_body([big, small, None, big])
    parts = codec.encode_response_parts(1, version, 9, body)
    assert len(parts) == 5  # head, big, middle, big, tail
    assert parts[1] is big and parts[3] is big  # not copied
    ref = bytearray(b"\0\0\0\0")
    ref += (9).to_bytes(4, "big")
    if version >= 12:
        ref.append(0)
    messages.response_schema(1, version).build(body, ref)
    ref[0:4] = (len(ref) - 4).to_bytes(4, "big")
    assert b"".join(parts) == bytes(ref)
    assert codec.encode_response(1, version, 9, body) == ref
    corr, decoded = codec.decode_response(1, version, bytes(ref)[4:])
    assert corr == 9
    assert bytes(decoded.responses[0].partitions[0].records) == big


def test_small_responses_stay_one_buffer() -> None:
    parts = codec.encode_response_parts(1, 12, 1, fetch_body([b"x" * 100]))
    assert len(parts) == 1
