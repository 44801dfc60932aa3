"""Share groups (KIP-932, "queues for Kafka"): the share partition (the in-flight
records of one topic partition for one share group, their states, delivery counts and
acquisition locks), the share sessions of ShareFetch/ShareAcknowledge, and the share
coordinator that keeps their state durable on ``__share_group_state``.

The share partition and the share coordinator meet only through ``persister.py``.
"""

