"""Kafka wire primitives as plain read/write functions.

This module owns the byte encoding of Kafka's primitive types: fixed-width
integers, bounded varints, (compact, nullable) strings, bytes and arrays, UUIDs,
raw record blobs and tagged-field sections. `primitives.py` wraps these in
`construct` classes; the compiled schemas call these functions directly, so the
same code runs compiled and uncompiled.

Reading works on a `Reader` (a buffer, a position and an end). Every length read
from the wire is checked against the bytes actually left before anything is
sliced or allocated, so a hostile length can never make the broker allocate.
Writing appends to a `bytearray`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from jocko_py.protocol.errors import ProtocolError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)


class Msg(dict):  # type: ignore[type-arg]
    """A parsed struct: a plain dict with attribute access to its fields.

    Cheaper than `construct.Container` (creation and item assignment stay in C),
    which matters on the produce and fetch paths.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


class Reader:
    """A read cursor over a bytes-like buffer, bounded by `end`."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    # construct's BytesIO protocol, used only by code outside the compiled fast path
    def read(self, n: int) -> bytes:
        return bytes(take(self, n))

    def tell(self) -> int:
        return self.pos


def _short(r: Reader, n: int) -> ProtocolError:
    return ProtocolError(f"truncated: need {n} bytes at {r.pos}, have {r.end - r.pos}")


def take(r: Reader, n: int) -> bytes | bytearray | memoryview:
    if n < 0 or r.pos + n > r.end:
        raise _short(r, n)
    p = r.pos
    r.pos = p + n
    return r.buf[p : p + n]


def _fixed(s: struct.Struct) -> tuple[Callable[[Reader], Any], Callable[[Any, bytearray], None]]:
    size = s.size
    unpack_from = s.unpack_from
    pack = s.pack

    def read(r: Reader) -> Any:
        p = r.pos
        if p + size > r.end:
            raise _short(r, size)
        r.pos = p + size
        return unpack_from(r.buf, p)[0]

    def write(v: Any, out: bytearray) -> None:
        try:
            out += pack(v)
        except struct.error as e:
            raise ValueError(f"cannot encode {v!r}: {e}") from None

    return read, write


r_i8, w_i8 = _fixed(_I8)
r_i16, w_i16 = _fixed(_I16)
r_u16, w_u16 = _fixed(_U16)
r_i32, w_i32 = _fixed(_I32)
r_u32, w_u32 = _fixed(_U32)
r_i64, w_i64 = _fixed(_I64)
r_f64, w_f64 = _fixed(_F64)


def r_bool(r: Reader) -> bool:
    return bool(r_i8(r))


def w_bool(v: Any, out: bytearray) -> None:
    out.append(1 if v else 0)


def r_uvarint(r: Reader) -> int:
    """Unsigned varint of at most 5 bytes (a 32-bit value)."""
    buf, p, end = r.buf, r.pos, r.end
    result = 0
    shift = 0
    while True:
        if p >= end:
            raise _short(r, 1)
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes")
    r.pos = p
    if result > 0xFFFFFFFF:
        raise ProtocolError("unsigned varint exceeds 32 bits")
    return result


def w_uvarint(v: int, out: bytearray) -> None:
    if v < 0 or v > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {v}")
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def r_varint(r: Reader) -> int:
    v = r_uvarint(r)
    return (v >> 1) ^ -(v & 1)


def w_varint(v: int, out: bytearray) -> None:
    w_uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF, out)


def r_varlong(r: Reader) -> int:
    buf, p, end = r.buf, r.pos, r.end
    result = 0
    shift = 0
    while True:
        if p >= end:
            raise _short(r, 1)
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ProtocolError("varlong longer than 10 bytes")
    r.pos = p
    result &= 0xFFFFFFFFFFFFFFFF
    return (result >> 1) ^ -(result & 1)


def w_varlong(v: int, out: bytearray) -> None:
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _decode(raw: bytes | bytearray | memoryview) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"invalid UTF-8 in string: {e}") from None


# -- strings ------------------------------------------------------------------------


def r_string(r: Reader) -> str:
    n = r_i16(r)
    if n < 0:
        raise ProtocolError("null in a non-nullable string")
    return _decode(take(r, n))


def r_nstring(r: Reader) -> str | None:
    n = r_i16(r)
    if n < 0:
        return None
    return _decode(take(r, n))


def r_cstring(r: Reader) -> str:
    n = r_uvarint(r) - 1
    if n < 0:
        raise ProtocolError("null in a non-nullable compact string")
    return _decode(take(r, n))


def r_cnstring(r: Reader) -> str | None:
    n = r_uvarint(r) - 1
    if n < 0:
        return None
    return _decode(take(r, n))


def w_string(v: str, out: bytearray) -> None:
    if v is None:
        raise ValueError("None in a non-nullable string")
    b = v.encode()
    if len(b) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    out += _I16.pack(len(b))
    out += b


def w_nstring(v: str | None, out: bytearray) -> None:
    if v is None:
        out += b"\xff\xff"
    else:
        w_string(v, out)


def w_cstring(v: str, out: bytearray) -> None:
    if v is None:
        raise ValueError("None in a non-nullable string")
    b = v.encode()
    w_uvarint(len(b) + 1, out)
    out += b


def w_cnstring(v: str | None, out: bytearray) -> None:
    if v is None:
        out.append(0)
    else:
        w_cstring(v, out)


# -- bytes (and record blobs, which are nullable bytes kept as a view) --------------


def r_bytes(r: Reader) -> bytes:
    n = r_i32(r)
    if n < 0:
        raise ProtocolError("null in non-nullable bytes")
    return bytes(take(r, n))


def r_nbytes(r: Reader) -> bytes | None:
    n = r_i32(r)
    if n < 0:
        return None
    return bytes(take(r, n))


def r_cbytes(r: Reader) -> bytes:
    n = r_uvarint(r) - 1
    if n < 0:
        raise ProtocolError("null in non-nullable compact bytes")
    return bytes(take(r, n))


def r_cnbytes(r: Reader) -> bytes | None:
    n = r_uvarint(r) - 1
    if n < 0:
        return None
    return bytes(take(r, n))


def r_records(r: Reader) -> bytes | bytearray | memoryview | None:
    """Record blob as a zero-copy view into the request frame."""
    n = r_i32(r)
    if n < 0:
        return None
    return take(r, n)


def r_crecords(r: Reader) -> bytes | bytearray | memoryview | None:
    n = r_uvarint(r) - 1
    if n < 0:
        return None
    return take(r, n)


def w_bytes(v: Any, out: bytearray) -> None:
    if v is None:
        raise ValueError("None in non-nullable bytes")
    out += _I32.pack(len(v))
    out += v


def w_nbytes(v: Any, out: bytearray) -> None:
    if v is None:
        out += b"\xff\xff\xff\xff"
    else:
        out += _I32.pack(len(v))
        out += v


def w_cbytes(v: Any, out: bytearray) -> None:
    if v is None:
        raise ValueError("None in non-nullable bytes")
    w_uvarint(len(v) + 1, out)
    out += v


def w_cnbytes(v: Any, out: bytearray) -> None:
    if v is None:
        out.append(0)
    else:
        w_uvarint(len(v) + 1, out)
        out += v


# -- uuid ---------------------------------------------------------------------------


def r_uuid(r: Reader) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(take(r, 16)))


def w_uuid(v: uuid.UUID | None, out: bytearray) -> None:
    out += (v or ZERO_UUID).bytes


# -- arrays -------------------------------------------------------------------------


def _count_ok(r: Reader, n: int) -> None:
    # every element takes at least one byte, so a count beyond the bytes left is a lie
    if n > r.end - r.pos:
        raise ProtocolError(f"array of {n} elements in {r.end - r.pos} bytes")


def r_array(r: Reader, elem: Callable[[Reader], Any]) -> list[Any]:
    n = r_i32(r)
    if n < 0:
        raise ProtocolError("null in a non-nullable array")
    _count_ok(r, n)
    return [elem(r) for _ in range(n)]


def r_narray(r: Reader, elem: Callable[[Reader], Any]) -> list[Any] | None:
    n = r_i32(r)
    if n < 0:
        return None
    _count_ok(r, n)
    return [elem(r) for _ in range(n)]


def r_carray(r: Reader, elem: Callable[[Reader], Any]) -> list[Any]:
    n = r_uvarint(r) - 1
    if n < 0:
        raise ProtocolError("null in a non-nullable compact array")
    _count_ok(r, n)
    return [elem(r) for _ in range(n)]


def r_cnarray(r: Reader, elem: Callable[[Reader], Any]) -> list[Any] | None:
    n = r_uvarint(r) - 1
    if n < 0:
        return None
    _count_ok(r, n)
    return [elem(r) for _ in range(n)]


class Encoded:
    """An array's elements already encoded for the version being written: `count`
    elements in `data`. Written as they are, without looking at them: a response part
    cached as bytes (see broker/metadata_cache.py). `errors` counts the non-zero error
    codes inside, for the broker's error statistics, which cannot read them from bytes."""

    __slots__ = ("count", "data", "errors")

    def __init__(self, count: int, data: bytes | bytearray | memoryview,
                 errors: dict[int, int] | None = None) -> None:
        self.count = count
        self.data = data
        self.errors = errors or {}

    def __len__(self) -> int:
        return self.count


def _w_encoded(v: Encoded, out: bytearray) -> None:
    if len(v.data) >= OUT_OF_LINE_BYTES and type(out) is Chunked:
        out.detach(v.data)
    else:
        out += v.data


def w_array(v: Any, out: bytearray, elem: Callable[[Any, bytearray], None]) -> None:
    if v is None:
        raise ValueError("None in a non-nullable array")
    out += _I32.pack(len(v))
    if type(v) is Encoded:
        _w_encoded(v, out)
        return
    for x in v:
        elem(x, out)


def w_narray(v: Any, out: bytearray, elem: Callable[[Any, bytearray], None]) -> None:
    if v is None:
        out += b"\xff\xff\xff\xff"
    else:
        w_array(v, out, elem)


def w_carray(v: Any, out: bytearray, elem: Callable[[Any, bytearray], None]) -> None:
    if v is None:
        raise ValueError("None in a non-nullable array")
    w_uvarint(len(v) + 1, out)
    if type(v) is Encoded:
        _w_encoded(v, out)
        return
    for x in v:
        elem(x, out)


def w_cnarray(v: Any, out: bytearray, elem: Callable[[Any, bytearray], None]) -> None:
    if v is None:
        out.append(0)
    else:
        w_carray(v, out, elem)


# -- nullable structs (a signed byte marker: -1 null, 1 present) ---------------------


def r_nstruct(r: Reader, parse: Callable[[Reader], Any]) -> Any:
    if r_i8(r) < 0:
        return None
    return parse(r)


def w_nstruct(v: Any, out: bytearray, build: Callable[[Any, bytearray], None]) -> None:
    if v is None:
        out.append(0xFF)
    else:
        out.append(1)
        build(v, out)


# -- tagged fields ------------------------------------------------------------------

TagTable = dict[int, tuple[str, Callable[[Reader], Any]]]


def r_tagged(r: Reader, table: TagTable, result: dict[str, Any]) -> None:
    """Read a tagged-field section into `result`; unknown tags are skipped.

    The order of tags is not checked (a repeated tag: the last one wins), as
    Kafka's generated readers do not check it either."""
    n = r_uvarint(r)
    _count_ok(r, n)
    for _ in range(n):
        tag = r_uvarint(r)
        size = r_uvarint(r)
        if size > r.end - r.pos:
            raise _short(r, size)
        entry = table.get(tag)
        if entry is None:
            r.pos += size
            continue
        sub = Reader(r.buf, r.pos, r.pos + size)
        result[entry[0]] = entry[1](sub)
        r.pos += size


def w_tagged(
    obj: Any, out: bytearray, table: list[tuple[int, str, Any, Callable[[Any, bytearray], None]]]
) -> None:
    """Write the tagged fields of `obj` whose value differs from the default."""
    present = []
    for tag, name, default, build in table:
        v = obj.get(name, default)
        if v != default:
            present.append((tag, v, build))
    w_uvarint(len(present), out)
    for tag, v, build in present:
        w_uvarint(tag, out)
        body = bytearray()
        build(v, body)
        w_uvarint(len(body), out)
        out += body


# -- record blobs: written like nullable bytes, but big ones stay out of line ---------

OUT_OF_LINE_BYTES = 16 * 1024


class OutOfLine:
    """A record blob whose bytes are not in memory (a region of a log segment, see
    commitlog/segment.py `FileRegion`): its length is known, so the frame around it can
    be encoded, and the connection writing the frame sends its bytes straight from the
    file (sendfile). `read` gives them as bytes, for any writer that cannot."""

    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def read(self) -> bytes:
        raise NotImplementedError


Part = bytes | bytearray | memoryview | OutOfLine


class Chunked(bytearray):
    """An output buffer that keeps large record blobs out of line.

    A fetch response is mostly record data read from the log; copying it into
    the response buffer is wasted work. `detach` closes the current chunk and
    records the blob itself as the next one; the caller writes all chunks with
    one `writelines`.
    """

    def __init__(self, initial: bytes = b"") -> None:
        super().__init__(initial)
        self.parts: list[Part] = []

    def detach(self, blob: Part) -> None:
        self.parts.append(bytearray(self))
        self.parts.append(blob)
        del self[:]

    def finish(self) -> list[Part]:
        return [*self.parts, bytearray(self)] if self.parts else [self]


def w_records(v: Any, out: bytearray) -> None:
    if v is None:
        out += b"\xff\xff\xff\xff"
        return
    out += _I32.pack(len(v))
    if len(v) >= OUT_OF_LINE_BYTES and type(out) is Chunked:
        out.detach(v)
    else:
        out += v.read() if isinstance(v, OutOfLine) else v


def w_crecords(v: Any, out: bytearray) -> None:
    if v is None:
        out.append(0)
        return
    w_uvarint(len(v) + 1, out)
    if len(v) >= OUT_OF_LINE_BYTES and type(out) is Chunked:
        out.detach(v)
    else:
        out += v.read() if isinstance(v, OutOfLine) else v
