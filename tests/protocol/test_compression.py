"""Compression codecs: round trips, client framings, decompression limits."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest

from jocko_py.protocol import compression as c
from jocko_py.protocol.records import CorruptRecordError, RecordBatchTooLargeError

DATA = bytes(range(256)) * 300 + b"abc" * 50_000
LIMIT = 10 * 1024 * 1024


@pytest.mark.parametrize("codec", [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
@pytest.mark.parametrize("data", [b"", b"x", DATA])
def test_round_trip(codec: int, data: bytes) -> None:
    assert c.decompress(codec, c.compress(codec, data), limit=LIMIT) == data


def test_gzip_output_is_a_gzip_member() -> None:
    assert gzip.decompress(c.compress(c.GZIP, DATA)) == DATA


def test_gzip_reads_stdlib_gzip() -> None:
    assert c.decompress(c.GZIP, gzip.compress(DATA), limit=LIMIT) == DATA


def test_snappy_writes_xerial_framing() -> None:
    out = c.compress(c.SNAPPY, DATA)
    magic, version, compat = struct.unpack_from(">8sii", out)
    assert magic == b"\x82SNAPPY\x00" and version == 1 and compat == 1
    (n,) = struct.unpack_from(">i", out, 16)
    assert bytes(cramjam.snappy.decompress_raw(out[20 : 20 + n])) == DATA[: 32 * 1024]


def test_snappy_reads_raw_snappy() -> None:
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert c.decompress(c.SNAPPY, raw, limit=LIMIT) == DATA


def test_snappy_reads_hand_built_xerial() -> None:
    blocks = [DATA[:1000], DATA[1000:]]
    framed = struct.pack(">8sii", b"\x82SNAPPY\x00", 1, 1)
    for blk in blocks:
        raw = bytes(cramjam.snappy.compress_raw(blk))
        framed += struct.pack(">i", len(raw)) + raw
    assert c.decompress(c.SNAPPY, framed, limit=LIMIT) == DATA


def test_lz4_frame_is_readable_by_reference_decoder() -> None:
    out = c.compress(c.LZ4, DATA)
    assert out[:4] == b"\x04\x22\x4d\x18"
    assert out[4] & 0x20  # independent blocks, which Kafka's Java reader requires
    assert bytes(cramjam.lz4.decompress(out)) == DATA


def test_lz4_reads_reference_frames() -> None:
    assert c.decompress(c.LZ4, bytes(cramjam.lz4.compress(DATA)), limit=LIMIT) == DATA


def test_xxh32_known_vectors() -> None:
    assert c._xxh32(b"") == 0x02CC5D05
    assert c._xxh32(b"a") == 0x550D7456
    assert c._xxh32(b"abc") == 0x32D153FF


def test_zstd_without_content_size_decompresses() -> None:
    comp = cramjam.zstd.Compressor()
    comp.compress(DATA)
    streamed = bytes(comp.finish())
    assert c.decompress(c.ZSTD, streamed, limit=LIMIT) == DATA


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_decompression_bomb_is_bounded(codec: int) -> None:
    bomb = c.compress(codec, b"\x00" * 4_000_000)
    assert len(bomb) < 300_000
    with pytest.raises(RecordBatchTooLargeError):
        c.decompress(codec, bomb, limit=1_000_000)


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_garbage_is_corrupt(codec: int) -> None:
    with pytest.raises(CorruptRecordError):
        c.decompress(codec, b"\x82SNAPPY\x00garbage-garbage-garbage", limit=LIMIT)


def test_truncated_gzip_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        c.decompress(c.GZIP, c.compress(c.GZIP, DATA)[:-20], limit=LIMIT)


def test_truncated_zstd_is_corrupt_not_too_large() -> None:
    with pytest.raises(CorruptRecordError):
        c.decompress(c.ZSTD, c.compress(c.ZSTD, DATA)[:-5], limit=LIMIT)


@pytest.mark.parametrize(
    "opts",
    [
        {"block_linked": True},
        {"block_linked": False, "block_checksum": True, "content_checksum": True},
        {"block_linked": False, "store_size": False, "block_size": 7},  # 4 MiB blocks
    ],
)
def test_lz4_frame_variants_from_python_lz4(opts: dict[str, object]) -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    frame = lz4_frame.compress(DATA, **opts)
    assert c.decompress(c.LZ4, frame, limit=LIMIT) == DATA


def test_our_lz4_frames_read_by_python_lz4() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    assert lz4_frame.decompress(c.compress(c.LZ4, DATA)) == DATA
