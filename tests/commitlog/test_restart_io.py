"""What a restart costs in fsyncs (commitlog/log.py `_load`, manager.py `close_all`).

A restart after a crash validates the unsafe segments and does not fsync them (Kafka's
LogLoader): the recovery point stays at the checkpoint, so a second crash validates
them again, and the next flush covers them. A clean stop fsyncs every log on a pool of
threads, and everything is then durable: the next start needs no recovery.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from jocko_py.commitlog import Log, LogConfig
from jocko_py.commitlog import manager as manager_mod
from jocko_py.commitlog.manager import LogManager
from tests.commitlog._util import base_offsets, batch

NOW = 1_700_000_000_000


class FsyncCounter:
    """os.fsync wrapped: how many calls, and on how many threads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()
        real = os.fsync

        def fsync(fd: int) -> None:
            with self._lock:
                self.calls += 1
                self.threads.add(threading.get_ident())
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)


def fill(m: LogManager, logs: int) -> None:
    for i in range(logs):
        lg = m.get_or_create("t", i)
        for _ in range(3):
            lg.append(batch(2, ts=NOW), 0, now_ms=NOW)


def test_recovery_after_a_crash_does_not_fsync_and_keeps_the_recovery_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = LogManager(tmp_path, LogConfig())
    fill(m, 20)
    m.checkpoint_recovery_points()  # recovery points 0: nothing flushed yet
    # a crash: no close_all, no clean-shutdown marker
    counter = FsyncCounter(monkeypatch)
    m2 = LogManager(tmp_path, LogConfig())
    m2.load_all()
    assert len(m2.logs) == 20
    # only the removal of nothing (no marker): no segment, index or snapshot fsynced
    assert counter.calls == 0, f"{counter.calls} fsyncs while recovering 20 logs"
    for lg in m2.logs.values():
        assert lg.log_end_offset == 6
        assert lg.recovery_point == 0  # validated, not flushed: a second crash redoes it
        assert base_offsets(lg.read(0, 1 << 20).records) == [0, 2, 4]
    # the rebuilt indexes are in the files already (written, not fsynced)
    assert all((tmp_path / "t-0" / f"{0:020d}{s}").stat().st_size > 0
               for s in (".index", ".timeindex"))
    # a flush covers the recovered segments, and the recovery point moves to the end
    lg0 = m2.logs[("t", 0)]
    before = counter.calls
    lg0.flush()
    assert counter.calls > before
    assert lg0.recovery_point == 6


def test_a_second_crash_recovers_again_and_loses_nothing(tmp_path: Path) -> None:
    m = LogManager(tmp_path, LogConfig())
    fill(m, 3)
    m.checkpoint_recovery_points()
    for _ in range(2):  # crash, recover, crash again before any flush
        m = LogManager(tmp_path, LogConfig())
        m.load_all()
        m.checkpoint_recovery_points()
    for lg in m.logs.values():
        assert lg.log_end_offset == 6
        assert base_offsets(lg.read(0, 1 << 20).records) == [0, 2, 4]
    m.close_all(1)
    m = LogManager(tmp_path, LogConfig())
    m.load_all()
    assert all(lg.recovery_point == 6 for lg in m.logs.values())
    m.close_all(1)


def test_clean_stop_fsyncs_on_several_threads_and_needs_no_recovery(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = LogManager(tmp_path, LogConfig())
    fill(m, 40)
    counter = FsyncCounter(monkeypatch)
    main = threading.get_ident()
    m.close_all(7)
    # each log's segment (and its two indexes) and producer snapshot
    assert counter.calls >= 40 * 2
    assert counter.threads - {main}, "every fsync ran on the closing thread"
    assert manager_mod.SHUTDOWN_FLUSH_THREADS > 1
    opened: list[bool] = []
    real_open = Log.open.__func__  # type: ignore[attr-defined]

    def spy(cls: type[Log], directory: Path, config: LogConfig, recovery_point: int = 0,
            *, had_clean_shutdown: bool = False) -> Log:
        opened.append(had_clean_shutdown)
        return real_open(cls, directory, config, recovery_point,
                         had_clean_shutdown=had_clean_shutdown)

    monkeypatch.setattr(Log, "open", classmethod(spy))
    m2 = LogManager(tmp_path, LogConfig())
    m2.load_all()
    assert opened == [True] * 40  # the marker was written: no log is recovered
    for lg in m2.logs.values():
        assert lg.recovery_point == lg.log_end_offset == 6
        assert base_offsets(lg.read(0, 1 << 20).records) == [0, 2, 4]
    m2.close_all(8)


def test_new_leader_epochs_are_fsynced_with_the_next_flush_not_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Becoming leader of thousands of partitions at once (topics created, leaders
    moved) writes each leader-epoch checkpoint without fsync (Kafka's KAFKA-15046);
    the log's next flush makes it durable."""
    m = LogManager(tmp_path, LogConfig())
    logs = [m.get_or_create("t", i) for i in range(20)]
    counter = FsyncCounter(monkeypatch)
    for lg in logs:
        lg.leader_epochs.assign(3, 0)
    assert counter.calls == 0
    assert all(lg.leader_epochs.unsynced for lg in logs)
    logs[0].flush()
    assert counter.calls >= 2  # the checkpoint and its directory
    assert not logs[0].leader_epochs.unsynced
    tickets = [lg.begin_flush() for lg in logs[1:]]
    assert all(any(isinstance(f, Path) and f.name == "leader-epoch-checkpoint"
                   for f in t.fds) for t in tickets)
    m.run_flush_tickets(tickets)
    m.end_flush_tickets(tickets)
    m.close_all(1)


def test_a_leader_epoch_checkpoint_lost_to_a_power_loss_is_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, LogConfig())
    lg.append(batch(2, ts=NOW), 0, now_ms=NOW)
    lg.append(batch(2, ts=NOW), 5, now_ms=NOW)  # epoch 5 from offset 2
    lg.flush()
    lg.close()
    # the unsynced rename of the last assign did not survive: epoch 0 only
    (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    lg = Log.open(d, LogConfig())
    assert lg.leader_epochs.entries() == [(0, 0), (5, 2)]
    lg.close()
