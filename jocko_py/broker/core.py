"""The broker's services, shared by every handler: config, metadata, partitions.

`Broker` is built once by `app.py` and handed to each request through its
`RequestContext`. It holds no socket code.
"""

from __future__ import annotations

import logging
from typing import Any

from jocko_py.broker.config import BrokerConfig
from jocko_py.broker.replica_manager import ReplicaManager
from jocko_py.broker.topics import TopicManager
from jocko_py.commitlog.config import LogConfig

log = logging.getLogger("jocko_py.broker")


class Broker:
    def __init__(self, config: BrokerConfig, cluster_id: str) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.cluster_id = cluster_id
        self.log_config = LogConfig.from_broker_properties(config.properties)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.topics = TopicManager(
            config.data_dir, config.broker_id, config.advertised_host, config.advertised_port
        )
        self.replicas = ReplicaManager(
            config.data_dir, self.log_config, self.topics, config.broker_id
        )
        # extension point for services added by later layers (group coordinator, ...)
        self.services: dict[str, Any] = {}

    def start(self) -> None:
        self.replicas.start()
        from jocko_py.broker.group import install as install_groups

        install_groups(self)

    @property
    def controller_id(self) -> int:
        return self.broker_id

    def close(self) -> None:
        self.replicas.close()
        self.topics.close()
