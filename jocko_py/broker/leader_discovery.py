"""KIP-951 leader discovery: a NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH) answer in
Produce (v10+) and Fetch (v16+) names the partition's current leader and epoch, and the
response lists that leader's endpoint, so the client can go there at once instead of
refreshing its metadata first. Taken from this broker's metadata image: a leader that
is not known (or fenced) is reported as -1 with no endpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jocko_py.cluster.metadata import MetadataImage
from jocko_py.protocol.errors import ErrorCode

LEADER_HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def current_leader(image: MetadataImage, topic: str, partition: int) -> dict[str, int]:
    p = image.partition(topic, partition)
    if p is None:
        return {"leader_id": -1, "leader_epoch": -1}
    b = image.brokers.get(p.leader)
    leader = p.leader if b is not None and not b.fenced else -1
    return {"leader_id": leader, "leader_epoch": p.leader_epoch}


def node_endpoints(image: MetadataImage, leaders: Iterable[int]) -> list[dict[str, Any]]:
    out = []
    for bid in sorted(set(leaders)):
        b = image.brokers.get(bid)
        if b is not None and not b.fenced:
            out.append({"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack})
    return out
