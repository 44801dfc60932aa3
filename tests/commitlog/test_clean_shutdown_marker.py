"""The clean-shutdown marker (Kafka 4.x's CleanShutdownFileHandler): written, fsynced,
in every log dir that did not fail, after every log is flushed and checkpointed, naming
the broker epoch; read before loading (``previous_broker_epoch``), deleted before any
log is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from jocko_py.commitlog import LogConfig, LogManager
from jocko_py.commitlog.log import Log
from jocko_py.commitlog.manager import (
    CLEAN_SHUTDOWN_FILE,
    previous_broker_epoch,
    read_clean_shutdown_epoch,
    write_clean_shutdown_file,
)
from tests.commitlog._util import batch


def test_close_writes_kafkas_json_with_the_broker_epoch(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    mgr.get_or_create("t", 0).append(batch(2), 0)
    mgr.close_all(7)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_text() == '{"version":0,"brokerEpoch":7}'
    assert read_clean_shutdown_epoch(tmp_path) == 7
    assert previous_broker_epoch([tmp_path]) == 7


def test_every_dir_must_name_the_same_epoch(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    assert previous_broker_epoch([a, b]) == -1  # no marker: unclean
    write_clean_shutdown_file(a, 5)
    assert previous_broker_epoch([a, b]) == -1  # b was not shut down cleanly
    write_clean_shutdown_file(b, 6)
    assert previous_broker_epoch([a, b]) == -1  # they disagree
    write_clean_shutdown_file(b, 5)
    assert previous_broker_epoch([a, b]) == 5


@pytest.mark.parametrize("content", ["", "{", '{"version":0}', '{"brokerEpoch":"5"}', "[5]",
                                     '{"version":0,"brokerEpoch":true}'])
def test_a_marker_naming_no_epoch_is_clean_for_recovery_but_names_none(
        tmp_path: Path, content: str) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_text(content)  # "" is what versions before wrote
    assert read_clean_shutdown_epoch(tmp_path) == -1
    assert previous_broker_epoch([tmp_path]) == -1
    mgr = LogManager(tmp_path, LogConfig())
    mgr.get_or_create("t", 0).append(batch(1), 0)
    mgr.close_all()
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_text(content)
    mgr2 = LogManager(tmp_path, LogConfig())
    mgr2.load_all()
    lg = mgr2.get("t", 0)
    assert lg is not None and lg.log_end_offset == 1
    mgr2.close_all()


def test_the_marker_is_deleted_before_any_log_is_opened(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash while loading (or any time after) must make the next start recover."""
    mgr = LogManager(tmp_path, LogConfig())
    for p in range(2):
        mgr.get_or_create("t", p).append(batch(1), 0)
    mgr.close_all(3)
    seen: list[tuple[bool, bool]] = []
    real_open = Log.open

    def spy(directory: Path, config: LogConfig, recovery_point: int = 0, *,
            had_clean_shutdown: bool = False) -> Log:
        seen.append(((tmp_path / CLEAN_SHUTDOWN_FILE).exists(), had_clean_shutdown))
        return real_open(directory, config, recovery_point,
                         had_clean_shutdown=had_clean_shutdown)

    monkeypatch.setattr(Log, "open", spy)
    mgr2 = LogManager(tmp_path, LogConfig())
    mgr2.load_all()
    assert seen == [(False, True), (False, True)]  # gone, and the logs skip recovery
    mgr2.close_all(4)
    assert read_clean_shutdown_epoch(tmp_path) == 4


def test_a_failed_log_dir_gets_no_marker(tmp_path: Path) -> None:
    """Single node, two dirs: the second fails alone; only the first is marked clean,
    so the next start recovers the second and names no previous epoch."""
    a, b = tmp_path / "a", tmp_path / "b"
    mgr = LogManager(a, LogConfig(), (b,))
    mgr.offline_on_failure = False
    mgr.load_all()
    for p in range(2):
        mgr.get_or_create("t", p).append(batch(1), 0)
    mgr.mark_offline("EIO (test)", b)
    assert b in mgr.offline_dirs
    mgr.close_all(9)
    assert read_clean_shutdown_epoch(a) == 9
    assert read_clean_shutdown_epoch(b) is None
    assert previous_broker_epoch([a, b]) == -1


def test_a_broker_whose_log_dirs_failed_writes_no_marker(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, LogConfig())
    mgr.get_or_create("t", 0).append(batch(1), 0)
    mgr.mark_offline("EIO (test)")
    mgr.close_all(9)
    assert read_clean_shutdown_epoch(tmp_path) is None
