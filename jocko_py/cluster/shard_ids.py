"""Node ids of a sharded broker's shards (jocko_py/shards.py): shard k of node n is node
``n + 1000 * k``, so a host's shards are told apart and listed together by the tools."""

from __future__ import annotations

SHARD_ID_STRIDE = 1000


def shard_node_id(node_id: int, shard: int) -> int:
    """The node id of shard ``shard`` of node ``node_id``."""
    return node_id + SHARD_ID_STRIDE * shard


def host_and_shard(node_id: int) -> tuple[int, int]:
    """(the host's node id, the shard index) of a node id: (1, 1) for 1001."""
    return node_id % SHARD_ID_STRIDE, node_id // SHARD_ID_STRIDE
