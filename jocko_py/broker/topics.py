"""The broker's door to the controller: admin changes, producer ids, ISR changes.

Every metadata change is decided by the active controller (`cluster.controller`,
pure functions of the image) and committed through the metadata quorum; this module
never writes a record itself. On the active controller the decision is taken
locally, under the quorum's lock; anywhere else the request is forwarded to the
active controller's broker over the Kafka protocol (CreateTopics, DeleteTopics,
CreatePartitions, IncrementalAlterConfigs, AllocateProducerIds, AlterPartition),
retried on NOT_CONTROLLER until its timeout, and the caller waits (bounded) until
the local image shows the change, so the next Metadata request on this broker sees
it. A forwarded request that reaches a broker that is no longer the controller gets
NOT_CONTROLLER (it is never forwarded twice).

Topic names are validated here, as Kafka's broker does before asking its controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jocko_py.broker.inter_broker import BrokerChannel, ClientSecurity
from jocko_py.cluster.controller import check_manual_assignments, committed_producer_block
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_TOPIC,
    MetadataImage,
    MetadataRecord,
)
from jocko_py.cluster.quorum import MetadataQuorum, NotControllerError
from jocko_py.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from jocko_py.broker.api import RequestContext
    from jocko_py.broker.partition import IsrChange

log = logging.getLogger("jocko_py.broker.topics")

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
FORWARD_CLIENT_ID = "jocko-py-forward"
CONTROLLER_TIMEOUT_S = 15.0
CONTROLLER_POLL_S = 0.1  # how often an in-flight forward checks the controller is still it
APPLY_TIMEOUT_S = 10.0


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is longer than {MAX_TOPIC_NAME} characters",
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal: it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


def is_forwarded(ctx: RequestContext) -> bool:
    """Was this request forwarded to the controller by another broker? Its client id
    says so, and only a broker of the cluster (JOCKO-CLUSTER) is believed: a client
    claiming that client id is an ordinary client (its mutation quota counts, and its
    request is forwarded like any other)."""
    s = ctx.session
    return ctx.header.client_id == FORWARD_CLIENT_ID and (
        s is None or s.cluster_broker_id is not None)


class TopicManager:
    def __init__(self, quorum: MetadataQuorum, broker_id: int) -> None:
        self.quorum = quorum
        self.broker_id = broker_id
        self._channels: dict[int, BrokerChannel] = {}
        self.channel_security: ClientSecurity | None = None  # set by the Broker
        self._pid_next = 0
        self._pid_limit = 0
        self._pid_lock = asyncio.Lock()

    @property
    def image(self) -> MetadataImage:
        return self.quorum.image

    # ------------------------------------------------------------------ plumbing

    async def _commit(self, decide: Callable[[MetadataImage], tuple[int, list[MetadataRecord]]],
                      ) -> ErrorCode:
        """Decide on the image and commit, as the active controller."""
        async with self.quorum.lock:
            if not self.quorum.is_active_controller():
                raise NotControllerError()
            code, records = decide(self.quorum.image)
            if code == ErrorCode.NONE and records:
                await self.quorum.propose(records)
        return ErrorCode.of(code)

    async def commit(self, decide: Callable[[MetadataImage], tuple[int, list[MetadataRecord]]],
                     ) -> ErrorCode:
        """Commit the records ``decide`` returns, as the active controller (raises
        NotControllerError elsewhere): SCRAM credentials, ACLs."""
        return await self._commit(decide)

    async def _controller_request(self, api_key: int, version: int, body: dict[str, Any],
                                  ok: Callable[[Any], bool] | None = None) -> Any:
        """Send a request to the active controller's broker; retry NOT_CONTROLLER."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTROLLER_TIMEOUT_S
        last: str = "no active controller"
        while loop.time() < deadline:
            cid = self.quorum.controller_id()
            b = self.image.brokers.get(cid) if cid >= 0 else None
            if cid == self.broker_id and self.quorum.is_active_controller():
                raise _Local()
            if b is None:
                await asyncio.sleep(0.1)
                continue
            ch = self._channels.get(cid)
            if ch is None or (ch.host, ch.port) != (b.host, b.port):
                if ch is not None:
                    await ch.close()
                ch = self._channels[cid] = BrokerChannel(b.host, b.port, FORWARD_CLIENT_ID,
                                                         security=self.channel_security)
            try:
                resp = await self._request_while_controller(
                    ch, cid, api_key, version, body, max(0.1, deadline - loop.time()))
            except _ControllerMoved:
                last = f"controller {cid} lost its role while the request was in flight"
                continue
            except (ConnectionError, OSError, TimeoutError) as e:
                last = f"controller {cid} unreachable: {e}"
                await asyncio.sleep(0.1)
                continue
            if ok is not None and not ok(resp):
                last = f"controller {cid} answered NOT_CONTROLLER"
                await asyncio.sleep(0.1)
                continue
            return resp
        raise KafkaError(ErrorCode.NOT_CONTROLLER, last)

    async def _request_while_controller(self, ch: BrokerChannel, cid: int, api_key: int,
                                        version: int, body: dict[str, Any],
                                        timeout: float) -> Any:
        """``ch.request``, abandoned as soon as the quorum names another controller: a
        controller cut off by a partition never answers, and waiting out the whole
        deadline on it would starve heartbeats to its successor (every broker fenced)."""
        req = asyncio.ensure_future(ch.request(api_key, version, body, timeout=timeout))
        while True:
            done, _ = await asyncio.wait({req}, timeout=CONTROLLER_POLL_S)
            if done:
                return req.result()
            if self.quorum.controller_id() != cid:
                req.cancel()
                await ch.close()  # fails the orphaned request; a new channel next time
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await req
                raise _ControllerMoved()

    async def forward(self, api_key: int, version: int, body: dict[str, Any],
                      ok: Callable[[Any], bool] | None = None) -> Any:
        """Send a request to the active controller's broker (read-only requests)."""
        try:
            return await self._controller_request(api_key, version, body, ok)
        except _Local:
            raise KafkaError(ErrorCode.NOT_CONTROLLER,
                             "this broker just became the controller; retry") from None

    async def _wait_applied(self, pred: Callable[[MetadataImage], bool]) -> None:
        await self.quorum.wait_for(pred, APPLY_TIMEOUT_S)

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()

    # ------------------------------------------------------------------ topics

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
        validate_configs: Callable[[dict[str, str]], None] | None = None,
        forwarded: bool = False,
        assignments: list[tuple[int, ...]] | None = None,
    ) -> uuid.UUID:
        """Create a topic (decided here on the active controller, else forwarded to it);
        `assignments` is a manual replica assignment (one replica list per partition,
        num_partitions and replication_factor taken from it)."""
        validate_topic_name(name)
        if name in self.image.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        if replication_factor <= 0:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            )
        configs = dict(configs or {})
        if validate_configs is not None:
            validate_configs(configs)
        live = [b for b in self.image.brokers.values() if not b.fenced]
        if validate_only:
            if assignments:
                self._check_assignments(self.image, assignments, None)
            else:
                self._check_rf(replication_factor, len(live))
            return uuid.UUID(int=0)
        if self.quorum.is_active_controller():
            tid: list[uuid.UUID] = []

            def decide(img: MetadataImage) -> tuple[int, list[MetadataRecord]]:
                if assignments:
                    self._check_assignments(img, assignments, None)
                else:
                    self._check_rf(replication_factor,
                                   sum(not b.fenced for b in img.brokers.values()))
                code, recs = self.quorum.controller.create_topic(
                    img, name, num_partitions, replication_factor, configs,
                    assignments=assignments)
                for r in recs:
                    if hasattr(r, "name") and hasattr(r, "topic_id") and r.name == name:
                        tid.append(r.topic_id)
                return code, recs

            try:
                code = await self._commit(decide)
            except NotControllerError:
                if forwarded:
                    raise KafkaError(ErrorCode.NOT_CONTROLLER, "not the controller") from None
                return await self._forward_create(name, num_partitions, replication_factor,
                                                  configs, assignments)
            if code == ErrorCode.TOPIC_ALREADY_EXISTS:
                raise KafkaError(code, f"Topic '{name}' already exists.")
            if code:
                raise KafkaError(code, None)
            log.info("[broker=%d] created topic %s (%s) with %d partition(s), RF %d, configs %s",
                     self.broker_id, name, tid[0] if tid else "?", num_partitions,
                     replication_factor, configs)
            return tid[0]
        if forwarded:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "not the controller")
        return await self._forward_create(name, num_partitions, replication_factor, configs,
                                          assignments)

    @staticmethod
    def _check_assignments(img: MetadataImage, assignments: list[tuple[int, ...]],
                           rf: int | None) -> None:
        if check_manual_assignments(img, assignments, rf):
            bad = sorted({b for a in assignments for b in a if b not in img.brokers})
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Unknown broker id(s) {bad} in the replica assignment" if bad else
                "Invalid replica assignment: every partition needs the same number of "
                f"distinct replicas{f' ({rf})' if rf is not None else ''}, at least one of "
                "them unfenced")

    @staticmethod
    def _check_rf(rf: int, live: int) -> None:
        if rf > live:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): "
                f"The target replication factor of {rf} cannot be reached "
                f"because only {live} broker(s) are registered.",
            )

    async def _forward_create(self, name: str, n: int, rf: int, configs: dict[str, str],
                              assignments: list[tuple[int, ...]] | None = None) -> uuid.UUID:
        manual = [{"partition_index": i, "broker_ids": list(a)}
                  for i, a in enumerate(assignments or ())]
        body = {"topics": [{"name": name, "num_partitions": -1 if manual else n,
                            "replication_factor": -1 if manual else rf,
                            "assignments": manual,
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": 30000, "validate_only": False}
        try:
            resp = await self._controller_request(
                19, 7, body, ok=lambda r: r.topics[0].error_code != ErrorCode.NOT_CONTROLLER)
        except _Local:
            return await self.create_topic(name, n, rf, configs, assignments=assignments)
        t = resp.topics[0]
        if t.error_code:
            raise KafkaError(ErrorCode.of(t.error_code), t.error_message)
        await self._wait_applied(lambda img: name in img.topics)
        return t.topic_id  # type: ignore[no-any-return]

    async def delete_topic(self, name: str, *, forwarded: bool = False) -> uuid.UUID:
        t = self.image.topics.get(name)
        if t is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        tid = t.topic_id
        try:
            code = await self._commit(lambda img: self.quorum.controller.delete_topic(img, name))
        except NotControllerError:
            if forwarded:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "not the controller") from None
            try:
                resp = await self._controller_request(
                    20, 6, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                            "timeout_ms": 30000},
                    ok=lambda r: r.responses[0].error_code != ErrorCode.NOT_CONTROLLER)
            except _Local:
                return await self.delete_topic(name)
            code = ErrorCode.of(resp.responses[0].error_code)
            if code == ErrorCode.NONE:
                await self._wait_applied(lambda img: img.topic_by_id(tid) is None)
        if code:
            raise KafkaError(code, "This server does not host this topic-partition."
                             if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else None)
        log.info("[broker=%d] deleted topic %s (%s)", self.broker_id, name, tid)
        return tid

    async def create_partitions(self, name: str, count: int, validate_only: bool = False,
                                *, forwarded: bool = False,
                                assignments: list[tuple[int, ...]] | None = None) -> None:
        t = self.image.topics.get(name)
        if t is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        current = len(t.partitions)
        if count < current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the "
                f"requested {count}.",
            )
        if count == current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
            )
        if assignments:
            if len(assignments) != count - current:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Increasing the number of partitions by {count - current} but "
                    f"{len(assignments)} assignments provided.")
            rf = len(next(iter(t.partitions.values())).replicas) if t.partitions else 1
            self._check_assignments(self.image, assignments, rf)
        if validate_only:
            return
        try:
            code = await self._commit(
                lambda img: self.quorum.controller.create_partitions(img, name, count,
                                                                     assignments))
        except NotControllerError:
            if forwarded:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "not the controller") from None
            try:
                resp = await self._controller_request(
                    37, 3, {"topics": [{"name": name, "count": count, "assignments": [
                        {"broker_ids": list(a)} for a in assignments] if assignments else None}],
                            "timeout_ms": 30000, "validate_only": False},
                    ok=lambda r: r.results[0].error_code != ErrorCode.NOT_CONTROLLER)
            except _Local:
                return await self.create_partitions(name, count, assignments=assignments)
            res = resp.results[0]
            if res.error_code:
                raise KafkaError(ErrorCode.of(res.error_code), res.error_message) from None
            await self._wait_applied(
                lambda img: name in img.topics and len(img.topics[name].partitions) >= count)
            return
        if code:
            raise KafkaError(code, None)

    async def set_topic_configs(self, name: str, changes: dict[str, str | None], *,
                                forwarded: bool = False) -> None:
        await self.set_configs(CONFIG_RESOURCE_TOPIC, name, changes, forwarded=forwarded)

    async def set_configs(self, resource_type: int, name: str, changes: dict[str, str | None],
                          *, forwarded: bool = False) -> None:
        """ConfigRecords for a topic or a broker (name "" = the cluster-wide default),
        written by the controller (forwarded to it from any other broker)."""
        try:
            code = await self._commit(lambda img: self.quorum.controller.alter_config(
                img, resource_type, name, changes))
        except NotControllerError:
            if forwarded:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "not the controller") from None
            body = {"resources": [{
                "resource_type": resource_type, "resource_name": name,
                "configs": [{"name": k, "config_operation": 0 if v is not None else 1,
                             "value": v} for k, v in changes.items()]}],
                "validate_only": False}
            try:
                resp = await self._controller_request(
                    44, 1, body,
                    ok=lambda r: r.responses[0].error_code != ErrorCode.NOT_CONTROLLER)
            except _Local:
                return await self.set_configs(resource_type, name, changes)
            res = resp.responses[0]
            if res.error_code:
                raise KafkaError(ErrorCode.of(res.error_code), res.error_message) from None
            await self._wait_applied(lambda img: all(
                img.configs(resource_type, name).get(k) == v for k, v in changes.items()))
            return
        if code:
            raise KafkaError(code, None)

    async def update_features(self, levels: dict[str, int], *, forwarded: bool = False) -> None:
        """FeatureLevelRecords for the changed features, written by the controller."""
        try:
            code = await self._commit(
                lambda img: self.quorum.controller.update_features(img, levels))
        except NotControllerError:
            if forwarded:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "not the controller") from None
            body = {"timeout_ms": 30000, "validate_only": False, "feature_updates": [
                {"feature": k, "max_version_level": v, "upgrade_type": 1}
                for k, v in levels.items()]}
            try:
                resp = await self._controller_request(
                    57, 1, body, ok=lambda r: r.error_code != ErrorCode.NOT_CONTROLLER)
            except _Local:
                return await self.update_features(levels)
            if resp.error_code:
                raise KafkaError(ErrorCode.of(resp.error_code), resp.error_message) from None
            await self._wait_applied(lambda img: all(
                img.features.get(k) == v for k, v in levels.items()))
            return
        if code:
            raise KafkaError(code, None)

    # ------------------------------------------------------------------ leaders, replicas

    async def elect_leaders(self, wanted: list[tuple[str, int]], unclean: bool
                            ) -> dict[tuple[str, int], ErrorCode]:
        """ElectLeaders as the active controller (raises NotControllerError elsewhere)."""
        results: dict[tuple[str, int], int] = {}

        def decide(img: MetadataImage) -> tuple[int, list[MetadataRecord]]:
            res, recs = self.quorum.controller.elect_leaders(img, wanted, unclean)
            results.update(res)
            return 0, recs

        await self._commit(decide)
        return {k: ErrorCode.of(v) for k, v in results.items()}

    async def reassign(self, topic: str, pid: int, target: tuple[int, ...] | None
                       ) -> ErrorCode:
        """One partition's AlterPartitionReassignments, as the active controller."""
        return await self._commit(
            lambda img: self.quorum.controller.reassign(img, topic, pid, target))

    # ------------------------------------------------------------------ producer ids

    async def allocate_producer_block(self, broker_id: int, broker_epoch: int, *,
                                      forwarded: bool = False) -> tuple[ErrorCode, int, int]:
        """A committed block of producer ids for ``broker_id``: (error, first, count)."""
        block: list[tuple[int, int]] = []

        def decide(img: MetadataImage) -> tuple[int, list[MetadataRecord]]:
            code, recs, _ = self.quorum.controller.allocate_producer_ids(
                img, broker_id, broker_epoch)
            if code == ErrorCode.NONE:
                got = committed_producer_block(img, recs[0])  # type: ignore[arg-type]
                if got is not None:
                    block.append(got)
            return code, recs

        try:
            code = await self._commit(decide)
        except NotControllerError:
            if forwarded:
                return ErrorCode.NOT_CONTROLLER, -1, 0
            try:
                resp = await self._controller_request(
                    67, 0, {"broker_id": broker_id, "broker_epoch": broker_epoch},
                    ok=lambda r: r.error_code != ErrorCode.NOT_CONTROLLER)
            except _Local:
                return await self.allocate_producer_block(broker_id, broker_epoch)
            return ErrorCode.of(resp.error_code), resp.producer_id_start, resp.producer_id_len
        if code or not block:
            return code or ErrorCode.UNKNOWN_SERVER_ERROR, -1, 0
        return ErrorCode.NONE, block[0][0], block[0][1]

    async def allocate_producer_id(self) -> int:
        async with self._pid_lock:
            if self._pid_next >= self._pid_limit:
                b = self.image.brokers.get(self.broker_id)
                epoch = b.broker_epoch if b is not None else -1
                code, start, count = await self.allocate_producer_block(self.broker_id, epoch)
                if code:
                    raise KafkaError(code, "could not allocate producer ids")
                self._pid_next, self._pid_limit = start, start + count
            pid = self._pid_next
            self._pid_next += 1
            return pid

    # ------------------------------------------------------------------ ISR changes

    async def alter_partition_local(self, broker_id: int, topic_id: uuid.UUID, partition: int,
                                    leader_epoch: int, partition_epoch: int,
                                    new_isr: tuple[int, ...],
                                    member_epochs: tuple[int, ...] = (), *,
                                    forwarded: bool = False) -> ErrorCode:
        try:
            return await self._commit(lambda img: self.quorum.controller.alter_partition(
                img, topic_id, partition, broker_id, leader_epoch, partition_epoch, new_isr,
                member_epochs))
        except NotControllerError:
            return ErrorCode.NOT_CONTROLLER

    async def alter_partition(self, change: IsrChange) -> ErrorCode:
        """Leader -> controller: ask for an ISR change (Kafka's AlterPartition)."""
        if self.quorum.is_active_controller():
            code = await self.alter_partition_local(
                self.broker_id, change.topic_id, change.partition, change.leader_epoch,
                change.partition_epoch, change.new_isr, change.member_epochs)
            if code != ErrorCode.NOT_CONTROLLER:
                return code
        b = self.image.brokers.get(self.broker_id)
        body = {"broker_id": self.broker_id, "broker_epoch": b.broker_epoch if b else -1,
                "topics": [{"topic_id": change.topic_id, "partitions": [{
                    "partition_index": change.partition, "leader_epoch": change.leader_epoch,
                    "new_isr_with_epochs": [
                        {"broker_id": r, "broker_epoch": e}
                        for r, e in zip(change.new_isr, change.member_epochs
                                        or (-1,) * len(change.new_isr), strict=True)],
                    "leader_recovery_state": 0,
                    "partition_epoch": change.partition_epoch}]}]}
        try:
            resp = await self._controller_request(
                56, 3, body, ok=lambda r: r.error_code != ErrorCode.NOT_CONTROLLER)
        except _Local:
            return await self.alter_partition_local(
                self.broker_id, change.topic_id, change.partition, change.leader_epoch,
                change.partition_epoch, change.new_isr, change.member_epochs)
        except KafkaError as e:
            return e.code
        if resp.error_code:
            return ErrorCode.of(resp.error_code)
        return ErrorCode.of(resp.topics[0].partitions[0].error_code)


class _ControllerMoved(Exception):
    """The controller a request went to is no longer the quorum's controller."""


class _Local(Exception):
    """The controller turned out to be this broker: decide locally."""
