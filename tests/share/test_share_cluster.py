"""The share-group workload on three jocko-py brokers (RF 3) with failovers, in `make test`
(issue 24, "What must be shown"): tests/share/share_cluster.py's `run("jocko", ...)`.

Three `KafkaShareConsumer`s (Java 4.4.0) accept 3,000 records of a one-partition topic;
the share partition's leader is SIGKILLed and restarted mid-stream, then the broker of
the group's share coordinator. Passes when no record whose accept a commitSync confirmed
is delivered again and every record is accepted once in the end (share_cluster.py's
module docstring says exactly how). The same workload on three Apache Kafka 4.4.0 nodes,
which checks the workload itself, is `make share-cluster-kafka`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.share.harness import java_missing, jocko_missing
from tests.share.share_cluster import run
from tests.support.prereq import missing

# the workload's own waits are bounded (three steps of at most 180 s, 240 s to the end);
# it takes ~25 s on an idle machine
pytestmark = [pytest.mark.java, pytest.mark.cluster, pytest.mark.timeout(900)]


def test_share_failover_leader_then_coordinator_kill(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if why := java_missing():
        missing(why)
    if why := jocko_missing():
        missing(why)
    rc = run("jocko", tmp_path)
    out = capsys.readouterr().out
    print(out)  # the timeline and the verdict, in the report of a failure
    if rc == 2:
        missing(out.strip().splitlines()[-1])
    assert rc == 0, out[-4000:]
    assert "PASS (jocko)" in out
