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
    if args.protocol == "consumer":
        # KIP-848: the broker assigns, incrementally; timeouts are the broker's
        conf["group.protocol"] = "consumer"
        for k in ("session.timeout.ms", "heartbeat.interval.ms"):
            del conf[k]
        if args.remote_assignor:
            conf["group.remote.assignor"] = args.remote_assignor
        cooperative = True
    else:
        conf["partition.assignment.strategy"] = "cooperative-sticky" if cooperative \
            else "range"
    consumer = Consumer(conf)

    # the assignment is tracked here rather than read back with c.assignment(): during
    # close() librdkafka calls on_revoke while the handle is being destroyed, and
    # c.assignment() then raises _DESTROY ("Failed to get assignment")
    owned: set[int] = set()

    def on_assign(c: Any, parts: Any) -> None:
        if cooperative:
            c.incremental_assign(parts)
            owned.update(tp.partition for tp in parts)
        else:
            c.assign(parts)
            owned.clear()
            owned.update(tp.partition for tp in parts)
        out.assignment(owned)

    def on_revoke(c: Any, parts: Any) -> None:
        if cooperative:
            c.incremental_unassign(parts)
            owned.difference_update(tp.partition for tp in parts)
        else:
            c.unassign()
            owned.clear()
        out.assignment(owned)

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
