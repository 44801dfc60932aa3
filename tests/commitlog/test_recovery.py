"""Crash recovery: torn tails, bad CRCs, missing/corrupt indexes, partial rolls."""

from __future__ import annotations

import os
from pathlib import Path

from jocko_py.commitlog import Log, LogConfig
from jocko_py.commitlog.index import OffsetIndex
from tests.commitlog._util import base_offsets, batch

NOW = 1_700_000_000_000


def _fill(path: Path, cfg: LogConfig, batches: int, records: int = 2) -> list[int]:
    """Write ``batches`` batches and close uncleanly (no flush); returns their sizes."""
    lg = Log.open(path, cfg)
    sizes = []
    for _ in range(batches):
        data = batch(records, ts=NOW, value_size=50)
        lg.append(data, 0, now_ms=NOW)
        sizes.append(len(data))
    for seg in lg.segments:
        seg.close()  # like a crash: nothing flushed, no checkpoint
    return sizes


def _seg_file(path: Path, base: int, suffix: str = ".log") -> Path:
    return path / f"{base:020d}{suffix}"


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    sizes = _fill(d, LogConfig(), 5)
    log_file = _seg_file(d, 0)
    os.truncate(log_file, sum(sizes) - 17)  # the last batch is cut mid-way
    lg = Log.open(d, LogConfig())
    assert lg.log_end_offset == 8  # 4 whole batches of 2 records
    assert os.path.getsize(log_file) == sum(sizes[:4])
    assert base_offsets(lg.read(0, 1 << 20).records) == [0, 2, 4, 6]
    assert lg.append(batch(1, ts=NOW), 0, now_ms=NOW).first_offset == 8
    lg.close()


def test_tail_shorter_than_a_header_is_truncated(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    sizes = _fill(d, LogConfig(), 3)
    with open(_seg_file(d, 0), "ab") as f:
        f.write(b"\x00" * 30)
    lg = Log.open(d, LogConfig())
    assert lg.log_end_offset == 6 and lg.active_segment.size == sum(sizes)
    lg.close()


def test_bad_crc_in_last_batch_is_truncated(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    sizes = _fill(d, LogConfig(), 4)
    log_file = _seg_file(d, 0)
    with open(log_file, "r+b") as f:
        f.seek(sum(sizes[:3]) + 70)  # inside the last batch's records
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))
    lg = Log.open(d, LogConfig())
    assert lg.log_end_offset == 6
    assert os.path.getsize(log_file) == sum(sizes[:3])
    lg.close()


def test_corrupt_middle_segment_drops_later_segments(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(batch(2, ts=NOW, value_size=50))
    cfg = LogConfig(segment_bytes=size * 2)
    _fill(d, cfg, 6)  # segments 0, 4, 8
    with open(_seg_file(d, 4), "r+b") as f:
        f.seek(size + 80)
        f.write(b"\xff\xff")
    lg = Log.open(d, cfg)
    assert [s.base_offset for s in lg.segments] == [0, 4]
    assert lg.log_end_offset == 6
    assert not _seg_file(d, 8).exists()
    lg.close()


def test_missing_index_is_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig(index_interval_bytes=0)
    lg = Log.open(d, cfg)
    for i in range(10):
        lg.append(batch(3, ts=NOW + 10 * i), 0, now_ms=NOW)
    lg.close()
    _seg_file(d, 0, ".index").unlink()
    _seg_file(d, 0, ".timeindex").unlink()
    # recovery_point=LEO: no recovery needed, yet the missing indexes are noticed.
    lg = Log.open(d, cfg, recovery_point=30)
    assert _seg_file(d, 0, ".index").exists()
    assert _seg_file(d, 0, ".timeindex").exists()
    assert lg.active_segment.offset_index.entries == 10
    for off in range(30):
        assert base_offsets(lg.read(off, 1).records) == [off - off % 3]
    # the rebuilt time index answers lookups by timestamp
    for i in range(10):
        assert lg.offset_for_timestamp(NOW + 10 * i - 5) == (3 * i, NOW + 10 * i)
    assert lg.offset_for_timestamp(NOW + 91) is None
    lg.close()


def test_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig(index_interval_bytes=0)
    lg = Log.open(d, cfg)
    for _ in range(10):
        lg.append(batch(3, ts=NOW), 0, now_ms=NOW)
    lg.close()
    idx = _seg_file(d, 0, ".index")
    good = idx.read_bytes()
    # Plausible-looking but wrong: last entry points at the wrong batch.
    bad = bytearray(good)
    bad[-8:-4] = (24).to_bytes(4, "big")
    idx.write_bytes(bytes(bad))
    lg = Log.open(d, cfg, recovery_point=30)
    assert idx.read_bytes() == good
    for off in range(30):
        assert base_offsets(lg.read(off, 1).records) == [off - off % 3]
    lg.close()
    idx.write_bytes(good[:-3])  # not a whole number of entries
    lg = Log.open(d, cfg, recovery_point=30)
    assert idx.read_bytes() == good
    lg.close()


def test_index_with_garbage_entries_is_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, LogConfig())
    lg.append(batch(3, ts=NOW), 0, now_ms=NOW)
    lg.close()
    _seg_file(d, 0, ".index").write_bytes(b"\xff" * 16)
    _seg_file(d, 0, ".timeindex").write_bytes(b"\x00" * 24)
    lg = Log.open(d, LogConfig(), recovery_point=3)
    assert lg.log_end_offset == 3
    assert lg.offset_for_timestamp(NOW) == (0, NOW)
    lg.close()


def test_partial_roll_empty_new_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _fill(d, LogConfig(), 2)
    # Crash right after the new segment file was created, before its indexes.
    _seg_file(d, 4).touch()
    lg = Log.open(d, LogConfig())
    assert [s.base_offset for s in lg.segments] == [0, 4]
    assert lg.log_end_offset == 4
    assert lg.append(batch(1, ts=NOW), 0, now_ms=NOW).first_offset == 4
    assert base_offsets(lg.read(4, 1 << 20).records) == [4]
    lg.close()


def test_partial_roll_index_without_log_is_removed(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _fill(d, LogConfig(), 2)
    _seg_file(d, 4, ".index").write_bytes(b"")
    _seg_file(d, 4, ".timeindex").write_bytes(b"\x00" * 12)
    lg = Log.open(d, LogConfig())
    assert [s.base_offset for s in lg.segments] == [0]
    assert not _seg_file(d, 4, ".index").exists()
    assert not _seg_file(d, 4, ".timeindex").exists()
    assert lg.log_end_offset == 4
    lg.close()


def test_segments_before_recovery_point_are_not_rescanned(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(batch(2, ts=NOW, value_size=50))
    cfg = LogConfig(segment_bytes=size * 2)
    lg = Log.open(d, cfg)
    for _ in range(6):
        lg.append(batch(2, ts=NOW, value_size=50), 0, now_ms=NOW)
    lg.flush()
    lg.close()
    # Corrupt a record byte (not a header) in the first, already-flushed segment:
    # only a full CRC scan would notice, and it must not run there.
    with open(_seg_file(d, 0), "r+b") as f:
        f.seek(80)
        f.write(b"\xee")
    lg = Log.open(d, cfg, recovery_point=8)
    assert [s.base_offset for s in lg.segments] == [0, 4, 8]
    assert lg.log_end_offset == 12
    lg.close()


def test_offset_index_lookup(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 100, 1024)
    assert idx.lookup(150) == (100, 0)
    for off, pos in ((100, 0), (110, 500), (130, 900)):
        idx.append(off, pos)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 500)
    assert idx.lookup(1000) == (130, 900)
    idx.truncate_to_position(500)
    assert idx.lookup(1000) == (100, 0)
    idx.flush()
    idx.close()
    assert (tmp_path / "x.index").stat().st_size == 8
    again = OffsetIndex.load(tmp_path / "x.index", 100, 1024)
    assert again.entries == 1
    again.close()


def test_batches_without_timestamps_reopen_cleanly(tmp_path: Path) -> None:
    from jocko_py.protocol.records import NewRecord, build_batch

    d = tmp_path / "t-0"
    no_ts = build_batch([NewRecord(None, b"v", (), -1)])
    size = len(no_ts)
    lg = Log.open(d, LogConfig(segment_bytes=size))
    for _ in range(3):
        lg.append(no_ts, 0)
    assert lg.num_segments == 3
    assert lg.latest_timestamp_offset() is None
    lg.close()
    # No bogus (-1, -1) time index entries were written for timestamp-less batches.
    assert [_seg_file(d, b, ".timeindex").stat().st_size for b in (0, 1, 2)] == [0, 0, 0]
    lg = Log.open(d, LogConfig(segment_bytes=size), had_clean_shutdown=True)
    assert lg.log_end_offset == 3
    assert all(s.time_index.entries == 0 for s in lg.segments)
    lg.close()


def test_undecodable_stored_batch_is_a_storage_error(tmp_path: Path) -> None:
    import pytest

    from jocko_py.commitlog import KafkaStorageError

    d = tmp_path / "t-0"
    lg = Log.open(d, LogConfig())
    lg.append(batch(2, ts=NOW), 0, now_ms=NOW)
    lg.close()
    with open(_seg_file(d, 0), "r+b") as f:
        f.seek(61)  # first record's length varint: now claims more than the batch holds
        f.write(b"\x7e")
    lg = Log.open(d, LogConfig(), had_clean_shutdown=True)  # trusted: no CRC scan
    with pytest.raises(KafkaStorageError):
        lg.offset_for_timestamp(NOW)
    with pytest.raises(KafkaStorageError):
        lg.latest_timestamp_offset()
    lg.close()
