"""Log: append, read, rolling, retention, timestamps, deletes, flushing, disk errors."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from jocko_py.commitlog import KafkaStorageError, Log, LogConfig, OffsetOutOfRangeError
from jocko_py.protocol.records import (
    NewRecord,
    RecordBatchTooLargeError,
    build_batch,
    decode_records,
    split_batches,
)
from tests.commitlog._util import base_offsets, batch
from tests.support.prereq import requires

NOW = 1_700_000_000_000


def _open(tmp_path: Path, **cfg: object) -> Log:
    return Log.open(tmp_path / "topic-0", LogConfig(**cfg))  # type: ignore[arg-type]


def test_append_assigns_offsets_and_epoch(tmp_path: Path) -> None:
    lg = _open(tmp_path)
    info1 = lg.append(batch(3, ts=NOW), leader_epoch=5, now_ms=NOW)
    info2 = lg.append(batch(2, ts=NOW + 1) + batch(1, ts=NOW + 2), leader_epoch=6, now_ms=NOW)
    assert (info1.first_offset, info1.last_offset, info1.num_records) == (0, 2, 3)
    assert (info2.first_offset, info2.last_offset, info2.num_records) == (3, 5, 3)
    assert info2.max_timestamp == NOW + 2 and info2.offset_of_max_timestamp == 5
    assert lg.log_end_offset == 6 and lg.log_start_offset == 0
    out = split_batches(lg.read(0, 1 << 20).records, validate_crc=True)
    assert [(h.base_offset, h.partition_leader_epoch) for h, _ in out] == [(0, 5), (3, 6), (5, 6)]
    assert [r.offset for _, mv in out for r in decode_records(mv)] == list(range(6))
    lg.close()


def test_append_does_not_modify_callers_buffer(tmp_path: Path) -> None:
    lg = _open(tmp_path)
    lg.append(batch(1), 0)
    data = bytearray(batch(1))
    before = bytes(data)
    lg.append(data, 0)
    assert bytes(data) == before
    lg.close()


def test_read_at_every_offset_inside_a_batch_returns_that_batch(tmp_path: Path) -> None:
    lg = _open(tmp_path, index_interval_bytes=0)
    for _ in range(4):
        lg.append(batch(5, ts=NOW), 0, now_ms=NOW)
    for off in range(20):
        res = lg.read(off, 1)  # max_bytes=1: exactly one batch thanks to min_one_batch
        assert base_offsets(res.records) == [off - off % 5]
        assert res.first_batch_offset == off - off % 5
    lg.close()


def test_read_respects_max_bytes_and_min_one_batch(tmp_path: Path) -> None:
    lg = _open(tmp_path)
    sizes = [len(batch(2, ts=NOW)) for _ in range(3)]
    for _ in range(3):
        lg.append(batch(2, ts=NOW), 0, now_ms=NOW)
    assert base_offsets(lg.read(0, sizes[0] * 2).records) == [0, 2]
    assert base_offsets(lg.read(0, sizes[0] * 2 - 1).records) == [0]
    assert lg.read(0, 10, min_one_batch=False).records == b""
    assert base_offsets(lg.read(3, 1 << 20).records) == [2, 4]
    lg.close()


def test_read_stops_below_max_offset(tmp_path: Path) -> None:
    lg = _open(tmp_path)
    for _ in range(3):
        lg.append(batch(2, ts=NOW), 0, now_ms=NOW)
    assert base_offsets(lg.read(0, 1 << 20, max_offset=4).records) == [0, 2]
    # A batch that straddles the high watermark is withheld entirely.
    assert base_offsets(lg.read(0, 1 << 20, max_offset=3).records) == [0]
    assert lg.read(4, 1 << 20, max_offset=4).records == b""
    lg.close()


def test_read_out_of_range(tmp_path: Path) -> None:
    lg = _open(tmp_path)
    lg.append(batch(2), 0)
    assert lg.read(2, 100).records == b""  # at the log end: empty, not an error
    with pytest.raises(OffsetOutOfRangeError) as info:
        lg.read(3, 100)
    assert info.value.log_end_offset == 2 and info.value.code == 1
    lg.delete_records_before(1)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    lg.close()


def test_roll_by_segment_bytes(tmp_path: Path) -> None:
    size = len(batch(1, ts=NOW))
    lg = _open(tmp_path, segment_bytes=size * 3)
    for _ in range(10):
        lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    assert [s.base_offset for s in lg.segments] == [0, 3, 6, 9]
    assert all(s.size <= size * 3 for s in lg.segments)
    # Rolled segments were fsynced, so the recovery point passed them.
    assert lg.recovery_point == 9 and not any(s.dirty for s in lg.segments[:-1])
    assert sorted(p.name for p in (tmp_path / "topic-0").glob("*.log")) == [
        f"{b:020d}.log" for b in (0, 3, 6, 9)
    ]
    # Reads continue across segment boundaries one segment at a time.
    assert base_offsets(lg.read(2, 1 << 20).records) == [2]
    assert base_offsets(lg.read(3, 1 << 20).records) == [3, 4, 5]
    lg.close()


def test_roll_by_segment_ms(tmp_path: Path) -> None:
    lg = _open(tmp_path, segment_ms=1000)
    lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    lg.append(batch(1, ts=NOW + 500), 0, now_ms=NOW + 500)
    assert lg.num_segments == 1
    lg.append(batch(1, ts=NOW + 1500), 0, now_ms=NOW + 1500)
    assert [s.base_offset for s in lg.segments] == [0, 2]
    lg.close()


def test_roll_when_index_is_full(tmp_path: Path) -> None:
    # 24 bytes: 3 offset entries (8 bytes), 2 time entries (12 bytes); equal
    # timestamps add only one time entry, so the offset index fills first.
    lg = _open(tmp_path, segment_index_bytes=24, index_interval_bytes=0)
    for _ in range(7):
        lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    assert [s.base_offset for s in lg.segments] == [0, 3, 6]
    lg.close()


def test_batch_larger_than_max_message_bytes_is_rejected(tmp_path: Path) -> None:
    lg = _open(tmp_path, max_message_bytes=200)
    with pytest.raises(RecordBatchTooLargeError):
        lg.append(batch(1, value_size=300), 0)
    assert lg.log_end_offset == 0
    lg.close()


def test_retention_by_time_rolls_and_deletes_an_expired_active_segment(tmp_path: Path) -> None:
    size = len(batch(1, ts=NOW))
    lg = _open(tmp_path, segment_bytes=size * 2, retention_ms=10_000)
    for i in range(6):  # segments [0,1] [2,3] [4,5], timestamps NOW..NOW+5000
        lg.append(batch(1, ts=NOW + i * 1000), 0, now_ms=NOW)
    assert lg.num_segments == 3
    assert lg.apply_retention(NOW + 10_500) == 0
    assert lg.apply_retention(NOW + 11_500) == 1  # segment 0 max ts NOW+1000 expired
    assert lg.log_start_offset == 2
    assert lg.apply_retention(NOW + 14_500) == 1  # segment [2,3] (max ts NOW+3000)
    assert [s.base_offset for s in lg.segments] == [4]
    # Kafka: an expired active segment is rolled, then deleted; the log end stays
    assert lg.apply_retention(NOW + 100_000) == 1
    assert [s.base_offset for s in lg.segments] == [6]
    assert lg.log_start_offset == 6 and lg.log_end_offset == 6 and lg.size_bytes == 0
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(5, 100)
    assert lg.apply_retention(NOW + 200_000) == 0  # an empty active segment stays
    assert lg.append(batch(1, ts=NOW + 200_000), 0, now_ms=NOW + 200_000) is not None
    assert lg.log_end_offset == 7
    lg.close()
    # The advanced log start offset survives a restart.
    lg = Log.open(tmp_path / "topic-0", LogConfig())
    assert lg.log_start_offset == 6 and lg.log_end_offset == 7
    lg.close()


def test_retention_by_bytes(tmp_path: Path) -> None:
    size = len(batch(1, ts=NOW))
    lg = _open(tmp_path, segment_bytes=size * 2, retention_bytes=size * 3, retention_ms=-1)
    for _ in range(7):  # segments [0,1] [2,3] [4,5] [6]
        lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    assert lg.apply_retention(NOW) == 2
    assert [s.base_offset for s in lg.segments] == [4, 6]
    assert lg.size_bytes <= size * 3
    assert lg.log_start_offset == 4
    lg.close()


def test_retention_bytes_zero_rolls_and_empties_the_active_segment(tmp_path: Path) -> None:
    size = len(batch(1, ts=NOW))
    lg = _open(tmp_path, segment_bytes=size * 10, retention_bytes=0, retention_ms=-1)
    lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    assert lg.apply_retention(NOW) == 1
    assert lg.log_start_offset == lg.log_end_offset == 2 and lg.size_bytes == 0
    lg.close()


def test_retention_unlimited_deletes_nothing(tmp_path: Path) -> None:
    size = len(batch(1, ts=1))
    lg = _open(tmp_path, segment_bytes=size, retention_ms=-1, retention_bytes=-1)
    for _ in range(3):
        lg.append(batch(1, ts=1), 0, now_ms=2)
    assert lg.apply_retention(NOW) == 0 and lg.num_segments == 3
    lg.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    size = len(build_batch([NewRecord(b"a", b"b", (), 0)] * 3))
    lg = _open(tmp_path, segment_bytes=size * 2, index_interval_bytes=0)
    # Batches of 3 records at timestamps t, t+1, t+2 for t = 0, 10, 20, ...
    for t in range(0, 100, 10):
        recs = [NewRecord(b"a", b"b", (), NOW + t + i) for i in range(3)]
        lg.append(build_batch(recs), 0, now_ms=NOW)
    assert lg.num_segments > 2
    assert lg.offset_for_timestamp(0) == (0, NOW)
    assert lg.offset_for_timestamp(NOW + 11) == (4, NOW + 11)
    assert lg.offset_for_timestamp(NOW + 13) == (6, NOW + 20)
    assert lg.offset_for_timestamp(NOW + 92) == (29, NOW + 92)
    assert lg.offset_for_timestamp(NOW + 93) is None
    assert lg.latest_timestamp_offset() == (29, NOW + 92)
    lg.delete_records_before(7)
    assert lg.offset_for_timestamp(NOW) == (7, NOW + 21)
    lg.close()


def test_latest_timestamp_offset_is_first_record_with_max(tmp_path: Path) -> None:
    lg = _open(tmp_path)
    assert lg.latest_timestamp_offset() is None
    lg.append(build_batch([NewRecord(None, b"x", (), t) for t in (5, 9, 9, 1)]), 0)
    lg.append(build_batch([NewRecord(None, b"x", (), 7)]), 0)
    assert lg.latest_timestamp_offset() == (1, 9)
    lg.close()


def test_log_append_time(tmp_path: Path) -> None:
    lg = _open(tmp_path)
    info = lg.append(batch(2, ts=5), 0, log_append_time=NOW)
    assert info.log_append_time == NOW and info.max_timestamp == NOW
    [(h, mv)] = split_batches(lg.read(0, 1 << 20).records, validate_crc=True)
    assert h.timestamp_type == 1
    assert [r.timestamp for r in decode_records(mv)] == [NOW, NOW]
    lg.close()


def test_delete_records_before(tmp_path: Path) -> None:
    size = len(batch(1, ts=NOW))
    lg = _open(tmp_path, segment_bytes=size * 2)
    for _ in range(6):
        lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    assert lg.delete_records_before(3) == 3
    assert [s.base_offset for s in lg.segments] == [2, 4]  # segment [0,1] deleted
    assert lg.log_start_offset == 3
    assert base_offsets(lg.read(3, 1 << 20).records) == [3]
    assert lg.delete_records_before(1) == 3  # never moves backwards
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records_before(7)
    assert lg.delete_records_before(6) == 6
    assert lg.read(6, 100).records == b""
    lg.close()
    lg = Log.open(tmp_path / "topic-0", LogConfig(segment_bytes=size * 2))
    assert (lg.log_start_offset, lg.log_end_offset) == (6, 6)
    lg.close()


def test_truncate_to(tmp_path: Path) -> None:
    size = len(batch(2, ts=NOW))
    lg = _open(tmp_path, segment_bytes=size * 2, index_interval_bytes=0)
    for _ in range(5):  # batches at 0,2,4,6,8; segments [0,2] [4,6] [8]
        lg.append(batch(2, ts=NOW), 0, now_ms=NOW)
    lg.truncate_to(6)
    assert lg.log_end_offset == 6 and [s.base_offset for s in lg.segments] == [0, 4]
    lg.truncate_to(3)  # inside batch 2-3: the whole batch goes
    assert lg.log_end_offset == 2 and [s.base_offset for s in lg.segments] == [0]
    info = lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    assert info.first_offset == 2
    assert base_offsets(lg.read(0, 1 << 20).records) == [0, 2]
    lg.close()
    lg = Log.open(tmp_path / "topic-0", LogConfig())
    assert lg.log_end_offset == 3
    lg.close()


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    lg = _open(tmp_path)
    lg.append(batch(2, base_offset=0, partition_leader_epoch=3), 9, assign_offsets=False)
    info = lg.append(batch(1, base_offset=2, partition_leader_epoch=4), 9, assign_offsets=False)
    assert info.first_offset == 2 and lg.log_end_offset == 3
    out = split_batches(lg.read(0, 1 << 20).records, validate_crc=True)
    assert [(h.base_offset, h.partition_leader_epoch) for h, _ in out] == [(0, 3), (2, 4)]
    lg.close()


def test_flush_messages_sets_needs_flush(tmp_path: Path) -> None:
    lg = _open(tmp_path, flush_messages=5)
    dirty: list[Log] = []
    lg.on_dirty = dirty.append
    lg.append(batch(2), 0)
    assert not lg.needs_flush and dirty == [lg]
    lg.append(batch(2), 0)
    assert not lg.needs_flush and lg.unflushed_messages == 4
    assert lg.flush_if_due() is False
    lg.append(batch(1), 0)
    assert lg.needs_flush and len(dirty) == 1  # reported once until flushed
    assert lg.flush_if_due() is True
    assert not lg.needs_flush and lg.unflushed_messages == 0 and lg.recovery_point == 5
    lg.append(batch(1), 0)
    assert len(dirty) == 2
    lg.close()


def test_flush_ms(tmp_path: Path) -> None:
    lg = _open(tmp_path, flush_ms=1000)
    lg.append(batch(1), 0)
    assert lg.flush_if_due(lg.last_flush_ms + 10) is False
    assert lg.flush_if_due(lg.last_flush_ms + 1000) is True
    assert lg.recovery_point == 1
    lg.close()


def test_flush_fsyncs_once_per_dirty_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = _open(tmp_path)
    for _ in range(10):
        lg.append(batch(1), 0)
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    lg.flush()
    # .log, .index, .timeindex of the one dirty segment, and the leader-epoch
    # checkpoint the first append wrote without fsync (and its directory)
    assert len(calls) == 5
    calls.clear()
    lg.flush()
    assert calls == []
    lg.close()


def test_enospc_raises_storage_error_and_log_stays_consistent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = _open(tmp_path)
    lg.append(batch(2), 0)
    real = os.pwrite

    def short_then_fail(fd: int, data: bytes, offset: int) -> int:
        if len(data) > 20:
            real(fd, bytes(data)[:20], offset)  # a partial write lands on disk first
            return 20
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", short_then_fail)
    with pytest.raises(KafkaStorageError) as info:
        lg.append(batch(3), 0)
    assert info.value.code == 56
    monkeypatch.setattr(os, "pwrite", real)
    assert lg.log_end_offset == 2
    assert lg.active_segment.size == os.path.getsize(lg.active_segment.log_path)
    info2 = lg.append(batch(1), 0)
    assert info2.first_offset == 2
    assert base_offsets(lg.read(0, 1 << 20).records) == [0, 2]
    lg.close()
    lg = Log.open(tmp_path / "topic-0", LogConfig())
    assert lg.log_end_offset == 3
    lg.close()


def test_delete_removes_directory(tmp_path: Path) -> None:
    lg = _open(tmp_path)
    lg.append(batch(1), 0)
    lg.delete()
    assert not (tmp_path / "topic-0").exists()


def test_old_timestamps_do_not_roll_every_append(tmp_path: Path) -> None:
    # Kafka measures segment age in message time (incoming max ts minus the first
    # batch's ts), so replaying year-old data fills segments normally.
    lg = _open(tmp_path, segment_ms=1000)
    old = NOW - 365 * 24 * 3600 * 1000
    for i in range(5):
        lg.append(batch(1, ts=old + i), 0, now_ms=NOW)
    assert lg.num_segments == 1
    lg.append(batch(1, ts=old + 2000), 0, now_ms=NOW)
    assert [s.base_offset for s in lg.segments] == [0, 5]
    lg.close()


def test_follower_append_ignores_max_message_bytes(tmp_path: Path) -> None:
    lg = _open(tmp_path, max_message_bytes=100)
    info = lg.append(batch(1, value_size=300), 0, assign_offsets=False)
    assert info.last_offset == 0
    with pytest.raises(RecordBatchTooLargeError):
        lg.append(batch(1, value_size=300), 0)
    lg.close()


def test_offset_gaps_read_the_next_batch(tmp_path: Path) -> None:
    # Gaps appear after compaction (or from a leader's compacted log on a follower).
    lg = _open(tmp_path)
    lg.append(batch(2, base_offset=0), 0, assign_offsets=False)
    lg.append(batch(1, base_offset=10), 0, assign_offsets=False)
    assert lg.log_end_offset == 11
    assert base_offsets(lg.read(5, 1 << 20).records) == [10]
    lg.close()
    lg = Log.open(tmp_path / "topic-0", LogConfig())  # full recovery accepts the gap
    assert lg.log_end_offset == 11
    lg.close()


@requires(os.path.isdir("/proc/self/fd"), "needs /proc/self/fd")
def test_inactive_segments_hold_one_file_descriptor(tmp_path: Path) -> None:
    size = len(batch(1, ts=NOW))
    lg = _open(tmp_path, segment_bytes=size)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(10):
        lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    # 9 more segments: one .log fd each; index files hold none (fd_cache.py)
    assert len(os.listdir("/proc/self/fd")) - before == 9
    lg.close()
    lg = Log.open(tmp_path / "topic-0", LogConfig(segment_bytes=size), had_clean_shutdown=True)
    held = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")]
    assert not [f for f in held if f.endswith((".index", ".timeindex"))]
    lg.close()
