"""Record-batch compression codecs: gzip, snappy, lz4 and zstd.

This module owns the framing each Kafka client uses per codec, and the bound on
decompressed size (a small compressed batch must not expand without limit).

- gzip (1): RFC 1952 gzip members (zlib headers are tolerated too).
- snappy (2): the Java client writes snappy-java's "xerial" stream framing:
  ``b"\\x82SNAPPY\\x00"`` + int32 version + int32 min-compatible version, then
  blocks of int32 (big-endian) length + raw snappy.  librdkafka sends plain raw
  snappy.  Both are decoded; we write xerial framing, which every client reads.
- lz4 (3): the LZ4 *frame* format (magic 0x184D2204).  We parse frames here so
  each block is decompressed against a bounded buffer; we write frames with
  independent blocks, no checksums — which Kafka's Java reader requires/accepts.
- zstd (4): zstd frames, which may lack a content size (streaming producers);
  decompression grows an output buffer up to the limit.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from jocko_py.protocol.record_errors import CorruptRecordError, RecordBatchTooLargeError

__all__ = [
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "compress",
    "decompress",
]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_I32 = struct.Struct(">i")
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size

_LZ4_MAGIC = 0x184D2204
_LZ4_SKIPPABLE_MASK = 0xFFFFFFF0
_LZ4_SKIPPABLE = 0x184D2A50
_U32LE = struct.Struct("<I")
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_LZ4_WRITE_BLOCK = 64 * 1024
_LZ4_WRITE_BD = 4 << 4  # block max size 64 KiB, as Kafka's Java writer uses

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def codec_name(codec: int) -> str:
    return _NAMES.get(codec, f"unknown({codec})")


def _too_large(codec: int, limit: int) -> RecordBatchTooLargeError:
    return RecordBatchTooLargeError(
        f"{codec_name(codec)} records decompress to more than {limit} bytes"
    )


def decompress(codec: int, data: bytes | bytearray | memoryview, *, limit: int) -> bytes:
    """Decompress ``data``; raise RecordBatchTooLargeError past ``limit`` bytes out.

    Malformed input raises CorruptRecordError.
    """
    try:
        if codec == NONE:
            out = bytes(data)
        elif codec == GZIP:
            out = _gunzip(data, limit)
        elif codec == SNAPPY:
            out = _unsnappy(data, limit)
        elif codec == LZ4:
            out = _unlz4(data, limit)
        elif codec == ZSTD:
            out = _unzstd(data, limit)
        else:
            raise CorruptRecordError(f"unknown compression codec {codec}")
    except (CorruptRecordError, RecordBatchTooLargeError):
        raise
    except (zlib.error, cramjam.DecompressionError, ValueError, OSError) as exc:
        raise CorruptRecordError(f"{codec_name(codec)} data is corrupt: {exc}") from exc
    if len(out) > limit:
        raise _too_large(codec, limit)
    return out


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` in the framing Kafka clients expect for ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        # wbits=31: a gzip member, as Java's GZIPOutputStream writes.
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return _lz4_frame_compress(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data), level=3))
    raise ValueError(f"unknown compression codec {codec}")


# --- gzip -------------------------------------------------------------------------


def _gunzip(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    out = bytearray()
    rest: bytes | memoryview = memoryview(data)
    while len(rest):
        # wbits=47 accepts gzip or zlib headers; max_length keeps each step bounded.
        d = zlib.decompressobj(47)
        chunk: bytes | memoryview = rest
        while True:
            out += d.decompress(chunk, limit + 1 - len(out))
            if len(out) > limit:
                raise _too_large(GZIP, limit)
            if d.eof or not d.unconsumed_tail:
                break
            chunk = d.unconsumed_tail
        if not d.eof:
            raise CorruptRecordError("gzip data ends before the end of its stream")
        rest = d.unused_data
        # Several concatenated gzip members are legal; trailing zeros are padding.
        if not rest.strip(b"\x00"):
            break
    return bytes(out)


# --- snappy -----------------------------------------------------------------------


def _raw_snappy(block: bytes | memoryview, limit: int, produced: int) -> bytes:
    # The raw format states its decompressed length first: check it before allocating.
    size = int(cramjam.snappy.decompress_raw_len(block))
    if produced + size > limit:
        raise _too_large(SNAPPY, limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _unsnappy(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    mv = memoryview(data)
    if len(mv) >= _XERIAL_HEADER.size and bytes(mv[:8]) == _XERIAL_MAGIC:
        out = bytearray()
        pos = _XERIAL_HEADER.size
        while pos < len(mv):
            if len(mv) - pos < 4:
                raise CorruptRecordError("xerial snappy block length is cut short")
            (n,) = _I32.unpack_from(mv, pos)
            pos += 4
            if n < 0 or n > len(mv) - pos:
                raise CorruptRecordError(f"xerial snappy block length {n} is out of range")
            out += _raw_snappy(bytes(mv[pos : pos + n]), limit, len(out))
            pos += n
        return bytes(out)
    return _raw_snappy(bytes(mv), limit, 0)


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    mv = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
    for start in range(0, max(len(mv), 1), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(bytes(mv[start : start + _XERIAL_BLOCK])))
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


# --- lz4 ----------------------------------------------------------------------------


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, needed only for the 1-byte LZ4 frame header checksum."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while i + 16 <= n:
            for j in range(4):
                (lane,) = _U32LE.unpack_from(data, i + 4 * j)
                v[j] = (rotl((v[j] + lane * p2) & mask, 13) * p1) & mask
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while i + 4 <= n:
        (lane,) = _U32LE.unpack_from(data, i)
        h = (rotl((h + lane * p3) & mask, 17) * p4) & mask
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & mask, 11) * p1) & mask
        i += 1
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


def _unlz4(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    mv = memoryview(data)
    out = bytearray()
    pos = 0
    n = len(mv)
    while pos < n:
        if n - pos < 4:
            raise CorruptRecordError("lz4 frame magic is cut short")
        (magic,) = _U32LE.unpack_from(mv, pos)
        if magic & _LZ4_SKIPPABLE_MASK == _LZ4_SKIPPABLE:
            if n - pos < 8:
                raise CorruptRecordError("lz4 skippable frame is cut short")
            (skip,) = _U32LE.unpack_from(mv, pos + 4)
            pos += 8 + skip
            continue
        if magic != _LZ4_MAGIC:
            raise CorruptRecordError(f"not an lz4 frame (magic {magic:#x})")
        pos = _unlz4_frame(mv, pos + 4, limit, out)
    return bytes(out)


def _unlz4_frame(mv: memoryview, pos: int, limit: int, out: bytearray) -> int:
    n = len(mv)
    if n - pos < 3:
        raise CorruptRecordError("lz4 frame descriptor is cut short")
    flg, bd = mv[pos], mv[pos + 1]
    if flg >> 6 != 1:
        raise CorruptRecordError(f"unsupported lz4 frame version {flg >> 6}")
    independent = bool(flg & 0x20)
    block_checksum = bool(flg & 0x10)
    content_size = bool(flg & 0x08)
    content_checksum = bool(flg & 0x04)
    dict_id = bool(flg & 0x01)
    block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x7)
    if block_max is None:
        raise CorruptRecordError(f"invalid lz4 block size code in {bd:#x}")
    desc_len = 2 + (8 if content_size else 0) + (4 if dict_id else 0)
    if n - pos < desc_len + 1:
        raise CorruptRecordError("lz4 frame descriptor is cut short")
    if content_size:
        (declared,) = struct.unpack_from("<Q", mv, pos + 2)
        if declared + len(out) > limit:
            raise _too_large(LZ4, limit)
    # The header checksum is not verified: the batch CRC already covers these bytes,
    # and some old Java writers computed it incorrectly.
    pos += desc_len + 1
    if not independent:
        # Linked blocks reference earlier output, so they cannot be decoded block by
        # block; hand the whole frame to the library and bound it afterwards.
        frame_start = pos - desc_len - 1 - 4
        whole = bytes(cramjam.lz4.decompress(bytes(mv[frame_start:])))
        if len(out) + len(whole) > limit:
            raise _too_large(LZ4, limit)
        out += whole
        return n
    buf = bytearray(block_max)
    while True:
        if n - pos < 4:
            raise CorruptRecordError("lz4 block size is cut short")
        (bsize,) = _U32LE.unpack_from(mv, pos)
        pos += 4
        if bsize == 0:
            break
        uncompressed = bool(bsize & 0x80000000)
        bsize &= 0x7FFFFFFF
        if bsize > n - pos or bsize > block_max:
            raise CorruptRecordError(f"lz4 block size {bsize} is out of range")
        block = mv[pos : pos + bsize]
        pos += bsize + (4 if block_checksum else 0)
        if uncompressed:
            produced = bsize
            if len(out) + produced > limit:
                raise _too_large(LZ4, limit)
            out += block
            continue
        produced = int(cramjam.lz4.decompress_block_into(bytes(block), buf))
        if len(out) + produced > limit:
            raise _too_large(LZ4, limit)
        out += memoryview(buf)[:produced]
    if content_checksum:
        pos += 4
    if pos > n:
        raise CorruptRecordError("lz4 frame is cut short")
    return pos


def _lz4_frame_compress(data: bytes | bytearray | memoryview) -> bytes:
    mv = memoryview(data)
    flg = 0x60  # version 01, independent blocks, no checksums, no content size
    descriptor = bytes((flg, _LZ4_WRITE_BD))
    hc = (_xxh32(descriptor) >> 8) & 0xFF
    out = bytearray(_U32LE.pack(_LZ4_MAGIC))
    out += descriptor
    out.append(hc)
    for start in range(0, len(mv), _LZ4_WRITE_BLOCK):
        chunk = bytes(mv[start : start + _LZ4_WRITE_BLOCK])
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            out += _U32LE.pack(len(chunk) | 0x80000000)
            out += chunk
        else:
            out += _U32LE.pack(len(block))
            out += block
    out += _U32LE.pack(0)
    return bytes(out)


# --- zstd ---------------------------------------------------------------------------


def _zstd_content_size(mv: memoryview) -> int | None:
    """Frame_Content_Size from the first frame header, or None when absent."""
    if len(mv) < 6 or bytes(mv[:4]) != _ZSTD_MAGIC:
        return None
    fhd = mv[4]
    fcs_flag = fhd >> 6
    single_segment = bool(fhd & 0x20)
    did_size = (0, 1, 2, 4)[fhd & 0x3]
    pos = 5 + (0 if single_segment else 1) + did_size
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if fcs_size == 0 or len(mv) < pos + fcs_size:
        return None
    raw = int.from_bytes(mv[pos : pos + fcs_size], "little")
    return raw + 256 if fcs_size == 2 else raw


def _unzstd(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    mv = memoryview(data)
    declared = _zstd_content_size(mv)
    if declared is not None and declared > limit:
        raise _too_large(ZSTD, limit)
    src = bytes(mv)
    # Without a declared size (streaming writers), grow the output buffer until
    # the data fits or the limit is reached; each attempt is bounded.
    size = min(limit, max(64 * 1024, 4 * len(src), declared or 0))
    while True:
        buf = bytearray(size)
        try:
            written = int(cramjam.zstd.decompress_into(src, buf))
        except cramjam.DecompressionError as exc:
            # Only "output buffer too small" is worth a bigger buffer; anything
            # else is damaged input.
            if "whole buffer" not in str(exc):
                raise CorruptRecordError(f"zstd data is corrupt: {exc}") from exc
            if size >= limit:
                raise _too_large(ZSTD, limit) from None
            size = min(limit, size * 4)
            continue
        return bytes(memoryview(buf)[:written])
