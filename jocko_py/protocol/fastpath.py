"""Hand-written codecs for the hottest messages: Produce requests and responses.

The construct schemas are the reference; these functions produce the same
values and the same bytes (tests/protocol/test_fastpath.py checks both ways
with generated messages) with fewer calls per field. They cover Produce v3-13
(requests; v13 names topics by id);
a response they cannot express (record errors, a current-leader hint, node
endpoints) returns None and the caller uses the schema.
"""

from __future__ import annotations

import struct
from typing import Any

from jocko_py.protocol.errors import ProtocolError
from jocko_py.protocol.wire import (
    ZERO_UUID,
    Msg,
    Reader,
    r_cnstring,
    r_crecords,
    r_cstring,
    r_i32,
    r_nstring,
    r_records,
    r_string,
    r_tagged,
    r_uuid,
    r_uvarint,
    w_uvarint,
)

_HDR = struct.Struct(">hi")
_I32 = struct.Struct(">i")
_PART_V3 = struct.Struct(">ihqq")
_PART_V5 = struct.Struct(">ihqqq")
_NO_TAGS: dict[int, Any] = {}


def _count(r: Reader, flexible: bool) -> int:
    n = (r_uvarint(r) - 1) if flexible else r_i32(r)
    if n < 0:
        raise ProtocolError("null in a non-nullable array")
    if n > r.end - r.pos:
        raise ProtocolError(f"array of {n} elements in {r.end - r.pos} bytes")
    return n


def decode_produce_request(r: Reader, version: int) -> Msg:
    flexible = version >= 9
    tid = r_cnstring(r) if flexible else r_nstring(r)
    if r.pos + 6 > r.end:
        raise ProtocolError("truncated produce request")
    acks, timeout_ms = _HDR.unpack_from(r.buf, r.pos)
    r.pos += 6
    read_name = r_cstring if flexible else r_string
    read_records = r_crecords if flexible else r_records
    topics = []
    by_id = version >= 13
    for _ in range(_count(r, flexible)):
        if by_id:
            name, topic_id = "", r_uuid(r)
        else:
            name, topic_id = read_name(r), ZERO_UUID
        parts = []
        for _ in range(_count(r, flexible)):
            index = r_i32(r)
            records = read_records(r)
            p = Msg(index=index, records=records)
            if flexible:
                r_tagged(r, _NO_TAGS, p)
            parts.append(p)
        t = Msg(name=name, topic_id=topic_id, partition_data=parts)
        if flexible:
            r_tagged(r, _NO_TAGS, t)
        topics.append(t)
    msg = Msg(transactional_id=tid, acks=acks, timeout_ms=timeout_ms, topic_data=topics)
    if flexible:
        r_tagged(r, _NO_TAGS, msg)
    return msg


def encode_produce_response(version: int, body: Any, out: bytearray) -> bool:
    """Append the response body to `out`; False (nothing written) if not expressible."""
    if version >= 13:
        return False  # topic ids: the schema writes them
    flexible = version >= 9
    start = len(out)
    topics = body.get("responses", [])
    if flexible:
        w_uvarint(len(topics) + 1, out)
    else:
        out += _I32.pack(len(topics))
    for t in topics:
        name = t["name"].encode()
        if flexible:
            w_uvarint(len(name) + 1, out)
        else:
            out += struct.pack(">h", len(name))
        out += name
        parts = t["partition_responses"]
        if flexible:
            w_uvarint(len(parts) + 1, out)
        else:
            out += _I32.pack(len(parts))
        for p in parts:
            if p.get("record_errors") or p.get("current_leader") not in (
                None, {"leader_id": -1, "leader_epoch": -1}
            ):
                del out[start:]
                return False
            if version >= 5:
                out += _PART_V5.pack(p["index"], p["error_code"], p["base_offset"],
                                     p.get("log_append_time_ms", -1),
                                     p.get("log_start_offset", -1))
            else:
                out += _PART_V3.pack(p["index"], p["error_code"], p["base_offset"],
                                     p.get("log_append_time_ms", -1))
            if version >= 8:
                if flexible:
                    out.append(1)  # empty compact record_errors
                else:
                    out += b"\0\0\0\0"
                msg = p.get("error_message")
                if msg is None:
                    out += b"\0" if flexible else b"\xff\xff"
                else:
                    m = msg.encode()
                    if flexible:
                        w_uvarint(len(m) + 1, out)
                    else:
                        out += struct.pack(">h", len(m))
                    out += m
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _I32.pack(body.get("throttle_time_ms", 0))
    if flexible:
        if body.get("node_endpoints"):
            del out[start:]
            return False
        out.append(0)
    return True
