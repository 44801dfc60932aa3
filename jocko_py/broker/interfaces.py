"""The narrow views of the broker that its components are given.

`Broker` (`broker/core.py`) builds every service and hands each the part of itself
it uses, typed by one of these Protocols: a component names what it needs, never
`Broker`, so it imports nothing above itself (only the composition root, `core.py`
and `app.py`, and the handlers' context, `api.py` with the connection that builds it,
import `Broker`; an import-linter contract keeps it so). `Broker` satisfies each of
them structurally; a unit test may hand in a smaller object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jocko_py.broker.broker_configs import BrokerConfigView
    from jocko_py.broker.config import BrokerConfig
    from jocko_py.broker.controller_channel import ControllerChannel
    from jocko_py.broker.replica_manager import ReplicaManager
    from jocko_py.broker.share.persister import SharePersister
    from jocko_py.cluster.metadata import MetadataImage
    from jocko_py.commitlog.config import LogConfig


class CoordinatorHost(Protocol):
    """What the group and transaction coordinators use: this broker's id and config,
    the metadata image, the channel to the controller (to create their topic, to
    allocate producer ids) and the replicas of their partitions."""

    @property
    def broker_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def controller_channel(self) -> ControllerChannel: ...

    @property
    def replicas(self) -> ReplicaManager: ...


class SharePartitionsHook(Protocol):
    """What the group coordinator tells this broker's share partitions: a share
    member left (its acquired records go back), and where a group's configs are read."""

    group_config: Callable[[str], dict[str, str]] | None

    def member_left(self, group_id: str, member_id: str) -> None: ...


class GroupHost(CoordinatorHost, Protocol):
    """What the group coordinator uses: a coordinator's view, the share state's
    persister (share groups initialize and delete it) and the share partitions."""

    @property
    def share_persister(self) -> SharePersister: ...

    @property
    def share_partitions(self) -> SharePartitionsHook | None: ...


class OffsetsTopic(Protocol):
    """`__consumer_offsets` as the transaction coordinator sees it."""

    def topic_exists(self) -> bool: ...

    def partition_for(self, group_id: str) -> int: ...


class TxnOffsets(Protocol):
    """What the transaction coordinator uses of the group coordinator: where a group's
    offsets go, and the end of a transaction's offset commits (its marker written)."""

    @property
    def store(self) -> OffsetsTopic: ...

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None: ...


class TxnHost(CoordinatorHost, Protocol):
    """What the transaction coordinator uses: a coordinator's view, and the groups."""

    @property
    def groups(self) -> TxnOffsets: ...


class ConfigHost(Protocol):
    """What describing and validating configs reads: the image (topic configs), the
    log defaults and this broker's configuration with its dynamic layers."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def log_config(self) -> LogConfig: ...

    def config_view(self, image: MetadataImage | None = None) -> BrokerConfigView: ...
