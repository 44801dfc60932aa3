"""A flush split in three (begin on the owner's thread, fsync anywhere, end on the owner's
thread), so the broker's event loop never waits on a disk."""

from __future__ import annotations

import threading
from pathlib import Path

from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.log import Log, run_flush
from tests.commitlog._util import batch


def test_recovery_point_moves_to_the_log_end_taken_at_begin(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append(batch(3), 0)
    ticket = lg.begin_flush()
    assert ticket.log_end_offset == 3 and ticket.fds
    lg.append(batch(2), 0)  # lands while the fsync runs
    t = threading.Thread(target=run_flush, args=(ticket,))
    t.start()
    t.join(10)
    lg.end_flush(ticket)
    assert lg.recovery_point == 3  # not 5: the later append may not be on disk
    second = lg.begin_flush()
    run_flush(second)
    lg.end_flush(second)
    assert lg.recovery_point == 5
    lg.close()


def test_a_segment_closed_during_the_fsync_is_skipped(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append(batch(1), 0)
    ticket = lg.begin_flush()
    lg.close()  # e.g. the partition was deleted meanwhile
    run_flush(ticket)
    assert ticket.error is None
