"""The bound on open segment files (fd_cache.py): segments closed least recently used
first and reopened on use, nothing lost or misread across a close, a descriptor in a
flush never closed under it, and a clear KafkaStorageError when no descriptor is left.
"""

from __future__ import annotations

import logging
import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from jocko_py.commitlog import KafkaStorageError, Log, LogConfig
from jocko_py.commitlog.fd_cache import HANDLES
from jocko_py.commitlog.log import run_flush
from jocko_py.protocol.records import decode_records, split_batches
from tests.commitlog._util import batch

NOW = 1_700_000_000_000
LIMIT = 8


@pytest.fixture(autouse=True)
def low_limit() -> Iterator[None]:
    saved = HANDLES.limit
    before = set(HANDLES._open)
    HANDLES.limit = LIMIT
    try:
        yield
    finally:
        HANDLES.limit = saved
        for key in set(HANDLES._open) - before:  # the segments a test left open
            seg = HANDLES._open.pop(key)
            seg.release_fd()


def segment_fds(under: Path) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)):
            out.append(target)
    return out


def values(lg: Log) -> list[bytes]:
    out: list[bytes] = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        batches = split_batches(lg.read(offset, 1 << 20).records, validate_crc=True)
        assert batches
        for h, mv in batches:
            out += [r.value or b"" for r in decode_records(mv)]
            offset = h.last_offset + 1
    return out


def fill(tmp_path: Path, logs: int, segments: int) -> list[Log]:
    size = len(batch(1, ts=NOW))
    out = []
    for i in range(logs):
        lg = Log.open(tmp_path / f"t-{i}", LogConfig(segment_bytes=size))
        for _ in range(segments):
            lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
        out.append(lg)
    return out


def test_many_segments_stay_under_the_bound_and_read_back(tmp_path: Path) -> None:
    logs = fill(tmp_path, logs=6, segments=5)  # 30 segments, 8 descriptors
    assert sum(len(lg.segments) for lg in logs) == 30
    held = segment_fds(tmp_path)
    assert len(held) <= LIMIT and all(f.endswith(".log") for f in held), held
    for lg in logs:  # every segment, most of them reopened
        assert len(values(lg)) == 5
        lg.append(batch(1, ts=NOW), 0, now_ms=NOW)  # the active one, reopened if closed
        assert lg.segments[-1].find_position(lg.log_end_offset - 1) is not None
        assert len(segment_fds(tmp_path)) <= LIMIT
    lg = logs[0]
    lg.truncate_to(2)  # truncation through reopened files
    assert lg.log_end_offset == 2
    for lg in logs:
        lg.flush()
        lg.close()
    assert segment_fds(tmp_path) == []


def test_unclean_stop_with_closed_segments_recovers_everything(tmp_path: Path) -> None:
    logs = fill(tmp_path, logs=4, segments=4)
    for lg in logs:
        lg.flush()
    ends = [lg.log_end_offset for lg in logs]
    for lg in logs:  # a crash: nothing closed properly, indexes partly buffered
        for seg in lg.segments:
            seg.release_fd()
            HANDLES.forget(seg)
    size = len(batch(1, ts=NOW))
    for i, end in enumerate(ends):
        lg = Log.open(tmp_path / f"t-{i}", LogConfig(segment_bytes=size))
        assert lg.log_end_offset == end
        assert len(values(lg)) == end
        lg.close()


def test_a_descriptor_being_flushed_is_not_closed_until_the_fsync(tmp_path: Path) -> None:
    size = len(batch(1, ts=NOW))
    first = Log.open(tmp_path / "first", LogConfig(segment_bytes=1 << 20))
    first.append(batch(1, ts=NOW), 0, now_ms=NOW)
    ticket = first.begin_flush()
    fd = ticket.fds[0]
    assert isinstance(fd, int)
    fill(tmp_path, logs=3, segments=4)  # 12 more segments: the LRU turns over
    assert first.segments[0]._fd == fd  # kept: an fsync is waiting for it
    os.fstat(fd)
    run_flush(ticket)
    assert ticket.error is None
    first.end_flush(ticket)
    assert first.recovery_point == 1
    Log.open(tmp_path / "more", LogConfig(segment_bytes=size)).append(
        batch(1, ts=NOW), 0, now_ms=NOW)
    fill(tmp_path / "x", logs=2, segments=5)
    assert first.segments[0]._fd == -1  # closed like any other once flushed


def test_all_open_ones_being_flushed_exceeds_the_bound_for_the_moment(
        tmp_path: Path) -> None:
    logs = fill(tmp_path, logs=LIMIT, segments=1)
    tickets = [lg.begin_flush() for lg in logs]  # every open descriptor in a flush
    extra = Log.open(tmp_path / "one-more", LogConfig())  # opened over the bound
    assert HANDLES.open_count == LIMIT + 1
    for t in tickets:
        run_flush(t)
        t.log.end_flush(t)
    Log.open(tmp_path / "after", LogConfig()).close()  # back under it
    assert HANDLES.open_count <= LIMIT
    extra.close()


def test_out_of_descriptors_is_a_storage_error_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    HANDLES.limit = 1000  # the bound is not what stops it here: the OS is
    HANDLES._warned = False
    opened: list[Log] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 4, hard))
    try:
        with caplog.at_level(logging.ERROR, logger="jocko_py.commitlog.fd_cache"):
            with pytest.raises(KafkaStorageError, match="out of file descriptors"):
                for i in range(20):
                    opened.append(Log.open(tmp_path / f"t-{i}", LogConfig()))
            with pytest.raises(KafkaStorageError, match="out of file descriptors"):
                Log.open(tmp_path / "again", LogConfig())
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    said = [r for r in caplog.records if "ulimit -n" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    for lg in opened:
        lg.close()


def test_zero_copy_sends_count_against_the_bound(tmp_path: Path) -> None:
    """A FileRegion being sent holds a dup of its segment's descriptor: it counts, so
    segment files open (sends included) never exceed the bound, and the bytes still read
    back from every segment."""
    from jocko_py.commitlog.segment import FileRegion

    logs = fill(tmp_path, logs=6, segments=2)
    regions = []
    for lg in logs:
        r = lg.read(0, 1 << 20, region_min=1).records
        assert isinstance(r, FileRegion)
        regions.append(r)
    held = []
    try:
        for r in regions[:LIMIT - 2]:  # sends under way on most of the bound
            held.append((r, r.open()))
            assert len(segment_fds(tmp_path)) <= LIMIT
        assert HANDLES.open_count <= LIMIT
        for lg in logs:  # everything else makes do with the rest
            assert len(values(lg)) == 2
            assert len(segment_fds(tmp_path)) <= LIMIT
        for r, fd in held:
            assert os.pread(fd, r.size, r.position) == r.read()
    finally:
        for r, fd in held:
            r.close(fd)
    assert HANDLES.borrowed == 0
    for lg in logs:
        lg.close()
    assert segment_fds(tmp_path) == []


def test_clean_stop_of_more_logs_than_the_bound_stays_under_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """close_all flushes on a pool of threads (manager.py) in batches: each ticket holds
    its descriptor until its fsync is done, so taking every log's at once would pass the
    bound (and, with more partitions than ulimit -n, the OS's limit: EMFILE)."""
    from jocko_py.commitlog.manager import LogManager
    m = LogManager(tmp_path, LogConfig())
    for i in range(5 * LIMIT):
        m.get_or_create("t", i).append(batch(1, ts=NOW), 0, now_ms=NOW)
    peak = [0]
    real_run = run_flush

    def watched(ticket: object) -> None:
        # .log files: a pool thread's fsync of an index or checkpoint opens it briefly
        peak[0] = max(peak[0], sum(f.endswith(".log") for f in segment_fds(tmp_path)))
        real_run(ticket)  # type: ignore[arg-type]

    from jocko_py.commitlog import manager as manager_mod
    monkeypatch.setattr(manager_mod, "run_flush", watched)
    with caplog.at_level(logging.WARNING, logger="jocko_py.commitlog.fd_cache"):
        m.close_all(1)
    assert peak[0] <= LIMIT, f"{peak[0]} segment files open during the stop, bound {LIMIT}"
    assert "more than" not in caplog.text
    assert (tmp_path / ".kafka_cleanshutdown").exists()
