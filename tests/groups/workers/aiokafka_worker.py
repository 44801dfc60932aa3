"""Group consumer worker on aiokafka (see common.py for the output format)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener  # noqa: E402
from aiokafka.errors import CommitFailedError, KafkaError  # noqa: E402
from common import Output, StopFlag, parse_args  # noqa: E402


async def main() -> None:
    args = parse_args()
    out = Output(args.out)
    flag = StopFlag()
    kw: dict[str, Any] = {}
    if args.instance_id:
        kw["group_instance_id"] = args.instance_id
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=500, max_poll_records=50, **kw)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        async def on_partitions_assigned(self, assigned: Any) -> None:
            out.assignment(tp.partition for tp in consumer.assignment())

    await consumer.start()
    consumer.subscribe([args.topic], listener=Listener())
    out.line("READY")
    try:
        while not flag.stop:
            batch = await consumer.getmany(timeout_ms=200)
            n = 0
            for tp, recs in batch.items():
                for r in recs:
                    out.record(tp.partition, r.offset, r.value)
                    n += 1
            if n:
                try:
                    await consumer.commit()
                    out.line("C")
                except (CommitFailedError, KafkaError) as e:
                    # e.g. the broker is restarting: the next commit covers these records
                    out.line(f"F {e!r}")
        await consumer.commit()
    finally:
        await consumer.stop()
    out.line("CLOSED")


if __name__ == "__main__":
    asyncio.run(main())
