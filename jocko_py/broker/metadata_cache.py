"""Metadata response parts kept encoded, so a Metadata request costs what it asks for.

This module owns the encoded topic entries of Metadata responses. Encoding a topic's
partitions through the generic schema is most of a full Metadata request's cost
(13-16 ms at 1,000 partitions, 63-132 ms at 5,000 before this cache, all on the one
event loop), and the same bytes were rebuilt for every request although the topic
had not changed.

What is kept, and what keys it:
- per (response version, topic): the topic entry's bytes up to its
  `topic_authorized_operations` (the "head": error code, name, id, internal flag and
  every partition with leader, epoch, replicas, ISR, offline replicas), for the
  `TopicImage` it was encoded from and the set of live (unfenced) brokers it was
  encoded against (leader and offline replicas depend on it). The image replaces a
  `TopicImage` whenever anything of the topic changes, so an entry is used only while
  `entry.topic is image.topics[name]`: a cached part can never be older than the image.
- per response version: every topic's entry joined (what a full Metadata request with
  nothing hidden and no authorized operations asked for sends), for the image's
  `topics_version` (changes with any topic or partition) and the live set.

The metadata publisher calls `apply_delta` with each committed delta: entries of the
topics it changed or deleted are dropped at once (memory; correctness does not rest on
it, see above); a change of brokers drops everything.

The listener a client came in on decides only the broker list, which is small and
encoded per request. Encoding a missed topic yields the loop every `YIELD_S` (see
`MetadataCache.encode_topics`), so the first request after a restart or a broker being
fenced at 50,000 partitions does not hold the loop for the whole encode.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jocko_py.broker.topic_names import INTERNAL_TOPICS
from jocko_py.cluster.metadata import MetadataDelta, MetadataImage, TopicImage
from jocko_py.protocol import messages
from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.wire import Encoded

METADATA = 3
AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
ZERO = uuid.UUID(int=0)
# longest stretch of encoding between two yields to the event loop
YIELD_S = 0.002
_I32 = struct.Struct(">i")


def topic_entry(t: TopicImage, live: frozenset[int] | set[int],
                partition_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """A topic as Metadata (and DescribeTopicPartitions) answer it, for the given live
    brokers; `partition_ids` (sorted) limits it to those partitions."""
    parts = []
    partitions = t.partitions
    for pid in sorted(partitions) if partition_ids is None else partition_ids:
        p = partitions[pid]
        leader_live = p.leader in live
        parts.append({
            "error_code": ErrorCode.NONE if leader_live else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": pid,
            "leader_id": p.leader if leader_live else -1,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr),
            "offline_replicas": [r for r in p.replicas if r not in live],
        })
    return {
        "error_code": ErrorCode.NONE,
        "name": t.name,
        "topic_id": t.topic_id,
        "is_internal": t.name in INTERNAL_TOPICS,
        "partitions": parts,
        "topic_authorized_operations": AUTHORIZED_OPS_NOT_REQUESTED,
    }


def error_entry(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "topic_authorized_operations": AUTHORIZED_OPS_NOT_REQUESTED}


def _tail(version: int, ops: int) -> bytes:
    """What follows a topic entry's head: its authorized operations (v8+) and its empty
    tagged fields (v9+)."""
    out = _I32.pack(ops) if version >= 8 else b""
    return out + b"\0" if version >= 9 else out


@dataclass(slots=True)
class _Head:
    topic: TopicImage
    live: frozenset[int]
    data: bytes
    errors: dict[int, int]


@dataclass(slots=True)
class _All:
    topics_version: int
    live: frozenset[int]
    encoded: Encoded


class MetadataCache:
    """Encoded Metadata topic entries of one broker (see the module docstring)."""

    def __init__(self) -> None:
        self._heads: dict[tuple[int, str], _Head] = {}
        self._all: dict[int, _All] = {}
        self.hits = 0
        self.misses = 0

    # ---- kept up to date by the metadata publisher

    def apply_delta(self, delta: MetadataDelta) -> None:
        if delta.brokers or delta.snapshot_loaded:
            self.clear()
            return
        names = {ref.topic for ref in delta.partitions.values()}
        names.update(t.name for t in delta.deleted_topics.values())
        if names:
            self._all.clear()
            for key in [k for k in self._heads if k[1] in names]:
                del self._heads[key]

    def clear(self) -> None:
        self._heads.clear()
        self._all.clear()

    # ---- encoding

    def _head(self, version: int, t: TopicImage, live: frozenset[int]) -> _Head:
        key = (version, t.name)
        h = self._heads.get(key)
        if h is not None and h.topic is t and h.live == live:
            self.hits += 1
            return h
        self.misses += 1
        entry = topic_entry(t, live)
        errors: dict[int, int] = {}
        for p in entry["partitions"]:
            if p["error_code"]:
                errors[p["error_code"]] = errors.get(p["error_code"], 0) + 1
        data = bytes(messages.response_element_schema(METADATA, version, "topics").build(entry))
        tail = _tail(version, AUTHORIZED_OPS_NOT_REQUESTED)
        if tail:
            assert data.endswith(tail), "a Metadata topic entry does not end as expected"
            data = data[: -len(tail)]
        h = _Head(t, live, data, errors)
        self._heads[key] = h
        return h

    def encode_error(self, version: int, entry: dict[str, Any]) -> bytes:
        return bytes(messages.response_element_schema(METADATA, version, "topics").build(entry))

    async def encode_topics(
        self, version: int, items: Sequence[TopicImage | dict[str, Any]],
        live: frozenset[int], ops: Callable[[str], int] | None = None,
    ) -> Encoded:
        """The topics array of a Metadata response: `items` in order, each a topic (its
        cached head, encoded if missing) or an error entry (a dict, encoded as is).
        `ops(name)` gives a topic's authorized operations when they were asked for.
        Yields to the loop every `YIELD_S` of work; `items` are immutable images, so
        the answer is consistent with the image as it was when they were taken."""
        parts: list[bytes] = []
        errors: dict[int, int] = {}
        plain_tail = _tail(version, AUTHORIZED_OPS_NOT_REQUESTED)
        clock = time.perf_counter
        since = clock()
        for i, item in enumerate(items):
            if isinstance(item, dict):
                parts.append(self.encode_error(version, item))
                code = int(item["error_code"])
                if code:
                    errors[code] = errors.get(code, 0) + 1
                continue
            misses = self.misses
            h = self._head(version, item, live)
            parts.append(h.data)
            parts.append(plain_tail if ops is None else _tail(version, ops(item.name)))
            for code, n in h.errors.items():
                errors[code] = errors.get(code, 0) + n
            if (self.misses != misses or i & 63 == 63) and clock() - since > YIELD_S:
                await asyncio.sleep(0)
                since = clock()
        return Encoded(len(items), b"".join(parts), errors)

    async def all_topics(self, version: int, image: MetadataImage,
                         live: frozenset[int]) -> Encoded:
        """Every topic, sorted by name, as a full Metadata request with nothing hidden
        and no authorized operations gets them."""
        a = self._all.get(version)
        topics_version = image.topics_version
        if a is not None and a.topics_version == topics_version and a.live == live:
            return a.encoded
        items = [t for _, t in sorted(image.topics.items())]
        encoded = await self.encode_topics(version, items, live)
        self._all[version] = _All(topics_version, live, encoded)
        return encoded
