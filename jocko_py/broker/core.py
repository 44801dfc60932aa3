"""The broker's services, shared by every handler: config, metadata, partitions.

`Broker` is built once by `app.py` and handed to each request through its
`RequestContext`. It holds no socket code. Metadata comes from the quorum
(`cluster.quorum`: a one-voter local log on a single node, raft in a cluster);
the metadata publisher applies each committed delta to the replica manager.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from jocko_py.broker.broker_configs import BrokerConfigView
from jocko_py.broker.config import BrokerConfig
from jocko_py.broker.controller_channel import ControllerChannel
from jocko_py.broker.fetch_session import FetchSessionCache
from jocko_py.broker.group.coordinator import GroupCoordinator
from jocko_py.broker.group.group_configs import share_group_config
from jocko_py.broker.interfaces import SharePartitionsHook
from jocko_py.broker.metadata_cache import MetadataCache
from jocko_py.broker.metadata_publisher import MetadataPublisher
from jocko_py.broker.replica_manager import ReplicaManager
from jocko_py.broker.security.session import SecurityManager
from jocko_py.broker.share.coordinator import ShareCoordinator
from jocko_py.broker.share.manager import SharePartitionManager
from jocko_py.broker.share.persister import SharePersister
from jocko_py.broker.share.rpc_persister import make_persister
from jocko_py.broker.stats import BrokerStats
from jocko_py.broker.txn.coordinator import TransactionCoordinator
from jocko_py.cluster.metadata import CONFIG_RESOURCE_BROKER, MetadataImage
from jocko_py.cluster.quorum import MetadataQuorum
from jocko_py.commitlog.cleaner import LogCleaner
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.fd_cache import HANDLES

log = logging.getLogger("jocko_py.broker")


async def every(interval_s: float, fn: Callable[[], object], what: str) -> None:
    """Call ``fn`` (awaiting what it returns, if a coroutine) every ``interval_s``; a
    failure is logged and the next round runs."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            r = fn()
            if asyncio.iscoroutine(r):
                await r
        except Exception:
            log.exception("background task %s failed", what)


class Broker:
    def __init__(self, config: BrokerConfig, cluster_id: str, quorum: MetadataQuorum) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self._cluster_id = cluster_id
        self.quorum = quorum
        self.log_config = LogConfig.from_broker_properties(config.properties)
        HANDLES.configure(config.int("jocko.log.max.open.files"))
        config.data_dir.mkdir(parents=True, exist_ok=True)
        # TLS contexts, SASL settings, principals, ACLs (raises ConfigError)
        self.security = SecurityManager(config, lambda: quorum.image)
        # how this broker dials the others (the controller, leaders it follows)
        channel_security = self.security.broker_channel_security()
        self.controller_channel = ControllerChannel(quorum, config.broker_id, channel_security)
        # what the broker counts as it serves (requests, bytes, ...): see broker/metrics.py
        self.stats = BrokerStats()
        self.replicas = ReplicaManager(
            config.data_dir, self.log_config, config.broker_id, lambda: quorum.image,
            config.get, self.stats, config.extra_log_dirs,
            channel_security=channel_security, alter_partition=self.controller_channel.alter_partition,
            incarnation=str(quorum.incarnation),
            # in a cluster a failed data dir takes this broker out (others lead instead)
            offline_on_failure=bool(config.voters),
        )
        # encoded Metadata topic entries, kept up to date by the publisher
        self.metadata_cache = MetadataCache()
        # set once the metadata publisher is live (caught up): requests wait for it
        self.serving = asyncio.Event()
        self.publisher = MetadataPublisher(self)
        quorum.listeners.append(self.publisher.on_delta)
        # incremental fetch sessions (KIP-227) of the clients fetching from this broker
        self.fetch_sessions = FetchSessionCache(
            config.int("max.incremental.fetch.session.cache.slots"))
        # the share coordinator, for `__share_group_state` partitions (KIP-932), and the
        # durable state of share partitions through it: share groups initialize and
        # delete it, the share partitions read and write it (the state RPCs to the
        # coordinator of each key; `share_rpc` is the same persister, to close it)
        self.share_coordinator = ShareCoordinator(self)
        self.replicas.role_listeners.append(self.share_coordinator.on_partition_role)
        self.share_rpc = make_persister(self.share_coordinator, lambda: quorum.image,
                                        channel_security, config.broker_id)
        self.share_persister: SharePersister = self.share_rpc
        # this broker's share partitions (set when they are built)
        self.share_partitions: SharePartitionsHook | None = None
        # the group coordinator: its shards load as this broker is elected leader of
        # `__consumer_offsets` partitions (their timers run on the coordinator runtime)
        self.groups = GroupCoordinator(self)
        self.replicas.role_listeners.append(self.groups.on_partition_role)
        # the transaction coordinator, for `__transaction_state` partitions; it verifies
        # transactional produce (KIP-890 part 1)
        self.transactions = TransactionCoordinator(self)
        self.replicas.role_listeners.append(self.transactions.on_partition_role)
        self.replicas.txn_verifier = self.transactions.verify
        # this broker's share partitions (KIP-932): ShareFetch / ShareAcknowledge
        manager = SharePartitionManager(
            self.replicas, lambda: self.share_persister, config.get,
            lambda overrides: share_group_config(config.get, overrides), config.broker_id)
        manager.group_config = self.groups.group_overrides  # the groups' configs (type 32)
        self.replicas.role_listeners.append(manager.on_partition_role)
        self.share_partitions = manager
        # compaction of the logs with cleanup.policy=compact
        self.cleaner = LogCleaner(self.replicas.logs)

    @property
    def cluster_id(self) -> str:
        """The stored cluster id; in a cluster started unformatted, the one learned from
        the metadata quorum ("" until then)."""
        return self.quorum.cluster_id or self._cluster_id

    def start(self) -> None:
        """Load the logs (before any metadata delta is published) and the services."""
        self.replicas.start(self.quorum.image)
        self.groups.load()

    def background_jobs(self) -> list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]]:
        """Every periodic job of the broker, each (name, loop): `app.py` runs them all
        under one TaskGroup until the broker stops. Flushes (`log.flush.scheduler.
        interval.ms`), retention by time and size and by share of disk (`log.retention.
        check.interval.ms`), recovery-point checkpoints (`log.flush.offset.checkpoint.
        interval.ms`), ISR expiration, certificate reload (with TLS listeners), the log
        cleaner (unless `log.cleaner.enable=false`) and the transaction timer."""
        cfg = self.config
        flush_s = max(0.01, cfg.int("log.flush.scheduler.interval.ms") / 1000)
        retention_s = max(0.1, cfg.int("log.retention.check.interval.ms") / 1000)
        checkpoint_s = max(0.1, cfg.int("log.flush.offset.checkpoint.interval.ms") / 1000)
        logs = self.replicas.logs
        jobs: list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]] = [
            ("flush", lambda: every(flush_s, self.replicas.flush_due, "flush")),
            ("retention", lambda: every(
                retention_s, lambda: logs.apply_retention_all(int(time.time() * 1000)),
                "retention")),
            ("retention by share of disk", lambda: every(
                retention_s, self.disk_retention, "retention by share of disk")),
            ("checkpoint", lambda: every(
                checkpoint_s, logs.checkpoint_recovery_points, "checkpoint")),
            ("ISR expiration", self.replicas.isr_expiration_loop),
        ]
        if self.security.tls:
            reload_s = max(0.05, cfg.int("jocko.ssl.reload.check.interval.ms") / 1000)
            jobs.append(("certificate reload", lambda: every(
                reload_s, self.security.check_certificates, "certificate reload")))
        if cfg.get("log.cleaner.enable").lower() != "false":
            jobs.append(("log cleaner", self._log_cleaner))
        return jobs

    def disk_retention(self) -> int:
        """Retention by share of disk (`jocko.log.retention.disk.percent`), protecting the
        offsets committed by the groups this broker coordinates when asked to."""
        percent = self.config.int("jocko.log.retention.disk.percent")
        if percent < 0:
            return 0
        committed: dict[tuple[str, int], int] | None = None
        if self.config.bool("jocko.log.retention.disk.protect.committed.offsets"):
            committed = {}
            for g in self.groups.groups.values():
                for tp, om in g.offsets.items():
                    committed[tp] = min(committed.get(tp, om.offset), om.offset)
        return self.replicas.apply_disk_retention(percent, committed)

    async def _log_cleaner(self) -> None:
        backoff_raw = self.config.get("log.cleaner.backoff.ms")
        backoff_s = max(0.05, (int(backoff_raw) if backoff_raw else 15000) / 1000)
        while True:
            await asyncio.sleep(backoff_s)
            for tp in self.cleaner.compacted():
                try:
                    self.cleaner.clean_all(only=[tp])
                except Exception:
                    log.exception("log cleaner failed on %s-%d", *tp)
                await asyncio.sleep(0)  # let requests in between logs

    def config_view(self, image: MetadataImage | None = None) -> BrokerConfigView:
        """This broker's configuration with the dynamic layers from the metadata log."""
        img = image or self.image
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
    def image(self) -> MetadataImage:
        """The metadata image this broker has applied (the one way to read it)."""
        return self.quorum.image

    @property
    def controller_id(self) -> int:
        return self.quorum.controller_id()

    def registered_broker_epoch(self) -> int:
        """The broker epoch this process is registered under in the metadata it applied,
        or -1 (not registered yet, or the registration is another process's)."""
        b = self.image.brokers.get(self.broker_id)
        if b is None or b.incarnation_id != self.quorum.incarnation:
            return -1
        return b.broker_epoch

    def close(self) -> None:
        # the clean-shutdown markers name the epoch this process was registered under:
        # its next start registers with it as its previous broker epoch (KIP-966)
        self.publisher.close()
        self.replicas.close(self.registered_broker_epoch())
