"""A transactional copier process for tests/transactions/soak.py (Kafka's
`TransactionalMessageCopier`): consume a read_committed group member's share of the
input, produce each record to the output (same key and value; output partition =
the record's number modulo the output's partitions, or 0 with one output partition)
and commit the consumed offsets with the transaction, `--batch` records per
transaction. Every abortable error aborts the transaction and rewinds to the group's
committed offsets; a fatal one (fenced) exits 2 and the driver starts a new copier
with the same transactional id. Prints "copied N" lines as transactions commit.

Usage: python -m tests.transactions.copier BOOTSTRAP INPUT OUTPUT OUT_PARTITIONS GROUP
       TXN_ID BATCH
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def main() -> int:
    bootstrap, src, dst, out_parts, group, tid, batch = sys.argv[1:8]
    n_out, per_txn = int(out_parts), int(batch)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "fetch.wait.max.ms": 100})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 10,
                  "transaction.timeout.ms": 20000, "message.timeout.ms": 20000})
    p.init_transactions(60)
    c.subscribe([src])
    copied = 0
    while True:
        msgs = [m for m in c.consume(per_txn, 1.0) if not m.error()]
        if not msgs:
            continue
        try:
            p.begin_transaction()
            for m in msgs:
                num = int(m.value())
                p.produce(dst, key=m.key(), value=m.value(),
                          partition=num % n_out if n_out > 1 else 0)
            offsets: dict[tuple[str, int], int] = {}
            for m in msgs:
                offsets[(m.topic(), m.partition())] = m.offset() + 1
            p.send_offsets_to_transaction(
                [TopicPartition(t, pp, o) for (t, pp), o in offsets.items()],
                c.consumer_group_metadata(), 60)
            p.commit_transaction(60)
            copied += len(msgs)
            print(f"copied {copied}", flush=True)
        except KafkaException as e:
            err: KafkaError = e.args[0]
            if err.fatal() or not err.txn_requires_abort() and not err.retriable():
                print(f"fatal: {err}", file=sys.stderr, flush=True)
                return 2
            print(f"aborting: {err}", file=sys.stderr, flush=True)
            try:
                p.abort_transaction(60)
            except KafkaException as e2:
                print(f"abort failed: {e2}", file=sys.stderr, flush=True)
                return 2
            _rewind(c)


def _rewind(c: Consumer) -> None:
    """Back to the group's committed offsets: the aborted records are copied again."""
    parts = c.assignment()
    for _ in range(60):
        try:
            committed = c.committed(parts, 10)
            break
        except KafkaException:
            time.sleep(0.5)
    else:
        raise SystemExit(2)
    for tp in committed:
        c.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))


if __name__ == "__main__":
    sys.exit(main())
