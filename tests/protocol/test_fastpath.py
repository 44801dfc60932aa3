"""The Produce fast path decodes and encodes exactly like the construct schemas."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jocko_py.protocol import fastpath, messages
from jocko_py.protocol.errors import ProtocolError
from jocko_py.protocol.wire import Reader
from tests.protocol._codec_strategies import values

VERSIONS = range(3, 12)


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, memoryview):
        return bytes(v)
    return v


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_request_fast_decode_equals_schema(version: int, data: st.DataObject) -> None:
    schema = messages.request_schema(0, version)
    value = data.draw(values(schema.struct))
    wire = bytes(schema.build(value))
    ref = schema.parse(Reader(memoryview(wire)))
    r = Reader(memoryview(wire))
    fast = fastpath.decode_produce_request(r, version)
    assert r.pos == len(wire)
    assert _plain(fast) == _plain(ref)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_response_fast_encode_equals_schema(version: int, data: st.DataObject) -> None:
    schema = messages.response_schema(0, version)
    value = data.draw(values(schema.struct))
    ref = bytes(schema.build(value))
    out = bytearray(b"prefix")
    if fastpath.encode_produce_response(version, value, out):
        assert bytes(out[6:]) == ref
    else:
        assert out == b"prefix"  # nothing half-written when it falls back


@pytest.mark.parametrize("version", VERSIONS)
def test_common_response_takes_the_fast_path(version: int) -> None:
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1,
         "log_start_offset": 0, "record_errors": [], "error_message": None}]}],
        "throttle_time_ms": 0}
    out = bytearray()
    assert fastpath.encode_produce_response(version, body, out)
    assert bytes(out) == bytes(messages.response_schema(0, version).build(body))


@pytest.mark.parametrize("version", [3, 9])
def test_truncated_request_is_a_protocol_error(version: int) -> None:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"x" * 50}]}]}
    wire = bytes(messages.request_schema(0, version).build(body))
    for cut in range(len(wire)):
        with pytest.raises(ProtocolError):
            fastpath.decode_produce_request(Reader(memoryview(wire[:cut]), 0), version)
