"""Group consumer worker on confluent-kafka / librdkafka (output format: common.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from common import Output, StopFlag, parse_args  # noqa: E402
from confluent_kafka import Consumer, KafkaError, KafkaException  # noqa: E402


def main() -> None:
    args = parse_args()
    out = Output(args.out)
    flag = StopFlag()
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": args.session_timeout_ms, "heartbeat.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 2000,
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    cooperative = args.assignor == "cooperative"
    conf["partition.assignment.strategy"] = "cooperative-sticky" if cooperative else "range"
    consumer = Consumer(conf)

    def on_assign(c: Any, parts: Any) -> None:
        if cooperative:
            c.incremental_assign(parts)
        else:
            c.assign(parts)
        out.assignment(tp.partition for tp in c.assignment())

    def on_revoke(c: Any, parts: Any) -> None:
        if cooperative:
            c.incremental_unassign(parts)
        else:
            c.unassign()
        out.assignment(tp.partition for tp in c.assignment())

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke,
                       on_lost=on_revoke)
    out.line("READY")
    try:
        while not flag.stop:
            msgs = consumer.consume(50, 0.2)
            n = 0
            for m in msgs:
                if m.error():
                    continue
                out.record(m.partition(), m.offset(), m.value())
                n += 1
            if n:
                try:
                    consumer.commit(asynchronous=False)
                    out.line("C")
                except KafkaException as e:
                    err = e.args[0]
                    if err.code() != KafkaError._NO_OFFSET:
                        out.line(f"F {err}")
        try:
            consumer.commit(asynchronous=False)
        except KafkaException:
            pass
    finally:
        consumer.close()
    out.line("CLOSED")


if __name__ == "__main__":
    main()
