"""Our codec against an independent one: kafka-python 3.x's protocol classes.

kafka-python generates its message classes from its own copy of Kafka's JSON
specs with its own encoder, so agreement on bytes is evidence both read the
specs the same way. For every served (api, version) that kafka-python also
covers, a generated value is encoded by both and the bytes compared, and each
side decodes the other's bytes back to the same value. Frames with headers are
compared too (request header v1/v2, response header v0/v1, ApiVersions' v0).

Known differences in kafka-python, worked around here rather than hidden:
- it renames `*_authorized_operations` to `authorized_operations` and models
  some of them as a set of bits (`bitfield`); values are converted;
- its specs predate Kafka 4.x's renames (TxnOffsetCommit's `GenerationId` is
  `GenerationIdOrMemberEpoch` since 4.0); `RENAMED` maps its names to ours;
- it decodes any ApiVersions response with a non-zero error code as v0 (the
  UNSUPPORTED_VERSION fallback), so ApiVersions responses use error code 0.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jocko_py.protocol import codec, messages
from jocko_py.protocol.messages import Schema
from jocko_py.protocol.primitives import KArray, KStruct, NullableStruct
from tests.protocol._codec_strategies import served, values

kp = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_message import ApiMessage  # noqa: E402
from kafka.protocol.data_container import DataContainer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from gen_protocol import snake  # noqa: E402

API_VERSIONS = 18


def _kafka_python_classes() -> dict[tuple[int, str], Any]:
    for m in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".old" in m.name or m.name.endswith("generate_stubs"):
            continue
        importlib.import_module(m.name)
    found: dict[tuple[int, str], Any] = {}
    todo = list(ApiMessage.__subclasses__())
    while todo:
        c = todo.pop()
        todo.extend(c.__subclasses__())
        if getattr(c, "_class_version", None) is None:
            found[(c.API_KEY, c.type)] = c
    return found


KP = _kafka_python_classes()


def _both_cover(key: int, version: int, kind: str) -> bool:
    c = KP.get((key, kind))
    if c is None or c.valid_versions is None:
        return False
    lo, hi = c.valid_versions
    return bool(lo <= version <= hi)


CASES = [
    pytest.param(key, v, kind, id=f"{messages.api_name(key)}-v{v}-{kind}")
    for key, v in served()
    for kind in ("request", "response")
    if _both_cover(key, v, kind)
]

SETTINGS = settings(
    max_examples=5,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def schema(key: int, version: int, kind: str) -> Schema:
    if kind == "request":
        return messages.request_schema(key, version)
    return messages.response_schema(key, version)


def draw_value(data: Any, key: int, kind: str, s: Schema) -> Any:
    value = data.draw(values(s.struct), label="value")
    if key == API_VERSIONS and kind == "response":
        value["error_code"] = 0  # see the module docstring
    return value


def _struct_of(con: Any) -> KStruct:
    if isinstance(con, NullableStruct):
        con = con.struct
    if isinstance(con, KArray):
        con = con.elem
    assert isinstance(con, KStruct), con
    return con


def _data_class(field: Any) -> Any:
    if not field.has_data_class():  # kafka-python creates these lazily for some nestings
        field.set_data_class(type(field.type_str, (DataContainer,), {"_struct": field}))
    return field.data_class


RENAMED = {"generation_id": "generation_id_or_member_epoch"}


def _our_name(kp_field: Any, ours: dict[str, Any]) -> str | None:
    name = snake(kp_field._name)
    if name not in ours and RENAMED.get(name) in ours:
        return RENAMED[name]
    if name in ours:
        return name
    alias = [k for k in ours if k.endswith("_" + name)]  # authorized_operations renames
    return alias[0] if len(alias) == 1 else None


def to_kafka_python(ours: KStruct, kp_struct: Any, cls: Any, value: Any, version: int) -> Any:
    """Our value (a mapping shaped by `ours`) as a kafka-python object of `cls`."""
    fields = {f.name: f for f in ours.fields}
    kwargs: dict[str, Any] = {}
    for f in kp_struct._fields:
        if not f.for_version_q(version):
            continue
        name = _our_name(f, fields)
        if name is None or fields[name].subcon is None:
            continue
        ofield = fields[name]
        val = value[name]
        if f.tagged_field_q(version) and val == ofield.default:
            continue  # not on the wire; kafka-python would write a default struct
        if f.type_str == "bitfield":
            bits = {b for b in range(32) if (val & 0xFFFFFFFF) >> b & 1}
            val = None if bits == {31} else bits
        elif f.is_struct_array() and val is not None:
            sub = _struct_of(ofield.subcon)
            val = [to_kafka_python(sub, f, _data_class(f), x, version) for x in val]
        elif f.is_struct() and val is not None:
            sub = _struct_of(ofield.subcon)
            val = to_kafka_python(sub, f, _data_class(f), val, version)
        elif isinstance(val, memoryview):
            val = bytes(val)
        kwargs[f.name] = val
    return cls(version=version, **kwargs)


def plain(v: Any) -> Any:
    """kafka-python data with the all-zero UUID as None (it decodes that UUID as None)."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, uuid.UUID) and v.int == 0:
        return None
    return v


def kp_encode(obj: Any, version: int) -> bytes:
    return bytes(obj.encode(version=version))


def kp_decode(cls: Any, data: bytes, version: int) -> Any:
    obj = cls.decode(data, version=version)
    obj._header = None  # decoded objects lack it, and encode() touches it
    return obj


@pytest.mark.parametrize(("key", "version", "kind"), CASES)
@SETTINGS
@given(data=st.data())
def test_same_value_encodes_to_the_same_bytes(key: int, version: int, kind: str, data: Any) -> None:
    s = schema(key, version, kind)
    cls = KP[(key, kind)]
    value = draw_value(data, key, kind, s)
    ours = bytes(s.build(value))
    theirs = kp_encode(to_kafka_python(s.struct, cls._struct, cls, value, version), version)
    assert theirs == ours


@pytest.mark.parametrize(("key", "version", "kind"), CASES)
@SETTINGS
@given(data=st.data())
def test_each_decodes_the_others_bytes(key: int, version: int, kind: str, data: Any) -> None:
    s = schema(key, version, kind)
    cls = KP[(key, kind)]
    value = draw_value(data, key, kind, s)
    expected_kp = to_kafka_python(s.struct, cls._struct, cls, value, version)
    # kafka-python decodes our bytes to the value, and re-encodes them unchanged
    ours = bytes(s.build(value))
    decoded = kp_decode(cls, ours, version)
    # compared as plain data: kafka-python's nested classes differ by identity
    assert plain(decoded.to_dict(json=False)) == plain(expected_kp.to_dict(json=False))
    assert kp_encode(decoded, version) == ours
    # we decode kafka-python's bytes to the value
    assert s.parse_bytes(kp_encode(expected_kp, version)) == value


HEADER_CASES = sorted(
    {(key, v) for key, v, kind in (c.values for c in CASES) if kind == "request"}
    & {(key, v) for key, v, kind in (c.values for c in CASES) if kind == "response"}
)


@pytest.mark.parametrize(
    ("key", "version"),
    [pytest.param(k, v, id=f"{messages.api_name(k)}-v{v}") for k, v in HEADER_CASES],
)
@settings(
    max_examples=2,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_framed_request_and_response_with_headers_match(key: int, version: int, data: Any) -> None:
    corr = data.draw(st.integers(0, 2**31 - 1), label="correlation id")
    client_id = data.draw(st.text(max_size=8), label="client id")

    req = messages.request_schema(key, version)
    req_cls = KP[(key, "request")]
    req_value = draw_value(data, key, "request", req)
    obj = to_kafka_python(req.struct, req_cls._struct, req_cls, req_value, version)
    obj.with_header(correlation_id=corr, client_id=client_id)
    theirs = bytes(obj.encode(version=version, header=True, framed=True))
    assert theirs == bytes(codec.encode_request(key, version, corr, client_id, req_value))

    resp = messages.response_schema(key, version)
    resp_cls = KP[(key, "response")]
    resp_value = draw_value(data, key, "response", resp)
    robj = to_kafka_python(resp.struct, resp_cls._struct, resp_cls, resp_value, version)
    robj.with_header(correlation_id=corr)
    rtheirs = bytes(robj.encode(header=True, framed=True))  # version set at construction
    assert rtheirs == bytes(codec.encode_response(key, version, corr, resp_value))


def test_kafka_python_reads_our_api_versions_fallback_as_v0() -> None:
    """The UNSUPPORTED_VERSION reply is a v0 body with header v0, whatever was asked."""
    body = {
        "error_code": 35,
        "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}],
    }
    frame = bytes(codec.encode_response(API_VERSIONS, 0, 7, body))
    cls = KP[(API_VERSIONS, "response")]
    # a client that asked for v4 reads the reply as v0 because of the error code
    decoded = cls.decode(frame, version=4, header=True, framed=True)
    assert decoded.header.correlation_id == 7
    assert decoded.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(18, 0, 4)]
