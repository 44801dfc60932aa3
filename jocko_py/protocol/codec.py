"""Request/response headers and bodies for the versions a broker serves.

Quirks kept here, each with a test:
- Request header v1 for non-flexible request versions, v2 for flexible ones; in
  v2 the client id keeps its int16 length (it is not a compact string).
- Response header v0 for non-flexible responses, v1 (tagged fields) for flexible
  ones, except ApiVersions, which always uses v0 so a client can read it before
  it knows the broker's versions.
- Bytes after a request body are ignored, as Kafka's broker does (it parses the
  body and never looks at what is left): librdkafka 2.16 sends Metadata v12 with
  3 extra bytes. `Request.trailing` counts them so the caller can log it.
- An ApiVersions request of a version this broker does not serve is answered
  with a v0 body carrying UNSUPPORTED_VERSION and the supported ranges (the
  caller builds that body; `decode_request` raises `UnsupportedRequest`), and
  `decode_response` reads such a reply as v0 whichever version was asked for.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from jocko_py.protocol import fastpath, messages
from jocko_py.protocol.errors import ErrorCode, ProtocolError, UnsupportedVersionError
from jocko_py.protocol.wire import (
    Chunked,
    OutOfLine,
    Part,
    Reader,
    r_i16,
    r_i32,
    r_nstring,
    r_tagged,
    w_i32,
)

API_VERSIONS_KEY = 18
PRODUCE_KEY = 0
_HEAD = struct.Struct(">hhi")
_ERROR = struct.Struct(">h")
_UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(slots=True)
class Request:
    header: RequestHeader
    body: Any
    size: int
    trailing: int = 0  # bytes after the body, ignored (Kafka does not look at them)


class UnsupportedRequest(UnsupportedVersionError):
    """A well-framed request this broker does not serve (unknown key or version)."""

    def __init__(self, header: RequestHeader, message: str):
        super().__init__(message)
        self.header = header


def peek_header(frame: bytes | bytearray | memoryview) -> RequestHeader:
    if len(frame) < 8:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame, 0)
    return RequestHeader(api_key, api_version, correlation_id, None)


def decode_request(
    frame: bytes | bytearray | memoryview, served: dict[int, tuple[int, int]]
) -> Request:
    """Decode one request frame (without its size prefix).

    `served` maps api key -> (min, max) version this broker implements.
    """
    header = peek_header(frame)
    # a view, so record blobs are slices of the frame rather than copies
    r = Reader(memoryview(frame), 8)
    header.client_id = r_nstring(r)
    rng = served.get(header.api_key)
    if rng is None or not rng[0] <= header.api_version <= rng[1]:
        raise UnsupportedRequest(
            header,
            f"{messages.api_name(header.api_key)} v{header.api_version} is not served",
        )
    if messages.request_flexible(header.api_key, header.api_version):
        r_tagged(r, {}, {})
    if header.api_key == PRODUCE_KEY and header.api_version >= 3:
        body = fastpath.decode_produce_request(r, header.api_version)
    else:
        body = messages.request_schema(header.api_key, header.api_version).parse(r)
    return Request(header, body, len(frame), r.end - r.pos)


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Any
) -> bytearray:
    """Size-prefixed response frame in one buffer."""
    parts = encode_response_parts(api_key, api_version, correlation_id, body)
    if len(parts) == 1:
        return parts[0]  # type: ignore[return-value]
    return bytearray(b"".join(p.read() if isinstance(p, OutOfLine) else p for p in parts))


def encode_response_parts(
    api_key: int, api_version: int, correlation_id: int, body: Any
) -> list[Part]:
    """Size-prefixed response frame as chunks to write in order.

    Record blobs of 16 KiB or more are not copied: they are chunks of their own
    (see `wire.Chunked`), regions of a log file included (`wire.OutOfLine`: the
    connection sends them from the file). The first chunk is always a bytearray
    holding the size.
    """
    out = Chunked(b"\0\0\0\0")
    w_i32(correlation_id, out)
    if api_key != API_VERSIONS_KEY and messages.response_flexible(api_key, api_version):
        out.append(0)  # empty tagged fields of response header v1
    if not (api_key == PRODUCE_KEY and api_version >= 3
            and fastpath.encode_produce_response(api_version, body, out)):
        messages.response_schema(api_key, api_version).build(body, out)
    parts = out.finish()
    first = parts[0]
    assert isinstance(first, bytearray)
    struct.pack_into(">i", first, 0, sum(len(p) for p in parts) - 4)
    return parts


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytearray:
    """Size-prefixed request frame (used by tools, tests and broker-to-broker calls)."""
    out = bytearray(b"\0\0\0\0")
    out += _HEAD.pack(api_key, api_version, correlation_id)
    if client_id is None:
        out += b"\xff\xff"
    else:
        cid = client_id.encode()
        out += struct.pack(">h", len(cid)) + cid
    if messages.request_flexible(api_key, api_version):
        out.append(0)
    messages.request_schema(api_key, api_version).build(body, out)
    struct.pack_into(">i", out, 0, len(out) - 4)
    return out


def decode_response(api_key: int, api_version: int, frame: bytes | memoryview) -> tuple[int, Any]:
    """Decode a response frame (without size prefix): (correlation id, body).

    An ApiVersions reply carrying UNSUPPORTED_VERSION is read as v0 whatever
    version was asked for: that is how a broker answers a version it lacks.
    """
    r = Reader(frame)
    correlation_id = r_i32(r)
    if api_key == API_VERSIONS_KEY:
        if r.end - r.pos >= 2 and _ERROR.unpack_from(r.buf, r.pos)[0] == _UNSUPPORTED_VERSION:
            api_version = 0
    elif messages.response_flexible(api_key, api_version):
        r_tagged(r, {}, {})
    body = messages.response_schema(api_key, api_version).parse(r)
    return correlation_id, body


__all__ = [
    "Request",
    "RequestHeader",
    "UnsupportedRequest",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "peek_header",
    "r_i16",
]
