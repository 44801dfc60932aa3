"""Zero-copy reads (segment.py `FileRegion`): a region found from the index and a few
headers covers exactly the whole batches the in-memory read returns, and refuses to
give out bytes that changed since the read (truncation, a closed or deleted segment).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from jocko_py.commitlog import Log, LogConfig
from jocko_py.commitlog.segment import FileRegion, RegionChanged
from jocko_py.protocol.records import NewRecord, build_batch

NOW = 1_700_000_000_000


def batch_of(rng: random.Random, size: int) -> bytes:
    n = rng.randint(1, 5)
    return build_batch([NewRecord(None, rng.randbytes(max(1, size // n)), (), NOW)
                        for _ in range(n)])


def filled_log(tmp_path: Path, rng: random.Random, batches: int = 300) -> Log:
    # small index interval and segments: regions start, end and cross index entries
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=4 << 20, index_interval_bytes=4096))
    for _ in range(batches):
        size = rng.choice([100, 700, 3000, 20_000, 90_000])
        lg.append(batch_of(rng, size), leader_epoch=0, now_ms=NOW)
    return lg


def test_region_is_exactly_the_whole_batches_the_read_returns(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    lg = filled_log(tmp_path, rng)
    assert lg.num_segments > 1
    end = lg.log_end_offset
    regions = 0
    for _ in range(400):
        offset = rng.randrange(end)
        max_bytes = rng.choice([1, 5000, 65_536, 100_000, 300_000, 1 << 20, 8 << 20])
        max_offset = rng.choice([None, end, rng.randrange(offset, end + 1)])
        min_one = rng.random() < 0.8
        plain = lg.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
        zc = lg.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one,
                     region_min=1)
        data = zc.records
        if isinstance(data, FileRegion):
            regions += 1
            assert data.first_offset == zc.first_batch_offset
            data = data.read()
        assert bytes(data) == bytes(plain.records), (offset, max_bytes, max_offset, min_one)
        assert zc.first_batch_offset == plain.first_batch_offset
    assert regions > 100
    lg.close()


def test_small_reads_stay_bytes(tmp_path: Path) -> None:
    lg = filled_log(tmp_path, random.Random(1), batches=20)
    r = lg.read(0, 1000, region_min=64 * 1024)
    assert isinstance(r.records, bytes | memoryview)
    lg.close()


def test_region_refuses_bytes_changed_since_the_read(tmp_path: Path) -> None:
    rng = random.Random(2)
    lg = filled_log(tmp_path, rng, batches=60)
    hw = lg.log_end_offset
    whole = lg.read(0, 1 << 30, region_min=1).records
    assert isinstance(whole, FileRegion)
    early = lg.read(0, 10_000, region_min=1).records
    assert isinstance(early, FileRegion)
    expected = early.read()
    # truncating past a region's end leaves it intact; below its end, it is refused
    lg.truncate_to(hw - 1)
    assert early.read() == expected
    with pytest.raises(RegionChanged):
        whole.read()
    with pytest.raises(RegionChanged):
        whole.check(opened=True)
    # a descriptor taken before the segment is deleted keeps the old bytes readable
    fd = early.open()
    try:
        lg.truncate_fully_and_start_at(hw + 100)
        assert early.segment.closed
        early.check(opened=True)
        assert os.pread(fd, early.size, early.position) == expected
    finally:
        early.close(fd)
    with pytest.raises(RegionChanged):
        early.open()  # deleted before its send began
    with pytest.raises(RegionChanged):
        early.read()
    lg.close()
