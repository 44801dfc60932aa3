"""Model-based test: random appends, reads, truncations, deletes and reopens vs a simple model."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from jocko_py.commitlog import Log, LogConfig, OffsetOutOfRangeError
from tests.commitlog._util import base_offsets, batch

NOW = 1_700_000_000_000
BATCH_SIZE_1 = len(batch(1, ts=NOW))
# Tiny segments and a dense index so rolls, index lookups and multi-segment reads happen.
CONFIG = LogConfig(segment_bytes=BATCH_SIZE_1 * 4, index_interval_bytes=150)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # Durability is not under test here and fsync makes each step slow.
        self._real_fsync = os.fsync
        os.fsync = lambda fd: None
        self.tmp = Path(tempfile.mkdtemp(prefix="logmodel-"))
        self.log = Log.open(self.tmp / "t-0", CONFIG)
        self.batches: list[tuple[int, int]] = []  # (base offset, record count)
        self.start = 0
        self.leo = 0
        self.origin = 0  # where the log (re)started: its end when no batch is left

    def teardown(self) -> None:
        os.fsync = self._real_fsync
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(n=st.integers(1, 3))
    def append(self, n: int) -> None:
        info = self.log.append(batch(n, ts=NOW), 0, now_ms=NOW)
        assert info.first_offset == self.leo
        self.batches.append((self.leo, n))
        self.leo += n

    @precondition(lambda self: self.start < self.leo)
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        off = data.draw(st.integers(self.start, self.leo - 1))
        got = base_offsets(self.log.read(off, 1).records)
        want = [b for b, n in self.batches if b <= off < b + n]
        assert got == want

    @rule()
    def read_out_of_range(self) -> None:
        try:
            self.log.read(self.leo + 1, 100)
        except OffsetOutOfRangeError:
            return
        raise AssertionError("read past the log end must fail")

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        off = data.draw(st.integers(self.start, self.leo))
        self.log.truncate_to(off)
        if off >= self.leo:
            return
        if off < self.start:
            # Below the log start: Kafka empties the log and restarts it at off.
            self.batches, self.start, self.leo, self.origin = [], off, off, off
            return
        # Whole batches go, so the end may land below off (and below the start).
        self.batches = [(b, n) for b, n in self.batches if b + n <= off]
        self.leo = self.batches[-1][0] + self.batches[-1][1] if self.batches else self.origin
        self.start = min(self.start, self.leo)

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        off = data.draw(st.integers(self.start, self.leo))
        assert self.log.delete_records_before(off) == off
        self.start = off

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
        else:
            for seg in self.log.segments:  # crash: nothing flushed
                seg.close()
        self.log = Log.open(self.tmp / "t-0", CONFIG, had_clean_shutdown=clean)

    @invariant()
    def offsets_match(self) -> None:
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.start
        bases = [s.base_offset for s in self.log.segments]
        assert bases == sorted(bases)
        assert all(s.size <= CONFIG.segment_bytes for s in self.log.segments)


LogMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
TestLogModel = LogMachine.TestCase
