"""LogManager: directories, loading, checkpoints, clean shutdown, batched flushes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jocko_py.commitlog import LogConfig, LogManager
from jocko_py.commitlog.manager import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    parse_log_dir_name,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from tests.commitlog._util import base_offsets, batch


def test_get_or_create_and_reload(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    lg = mgr.get_or_create("orders", 3)
    assert mgr.get_or_create("orders", 3) is lg
    assert mgr.get("orders", 4) is None
    assert (tmp_path / "orders-3").is_dir()
    lg.append(batch(2), 0)
    mgr.get_or_create("my-topic-x", 0).append(batch(1), 0)
    mgr.close_all()

    mgr2 = LogManager(tmp_path, LogConfig())
    mgr2.load_all()
    assert sorted(mgr2.logs) == [("my-topic-x", 0), ("orders", 3)]
    reopened = mgr2.get("orders", 3)
    assert reopened is not None and reopened.log_end_offset == 2
    assert base_offsets(reopened.read(0, 1 << 20).records) == [0]
    mgr2.close_all()


def test_recovery_point_checkpoint_format(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    mgr.get_or_create("a", 0).append(batch(3), 0)
    mgr.get_or_create("b", 1)
    mgr.close_all()
    text = (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text()
    assert text == "0\n2\na 0 3\nb 1 0\n"
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        ("a", 0): 3,
        ("b", 1): 0,
    }


def test_malformed_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    p = tmp_path / "cp"
    p.write_text("0\n3\na 0 1\n")
    assert read_offset_checkpoint(p) == {}
    write_offset_checkpoint(p, {("t", 0): 5})
    assert read_offset_checkpoint(p) == {("t", 0): 5}


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    mgr.get_or_create("t", 0).append(batch(1), 0)
    mgr.close_all()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    mgr2 = LogManager(tmp_path, LogConfig())
    mgr2.load_all()
    # Removed while running so that a crash now triggers recovery next time.
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    lg = mgr2.get("t", 0)
    assert lg is not None and lg.recovery_point == 1
    mgr2.close_all()


def test_unclean_shutdown_recovers_from_checkpoint(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    lg = mgr.get_or_create("t", 0)
    sizes = [len(batch(2)) for _ in range(3)]
    for _ in range(3):
        lg.append(batch(2), 0)
    mgr.checkpoint_recovery_points()
    for seg in lg.segments:  # crash: no close_all, so no marker
        seg.close()
    seg_file = tmp_path / "t-0" / f"{0:020d}.log"
    os.truncate(seg_file, sum(sizes) - 5)
    mgr2 = LogManager(tmp_path, LogConfig())
    mgr2.load_all()
    lg2 = mgr2.get("t", 0)
    assert lg2 is not None and lg2.log_end_offset == 4
    mgr2.close_all()


def test_delete_log(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    mgr.get_or_create("t", 0).append(batch(1), 0)
    assert mgr.delete("t", 0) is True
    assert mgr.get("t", 0) is None
    assert list(tmp_path.iterdir()) == []
    assert mgr.delete("t", 0) is False


def test_leftover_delete_dirs_are_removed_on_load(tmp_path: Path) -> None:
    (tmp_path / "t-0.abc-delete").mkdir()
    (tmp_path / "t-0.abc-delete" / "x.log").write_bytes(b"junk")
    mgr = LogManager(tmp_path, LogConfig())
    mgr.load_all()
    assert mgr.logs == {}
    assert not (tmp_path / "t-0.abc-delete").exists()


def test_flush_dirty_batches_by_flush_messages(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig(flush_messages=3))
    a, b = mgr.get_or_create("a", 0), mgr.get_or_create("b", 0)
    a.append(batch(2), 0)
    b.append(batch(3), 0)
    assert mgr.has_due_flush
    assert mgr.flush_dirty() == 1  # only b reached flush.messages
    assert b.recovery_point == 3 and a.recovery_point == 0
    assert not mgr.has_due_flush
    a.append(batch(1), 0)
    assert mgr.flush_dirty() == 1
    assert a.recovery_point == 3
    assert mgr.flush_dirty() == 0
    mgr.close_all()


def test_apply_retention_all(tmp_path: Path) -> None:
    now = 1_700_000_000_000
    size = len(batch(1, ts=now))
    mgr = LogManager(tmp_path, LogConfig(segment_bytes=size, retention_ms=1000))
    lg = mgr.get_or_create("t", 0)
    for _ in range(3):
        lg.append(batch(1, ts=now), 0, now_ms=now)
    assert mgr.apply_retention_all(now + 5000) == 3  # the expired active one too
    assert lg.log_start_offset == lg.log_end_offset == 3
    mgr.close_all()


@pytest.mark.parametrize(
    ("name", "expected"),
    [("orders-3", ("orders", 3)), ("a-b-c-10", ("a-b-c", 10)), ("x", None), ("-1", None)],
)
def test_parse_log_dir_name(name: str, expected: tuple[str, int] | None) -> None:
    assert parse_log_dir_name(name) == expected
