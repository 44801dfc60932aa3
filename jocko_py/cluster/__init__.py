"""Cluster layer: metadata image and log, raft metadata quorum, gossip membership, controller.

- ``metadata``: record types, their encoding and the ``MetadataImage`` state machine.
- ``local_log``: single-node durable metadata log.
- ``raft``: sans-IO raft core (KRaft-shaped messages) and its asyncio TCP adapter.
- ``gossip``: sans-IO SWIM membership and its asyncio UDP adapter.
- ``controller``: the active controller turning membership and admin requests into records.
- ``node``: ``ClusterNode``, raft + gossip + controller around one image (and a standalone
  ``python -m jocko_py.cluster.node`` with a JSON control port, used by loopback tests).
"""
