"""Transactions in the log: markers, producer state, LSO, the .txnindex, recovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from jocko_py.commitlog import Log, LogConfig
from jocko_py.commitlog.producer_state import ProducerStateManager
from jocko_py.commitlog.txn_index import AbortedTxn, TxnIndex
from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.records import ControlType, build_control_batch, parse_header
from tests.commitlog._util import batch

NOW = 1_700_000_000_000


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytes:
    return batch(n, ts=NOW, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                 is_transactional=True)


def marker(pid: int, ctype: ControlType, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(ctype, producer_id=pid, producer_epoch=epoch,
                               coordinator_epoch=coordinator_epoch, timestamp=NOW)


def test_open_transaction_holds_back_the_lso_and_a_commit_releases_it(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append(batch(2, ts=NOW), 0, now_ms=NOW)                # 0-1 plain
    lg.append(txn_batch(7, 0), 0, now_ms=NOW)                 # 2-3 txn of 7
    lg.append(batch(1, ts=NOW), 0, now_ms=NOW)                # 4 plain
    assert lg.last_stable_offset(lg.log_end_offset) == 2
    assert lg.last_stable_offset(1) == 1                      # never past the HW
    lg.append(marker(7, ControlType.COMMIT), 0, now_ms=NOW)   # 5
    # completed but its marker is not below the HW yet: still unstable
    assert lg.last_stable_offset(5) == 2
    assert lg.last_stable_offset(6) == 6
    assert lg.collect_aborted(0, 6) == []
    lg.close()


def test_abort_is_indexed_in_the_markers_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(txn_batch(1, 0))
    lg = Log.open(d, LogConfig(segment_bytes=size * 2 + 10))
    lg.append(txn_batch(1, 0), 0, now_ms=NOW)                 # 0-1
    lg.append(txn_batch(2, 0), 0, now_ms=NOW)                 # 2-3
    lg.append(marker(1, ControlType.ABORT), 0, now_ms=NOW)    # 4 (new segment)
    assert lg.num_segments == 2
    assert lg.segments[1].txn_index.entries == [AbortedTxn(1, 0, 4, 2)]
    assert (d / f"{lg.segments[1].base_offset:020d}.txnindex").stat().st_size == 34
    assert lg.last_stable_offset(100) == 2                    # producer 2 still open
    lg.append(marker(2, ControlType.ABORT), 0, now_ms=NOW)    # 5
    assert lg.last_stable_offset(100) == 100
    assert lg.collect_aborted(0, 6) == [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 5, 6)]
    assert lg.collect_aborted(5, 6) == [AbortedTxn(2, 2, 5, 6)]
    assert lg.collect_aborted(0, 2) == [AbortedTxn(1, 0, 4, 2)]
    lg.close()


def test_non_transactional_write_during_a_transaction_is_refused(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append(txn_batch(3, 0), 0, now_ms=NOW)
    plain = parse_header(batch(1, ts=NOW, producer_id=3, producer_epoch=0, base_sequence=2))
    assert lg.producer_state.check(plain).error == ErrorCode.INVALID_TXN_STATE
    assert lg.producer_state.check_marker(3, 0, 0) == ErrorCode.NONE
    lg.append(marker(3, ControlType.COMMIT, epoch=1, coordinator_epoch=4), 0, now_ms=NOW)
    # the marker bumped the epoch: older markers and coordinators are fenced
    assert lg.producer_state.check_marker(3, 0, 4) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert lg.producer_state.check_marker(3, 1, 3) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    nxt = parse_header(txn_batch(3, 0, epoch=1))
    assert lg.producer_state.check(nxt).error == ErrorCode.NONE
    lg.close()


@pytest.mark.parametrize("clean", [True, False])
def test_recovery_rebuilds_open_transactions_and_the_index(tmp_path: Path, clean: bool) -> None:
    d = tmp_path / "t-0"
    size = len(txn_batch(1, 0))
    cfg = LogConfig(segment_bytes=size * 2 + 10)
    lg = Log.open(d, cfg)
    lg.append(txn_batch(1, 0), 0, now_ms=NOW)                 # 0-1
    lg.append(txn_batch(2, 0), 0, now_ms=NOW)                 # 2-3
    lg.append(marker(1, ControlType.ABORT), 0, now_ms=NOW)    # 4
    lg.append(txn_batch(9, 0), 0, now_ms=NOW)                 # 5-6
    before = lg.producer_state.copy()
    if clean:
        lg.close()
    else:
        for seg in lg.segments:
            seg.close()
        # the crash also lost the index (never fsynced): replay must restore it
        for p in d.glob("*.txnindex"):
            p.unlink()
    lg2 = Log.open(d, cfg, had_clean_shutdown=clean)
    assert lg2.producer_state == before
    assert lg2.last_stable_offset(100) == 2
    assert lg2.collect_aborted(0, 100) == [AbortedTxn(1, 0, 4, 2)]
    lg2.close()


def test_recovery_from_an_old_snapshot_does_not_duplicate_entries(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, LogConfig())
    lg.append(txn_batch(1, 0), 0, now_ms=NOW)                 # 0-1
    lg.close()                                                # snapshot at 2, txn open
    lg = Log.open(d, LogConfig(), had_clean_shutdown=True)
    lg.append(marker(1, ControlType.ABORT), 0, now_ms=NOW)    # 2
    for seg in lg.segments:
        seg.flush()
        seg.close()                                           # crash: snapshot stays at 2
    lg = Log.open(d, LogConfig())
    assert lg.collect_aborted(0, 10) == [AbortedTxn(1, 0, 2, 3)]
    assert TxnIndex.load(d / f"{0:020d}.txnindex").entries == [AbortedTxn(1, 0, 2, 3)]
    assert lg.last_stable_offset(10) == 10
    lg.close()


def test_truncation_reopens_a_transaction_and_drops_its_abort(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = Log.open(d, LogConfig())
    lg.append(txn_batch(1, 0), 0, now_ms=NOW)                 # 0-1
    lg.append(marker(1, ControlType.ABORT), 0, now_ms=NOW)    # 2
    lg.append(txn_batch(1, 2), 0, now_ms=NOW)                 # 3-4: next txn, same epoch
    assert lg.collect_aborted(0, 10) == [AbortedTxn(1, 0, 2, 3)]
    lg.truncate_to(2)                                         # the marker is gone
    assert lg.collect_aborted(0, 10) == []
    assert not (d / f"{0:020d}.txnindex").exists()
    assert lg.last_stable_offset(10) == 0
    lg.append(marker(1, ControlType.ABORT), 0, now_ms=NOW)    # 2 again
    assert lg.collect_aborted(0, 10) == [AbortedTxn(1, 0, 2, 3)]
    lg.truncate_fully_and_start_at(50)
    assert lg.collect_aborted(0, 100) == []
    assert lg.last_stable_offset(60) == 60
    lg.close()


def test_retention_deletes_the_index_with_its_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(txn_batch(1, 0))
    lg = Log.open(d, LogConfig(segment_bytes=size + 10))
    lg.append(txn_batch(1, 0), 0, now_ms=NOW)
    lg.append(marker(1, ControlType.ABORT), 0, now_ms=NOW)
    lg.append(batch(1, ts=NOW), 0, now_ms=NOW)
    assert list(d.glob("*.txnindex"))
    lg.delete_records_before(3)
    assert not list(d.glob("*.txnindex"))
    lg.close()


def test_torn_index_entry_is_dropped(tmp_path: Path) -> None:
    p = tmp_path / "x.txnindex"
    idx = TxnIndex(p)
    idx.append(AbortedTxn(1, 2, 3, 4))
    idx.append(AbortedTxn(5, 6, 7, 8))
    idx.close()
    with open(p, "r+b") as f:
        f.truncate(34 + 20)
    assert TxnIndex.load(p).entries == [AbortedTxn(1, 2, 3, 4)]
    assert p.stat().st_size == 34


def test_snapshot_without_txn_fields_loads(tmp_path: Path) -> None:
    p = tmp_path / "producer-state.json"
    p.write_text('{"offset": 3, "producers": [{"id": 1, "epoch": 0, '
                 '"batches": [[0, 1, 0, 1, 5]]}]}')
    ps = ProducerStateManager()
    assert ps.load(p) == 3
    assert ps.producers[1].txn_first_offset == -1
    assert ps.ongoing == {}


def _values(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    from jocko_py.protocol.records import decode_records, iter_batches
    out = []
    data = bytes(lg.read(0, 1 << 20).records)
    for seg in lg.segments[1:]:
        data += bytes(lg.read(seg.base_offset, 1 << 20).records)
    for pos, h in iter_batches(data, validate_crc=False):
        if h.is_control:
            continue
        for r in decode_records(data[pos:pos + h.size], h):
            out.append((r.offset, r.key, r.value))
    return out


def test_compaction_ignores_aborted_records_and_stops_at_open_transactions(
        tmp_path: Path) -> None:
    from jocko_py.commitlog.cleaner import clean_log
    from jocko_py.protocol.records import NewRecord, build_batch

    def rec(key: bytes, value: bytes, **kw: object) -> bytes:
        return build_batch([NewRecord(key, value, (), NOW)], **kw)  # type: ignore[arg-type]

    cfg = LogConfig(cleanup_policy="compact", segment_bytes=10_000)
    lg = Log.open(tmp_path / "c-0", cfg)
    lg.append(rec(b"k", b"committed"), 0, now_ms=NOW)                       # 0
    lg.append(rec(b"k", b"aborted", producer_id=5, producer_epoch=0, base_sequence=0,
                  is_transactional=True), 0, now_ms=NOW)                     # 1
    lg.append(marker(5, ControlType.ABORT), 0, now_ms=NOW)                   # 2
    lg.append(rec(b"j", b"open", producer_id=6, producer_epoch=0, base_sequence=0,
                  is_transactional=True), 0, now_ms=NOW)                     # 3
    lg.roll()
    lg.append(rec(b"j", b"later"), 0, now_ms=NOW)                            # 4
    lg.roll()
    # producer 6's transaction is open from offset 3: nothing is cleanable at all
    assert clean_log(lg, NOW, force=True) is None
    lg.append(marker(6, ControlType.COMMIT), 0, now_ms=NOW)                  # 5
    lg.roll()
    stats = clean_log(lg, NOW, force=True)
    assert stats is not None
    # the aborted write neither survives nor shadows the committed value of k
    assert _values(lg) == [(0, b"k", b"committed"), (4, b"j", b"later")]
    lg.close()


def _batches(lg: Log) -> list[tuple[int, bool, int]]:
    """(base offset, is control, producer id) of every batch."""
    out = []
    for seg in lg.segments:
        for _pos, h in seg.iter_headers():
            out.append((h.base_offset, h.is_control, h.producer_id))
    return out


def test_compaction_drops_markers_of_emptied_transactions_after_delete_retention(
        tmp_path: Path) -> None:
    """A marker stays while a record of its transaction survives; once none does, the
    first pass stamps it with a delete horizon (delete.retention.ms) and a pass past
    the horizon drops it, as Kafka's cleaner."""
    from jocko_py.commitlog.cleaner import clean_log
    from jocko_py.protocol.records import NewRecord, build_batch

    def rec(key: bytes, value: bytes, **kw: object) -> bytes:
        return build_batch([NewRecord(key, value, (), NOW)], **kw)  # type: ignore[arg-type]

    def txn(pid: int, key: bytes, value: bytes) -> bytes:
        return rec(key, value, producer_id=pid, producer_epoch=0, base_sequence=0,
                   is_transactional=True)

    retention = 1000
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=10_000,
                    delete_retention_ms=retention)
    lg = Log.open(tmp_path / "c-0", cfg)
    lg.append(txn(5, b"a", b"aborted"), 0, now_ms=NOW)                      # 0
    lg.append(marker(5, ControlType.ABORT), 0, now_ms=NOW)                  # 1
    lg.append(txn(6, b"b", b"shadowed"), 0, now_ms=NOW)                     # 2
    lg.append(marker(6, ControlType.COMMIT), 0, now_ms=NOW)                 # 3
    lg.append(txn(7, b"c", b"kept"), 0, now_ms=NOW)                         # 4
    lg.append(marker(7, ControlType.COMMIT), 0, now_ms=NOW)                 # 5
    lg.append(rec(b"b", b"newer"), 0, now_ms=NOW)                           # 6
    lg.roll()
    stats = clean_log(lg, NOW, force=True)
    assert stats is not None and stats.markers_dropped == 0
    # emptied transactions (5 aborted, 6 shadowed): markers stamped, still there
    assert _batches(lg) == [(1, True, 5), (3, True, 6), (4, False, 7), (5, True, 7),
                            (6, False, -1)]
    assert stats.next_horizon_ms == NOW + retention
    stats = clean_log(lg, NOW + retention - 1, force=True)
    assert stats is not None and stats.markers_dropped == 0
    stats = clean_log(lg, NOW + retention, force=True)
    assert stats is not None and stats.markers_dropped == 2
    # producer 7's commit marker stays: its record survives
    assert _batches(lg) == [(4, False, 7), (5, True, 7), (6, False, -1)]
    assert _values(lg) == [(4, b"c", b"kept"), (6, b"b", b"newer")]
    lg.close()
    # recovery rebuilds the same log: no transaction left open
    lg = Log.open(tmp_path / "c-0", cfg)
    assert lg.last_stable_offset(lg.log_end_offset) == lg.log_end_offset
    assert lg.producer_state.first_open_offset() is None
    lg.close()


def test_lso_is_never_below_the_log_start(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append(txn_batch(1, 0), 0, now_ms=NOW)                 # 0-1, left open
    lg.append(batch(2, ts=NOW), 0, now_ms=NOW)                # 2-3
    assert lg.last_stable_offset(4) == 0
    lg.delete_records_before(3)
    assert lg.last_stable_offset(4) == 3
    assert lg.last_stable_offset(2) == 2                      # and never past the HW
    lg.close()


def test_a_batch_past_the_one_being_verified_is_out_of_order(tmp_path: Path) -> None:
    """franz-go's TestTxnEtl (issue 21): two batches of a transaction in flight to a
    partition the producer never wrote to; the first one's verification (KIP-890) is
    refused for the moment (the previous transaction still completing) and the second
    one's passes. Appending the second first left a gap: the first one's retry got
    OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to the producer. As Kafka's
    VerificationStateEntry: the later batch is refused until the first is appended."""
    lg = Log.open(tmp_path / "t-0", LogConfig())
    ps = lg.producer_state
    first, second = txn_batch(9, 0, n=3, epoch=2), txn_batch(9, 3, n=3, epoch=2)
    ps.begin_verification(9, 2, 0)               # the first batch is being verified
    ps.begin_verification(9, 2, 3)               # then the second (lowest stays 0)
    assert ps.check(parse_header(second)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # the previous transaction's marker landing meanwhile does not lift it
    lg.append(marker(9, ControlType.COMMIT, epoch=2), 0, now_ms=NOW)
    assert ps.check(parse_header(second)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # a batch of a later epoch is not held back by it
    assert ps.check(parse_header(txn_batch(9, 0, epoch=3))).error == ErrorCode.NONE
    assert ps.check(parse_header(first)).error == ErrorCode.NONE
    lg.append(first, 0, now_ms=NOW)              # the retried first batch
    assert ps.check(parse_header(second)).error == ErrorCode.NONE
    lg.append(second, 0, now_ms=NOW)
    assert ps.producers[9].last_seq == 5
    lg.close()


def test_without_a_verification_a_first_batch_may_start_anywhere(tmp_path: Path) -> None:
    ps = ProducerStateManager()
    # a producer seen for the first time (its earlier state may have expired)
    assert ps.check(parse_header(txn_batch(4, 17))).error == ErrorCode.NONE
