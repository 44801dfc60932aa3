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
"""

from __future__ import annotations

import bisect
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.metadata_cache import error_entry, topic_entry
from jocko_py.protocol.errors import ErrorCode

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
    out: list[dict[str, Any]] = []
    next_cursor: dict[str, Any] | None = None
    budget = limit
    for name in names:
        t = image.topics.get(name)
        if t is None:
            out.append(error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
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
        parts = entry["partitions"]
        for p in parts:
            img = t.partitions.get(p["partition_index"])
            p["eligible_leader_replicas"] = list(img.elr) if img is not None else []
            p["last_known_elr"] = list(img.last_known_elr) if img is not None else []
        entry["partitions"] = parts
        out.append(entry)
        if next_cursor is not None:
            break
    return {"throttle_time_ms": 0, "topics": out, "next_cursor": next_cursor}
