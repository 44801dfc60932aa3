"""Composition root: build the broker from its config and run it until a signal.

Background work runs beside the server under one TaskGroup: batched log
flushing (one fsync pass per interval across all requests, honouring
`flush.messages`/`flush.ms`), retention, and recovery-point checkpoints.
SIGTERM/SIGINT stop the server, flush and close every log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from jocko_py.broker import handlers
from jocko_py.broker.config import (
    SECURITY_PROTOCOL_IDS,
    BrokerConfig,
    Listener,
)
from jocko_py.broker.core import Broker
from jocko_py.broker.features import BOOTSTRAP
from jocko_py.broker.server import Server
from jocko_py.cluster.controller import BrokerInfo, ControllerConfig
from jocko_py.cluster.metadata import BrokerEndpoint, format_endpoints
from jocko_py.cluster.quorum import LocalQuorum, MetadataQuorum, RaftQuorum
from jocko_py.commitlog.dirs import lock_dirs, random_uuid, store_meta, verify_meta
from jocko_py.commitlog.manager import previous_broker_epoch
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.metrics import MetricsServer
    from jocko_py.console import Console

log = logging.getLogger("jocko_py.app")


def _listeners_text(listeners: tuple[Listener, ...]) -> str:
    """`host:port` for the lone PLAINTEXT listener (as before listeners had names),
    else `NAME://host:port,...`."""
    if len(listeners) == 1 and listeners[0].name == "PLAINTEXT":
        return f"{listeners[0].host}:{listeners[0].port}"
    return ",".join(map(str, listeners))


def advertised_endpoints(config: BrokerConfig) -> tuple[BrokerEndpoint, ...]:
    """What this broker registers: every listener's advertised address (the
    inter-broker listener first)."""
    return tuple(BrokerEndpoint(x.name, x.host, x.port, SECURITY_PROTOCOL_IDS[x.security_protocol])
                 for x in config.advertised_listeners) or (
        BrokerEndpoint("PLAINTEXT", config.advertised_host, config.advertised_port),)


def log_dirs(config: BrokerConfig) -> list[Path]:
    """Every log directory (`log.dirs`); the first also holds the metadata log."""
    return [config.data_dir, *config.extra_log_dirs]


def load_cluster_id(config: BrokerConfig) -> str:
    """The cluster id from the directories' meta.properties, checked against each other
    and against `cluster.id` / `node.id` (DirectoryError if they disagree) and stored in
    every directory that lacks it. Unformatted, a single node makes one (as `storage
    format` would); a cluster member gets "" and learns it from the metadata quorum."""
    dirs = log_dirs(config)
    cluster_id, _ = verify_meta(dirs, config.broker_id, config.cluster_id)
    if not cluster_id and not config.voters:
        cluster_id = random_uuid()
    if cluster_id:
        store_meta(dirs, config.broker_id, cluster_id)
    return cluster_id


def _store_learned_cluster_id(config: BrokerConfig, cluster_id: str) -> None:
    written = store_meta(log_dirs(config), config.broker_id, cluster_id)
    log.info("cluster id %s learned from the metadata quorum, stored in %s", cluster_id,
             ", ".join(f"{d}/meta.properties" for d in written) or "(already stored)")


def build_quorum(config: BrokerConfig, cluster_id: str = "",
                 previous_broker_epoch: int = -1) -> MetadataQuorum:
    """A one-voter local quorum, or raft + gossip when `controller.quorum.voters` is set;
    this broker registers with ``previous_broker_epoch`` (from its clean-shutdown
    markers, -1 after an unclean stop)."""
    cc = ControllerConfig(
        default_replication_factor=max(1, config.int("default.replication.factor")),
        default_partitions=max(1, config.num_partitions),
        min_insync_replicas=max(1, config.int("min.insync.replicas")),
        bootstrap_features=tuple(sorted(BOOTSTRAP.items())),
    )
    if not config.voters:
        me = BrokerInfo(config.broker_id, config.advertised_host, config.advertised_port,
                        config.rack, uuid.uuid4(), advertised_endpoints(config),
                        previous_broker_epoch)
        return LocalQuorum(config.data_dir, config.broker_id, me, cc)
    from jocko_py.broker.security.cluster_links import cluster_link_security
    from jocko_py.cluster.gossip.core import GossipConfig
    from jocko_py.cluster.node import ClusterNode
    from jocko_py.cluster.raft.core import RaftConfig

    probe = max(50, config.int("jocko.gossip.probe.interval.ms"))
    gossip_cfg = GossipConfig(probe_interval_ms=probe, probe_timeout_ms=probe * 2 // 5,
                              sync_interval_ms=probe * 10, reconnect_interval_ms=probe * 3)
    election = config.int("controller.quorum.election.timeout.ms")
    fetch_timeout = config.int("controller.quorum.fetch.timeout.ms")
    node = ClusterNode(
        node_id=config.broker_id,
        data_dir=config.data_dir,
        raft_listen=config.raft_addr,
        voters=config.voters,
        gossip_listen=config.gossip_addr,
        seeds=list(config.join),
        advertised=format_endpoints(advertised_endpoints(config)),
        rack=config.rack,
        raft_config=RaftConfig(cluster_id=cluster_id,
                               election_timeout_ms=election, fetch_timeout_ms=fetch_timeout,
                               fetch_max_wait_ms=min(500, fetch_timeout // 4),
                               request_timeout_ms=min(2000, max(100, election // 3))),
        gossip_config=gossip_cfg,
        on_cluster_id=lambda cid: _store_learned_cluster_id(config, cid),
        security=cluster_link_security(config),
        previous_broker_epoch=previous_broker_epoch,
    )
    node.heartbeats_required = True
    node.session_timeout_ms = config.int("broker.session.timeout.ms")
    if config.bool("auto.leader.rebalance.enable"):
        node.leader_rebalance_interval_ms = max(
            100, int(float(config.get("leader.imbalance.check.interval.seconds")) * 1000))
    return RaftQuorum(node, config.broker_id, cc)


async def heartbeat_loop(broker: Broker, quorum: RaftQuorum, interval_s: float) -> None:
    """BrokerHeartbeat to the active controller: liveness, and the metadata offset this
    broker has applied (it is unfenced once caught up)."""
    node = quorum.node
    me = broker.broker_id
    fenced: bool | None = None
    while True:
        # while fenced (starting up, catching up) heartbeat often: the controller
        # unfences this broker at the first heartbeat that shows it caught up
        await asyncio.sleep(interval_s if fenced is False else min(interval_s, 0.1))
        b = quorum.image.brokers.get(me)
        offset = node.machine.applied
        try:
            if quorum.is_active_controller():
                _, is_fenced = node.record_heartbeat(me, offset)
            else:
                resp = await broker.controller_channel.forward(63, 1, {
                    "broker_id": me, "broker_epoch": b.broker_epoch if b else -1,
                    "current_metadata_offset": offset, "want_fence": False,
                    "want_shut_down": False}, ok=lambda r: r.error_code != ErrorCode.NOT_CONTROLLER)
                if resp.error_code:
                    continue
                is_fenced = resp.is_fenced
        except Exception as e:  # the controller is away: try again next interval
            log.debug("heartbeat failed: %s", e)
            continue
        if is_fenced != fenced:
            fenced = is_fenced
            log.info("broker %d is %s", me, "fenced" if is_fenced else "unfenced")


async def controlled_shutdown(broker: Broker, timeout_s: float) -> None:
    """Ask the cluster to move this broker's leaderships away, and wait (bounded)."""
    quorum = broker.quorum
    if not broker.config.voters or not broker.config.bool("controlled.shutdown.enable"):
        return
    me = broker.broker_id
    t0 = time.monotonic()
    await quorum.leave()

    def led_elsewhere() -> bool:
        return not any(
            p.leader == me and len(p.isr) > 1
            for t in quorum.image.topics.values() for p in t.partitions.values())

    # Bounded; and pointless once no controller is left (the whole cluster stopping).
    deadline = t0 + timeout_s
    no_controller_since: float | None = None
    outcome = "not all moved (timed out)"
    node = getattr(quorum, "node", None)
    while time.monotonic() < deadline:
        if led_elsewhere():
            outcome = "moved"
            break
        if node is not None and node.fatal is not None:
            outcome = "not moved: this broker's cluster node failed (the controller fences it)"
            break
        now = time.monotonic()
        if quorum.controller_id() < 0:
            no_controller_since = no_controller_since or now
            if now - no_controller_since > 1.0:
                outcome = "not moved: no other controller to move them"
                break
        else:
            no_controller_since = None
        await asyncio.sleep(0.05)
    log.info("controlled shutdown: leaderships %s in %.2fs", outcome, time.monotonic() - t0)


def log_effective_config(config: BrokerConfig) -> None:
    """One start-up line with every property whose value differs from Kafka's default."""
    from jocko_py.broker.config import DEFAULTS

    hidden = ("password", "secret", "sasl.jaas")
    changed = {k: ("[hidden]" if any(h in k for h in hidden) else v)
               for k, v in sorted(config.properties.items())
               if v != DEFAULTS.get(k) and not (k == "broker.id" and v == "0")}
    log.info("effective non-default configuration: %s",
             ", ".join(f"{k}={v}" for k, v in changed.items()) or "(none)",
             extra={"config": changed})


async def start_metrics(broker: Broker) -> MetricsServer | None:
    """The Prometheus endpoint, when `jocko.metrics.addr` (`--metrics-addr`) is set."""
    addr = broker.config.get("jocko.metrics.addr")
    if not addr:
        return None
    from jocko_py.broker.config import split_addr
    from jocko_py.broker.metrics import MetricsServer

    host, port = split_addr(addr, 9308)
    m = MetricsServer(broker, host or "0.0.0.0", port)
    await m.start()
    return m


async def start_console(broker: Broker) -> Console | None:
    """The web console, when `jocko.console.addr` (`--console-addr`) is set."""
    addr = broker.config.get("jocko.console.addr")
    if not addr:
        return None
    from jocko_py.broker.config import split_addr
    from jocko_py.console import Console

    host, port = split_addr(addr, 9080)
    c = Console(broker, host or "0.0.0.0", port)  # read-only: console_read_only(config)
    await c.start()
    return c


async def run_broker(config: BrokerConfig, stop: asyncio.Event | None = None,
                     on_ready: Callable[[Broker], None] | None = None) -> int:
    """Run until ``stop`` is set (by default: until SIGTERM/SIGINT, whose handlers can
    only be installed from the main thread; a broker embedded in another thread, as the
    pytest plugin runs it, is stopped through ``stop``). ``on_ready`` is called once the
    broker listens and serves.

    Every log directory's `.lock` is taken first, before anything is read from them, and
    held until the broker has stopped (DirectoryInUseError if another process, or another
    broker of this one, holds one)."""
    locks = lock_dirs(log_dirs(config))
    try:
        return await _run_broker(config, stop, on_ready)
    finally:
        locks.release()


async def _run_broker(config: BrokerConfig, stop: asyncio.Event | None,
                      on_ready: Callable[[Broker], None] | None) -> int:
    handlers.load_all()
    t0 = time.monotonic()
    if stop is None:
        # installed first: a SIGTERM during start-up stops the broker as soon as it runs
        stop = asyncio.Event()
        if threading.current_thread() is threading.main_thread():
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
    cluster_id = load_cluster_id(config)
    # read before the logs load, which deletes the clean-shutdown markers
    quorum = build_quorum(config, cluster_id, previous_broker_epoch(log_dirs(config)))
    broker = Broker(config, cluster_id, quorum)
    broker.start()
    server = Server(broker)
    metrics = console = None
    try:
        metrics = await start_metrics(broker)  # first: scrapable once the Kafka port is open
        console = await start_console(broker)
        await server.start()
    except BaseException:  # the port is taken: release what was opened (embedded brokers
        if metrics is not None:  # retry in the same process)
            await metrics.stop()
        if console is not None:
            await console.stop()
        with contextlib.suppress(Exception):
            await quorum.close()
        broker.close()
        raise
    await quorum.start()
    log.info(
        "jocko-py broker %d listening on %s, advertised as %s, data in %s, "
        "cluster %s, %s (started in %.2fs)",
        config.broker_id, _listeners_text(config.listeners),
        _listeners_text(config.advertised_listeners), config.data_dir,
        broker.cluster_id or "not known yet (learned from the quorum)",
        f"raft {config.raft_addr} voters {config.voters} gossip {config.gossip_addr}"
        if config.voters else "single node", time.monotonic() - t0,
    )
    log_effective_config(config)
    if on_ready is not None:
        on_ready(broker)
    # A failed disk operation takes the (only) log dir offline: as Kafka does when all
    # its log dirs failed, the broker stops (after a bounded controlled shutdown, so
    # leadership moves at once instead of after the session timeout) and exits 1.
    failed: list[str] = []

    def on_log_dir_failure(reason: str) -> None:
        failed.append(f"all log dirs in {config.data_dir} have failed: {reason}")
        stop.set()
    broker.replicas.logs.failure_listeners.append(on_log_dir_failure)
    if broker.replicas.logs.offline_reason is not None:
        on_log_dir_failure(broker.replicas.logs.offline_reason)
    jobs = broker.background_jobs()
    if isinstance(quorum, RaftQuorum):  # the broker's lease with the controller
        raft, heartbeat_s = quorum, max(0.02, config.int("broker.heartbeat.interval.ms") / 1000)
        jobs.append(("heartbeat", lambda: heartbeat_loop(broker, raft, heartbeat_s)))
    try:
        async with asyncio.TaskGroup() as tg:
            bg = [tg.create_task(job(), name=name) for name, job in jobs]
            fatal = None
            if isinstance(quorum, RaftQuorum):
                fatal = tg.create_task(quorum.node.wait_fatal())
            stop_wait = tg.create_task(stop.wait())
            await asyncio.wait([t for t in (fatal, stop_wait) if t is not None],
                               return_when=asyncio.FIRST_COMPLETED)
            log.info("shutting down")
            if fatal is not None and fatal.done():
                from jocko_py.cluster.node import ClusterIdMismatchError

                exc = fatal.result()
                if isinstance(exc, ClusterIdMismatchError):  # logged by raft: said once more
                    failed.append(str(exc))  # as the reason the broker stopped
                else:
                    failed.append(f"the cluster node failed: {exc!r}")
                    log.critical("%s", failed[-1])
            else:
                if failed:
                    log.critical("shutting down broker because %s", failed[0])
                await controlled_shutdown(
                    broker, min(30.0, config.int("controlled.shutdown.timeout.ms") / 1000))
            for t in bg + [t for t in (fatal, stop_wait) if t is not None]:
                t.cancel()
    finally:
        if metrics is not None:
            await metrics.stop()
        if console is not None:
            await console.stop()
        await broker.share_rpc.close()  # the share persister's inter-broker channels
        await server.stop()
        await broker.transactions.close()  # marker tasks and their inter-broker channels
        await broker.replicas.shutdown_fetchers()
        await broker.controller_channel.close()
        await quorum.close()
        broker.close()
        if failed:
            log.critical("broker %d stopped: %s", config.broker_id, failed[0])
        else:
            log.info("broker %d stopped cleanly", config.broker_id)
    return 1 if failed else 0


def run(config: BrokerConfig) -> int:
    """Run the broker until SIGTERM/SIGINT (exit status 0) or until its log dir or its
    cluster node fails (exit status 1, as Kafka halts)."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    return asyncio.run(run_broker(config))
