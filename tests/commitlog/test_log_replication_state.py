"""Log's leader-epoch cache and producer state: kept in step with the batches on disk."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from jocko_py.commitlog import Log, LogConfig
from jocko_py.commitlog.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache
from jocko_py.commitlog.producer_state import PRODUCER_SNAPSHOT_FILE, ProducerStateManager
from jocko_py.protocol.records import split_batches
from tests.commitlog._util import batch

NOW = 1_700_000_000_000


def _cfg(**kw: int) -> LogConfig:
    return LogConfig(**kw)  # type: ignore[arg-type]


def _idem(pid: int, epoch: int, seq: int, n: int = 1, **kw: int) -> bytes:
    return batch(n, ts=NOW + seq, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kw)


def _crash(lg: Log) -> None:
    """Close file descriptors only: no flush, no snapshot, as if killed."""
    for seg in lg.segments:
        seg.close()


def _file_entries(d: Path) -> list[tuple[int, int]]:
    c = LeaderEpochCache(d / LEADER_EPOCH_CHECKPOINT_FILE)
    assert c.checkpoint_found
    return c.entries()


def _scan(lg: Log) -> ProducerStateManager:
    """Producer state from an independent read of the segment files, from the log start."""
    ps = ProducerStateManager()
    for seg in lg.segments:
        for h, _ in split_batches(seg.log_path.read_bytes(), validate_crc=True):
            if h.next_offset > lg.log_start_offset:
                ps.observe(h, h.base_offset)
    return ps


def _epoch_entries_from_batches(lg: Log) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for seg in lg.segments:
        for h, _ in split_batches(seg.log_path.read_bytes(), validate_crc=True):
            if h.next_offset <= lg.log_start_offset:
                continue
            if h.partition_leader_epoch >= 0 and (
                not out or h.partition_leader_epoch > out[-1][0]
            ):
                out.append((h.partition_leader_epoch, max(h.base_offset, lg.log_start_offset)))
    return out


# --- leader epochs ---------------------------------------------------------------------


def test_leader_appends_record_each_new_epoch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    assert lg.leader_epochs.entries() == []
    for epoch, n in [(0, 2), (0, 3), (2, 1), (2, 2), (5, 4)]:
        lg.append(batch(n, ts=NOW), epoch, now_ms=NOW)
    assert lg.leader_epochs.entries() == [(0, 0), (2, 5), (5, 8)]
    assert _file_entries(d) == [(0, 0), (2, 5), (5, 8)]
    assert lg.leader_epochs.end_offset_for(2, lg.log_end_offset) == (2, 8)
    assert lg.leader_epochs.end_offset_for(5, lg.log_end_offset) == (5, 12)
    assert lg.leader_epochs.end_offset_for(3, lg.log_end_offset) == (2, 8)
    lg.close()
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    assert lg.leader_epochs.entries() == [(0, 0), (2, 5), (5, 8)]
    lg.close()


def test_follower_appends_take_each_batchs_epoch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    data = (
        batch(2, base_offset=0, partition_leader_epoch=1)
        + batch(1, base_offset=2, partition_leader_epoch=1)
        + batch(3, base_offset=3, partition_leader_epoch=4)
    )
    lg.append(data, 99, assign_offsets=False)  # the caller's epoch is not used
    lg.append(batch(1, base_offset=6, partition_leader_epoch=7), 99, assign_offsets=False)
    lg.append(batch(1, base_offset=7, partition_leader_epoch=-1), 99, assign_offsets=False)
    assert lg.leader_epochs.entries() == [(1, 0), (4, 3), (7, 6)]
    assert _file_entries(d) == [(1, 0), (4, 3), (7, 6)]
    lg.close()


def test_truncate_to_cuts_the_epoch_cache(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    for epoch in (1, 2, 3, 4):
        lg.append(batch(2, ts=NOW), epoch, now_ms=NOW)  # epoch e starts at 2*(e-1)
    lg.truncate_to(5)  # inside epoch 3's batch [4, 5]: the whole batch goes
    assert lg.log_end_offset == 4
    assert lg.leader_epochs.entries() == [(1, 0), (2, 2)]
    assert _file_entries(d) == [(1, 0), (2, 2)]
    lg.append(batch(1, ts=NOW), 6, now_ms=NOW)
    assert lg.leader_epochs.entries() == [(1, 0), (2, 2), (6, 4)]
    lg.close()


def test_truncate_fully_clears_the_epoch_cache(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    lg.append(batch(2, ts=NOW), 3, now_ms=NOW)
    lg.truncate_fully_and_start_at(100)
    assert lg.leader_epochs.entries() == []
    assert not (d / LEADER_EPOCH_CHECKPOINT_FILE).exists()
    lg.append(batch(1, base_offset=100, partition_leader_epoch=4), 0, assign_offsets=False)
    assert lg.leader_epochs.entries() == [(4, 100)]
    lg.close()


def test_delete_records_moves_the_first_epoch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(batch(2, ts=NOW))
    lg = Log.open(d, _cfg(segment_bytes=size * 2))
    for epoch in (1, 1, 2, 3):
        lg.append(batch(2, ts=NOW), epoch, now_ms=NOW)  # epochs 1:[0,4) 2:[4,6) 3:[6,8)
    lg.delete_records_before(3)
    assert lg.leader_epochs.entries() == [(1, 3), (2, 4), (3, 6)]
    lg.delete_records_before(5)
    assert lg.leader_epochs.entries() == [(2, 5), (3, 6)]
    assert _file_entries(d) == [(2, 5), (3, 6)]
    assert lg.leader_epochs.end_offset_for(1, lg.log_end_offset) == (1, 5)
    lg.close()


def test_retention_moves_the_first_epoch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(batch(2, ts=NOW))
    lg = Log.open(d, _cfg(segment_bytes=size * 2, retention_ms=1000))
    for epoch in (1, 1, 2, 3):
        lg.append(batch(2, ts=NOW), epoch, now_ms=NOW)
    lg.append(batch(2, ts=NOW + 10_000), 3, now_ms=NOW + 10_000)
    assert lg.apply_retention(now_ms=NOW + 10_500) >= 1
    start = lg.log_start_offset
    assert start > 0
    assert lg.leader_epochs.entries()[0][1] == start
    assert lg.leader_epochs.entries() == _epoch_entries_from_batches(lg)
    lg.close()


def test_torn_tail_after_a_crash_drops_the_lost_epoch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    sizes = []
    for epoch in (0, 0, 1, 2):
        data = batch(2, ts=NOW, value_size=50)
        lg.append(data, epoch, now_ms=NOW)
        sizes.append(len(data))
    assert lg.leader_epochs.entries() == [(0, 0), (1, 4), (2, 6)]
    _crash(lg)
    os.truncate(d / f"{0:020d}.log", sum(sizes) - 9)  # epoch 2's only batch is torn
    lg = Log.open(d, _cfg())
    assert lg.log_end_offset == 6
    assert lg.leader_epochs.entries() == [(0, 0), (1, 4)]
    assert _file_entries(d) == [(0, 0), (1, 4)]
    assert lg.leader_epochs.end_offset_for(1, lg.log_end_offset) == (1, 6)
    lg.append(batch(1, ts=NOW), 3, now_ms=NOW)
    assert lg.leader_epochs.entries() == [(0, 0), (1, 4), (3, 6)]
    lg.close()


def test_missing_checkpoint_is_rebuilt_from_batches(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(batch(2, ts=NOW))
    lg = Log.open(d, _cfg(segment_bytes=size * 2))
    for epoch in (0, 0, 3, 3, 3, 7):
        lg.append(batch(2, ts=NOW), epoch, now_ms=NOW)
    lg.close()
    (d / LEADER_EPOCH_CHECKPOINT_FILE).unlink()
    lg = Log.open(d, _cfg(segment_bytes=size * 2), had_clean_shutdown=True)
    assert lg.leader_epochs.entries() == [(0, 0), (3, 4), (7, 10)]
    assert _file_entries(d) == [(0, 0), (3, 4), (7, 10)]
    lg.close()


def test_corrupt_checkpoint_is_rebuilt_from_batches(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    for epoch in (2, 4):
        lg.append(batch(1, ts=NOW), epoch, now_ms=NOW)
    lg.close()
    (d / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n7\n1 x\n")
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    assert lg.leader_epochs.entries() == [(2, 0), (4, 1)]
    lg.close()


def test_checkpoint_behind_the_log_is_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    for epoch in (1, 2, 5):
        lg.append(batch(1, ts=NOW), epoch, now_ms=NOW)
    lg.close()
    (d / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n1\n1 0\n")  # lost epochs 2 and 5
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    assert lg.leader_epochs.entries() == [(1, 0), (2, 1), (5, 2)]
    lg.close()


def test_checkpoint_with_entries_below_the_log_start_is_repaired(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    for epoch in (1, 2, 3):
        lg.append(batch(2, ts=NOW), epoch, now_ms=NOW)
    lg.delete_records_before(3)
    lg.close()
    # as if the process died after moving the log start but before the epochs
    (d / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n3\n1 0\n2 2\n3 4\n")
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    assert lg.log_start_offset == 3
    assert lg.leader_epochs.entries() == [(2, 3), (3, 4)]
    lg.close()


def test_new_empty_log_writes_no_checkpoint(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    assert not (d / LEADER_EPOCH_CHECKPOINT_FILE).exists()
    lg.close()


# --- producer state --------------------------------------------------------------------


def _produce_mixed(lg: Log, rng: random.Random, n: int, seqs: dict[int, tuple[int, int]]) -> None:
    """Idempotent batches from a few producers (epoch bumps included) and plain ones."""
    for _ in range(n):
        pid = rng.choice([-1, 1, 2, 3])
        if pid < 0:
            lg.append(batch(rng.randint(1, 3), ts=NOW), 0, now_ms=NOW)
            continue
        epoch, seq = seqs.get(pid, (0, 0))
        if rng.random() < 0.1:
            epoch, seq = epoch + 1, 0
        k = rng.randint(1, 3)
        lg.append(_idem(pid, epoch, seq, k), 0, now_ms=NOW)
        seqs[pid] = (epoch, seq + k)


def test_appends_observe_only_idempotent_batches(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", _cfg())
    lg.append(batch(2, ts=NOW), 0, now_ms=NOW)
    lg.append(_idem(7, 0, 0, 3), 0, now_ms=NOW)
    lg.append(_idem(7, 0, 3, 1, base_offset=5, partition_leader_epoch=0), 0,
              assign_offsets=False)
    assert set(lg.producer_state.producers) == {7}
    e = lg.producer_state.producers[7]
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batches] == [
        (0, 2, 2, 4), (3, 3, 5, 5),
    ]
    assert lg.producer_state.check(
        split_batches(_idem(7, 0, 0, 3), validate_crc=True)[0][0]
    ).duplicate is not None
    lg.close()


def test_producer_state_after_truncate_equals_a_fresh_scan(tmp_path: Path) -> None:
    rng = random.Random(7)
    size = len(_idem(1, 0, 0, 3))
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg(segment_bytes=size * 4))
    seqs: dict[int, tuple[int, int]] = {}
    same_object = lg.producer_state
    for _ in range(12):
        _produce_mixed(lg, rng, rng.randint(5, 25), seqs)
        target = rng.randint(max(lg.log_start_offset, lg.log_end_offset - 30),
                             lg.log_end_offset)
        lg.truncate_to(target)
        assert lg.producer_state == _scan(lg)
        assert lg.producer_state is same_object
        seqs = {pid: (e.epoch, e.last_seq + 1) for pid, e in lg.producer_state.producers.items()}
    lg.truncate_to(1)  # below every in-memory copy: rebuilt from the log start
    assert lg.producer_state == _scan(lg)
    lg.close()


def test_producer_state_truncate_after_delete_records(tmp_path: Path) -> None:
    size = len(_idem(1, 0, 0, 1))
    lg = Log.open(tmp_path / "t-0", _cfg(segment_bytes=size * 2))
    for seq in range(10):
        lg.append(_idem(1, 0, seq), 0, now_ms=NOW)
    lg.append(_idem(2, 0, 0), 0, now_ms=NOW)
    lg.delete_records_before(9)
    lg.truncate_to(10)  # producer 2's batch goes
    assert set(lg.producer_state.producers) == {1}
    assert lg.producer_state.producers[1].last_seq == 9
    lg.close()


def test_producer_snapshot_written_on_close_and_loaded(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    _produce_mixed(lg, random.Random(3), 30, {})
    expected = lg.producer_state.copy()
    leo = lg.log_end_offset
    lg.close()
    snap = json.loads((d / PRODUCER_SNAPSHOT_FILE).read_text())
    assert snap["offset"] == leo and {p["id"] for p in snap["producers"]} == set(
        expected.producers
    )
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    assert lg.producer_state == expected
    lg.close()


def test_producer_state_after_a_crash_is_snapshot_plus_scan(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    rng = random.Random(5)
    seqs: dict[int, tuple[int, int]] = {}
    lg = Log.open(d, _cfg())
    _produce_mixed(lg, rng, 20, seqs)
    lg.close()  # snapshot at this log end
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    _produce_mixed(lg, rng, 20, seqs)
    expected = lg.producer_state.copy()
    _crash(lg)
    lg = Log.open(d, _cfg())
    assert lg.producer_state == expected == _scan(lg)
    lg.close()


def test_stale_snapshot_is_dropped_by_truncation(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    for seq in range(6):
        lg.append(_idem(1, 0, seq), 0, now_ms=NOW)
    lg.close()  # snapshot at 6
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    lg.truncate_to(3)
    assert not (d / PRODUCER_SNAPSHOT_FILE).exists()
    for seq in range(5):  # a new leader's history: another producer past offset 6
        lg.append(_idem(2, 0, seq), 0, now_ms=NOW)
    expected = lg.producer_state.copy()
    _crash(lg)
    lg = Log.open(d, _cfg())
    assert lg.producer_state == expected == _scan(lg)
    assert lg.producer_state.producers[1].last_seq == 2
    lg.close()


def test_snapshot_past_a_torn_tail_is_ignored(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    sizes = []
    for seq in range(4):
        data = _idem(1, 0, seq)
        lg.append(data, 0, now_ms=NOW)
        sizes.append(len(data))
    lg.close()  # snapshot at 4
    os.truncate(d / f"{0:020d}.log", sum(sizes) - 5)
    lg = Log.open(d, _cfg())  # recovery cuts the last batch: LEO 3 < snapshot 4
    assert lg.log_end_offset == 3
    assert lg.producer_state == _scan(lg)
    assert lg.producer_state.producers[1].last_seq == 2
    lg.close()


def test_truncate_fully_clears_producer_state(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, _cfg())
    lg.append(_idem(1, 0, 0), 0, now_ms=NOW)
    lg.save_producer_state()
    assert (d / PRODUCER_SNAPSHOT_FILE).exists()
    lg.truncate_fully_and_start_at(50)
    assert lg.producer_state.producers == {}
    assert not (d / PRODUCER_SNAPSHOT_FILE).exists()
    lg.close()
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    assert lg.producer_state.producers == {} and lg.log_start_offset == 50
    lg.close()


def test_snapshot_is_not_rewritten_when_unchanged(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    path = d / PRODUCER_SNAPSHOT_FILE
    lg = Log.open(d, _cfg())
    lg.append(_idem(1, 0, 0), 0, now_ms=NOW)
    lg.save_producer_state()  # the broker may save before closing
    os.utime(path, ns=(1, 1))
    lg.close()  # nothing changed since: no second write
    assert path.stat().st_mtime_ns == 1
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    lg.close()  # an idle partition's restart writes nothing either
    assert path.stat().st_mtime_ns == 1
    lg = Log.open(d, _cfg(), had_clean_shutdown=True)
    lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    lg.close()
    assert path.stat().st_mtime_ns != 1
    assert json.loads(path.read_text())["offset"] == 2
