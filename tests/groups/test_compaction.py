"""Log compaction: the latest value per key survives, tombstones last delete.retention.ms.

Unit tests drive `jocko_py.commitlog.cleaner.clean_log` on a real `Log` and
compare with a model (latest offset per key over the cleaned range); an
end-to-end test produces to a `cleanup.policy=compact` topic on a broker (small
segments, a fast cleaner and delete.retention.ms set through the broker's
config) and reads it back with kafka-python, watching a tombstone stay for
delete.retention.ms and go after.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from jocko_py.commitlog.cleaner import LogCleaner, clean_log
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.log import Log
from jocko_py.commitlog.manager import LogManager
from jocko_py.protocol import records as rb
from tests.groups.harness import BROKER_OVERRIDES, create_topic, wait_until
from tests.support.broker import BrokerProcess

NOW = 1_700_000_000_000
CFG = LogConfig(cleanup_policy=("compact",), segment_bytes=600, delete_retention_ms=10_000,
                min_cleanable_dirty_ratio=0.01)


def read_all(lg: Log) -> list[rb.Record]:
    out: list[rb.Record] = []
    for seg in lg.segments:
        for pos, h in seg.iter_headers():
            assert rb.verify_crc(seg.read_batch_at(pos, h))
            out += rb.decode_records(seg.read_batch_at(pos, h), h)
    return out


def append(lg: Log, recs: list[tuple[bytes | None, bytes | None]], ts: int = NOW,
           compression: int = 0) -> None:
    lg.append(rb.build_batch([rb.NewRecord(k, v, (), ts) for k, v in recs],
                             compression=compression), 0)


def cleaned_range_end(lg: Log) -> int:
    return lg.segments[-1].base_offset


def check_model(before: list[rb.Record], after: list[rb.Record], end: int,
                now: int, horizons_passed: bool) -> None:
    latest: dict[bytes, int] = {}
    for r in before:
        if r.key is not None and r.offset < end:
            latest[r.key] = r.offset
    after_by_offset = {r.offset: r for r in after}
    for r in before:
        if r.offset >= end or r.key is None:
            assert after_by_offset.get(r.offset) == r, f"lost record at {r.offset}"
            continue
        keep = latest[r.key] == r.offset
        if keep and r.value is None and horizons_passed:
            keep = False
        if keep:
            assert after_by_offset.get(r.offset) == r, f"lost latest value of {r.key!r}"
        else:
            assert r.offset not in after_by_offset, f"kept superseded record at {r.offset}"
    offs = [r.offset for r in after]
    assert offs == sorted(offs), "offsets out of order"


@pytest.mark.parametrize("compression", [0, 1, 4])
def test_latest_value_per_key_and_tombstones(tmp_path: Path, compression: int) -> None:
    lg = Log.open(tmp_path / "c-0", CFG)
    rnd = random.Random(7 + compression)
    for i in range(120):
        k = f"k{rnd.randrange(12)}".encode()
        choice = rnd.random()
        if choice < 0.1:
            recs: list[tuple[bytes | None, bytes | None]] = [(k, None)]
        elif choice < 0.15:
            recs = [(None, b"nokey%d" % i)]
        else:
            recs = [(k, b"v%d" % i), (f"k{rnd.randrange(12)}".encode(), b"w%d" % i)]
        append(lg, recs, compression=compression)
    assert lg.num_segments > 3
    before = read_all(lg)
    end = cleaned_range_end(lg)
    leo = lg.log_end_offset
    stats = clean_log(lg, NOW, first_dirty=0)
    assert stats is not None and stats.records_kept < stats.records_read
    after = read_all(lg)
    check_model(before, after, end, NOW, horizons_passed=False)
    assert lg.log_end_offset == leo
    # tombstones stay until their horizon, then go; nothing else changes
    stats2 = clean_log(lg, NOW + 5_000, first_dirty=stats.first_dirty, force=True)
    assert stats2 is not None
    check_model(before, read_all(lg), end, NOW + 5_000, horizons_passed=False)
    clean_log(lg, NOW + 20_000, first_dirty=stats.first_dirty, force=True)
    final = read_all(lg)
    check_model(before, final, end, NOW + 20_000, horizons_passed=True)
    # the cleaned log reopens (indexes rebuilt) with the same content, reads skip gaps
    lg.close()
    lg2 = Log.open(tmp_path / "c-0", CFG)
    assert read_all(lg2) == final
    first_gap = next(o for o in range(end) if o not in {r.offset for r in final})
    got = lg2.read(first_gap, 1 << 20)
    assert got.records and rb.parse_header(got.records).last_offset >= first_gap
    lg2.close()


def test_min_compaction_lag_and_dirty_ratio(tmp_path: Path) -> None:
    cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=300,
                    min_compaction_lag_ms=60_000, min_cleanable_dirty_ratio=0.5)
    lg = Log.open(tmp_path / "c-0", cfg)
    for i in range(30):
        append(lg, [(b"same", b"v%d" % i)], ts=NOW)
    assert clean_log(lg, NOW + 1_000) is None, "records younger than the lag were cleaned"
    stats = clean_log(lg, NOW + 120_000)
    assert stats is not None
    # everything clean now: below the dirty ratio, nothing to do
    assert clean_log(lg, NOW + 120_000, first_dirty=stats.first_dirty) is None
    lg.close()


def test_cleaner_checkpoint(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, CFG)
    lg = mgr.get_or_create("compacted", 0, CFG)
    plain = mgr.get_or_create("plain", 0, LogConfig(segment_bytes=600))
    for i in range(60):
        append(lg, [(b"k%d" % (i % 3), b"v%d" % i)])
        append(plain, [(b"k%d" % (i % 3), b"v%d" % i)])
    n_plain = len(read_all(plain))
    cleaner = LogCleaner(mgr)
    assert cleaner.clean_all(NOW) == 1
    assert len(read_all(plain)) == n_plain
    assert LogCleaner(mgr).first_dirty[("compacted", 0)] == lg.segments[-1].base_offset
    mgr.close_all()


DELETE_RETENTION_MS = 8000


@pytest.mark.timeout(120)
def test_compacted_topic_end_to_end(tmp_path: Path) -> None:
    """On a running broker: the latest value per key survives, a key with no newer value
    is never lost, and a tombstone is kept for delete.retention.ms after the cleaner
    first saw it (KIP-534: the horizon is the cleaning time + delete.retention.ms,
    so it is at least that long after the tombstone was written), then removed."""
    from kafka import KafkaConsumer, KafkaProducer

    b = BrokerProcess(tmp_path / "data", overrides={
        **BROKER_OVERRIDES, "log.cleaner.backoff.ms": "200",
        "log.cleaner.min.cleanable.ratio": "0.01",
        "log.cleaner.delete.retention.ms": str(DELETE_RETENTION_MS)})
    b.start()
    try:
        create_topic(b.bootstrap, "compacted", 1, {"cleanup.policy": "compact",
                                                   "segment.bytes": "1024"})
        p = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=0)
        latest: dict[str, str | None] = {}
        for i in range(300):
            k = f"key{i % 10}"
            v: str | None = None if (i % 10 == 3 and i > 250) else f"value{i}"
            p.send("compacted", key=k.encode(), value=v.encode() if v else None).get(10)
            latest[k] = v
        p.send("compacted", key=b"lonely", value=b"only-once").get(10)
        latest["lonely"] = "only-once"
        for i in range(40):  # roll past the tombstone so its segment can be cleaned
            p.send("compacted", key=b"filler", value=b"f%d" % i).get(10)
        latest["filler"] = "f39"
        p.close()
        written = time.monotonic()  # the cleaner cannot have seen the tombstone before

        def read() -> list[tuple[str, str | None]]:
            c = KafkaConsumer("compacted", bootstrap_servers=b.bootstrap,
                              auto_offset_reset="earliest", enable_auto_commit=False,
                              consumer_timeout_ms=1000)
            out = [(m.key.decode(), m.value.decode() if m.value is not None else None)
                   for m in c]
            c.close()
            return out

        wait_until(lambda: len(read()) < 100, 30, "the cleaner to compact the topic", 0.3)
        recs = read()
        seen: dict[str, str | None] = {}
        for k, v in recs:
            seen[k] = v
        # compacted: the latest value of every key, the tombstone included
        assert seen == latest, "a key lost its latest value (or the tombstone went early)"
        assert len(recs) < 100 and ("lonely", "only-once") in recs
        assert [v for k, v in recs if k == "key3"] == [None]
        # the tombstone stays until delete.retention.ms has passed
        checks = 0
        while time.monotonic() < written + DELETE_RETENTION_MS / 1000 - 0.5:
            assert ("key3", None) in read(), \
                f"tombstone removed {time.monotonic() - written:.1f}s after it was written"
            checks += 1
            time.sleep(0.3)
        assert checks >= 2
        # ... and then it goes, with nothing else changed
        wait_until(lambda: all(k != "key3" for k, _ in read()), 20,
                   "the key3 tombstone to be removed", 0.3)
        gone_s = time.monotonic() - written
        final = dict(read())
        assert final == {k: v for k, v in latest.items() if k != "key3"}
        print(f"tombstone removed {gone_s:.1f}s after it was written "
              f"(delete.retention.ms={DELETE_RETENTION_MS})")
    finally:
        b.stop()
