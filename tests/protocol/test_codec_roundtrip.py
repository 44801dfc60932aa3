"""Every served (api, version), request and response, round-trips generated values.

Values come from the schema itself (`_codec_strategies.values`), so each field of
each version, tagged fields included, is exercised. The compiled schema (the
fast path the broker runs) is checked against the uncompiled construct tree it
was compiled from, and flexible versions are fed bytes carrying tags the schema
does not know, which must be skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jocko_py.protocol import codec, messages
from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.messages import Schema
from jocko_py.protocol.messages._generated import DATA
from jocko_py.protocol.wire import Reader
from tests.protocol._codec_strategies import (
    has_unknown,
    served,
    strip_unknown,
    values,
    with_unknown_tags,
)

SERVED = served()
API_VERSIONS = 18
CASES = [
    pytest.param(key, v, kind, id=f"{messages.api_name(key)}-v{v}-{kind}")
    for key, v in SERVED
    for kind in ("request", "response")
]
FLEX_CASES = [
    c
    for c in CASES
    if (messages.request_flexible if c.values[2] == "request" else messages.response_flexible)(
        c.values[0], c.values[1]
    )
]

# ~170 schema versions: a few examples each keeps the module well under a minute,
# and hypothesis' edge-biased generation still covers nulls, empties and extremes
FEW = settings(
    max_examples=6,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def schema(key: int, version: int, kind: str) -> Schema:
    if kind == "request":
        return messages.request_schema(key, version)
    return messages.response_schema(key, version)


def uncompiled_build(s: Schema, value: Any) -> bytes:
    out = bytearray()
    s.struct._build(value, out, None, "")
    return bytes(out)


def uncompiled_parse(s: Schema, data: bytes) -> Any:
    r = Reader(data)
    v = s.struct._parse(r, None, "")
    assert r.pos == r.end, f"{r.end - r.pos} bytes left unparsed"
    return v


@pytest.mark.parametrize(("key", "version", "kind"), CASES)
@FEW
@given(data=st.data())
def test_build_parse_build_round_trip(key: int, version: int, kind: str, data: Any) -> None:
    s = schema(key, version, kind)
    value = data.draw(values(s.struct), label="value")
    encoded = bytes(s.build(value))
    r = Reader(encoded)
    parsed = s.parse(r)
    assert r.pos == len(encoded), "parser did not consume exactly the built bytes"
    assert parsed == value
    assert bytes(s.build(parsed)) == encoded


@pytest.mark.parametrize(("key", "version", "kind"), CASES)
@FEW
@given(data=st.data())
def test_compiled_and_uncompiled_agree(key: int, version: int, kind: str, data: Any) -> None:
    s = schema(key, version, kind)
    value = data.draw(values(s.struct), label="value")
    compiled = bytes(s.build(value))
    assert uncompiled_build(s, value) == compiled
    assert uncompiled_parse(s, compiled) == s.parse_bytes(compiled) == value


@pytest.mark.parametrize(("key", "version", "kind"), FLEX_CASES)
@FEW
@given(data=st.data())
def test_unknown_tagged_fields_are_skipped(key: int, version: int, kind: str, data: Any) -> None:
    s = schema(key, version, kind)
    shadow = _shadow(key, version, kind)
    value = data.draw(values(shadow), label="value with unknown tags")
    encoded = uncompiled_build_struct(shadow, value)
    expected = strip_unknown(value)
    assert s.parse_bytes(encoded) == expected
    assert uncompiled_parse(s, encoded) == expected
    # the unknown tags are dropped, so re-encoding gives the bytes without them
    assert bytes(s.build(s.parse_bytes(encoded))) == bytes(s.build(expected))
    if has_unknown(value):
        assert len(encoded) > len(s.build(expected))


_SHADOWS: dict[tuple[int, int, str], Any] = {}


def _shadow(key: int, version: int, kind: str) -> Any:
    k = (key, version, kind)
    if k not in _SHADOWS:
        _SHADOWS[k] = with_unknown_tags(schema(key, version, kind).struct)
    return _SHADOWS[k]


def uncompiled_build_struct(struct: Any, value: Any) -> bytes:
    out = bytearray()
    struct._build(value, out, None, "")
    return bytes(out)


def test_unknown_tag_injected_into_top_level_bytes_is_skipped() -> None:
    """Hand-made: replace the empty tag section of a v3 ApiVersions request."""
    s = messages.request_schema(18, 3)
    value = {"client_software_name": "jocko", "client_software_version": "1"}
    plain = bytes(s.build(value))
    assert plain.endswith(b"\x00")
    # one tag (90), 3 bytes of payload the schema knows nothing about
    injected = plain[:-1] + b"\x01" + b"\x5a" + b"\x03" + b"abc"
    assert s.parse_bytes(injected) == s.parse_bytes(plain)


@pytest.mark.parametrize(
    ("key", "version"),
    [pytest.param(k, v, id=f"{messages.api_name(k)}-v{v}") for k, v in SERVED],
)
@settings(
    max_examples=3,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_request_and_response_frames_round_trip_through_codec(
    key: int, version: int, data: Any
) -> None:
    """Headers included: encode_request/decode_request and encode_response/decode_response."""
    served_ranges = {key: (version, version)}
    req = messages.request_schema(key, version)
    req_value = data.draw(values(req.struct), label="request")
    client_id = data.draw(st.none() | st.text(max_size=8), label="client id")
    corr = data.draw(st.integers(-(2**31), 2**31 - 1), label="correlation id")
    frame = bytes(codec.encode_request(key, version, corr, client_id, req_value))
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    decoded = codec.decode_request(frame[4:], served_ranges)
    assert decoded.header == codec.RequestHeader(key, version, corr, client_id)
    assert decoded.body == req_value
    assert decoded.size == len(frame) - 4

    resp = messages.response_schema(key, version)
    resp_value = data.draw(values(resp.struct), label="response")
    if key == API_VERSIONS and resp_value["error_code"] == ErrorCode.UNSUPPORTED_VERSION:
        resp_value["error_code"] = 0  # that reply is read as v0 (tested in test_quirks)
    rframe = bytes(codec.encode_response(key, version, corr, resp_value))
    assert int.from_bytes(rframe[:4], "big", signed=True) == len(rframe) - 4
    assert codec.decode_response(key, version, rframe[4:]) == (corr, resp_value)


def test_struct_fields_default_to_a_struct_of_field_defaults() -> None:
    """Regression: an absent (tagged or out-of-version) struct parsed as an empty `{}`.

    Kafka's default for a struct field is the struct with every field at its
    default, so a follower reading `partition.diverging_epoch.epoch` of a Fetch
    response without that tag must get -1, not an AttributeError.
    """
    resp = messages.response_schema(1, 12)
    partition = {"partition_index": 0, "records": None}
    value = {"responses": [{"topic": "t", "partitions": [partition]}]}
    parsed = resp.parse_bytes(bytes(resp.build(value)))
    p = parsed.responses[0].partitions[0]
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (-1, -1)
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (-1, -1)
    assert (p.snapshot_id.end_offset, p.snapshot_id.epoch) == (-1, -1)
    # ReplicaState is only in Fetch v15+; at v12 it still reads as its defaults
    req = messages.request_schema(1, 12)
    assert req.parse_bytes(bytes(req.build({}))).replica_state.replica_id == -1


def test_tagged_struct_equal_to_its_defaults_is_not_written() -> None:
    resp = messages.response_schema(0, 10)

    def encode(current_leader: dict[str, int] | None) -> bytes:
        p: dict[str, Any] = {"index": 0}
        if current_leader is not None:
            p["current_leader"] = current_leader
        return bytes(resp.build({"responses": [{"name": "t", "partition_responses": [p]}]}))

    assert encode({"leader_id": -1, "leader_epoch": -1}) == encode(None)
    assert len(encode({"leader_id": 1, "leader_epoch": -1})) > len(encode(None))


def test_parsed_defaults_are_not_shared_between_messages() -> None:
    resp = messages.response_schema(1, 12)
    data = bytes(resp.build({"responses": [{"topic": "t", "partitions": [{}]}]}))
    a = resp.parse_bytes(data)
    b = resp.parse_bytes(data)
    a.responses[0].partitions[0].current_leader.leader_id = 7
    assert b.responses[0].partitions[0].current_leader.leader_id == -1
    assert resp.struct._parse(Reader(data), None, "") == b


DATA_CASES = [
    pytest.param(name, v, id=f"{name}-v{v}")
    for name in sorted(DATA)
    for v in range(messages.data_versions(name)[0], messages.data_versions(name)[1] + 1)
]


@pytest.mark.parametrize(("name", "version"), DATA_CASES)
@settings(
    max_examples=4,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_data_schema_round_trip(name: str, version: int, data: Any) -> None:
    """Headers, consumer-protocol payloads, group/transaction and metadata-log records."""
    s = messages.data_schema(name, version)
    value = data.draw(values(s.struct), label="value")
    encoded = bytes(s.build(value))
    assert s.parse_bytes(encoded) == value
    assert uncompiled_build(s, value) == encoded
    assert bytes(s.build(uncompiled_parse(s, encoded))) == encoded


def test_unknown_tags_in_request_header_v2_and_response_header_v1_are_skipped() -> None:
    body = {"topics": [{"topic_id": None, "name": "t"}]}
    plain = bytes(codec.encode_request(3, 12, 5, "cid", body))[4:]
    # request header v2 = key, version, correlation id, int16 client id, then tags
    head_end = 8 + 2 + len("cid")
    assert plain[head_end] == 0
    tagged = plain[:head_end] + b"\x02" + b"\x00\x01z" + b"\x09\x02zz" + plain[head_end + 1 :]
    a = codec.decode_request(plain, {3: (12, 12)})
    b = codec.decode_request(tagged, {3: (12, 12)})
    assert (a.header, a.body) == (b.header, b.body)

    resp = bytes(codec.encode_response(3, 12, 6, {"brokers": [], "topics": []}))[4:]
    assert resp[4] == 0  # response header v1: correlation id, then tags
    tagged_resp = resp[:4] + b"\x01" + b"\x03\x01q" + resp[5:]
    assert codec.decode_response(3, 12, tagged_resp) == codec.decode_response(3, 12, resp)
