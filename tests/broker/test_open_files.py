"""Bounded descriptors (commitlog/fd_cache.py): a broker with far more partitions than
its open-file limit allows three descriptors each keeps serving every partition, with
at most one descriptor per open segment and no more segment files open than its bound.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from jocko_py.client import Client
from jocko_py.protocol.records import NewRecord, build_batch, decode_records, parse_header
from tests.support.broker import BrokerProcess

NOFILE = 128
PARTITIONS = 500  # 5 topics of 100: three descriptors each (as before) would need 1,500
BOUND = 64  # jocko.log.max.open.files default: min(3/4 of the soft limit, soft - 64)


def open_files(pid: int) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed meanwhile
    return out


def low_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def test_broker_under_a_low_open_file_limit_serves_every_partition(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data")
    b.preexec_fn = low_nofile
    b.start()
    try:
        assert b.proc is not None
        pid = b.proc.pid
        topics = [f"fd{i:02d}" for i in range(PARTITIONS // 100)]
        with Client(b.bootstrap, timeout=120) as c:
            for i in range(0, len(topics), 5):
                r = c.request(19, 7, {"topics": [
                    {"name": t, "num_partitions": 100, "replication_factor": 1, "configs": []}
                    for t in topics[i:i + 5]], "timeout_ms": 120000})
                assert [t.error_code for t in r.topics] == [0] * len(r.topics)
            peak = 0
            for t in topics:
                batches = {p: build_batch([NewRecord(None, f"{t}/{p}".encode())])
                           for p in range(100)}
                r = c.request(0, 9, {"acks": -1, "timeout_ms": 30000, "topic_data": [
                    {"name": t, "partition_data": [
                        {"index": p, "records": data} for p, data in batches.items()]}]})
                codes = [p.error_code for x in r.responses for p in x.partition_responses]
                assert codes == [0] * 100, f"produce to {t}: {sorted(set(codes))}"
                peak = max(peak, len(open_files(pid)))
            for t in topics:
                parts = c.fetch_partitions(t, dict.fromkeys(range(100), 0), max_wait_ms=0)
                assert len(parts) == 100
                for p in parts:
                    assert p.error_code == 0, (t, p.partition_index, p.error_code)
                    data = bytes(p.records)
                    values = [r.value for r in decode_records(data, parse_header(data))]
                    assert values == [f"{t}/{p.partition_index}".encode()]
                files = open_files(pid)
                peak = max(peak, len(files))
        # the partitions' segment files (not the metadata log's, not the broker's output)
        logs = [f for f in files if f.endswith(".log") and f"{tmp_path}/data/fd" in f]
        indexes = [f for f in files if f.endswith((".index", ".timeindex", ".txnindex"))]
        assert len(logs) <= BOUND, f"{len(logs)} segment files open, bound {BOUND}"
        assert not indexes, f"index files held open: {indexes[:3]}"
        assert peak < NOFILE
        assert b.proc.poll() is None
        log = b.log_path.read_text(errors="replace")
        assert "Too many open files" not in log and "out of file descriptors" not in log
    finally:
        b.stop()
