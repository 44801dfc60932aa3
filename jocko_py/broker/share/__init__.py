"""Share groups (KIP-932, "queues for Kafka"): the share partition (the in-flight
records of one topic partition for one share group, their states, delivery counts and
acquisition locks), the share sessions of ShareFetch/ShareAcknowledge, and the share
coordinator that keeps their state durable on ``__share_group_state``.

The share partition and the share coordinator meet only through ``persister.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker
    from jocko_py.broker.share.manager import SharePartitionManager


def share_partitions(broker: Broker) -> SharePartitionManager:
    from jocko_py.broker.share.manager import SharePartitionManager

    m = broker.services["share_partitions"]
    assert isinstance(m, SharePartitionManager)
    return m


def install(broker: Broker) -> SharePartitionManager:
    """Build the share partition manager of this broker (`broker.services["share_partitions"]`)
    and register it for leadership changes."""
    from jocko_py.broker.share.manager import SharePartitionManager
    from jocko_py.broker.share.partition import SharePartitionConfig
    from jocko_py.broker.share.persister import InMemoryPersister, SharePersister

    def persister() -> SharePersister:
        # THE persister of this broker, shared with the group coordinator (which
        # initializes the state of assigned partitions): whoever needs it first builds
        # it. The in-memory one keeps share state only while this process runs (one
        # broker); the share coordinator's RPC persister replaces it here.
        p = broker.services.get("share_persister")
        if p is None:
            p = broker.services["share_persister"] = InMemoryPersister()
        out: SharePersister = p
        return out

    m = SharePartitionManager(broker.replicas, persister, broker.config.get, broker.broker_id)
    share_groups = getattr(broker.services.get("groups"), "share", None)
    if share_groups is not None and hasattr(share_groups, "group_config"):
        def config_of(group_id: str) -> tuple[SharePartitionConfig, str]:
            c = share_groups.group_config(group_id)  # the group's configs over the broker's
            return SharePartitionConfig(
                max_in_flight=c.partition_max_record_locks,
                delivery_count_limit=c.delivery_count_limit,
                lock_duration_ms=c.record_lock_duration_ms,
                read_committed=c.isolation_level == "read_committed"), c.auto_offset_reset

        m.config_source = config_of
    broker.replicas.role_listeners.append(m.on_partition_role)
    broker.services["share_partitions"] = m
    return m
