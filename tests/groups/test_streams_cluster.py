"""Kafka Streams 4.4.0 word count with a KTable, ``group.protocol=streams`` and
``processing.guarantee=exactly_once_v2``, two instances on three jocko-py brokers, one
SIGKILLed mid-stream (both instances running, counts being written) and restarted on its
state directory: the final counts read with read_committed are exact, and Kafka 4.4.0's
``kafka-streams-groups --describe`` shows both members owning every task.

The short version of ``make streams-cluster`` (tests/groups/streams_cluster.py, whose
``run`` this calls with a few rounds); a failure names every miscounted word (got,
expected) and the partitions' HW, LSO and open transactions. The seed is printed and
varies per run; ``JOCKO_STREAMS_SEED`` replays one.
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path
from types import SimpleNamespace

from jocko_py.protocol import records as rb
from tests.groups.streams_cluster import run
from tests.groups.test_streams_app import KAFKA44_JARS, _require_jars, committed_counts
from tests.support.prereq import missing


def test_two_instances_one_killed_count_exactly(tmp_path: Path) -> None:
    _require_jars()
    if not (KAFKA44_JARS / ".done").exists():
        missing("Kafka 4.4.0 tools not fetched (make -C tests/java kafka-44)")
    seed = int(os.environ.get("JOCKO_STREAMS_SEED") or random.randrange(2**32))
    print(f"seed={seed}")
    problems = run(seed, rounds=4, lines=25, root=tmp_path, settle=120,
                   keep=tmp_path / "kept")
    assert not problems, f"seed={seed}: " + "\n".join(problems)


def _count(word: str, n: int) -> rb.NewRecord:
    return rb.NewRecord(word.encode(), struct.pack(">q", n))


def test_committed_counts_skips_only_the_aborted_transaction_of_a_producer() -> None:
    """The reader's rule (the cause of this test's earlier miscounts, e.g. seed
    3987640586: 18 of 40 words absent or stale with every LSO at its HW): a restarted
    Streams instance keeps its producer id, so the abort of its open transaction and its
    later commits share the id; only the batches from the aborted transaction's first
    offset to its abort marker are skipped, as Kafka's consumer skips them."""
    pid = 7
    log = b"".join([
        rb.build_batch([_count("a", 1)], base_offset=0, producer_id=pid, producer_epoch=1,
                       base_sequence=0, is_transactional=True),
        rb.build_control_batch(rb.ControlType.ABORT, producer_id=pid, producer_epoch=2,
                               coordinator_epoch=0, base_offset=1),
        rb.build_batch([_count("a", 2), _count("b", 5)], base_offset=2, producer_id=pid,
                       producer_epoch=2, base_sequence=0, is_transactional=True),
        rb.build_control_batch(rb.ControlType.COMMIT, producer_id=pid, producer_epoch=3,
                               coordinator_epoch=0, base_offset=4),
        rb.build_batch([_count("c", 9)], base_offset=5, producer_id=8, producer_epoch=0,
                       base_sequence=0, is_transactional=True),
    ])
    pr = SimpleNamespace(records=log, aborted_transactions=[
        SimpleNamespace(producer_id=pid, first_offset=0)])
    out: dict[str, int] = {}
    assert committed_counts(pr, out) == 6
    assert out == {"a": 2, "b": 5, "c": 9}
