"""DescribeTopicPartitions (key 75), version 0: what Kafka 4.x's `kafka-topics --describe`
and AdminClient.describeTopics use instead of Metadata.

The named topics (sorted by name), or every topic when none is named, with per
partition its leader, leader epoch, replicas, ISR and offline replicas, in pages: at
most `ResponsePartitionLimit` partitions (capped by Kafka's
`max.request.partition.size.limit`, 2000) per response, and a `NextCursor` (topic and
partition) where the next page starts, given back as `Cursor`. Unknown or illegal
names get UNKNOWN_TOPIC_OR_PARTITION (no auto-creation, as in Kafka). The eligible
leader replicas and last known ELR (KIP-966) come from the metadata image. No
authorizer: the authorized operations are every topic operation.

A page costs its size, not the cluster's: only its partitions are built, each topic is
encoded on its own (the response's `Topics` go out as `wire.Encoded`) and the handler
yields to the event loop whenever it has worked `metadata_cache.YIELD_S` since the
last yield, so a full page (2,000 partitions, about 13 ms of CPU on this project's
2-core machine) does not hold the loop in one stretch; a single topic's part of a page
is still encoded in one go.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from typing import Any

from jocko_py.broker import metadata_cache
from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.metadata_cache import error_entry, topic_entry
from jocko_py.protocol import messages
from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.wire import Encoded

MAX_PARTITION_LIMIT = 2000  # Kafka's max.request.partition.size.limit default
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


@api(75, 0, 0)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = ctx.broker.image
    live = {b.broker_id for b in image.brokers.values() if not b.fenced}
    limit = max(1, min(req.response_partition_limit, MAX_PARTITION_LIMIT))
    names = sorted({t.name for t in req.topics}) if req.topics else sorted(image.topics)
    cursor = req.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    schema = messages.response_element_schema(75, 0, "topics")  # v0 is the only one
    parts: list[bytes] = []
    errors: dict[int, int] = {}
    count = 0

    def add(entry: dict[str, Any]) -> None:
        nonlocal count
        parts.append(bytes(schema.build(entry)))
        count += 1
        for code in [entry["error_code"], *(p["error_code"] for p in entry["partitions"])]:
            if code:
                errors[int(code)] = errors.get(int(code), 0) + 1

    clock = time.perf_counter
    since = clock()
    next_cursor: dict[str, Any] | None = None
    budget = limit
    # the topics as they are now (each TopicImage is immutable): the page stays
    # consistent across the yields below
    found = [(name, image.topics.get(name)) for name in names]
    for name, t in found:
        if clock() - since > metadata_cache.YIELD_S:
            await asyncio.sleep(0)
            since = clock()
        if t is None:
            add(error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        if budget == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        # only the partitions of this page are built: a page costs its size, not the topic's
        pids = sorted(t.partitions)
        if cursor is not None and name == cursor.topic_name:
            pids = pids[bisect.bisect_left(pids, cursor.partition_index):]
        if len(pids) > budget:
            next_cursor = {"topic_name": name, "partition_index": pids[budget]}
            pids = pids[:budget]
        budget -= len(pids)
        entry = topic_entry(t, live, pids)
        entry["topic_authorized_operations"] = TOPIC_OPERATIONS
        for p in entry["partitions"]:
            img = t.partitions.get(p["partition_index"])
            p["eligible_leader_replicas"] = list(img.elr) if img is not None else []
            p["last_known_elr"] = list(img.last_known_elr) if img is not None else []
        add(entry)
        if next_cursor is not None:
            break
    return {"throttle_time_ms": 0, "topics": Encoded(count, b"".join(parts), errors),
            "next_cursor": next_cursor}
