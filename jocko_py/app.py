"""Composition root: build the broker from its config and run it until a signal.

Background work runs beside the server under one TaskGroup: batched log
flushing (one fsync pass per interval across all requests, honouring
`flush.messages`/`flush.ms`), retention, and recovery-point checkpoints.
SIGTERM/SIGINT stop the server, flush and close every log.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time

from jocko_py.broker import handlers
from jocko_py.broker.config import BrokerConfig, load_or_create_cluster_id
from jocko_py.broker.core import Broker
from jocko_py.broker.server import Server

log = logging.getLogger("jocko_py.app")


async def _every(interval_s: float, fn: object, what: str) -> None:
    assert callable(fn)
    while True:
        await asyncio.sleep(interval_s)
        try:
            fn()
        except Exception:
            log.exception("background task %s failed", what)


async def run_broker(config: BrokerConfig) -> None:
    handlers.load_all()
    t0 = time.monotonic()
    cluster_id = config.cluster_id or load_or_create_cluster_id(config.data_dir)
    broker = Broker(config, cluster_id)
    broker.start()
    server = Server(broker)
    await server.start()
    log.info(
        "jocko-py broker %d listening on %s:%d, advertised as %s:%d, data in %s, "
        "cluster %s (started in %.2fs)",
        config.broker_id, config.host, config.port, config.advertised_host,
        config.advertised_port, config.data_dir, cluster_id, time.monotonic() - t0,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    flush_s = max(0.01, config.int("log.flush.scheduler.interval.ms") / 1000)
    retention_s = max(0.1, config.int("log.retention.check.interval.ms") / 1000)
    checkpoint_s = max(0.1, config.int("log.flush.offset.checkpoint.interval.ms") / 1000)
    logs = broker.replicas.logs
    try:
        async with asyncio.TaskGroup() as tg:
            bg = [
                tg.create_task(_every(flush_s, broker.replicas.flush_dirty, "flush")),
                tg.create_task(_every(
                    retention_s, lambda: logs.apply_retention_all(int(time.time() * 1000)),
                    "retention")),
                tg.create_task(_every(checkpoint_s, logs.checkpoint_recovery_points, "checkpoint")),
            ]
            for starter in broker.services.get("background", []):
                bg.append(tg.create_task(starter()))
            await stop.wait()
            log.info("shutting down")
            for t in bg:
                t.cancel()
    finally:
        await server.stop()
        broker.close()
        log.info("broker %d stopped cleanly", config.broker_id)


def run(config: BrokerConfig) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(run_broker(config))
