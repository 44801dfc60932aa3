"""Group consumer worker on kafka-python (see common.py for the output format)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from common import Output, StopFlag, parse_args  # noqa: E402
from kafka import KafkaConsumer  # noqa: E402
from kafka.consumer.subscription_state import ConsumerRebalanceListener  # noqa: E402
from kafka.errors import CommitFailedError, KafkaError  # noqa: E402


def main() -> None:
    args = parse_args()
    out = Output(args.out)
    flag = StopFlag()
    kw: dict[str, Any] = {}
    if args.assignor == "cooperative":
        from kafka.coordinator.assignors.cooperative_sticky import (
            CooperativeStickyAssignor,
        )
        kw["partition_assignment_strategy"] = [CooperativeStickyAssignor]
    if args.instance_id:
        kw["group_instance_id"] = args.instance_id
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=500, max_poll_records=50, **kw)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            out.assignment(tp.partition for tp in consumer.assignment())

        def on_partitions_lost(self, lost: Any) -> None:
            pass

    # Load the topic's metadata before the first JoinGroup: without it kafka-python
    # (3.0.12) may assign nothing as group leader ("No partition metadata"), rejoin at
    # once, and then leave the second SyncGroup's assignment unapplied for good (seen
    # against a cluster: generation 2 assigned every partition, the member never fetched).
    consumer.partitions_for_topic(args.topic)
    consumer.subscribe([args.topic], listener=Listener())
    out.line("READY")
    last: set[int] | None = None
    while not flag.stop:
        try:
            batch = consumer.poll(200)
        except KafkaError as e:  # e.g. the broker is restarting; a real app retries too
            out.line(f"E {e!r}")
            time.sleep(0.2)
            continue
        # cooperative rebalances may shrink the assignment without an assigned callback
        now = {tp.partition for tp in consumer.assignment()}
        if last is not None and now != last:
            out.assignment(now)
        last = now
        n = 0
        for tp, recs in batch.items():
            for r in recs:
                out.record(tp.partition, r.offset, r.value)
                n += 1
        if n:
            try:
                consumer.commit()
                out.line("C")
            except (CommitFailedError, KafkaError) as e:
                # e.g. the broker is restarting: the next commit covers these records
                out.line(f"F {e!r}")
    try:
        consumer.commit()
    finally:
        consumer.close()
    out.line("CLOSED")


if __name__ == "__main__":
    main()
