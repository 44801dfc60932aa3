"""The metadata quorum a broker runs on: one interface, two implementations.

- ``LocalQuorum``: a single node. A one-voter quorum over the local durable metadata
  log (``local_log.py``): a proposal is appended and fsync'd, then applied.
- ``RaftQuorum``: a cluster. ``ClusterNode`` (raft among the controller voters, the
  other brokers following the log as observers; gossip membership; the controller's
  reconcile loop on the raft leader).

Either way the image changes only by applying committed records, and every committed
batch is handed to the listeners as a ``MetadataDelta`` (the broker's metadata
publisher). Controller decisions (``Controller`` methods: pure functions of the image)
are taken under ``lock`` by the active controller only, and proposed; the lock keeps
a decision and its commit together, so two decisions never start from the same image.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.local_log import LocalMetadataLog
from jocko_py.cluster.metadata import MetadataDelta, MetadataImage, MetadataRecord
from jocko_py.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("jocko_py.cluster.quorum")

DeltaListener = Callable[[MetadataImage, MetadataDelta], None]


class NotControllerError(KafkaError):
    """This node is not (or no longer) the active controller (NOT_CONTROLLER)."""

    code = ErrorCode.NOT_CONTROLLER

    def __init__(self, message: str | None = None) -> None:
        super().__init__(type(self).code, message)


class MetadataQuorum:
    """Base: the image, its listeners and the controller."""

    def __init__(self, broker_id: int, controller_config: ControllerConfig) -> None:
        self.broker_id = broker_id
        self.controller = Controller(controller_config)
        self.listeners: list[DeltaListener] = []
        self.lock = asyncio.Lock()
        self.changed = asyncio.Event()

    @property
    def image(self) -> MetadataImage:
        raise NotImplementedError

    @property
    def incarnation(self) -> uuid.UUID:
        """This process's broker incarnation (registered with the broker)."""
        raise NotImplementedError

    @property
    def cluster_id(self) -> str:
        """The cluster id the quorum knows ("" if it has none of its own: a single node's
        comes from its directories)."""
        return ""

    def is_active_controller(self) -> bool:
        raise NotImplementedError

    def controller_id(self) -> int:
        raise NotImplementedError

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def propose(self, records: list[MetadataRecord]) -> None:
        """Commit ``records`` (active controller only; hold ``lock``) and apply them."""
        raise NotImplementedError

    async def leave(self) -> None:
        """Tell the cluster this broker is going away (controlled shutdown)."""

    def publish(self, delta: MetadataDelta) -> None:
        image = self.image
        for fn in self.listeners:
            try:
                fn(image, delta)
            except Exception:
                log.exception("[broker=%d] metadata listener failed", self.broker_id)
        self.changed.set()
        self.changed = asyncio.Event()

    async def wait_for(self, pred: Callable[[MetadataImage], bool], timeout: float) -> bool:
        """Wait (bounded) until ``pred(image)`` holds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not pred(self.image):
            left = deadline - loop.time()
            if left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)
        return True

    def status(self) -> dict[str, Any]:
        return {"mode": "local", "leader": self.controller_id()}

    def caught_up(self) -> bool:
        """Has this node applied the whole committed metadata log it knows of?"""
        return True


class LocalQuorum(MetadataQuorum):
    """Single node: this broker is the only voter and always the active controller."""

    def __init__(self, data_dir: Path, broker_id: int, self_info: BrokerInfo,
                 controller_config: ControllerConfig) -> None:
        super().__init__(broker_id, controller_config)
        self._image = MetadataImage()
        self.self_info = self_info
        self.log = LocalMetadataLog(data_dir / "__cluster_metadata.log")
        self._loaded: list[MetadataRecord] = list(self.log.replay())
        # Replay now so the broker can load its logs against the image; the delta is
        # published by start(), once the broker listens.
        self._pending_delta = self._image.apply_batch(self._loaded)

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def incarnation(self) -> uuid.UUID:
        return self.self_info.incarnation

    def is_active_controller(self) -> bool:
        return True

    def controller_id(self) -> int:
        return self.broker_id

    async def start(self) -> None:
        self.publish(self._pending_delta)
        async with self.lock:
            # the only broker: its restart is not a replica falling behind others
            recs = self.controller.bootstrap_records(self._image) + \
                self.controller.reconcile(self._image, {self.broker_id: self.self_info},
                                          fence_restarted=False)
            if recs:
                await self.propose(recs)

    async def propose(self, records: list[MetadataRecord]) -> None:
        if not records:
            return
        self.log.append(records)
        self.publish(self._image.apply_batch(records))

    async def close(self) -> None:
        self.log.close()


class RaftQuorum(MetadataQuorum):
    """A cluster member: raft (voter or observer) + gossip + controller via ClusterNode."""

    def __init__(self, node: Any, broker_id: int, controller_config: ControllerConfig) -> None:
        super().__init__(broker_id, controller_config)
        from jocko_py.cluster.node import ClusterNode

        assert isinstance(node, ClusterNode)
        self.node = node
        node.controller = self.controller
        node.lock = self.lock
        node.machine.listeners.append(self._on_delta)

    def _on_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        self.publish(delta)

    @property
    def image(self) -> MetadataImage:
        return self.node.machine.image

    @property
    def cluster_id(self) -> str:
        return str(self.node.cluster_id)

    @property
    def incarnation(self) -> uuid.UUID:
        from jocko_py.cluster.gossip.messages import member_incarnation

        core = self.node.gossip_core
        return member_incarnation(core.members[core.name].meta)

    def is_active_controller(self) -> bool:
        return self.node.is_active_controller()

    def controller_id(self) -> int:
        return int(self.node.core.leader_id)

    async def start(self) -> None:
        await self.node.start()

    async def propose(self, records: list[MetadataRecord]) -> None:
        from jocko_py.cluster.raft.core import NotLeaderError

        if not records:
            return
        if not self.is_active_controller():
            raise NotControllerError(f"controller is {self.controller_id()}")
        try:
            await self.node.propose(records)
        except NotLeaderError as e:
            raise NotControllerError(str(e)) from e

    async def leave(self) -> None:
        await self.node.gossip.leave()

    def caught_up(self) -> bool:
        core = self.node.core
        return core.leader_id >= 0 and 0 < core.high_watermark <= self.node.machine.applied

    async def close(self) -> None:
        await self.node.close()

    def status(self) -> dict[str, Any]:
        st = self.node.status()
        st["mode"] = "raft"
        return st

