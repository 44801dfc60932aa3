"""LeaderEpochCache: Kafka's rules for assign, OffsetForLeaderEpoch, truncation, checkpoint file."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from jocko_py.commitlog.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache


def _cache(tmp_path: Path, entries: Sequence[tuple[int, int]] = ()) -> LeaderEpochCache:
    c = LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE)
    for e, s in entries:
        c.assign(e, s)
    return c


def test_empty_cache(tmp_path: Path) -> None:
    c = _cache(tmp_path)
    assert c.latest_epoch() == -1 and c.entries() == [] and not c.checkpoint_found
    assert c.end_offset_for(0, 10) == (-1, -1)
    assert c.epoch_for_offset(0) == -1
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).exists()


def test_checkpoint_file_is_kafkas_text_format(tmp_path: Path) -> None:
    _cache(tmp_path, [(0, 0), (2, 10), (5, 42)])
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    assert path.read_text() == "0\n3\n0 0\n2 10\n5 42\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    _cache(tmp_path, [(1, 0), (3, 7), (4, 9)])
    again = LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE)
    assert again.checkpoint_found
    assert again.entries() == [(1, 0), (3, 7), (4, 9)]
    assert again.latest_epoch() == 4


def test_reads_a_file_written_by_kafka(tmp_path: Path) -> None:
    # as Kafka's CheckpointFile writes it (trailing newline, single spaces)
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n2\n0 0\n1 130\n")
    c = LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE)
    assert c.entries() == [(0, 0), (1, 130)]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "1\n1\n0 0\n",  # unknown version
        "0\n2\n0 0\n",  # count disagrees
        "0\n1\n0 0\n1 5\n",  # extra line
        "0\n1\nzero 0\n",
        "0\n1\n0\n",
        "0\n2\n3 0\n1 5\n",  # epochs go backwards
        "0\n2\n1 9\n3 5\n",  # offsets go backwards
        "0\n1\n-1 0\n",
    ],
)
def test_corrupt_file_starts_empty_with_a_warning(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    path.write_text(text)
    with caplog.at_level(logging.WARNING, logger="jocko_py.commitlog.leader_epoch"):
        c = LeaderEpochCache(path)
    assert c.entries() == [] and not c.checkpoint_found
    assert any("corrupt" in r.getMessage() for r in caplog.records)
    c.assign(2, 0)  # and it is usable: the next write replaces the bad file
    assert LeaderEpochCache(path).entries() == [(2, 0)]


def test_undecodable_file_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert LeaderEpochCache(path).entries() == []


def test_assign_ignores_old_equal_and_undefined_epochs(tmp_path: Path) -> None:
    c = _cache(tmp_path, [(3, 10)])
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    mtime = path.stat().st_mtime_ns
    c.assign(3, 20)  # same epoch, later offset: already known
    c.assign(2, 30)  # older epoch
    c.assign(-1, 40)  # batches without a leader epoch
    assert c.entries() == [(3, 10)]
    assert path.stat().st_mtime_ns == mtime  # nothing rewritten


def test_assign_newer_epoch_below_latest_start_removes_conflicting_entries(
    tmp_path: Path,
) -> None:
    c = _cache(tmp_path, [(1, 0), (2, 10), (3, 20)])
    c.assign(5, 15)  # starts inside epoch 2: epoch 3's entry cannot stand
    assert c.entries() == [(1, 0), (2, 10), (5, 15)]
    c.assign(6, 15)  # epoch 5 never got data: replaced
    assert c.entries() == [(1, 0), (2, 10), (6, 15)]
    c.assign(7, 0)
    assert c.entries() == [(7, 0)]
    assert LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).entries() == [(7, 0)]


def test_assign_rejects_a_negative_offset(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        _cache(tmp_path).assign(1, -1)


def test_end_offset_for(tmp_path: Path) -> None:
    # epoch 1: [0, 10), epoch 3: [10, 25), epoch 4: [25, LEO=40)
    c = _cache(tmp_path, [(1, 0), (3, 10), (4, 25)])
    leo = 40
    assert c.end_offset_for(4, leo) == (4, 40)  # latest: the log end
    assert c.end_offset_for(3, leo) == (3, 25)  # the next epoch's start
    assert c.end_offset_for(1, leo) == (1, 10)
    assert c.end_offset_for(2, leo) == (1, 10)  # between epochs: the one below it
    assert c.end_offset_for(5, leo) == (-1, -1)  # above every epoch
    assert c.end_offset_for(-1, leo) == (-1, -1)  # undefined epoch


def test_end_offset_for_below_the_first_epoch(tmp_path: Path) -> None:
    # Kafka's code (not its javadoc): the requested epoch with the first
    # known epoch's start offset; the data before it has been deleted.
    c = _cache(tmp_path, [(3, 100), (5, 200)])
    assert c.end_offset_for(1, 300) == (1, 100)
    assert c.end_offset_for(0, 300) == (0, 100)


def test_epoch_for_offset(tmp_path: Path) -> None:
    c = _cache(tmp_path, [(1, 5), (3, 10)])
    assert [c.epoch_for_offset(o) for o in (0, 4, 5, 9, 10, 11, 1000)] == [
        -1, -1, 1, 1, 3, 3, 3,
    ]


def test_truncate_from_end(tmp_path: Path) -> None:
    c = _cache(tmp_path, [(1, 0), (3, 10), (4, 25)])
    c.truncate_from_end(30)  # all start below: nothing to drop
    assert c.entries() == [(1, 0), (3, 10), (4, 25)]
    c.truncate_from_end(25)  # an entry starting at the new end goes
    assert c.entries() == [(1, 0), (3, 10)]
    c.truncate_from_end(11)
    assert c.entries() == [(1, 0), (3, 10)]
    c.truncate_from_end(5)
    assert c.entries() == [(1, 0)]
    assert LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).entries() == [(1, 0)]
    c.truncate_from_end(0)
    assert c.entries() == [] and c.latest_epoch() == -1
    assert LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).entries() == []


def test_truncate_from_start(tmp_path: Path) -> None:
    c = _cache(tmp_path, [(1, 0), (3, 10), (4, 25)])
    c.truncate_from_start(0)
    assert c.entries() == [(1, 0), (3, 10), (4, 25)]
    c.truncate_from_start(12)  # epoch 1 wholly below; epoch 3 covers 12 and moves there
    assert c.entries() == [(3, 12), (4, 25)]
    c.truncate_from_start(25)  # exactly at an entry: it stays, the older one goes
    assert c.entries() == [(4, 25)]
    c.truncate_from_start(100)
    assert c.entries() == [(4, 100)]
    assert LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).entries() == [(4, 100)]


def test_truncate_from_start_below_first_entry_keeps_everything(tmp_path: Path) -> None:
    c = _cache(tmp_path, [(2, 50)])
    c.truncate_from_start(10)
    assert c.entries() == [(2, 50)]


def test_clear_deletes_the_file(tmp_path: Path) -> None:
    c = _cache(tmp_path, [(1, 0)])
    c.clear()
    assert c.entries() == [] and not (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).exists()
    c.assign(2, 7)
    assert LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).entries() == [(2, 7)]


def test_reset_applies_assign_rules_and_writes_once(tmp_path: Path) -> None:
    c = _cache(tmp_path, [(9, 0)])
    c.reset([(0, 0), (0, 3), (-1, 4), (2, 5), (1, 6), (4, 9)])
    assert c.entries() == [(0, 0), (2, 5), (4, 9)]
    assert LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).entries() == c.entries()
