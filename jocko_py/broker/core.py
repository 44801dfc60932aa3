"""The broker's services, shared by every handler: config, metadata, partitions.

`Broker` is built once by `app.py` and handed to each request through its
`RequestContext`. It holds no socket code. Metadata comes from the quorum
(`cluster.quorum`: a one-voter local log on a single node, raft in a cluster);
the metadata publisher applies each committed delta to the replica manager.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from jocko_py.broker.broker_configs import BrokerConfigView
from jocko_py.broker.config import BrokerConfig
from jocko_py.broker.controller_channel import ControllerChannel
from jocko_py.broker.fetch_session import FetchSessionCache
from jocko_py.broker.metadata_cache import MetadataCache
from jocko_py.broker.metadata_publisher import MetadataPublisher
from jocko_py.broker.replica_manager import ReplicaManager
from jocko_py.broker.security.session import SecurityManager
from jocko_py.broker.stats import BrokerStats
from jocko_py.cluster.metadata import CONFIG_RESOURCE_BROKER, MetadataImage
from jocko_py.cluster.quorum import MetadataQuorum
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.fd_cache import HANDLES

log = logging.getLogger("jocko_py.broker")


class Broker:
    def __init__(self, config: BrokerConfig, cluster_id: str, quorum: MetadataQuorum) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self._cluster_id = cluster_id
        self.quorum = quorum
        self.log_config = LogConfig.from_broker_properties(config.properties)
        HANDLES.configure(config.int("jocko.log.max.open.files"))
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.topics = ControllerChannel(quorum, config.broker_id)
        # what the broker counts as it serves (requests, bytes, ...): see broker/metrics.py
        self.stats = BrokerStats()
        self.replicas = ReplicaManager(
            config.data_dir, self.log_config, config.broker_id, lambda: quorum.image,
            config.get, self.stats, config.extra_log_dirs,
        )
        self.replicas.alter_partition = self.topics.alter_partition
        # in a cluster a failed data dir takes this broker out (others lead instead)
        self.replicas.logs.offline_on_failure = bool(config.voters)
        self.replicas.incarnation = str(quorum.incarnation)
        # encoded Metadata topic entries, kept up to date by the publisher
        self.metadata_cache = MetadataCache()
        # set once the metadata publisher is live (caught up): requests wait for it
        self.serving = asyncio.Event()
        self.publisher = MetadataPublisher(self)
        quorum.listeners.append(self.publisher.on_delta)
        # incremental fetch sessions (KIP-227) of the clients fetching from this broker
        self.fetch_sessions = FetchSessionCache(
            config.int("max.incremental.fetch.session.cache.slots"))
        # TLS contexts, SASL settings, principals, ACLs (raises ConfigError)
        self.security = SecurityManager(config, lambda: quorum.image)
        self.replicas.channel_security = self.topics.channel_security = \
            self.security.broker_channel_security()
        # extension point for services added by later layers (group coordinator, ...)
        self.services: dict[str, Any] = {}

    @property
    def cluster_id(self) -> str:
        """The stored cluster id; in a cluster started unformatted, the one learned from
        the metadata quorum ("" until then)."""
        return self.quorum.cluster_id or self._cluster_id

    def start(self) -> None:
        """Load the logs (before any metadata delta is published) and the services."""
        self.replicas.start(self.quorum.image)
        from jocko_py.broker.group import install as install_groups
        from jocko_py.broker.txn import install as install_transactions

        install_groups(self)
        install_transactions(self)
        from jocko_py.broker.share.coordinator import install as install_share_coordinator

        install_share_coordinator(self)

    def config_view(self, image: MetadataImage | None = None) -> BrokerConfigView:
        """This broker's configuration with the dynamic layers from the metadata log."""
        img = image or self.quorum.image
        return BrokerConfigView(self.config, img.configs(CONFIG_RESOURCE_BROKER, ""),
                                img.broker_configs(self.broker_id))

    def apply_dynamic_configs(self, image: MetadataImage) -> None:
        """Dynamic broker configs changed: new log defaults for every log that does not
        override them, at once (Kafka's DynamicLogConfig.reconfigure)."""
        props = dict(self.config.properties)
        props.update(self.config_view(image).effective())
        try:
            cfg = LogConfig.from_broker_properties(props)
        except ValueError as e:  # validated before it was written; never stop applying
            log.error("[broker=%d] dynamic log config not applied: %s", self.broker_id, e)
            return
        if cfg == self.log_config:
            return
        log.info("[broker=%d] dynamic broker config: log defaults now %s", self.broker_id,
                 cfg.changed_properties(self.log_config))
        self.log_config = cfg
        self.replicas.set_base_config(cfg)

    @property
    def controller_id(self) -> int:
        return self.quorum.controller_id()

    def registered_broker_epoch(self) -> int:
        """The broker epoch this process is registered under in the metadata it applied,
        or -1 (not registered yet, or the registration is another process's)."""
        b = self.quorum.image.brokers.get(self.broker_id)
        if b is None or b.incarnation_id != self.quorum.incarnation:
            return -1
        return b.broker_epoch

    def close(self) -> None:
        # the clean-shutdown markers name the epoch this process was registered under:
        # its next start registers with it as its previous broker epoch (KIP-966)
        self.replicas.close(self.registered_broker_epoch())
