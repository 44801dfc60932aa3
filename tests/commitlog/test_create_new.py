"""A new partition's log (LogManager.get_or_create on a directory it makes): no file
is created at once, the segment's files with the first append, the leader-epoch
checkpoint with the first epoch (written in place, no temporary file), and the log is
what `Log.open` would have made of the empty directory, after a clean stop or a crash
at any of those points."""

from __future__ import annotations

from pathlib import Path

from jocko_py.commitlog import LogConfig, LogManager
from jocko_py.commitlog.log import Log
from jocko_py.commitlog.manager import CLEAN_SHUTDOWN_FILE
from tests.commitlog._util import base_offsets, batch

SEG = f"{0:020d}"


def _files(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()}


def _crash(mgr: LogManager) -> None:
    """Drop the logs as a SIGKILL would: descriptors closed, nothing flushed or marked."""
    for lg in mgr.logs.values():
        for seg in lg.segments:
            seg.close()


def test_new_log_creates_its_files_as_they_are_needed(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    lg = mgr.get_or_create("t", 0)
    d = tmp_path / "t-0"
    assert _files(d) == set()
    lg.leader_epochs.assign(3, 0)
    assert _files(d) == {"leader-epoch-checkpoint"}
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n3 0\n"
    assert lg.read(0, 1 << 20).records == b""  # nothing to read: still no segment file
    assert _files(d) == {"leader-epoch-checkpoint"}
    lg.append(batch(2), 3)
    assert {f"{SEG}.log", f"{SEG}.index", f"{SEG}.timeindex"} <= _files(d)
    lg.leader_epochs.assign(4, 2)  # an existing checkpoint is replaced through a .tmp
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n4 2\n"
    assert not any(n.endswith(".tmp") for n in _files(d))
    lg.append(batch(1), 4)
    mgr.close_all()
    mgr2 = LogManager(tmp_path, LogConfig())
    mgr2.load_all()
    lg2 = mgr2.get("t", 0)
    assert lg2 is not None and lg2.log_end_offset == 3
    assert lg2.leader_epochs.entries() == [(3, 0), (4, 2)]
    assert base_offsets(lg2.read(0, 1 << 20).records) == [0, 2]
    mgr2.close_all()


def test_created_log_is_what_open_makes_of_an_empty_directory(tmp_path: Path) -> None:
    cfg = LogConfig()
    (tmp_path / "a").mkdir()
    made = Log.create(tmp_path / "a", cfg)
    opened = Log.open(tmp_path / "b", cfg)
    for lg in (made, opened):
        lg.append(batch(3), 0)
    assert [(s.base_offset, s.next_offset, s.size) for s in made.segments] == \
        [(s.base_offset, s.next_offset, s.size) for s in opened.segments]
    assert (made.log_start_offset, made.log_end_offset, made.recovery_point) == \
        (opened.log_start_offset, opened.log_end_offset, opened.recovery_point)
    assert made.read(0, 1 << 20).records == opened.read(0, 1 << 20).records
    made.close()
    opened.close()


def test_crash_before_and_after_the_first_append(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    mgr.get_or_create("t", 0).leader_epochs.assign(0, 0)
    mgr.get_or_create("t", 1).append(batch(2), 0)
    mgr.checkpoint_recovery_points()
    _crash(mgr)
    mgr2 = LogManager(tmp_path, LogConfig())
    mgr2.load_all()
    empty, full = mgr2.get("t", 0), mgr2.get("t", 1)
    assert empty is not None and full is not None
    assert empty.log_end_offset == 0
    assert full.log_end_offset == 2
    empty.append(batch(1), 0)
    assert {f"{SEG}.log", f"{SEG}.index", f"{SEG}.timeindex"} <= _files(tmp_path / "t-0")
    mgr2.close_all()


def test_the_clean_shutdown_marker_goes_before_a_new_log(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    mgr.get_or_create("t", 0)
    mgr.close_all()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    mgr.get_or_create("t", 1)  # the same manager, used again after close_all
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    mgr.close_all()
    mgr2 = LogManager(tmp_path, LogConfig())
    mgr2.load_all()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    mgr2.get_or_create("t", 2)
    _crash(mgr2)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
