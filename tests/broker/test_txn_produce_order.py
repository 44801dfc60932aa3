"""franz-go's TestTxnEtl (issue 21) in process: two batches of a transaction in flight
to a partition the producer never wrote to, through the replica manager's KIP-890
verification. The coordinator refuses the first batch's add for the moment (the
previous transaction still completing: CONCURRENT_TRANSACTIONS, retriable) and accepts
the second's. The second may not be appended first (it would leave a gap that the
first batch's retry runs into, OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to the producer):
it is OUT_OF_ORDER_SEQUENCE_NUMBER itself (a producer skips that for a batch behind one
that failed), and both go in once the first is retried."""

from __future__ import annotations

import uuid
from pathlib import Path

from jocko_py.broker.replica_manager import ReplicaManager
from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.metadata import MetadataImage
from jocko_py.commitlog.config import LogConfig
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode as E


def _batch(seq: int, n: int) -> bytes:
    return rb.build_batch([rb.NewRecord(None, b"v%d" % i, (), 1) for i in range(n)],
                          producer_id=42, producer_epoch=3, base_sequence=seq,
                          is_transactional=True)


async def test_a_later_batch_waits_for_the_one_being_verified(tmp_path: Path) -> None:
    ctl = Controller(ControllerConfig())
    img = MetadataImage()
    img.apply_batch(ctl.reconcile(img, {1: BrokerInfo(1, "h", 1, None, uuid.uuid4())}))
    _, recs = ctl.create_topic(img, "t", 1, 1)
    delta = img.apply_batch(recs)
    rm = ReplicaManager(tmp_path, LogConfig(), 1, lambda: img, lambda k: "")
    rm.start(img)
    rm.apply_delta(img, delta)
    answers = [E.CONCURRENT_TRANSACTIONS, E.NONE, E.NONE, E.NONE]

    async def verifier(tid: str, pid: int, epoch: int, parts: list[tuple[str, int]],
                       add: bool) -> dict[tuple[str, int], E]:
        return {tp: answers.pop(0) for tp in parts}

    rm.txn_verifier = verifier

    async def produce(data: bytes) -> E:
        [r] = await rm.append_records([("t", 0, data)], 1, 1000, transactional_id="tx",
                                      abortable_supported=True, add_partitions=True)
        return r.error

    first, second = _batch(0, 5), _batch(5, 5)
    assert await produce(first) != E.NONE         # retriable: the add was refused for now
    assert await produce(second) == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert await produce(first) == E.NONE         # the producer retries from the first
    assert await produce(second) == E.NONE
    p = rm.get("t", 0)
    assert p is not None and p.log.log_end_offset == 10
    rm.close()
