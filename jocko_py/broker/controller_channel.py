"""The broker's door to the controller: every metadata change goes through it.

Every metadata change is decided by the active controller (`cluster.controller` and
its control managers: pure functions of the image returning a `ControllerResult`,
records and response) and committed through the metadata quorum; no handler writes
a record itself. `submit` is the one commit-or-forward path: on the active
controller the decision is taken locally, under the quorum's lock, and its records
committed before its response is given; anywhere else the request is forwarded to
the active controller's broker over the Kafka protocol (CreateTopics, DeleteTopics,
CreatePartitions, IncrementalAlterConfigs, UpdateFeatures, CreateAcls, DeleteAcls,
AlterClientQuotas, AlterUserScramCredentials, ElectLeaders,
AlterPartitionReassignments, AllocateProducerIds, AlterPartition), retried on
NOT_CONTROLLER until its timeout, and for topic, config and feature changes the caller
waits (bounded) until the local image shows the change, so the next Metadata request
on this broker sees it. A forwarded request that reaches a broker that is no longer
the controller gets NOT_CONTROLLER (it is never forwarded twice).

Topic names are validated here (`topic_names.py`), as Kafka's broker does before asking
its controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from jocko_py.broker.inter_broker import BrokerChannel, ClientSecurity
from jocko_py.broker.topic_names import validate_topic_name
from jocko_py.cluster.controller import check_manual_assignments, committed_producer_block
from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_TOPIC,
    MetadataImage,
    MetadataRecord,
    TopicRecord,
)
from jocko_py.cluster.quorum import MetadataQuorum, NotControllerError
from jocko_py.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from jocko_py.broker.partition import IsrChange
    from jocko_py.broker.security.authz import Principal
    from jocko_py.protocol.codec import RequestHeader

log = logging.getLogger("jocko_py.broker.controller_channel")

FORWARD_CLIENT_ID = "jocko-py-forward"
CONTROLLER_TIMEOUT_S = 15.0
CONTROLLER_POLL_S = 0.1  # how often an in-flight forward checks the controller is still it
APPLY_TIMEOUT_S = 10.0

R = TypeVar("R")


class Request(Protocol):
    """What `is_forwarded` reads of a request (a handler's `RequestContext`)."""

    @property
    def header(self) -> RequestHeader: ...

    @property
    def session(self) -> Principal | None: ...


def is_forwarded(ctx: Request) -> bool:
    """Was this request forwarded to the controller by another broker? Its client id
    says so, and only a broker of the cluster (JOCKO-CLUSTER) is believed: a client
    claiming that client id is an ordinary client (its mutation quota counts, and its
    request is forwarded like any other)."""
    s = ctx.session
    return ctx.header.client_id == FORWARD_CLIENT_ID and (
        s is None or s.cluster_broker_id is not None)


class ControllerChannel:
    def __init__(self, quorum: MetadataQuorum, broker_id: int,
                 channel_security: ClientSecurity | None = None) -> None:
        self.quorum = quorum
        self.broker_id = broker_id
        self._channels: dict[int, BrokerChannel] = {}
        self.channel_security = channel_security
        self._pid_next = 0
        self._pid_limit = 0
        self._pid_lock = asyncio.Lock()

    @property
    def image(self) -> MetadataImage:
        return self.quorum.image

    # ------------------------------------------------------------------ plumbing

    async def commit(self, decide: Callable[[MetadataImage], ControllerResult[R]]) -> R:
        """Decide on the image and commit the decision's records, as the active
        controller (raises NotControllerError elsewhere); the decision's response, once
        its records are committed. The quorum's lock keeps a decision and its commit
        together: two decisions never start from the same image."""
        async with self.quorum.lock:
            if not self.quorum.is_active_controller():
                raise NotControllerError()
            result = decide(self.quorum.image)
            if result.records:
                await self.quorum.propose(result.records)
        return result.response

    async def submit(self, decide: Callable[[MetadataImage], ControllerResult[R]],
                     forward: Forward[R] | None, *, forwarded: bool) -> R:
        """The one commit-or-forward path of every metadata change. On the active
        controller, ``decide`` and commit (``commit``). Anywhere else, send
        ``forward``'s request to the active controller's broker (retried while it
        answers NOT_CONTROLLER, until CONTROLLER_TIMEOUT_S), read its answer back as the
        decision's response and, with ``forward.applied``, wait (bounded) until the
        local image shows the change. A request that was itself forwarded here
        (``forwarded``), or one that cannot be forwarded (``forward`` None), gets
        NOT_CONTROLLER: nothing is forwarded twice. Raises KafkaError (NOT_CONTROLLER:
        no controller answered in time)."""
        for _ in range(2):
            try:
                return await self.commit(decide)
            except NotControllerError:
                if forwarded or forward is None:
                    raise KafkaError(ErrorCode.NOT_CONTROLLER, "not the controller") from None
            try:
                return await self._forward_decision(forward)
            except _Local:
                continue  # this broker just became the controller: decide here
        raise KafkaError(ErrorCode.NOT_CONTROLLER,
                         "this broker just became the controller; retry")

    async def _forward_decision(self, fw: Forward[R]) -> R:
        resp = await self._controller_request(
            fw.api_key, fw.version, fw.body, ok=lambda r: not fw.not_controller(r))
        response = fw.response(resp)
        applied = fw.applied
        if applied is not None:
            await self._wait_applied(lambda img: applied(img, response))
        return response

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
        configs = self._check_new_topic(name, num_partitions, replication_factor, configs,
                                        validate_configs)
        live = [b for b in self.image.brokers.values() if not b.fenced]
        if validate_only:
            if assignments:
                self._check_assignments(self.image, assignments, None)
            else:
                self._check_rf(replication_factor, len(live))
            return uuid.UUID(int=0)
        return await self._create_one(name, num_partitions, replication_factor, configs,
                                      forwarded, assignments)

    async def create_topics(self, topics: list[NewTopic], *, forwarded: bool = False,
                            ) -> list[uuid.UUID | KafkaError]:
        """The topics of one CreateTopics request (not validate_only), each one's id or
        error. On the active controller they are decided together and committed as one
        batch of records, as Kafka's controller does (ReplicationControlManager
        createTopics): one metadata-log write, and one delta for the brokers to apply
        rather than one per topic. Elsewhere each is forwarded (`create_topic`)."""
        out: list[uuid.UUID | KafkaError] = []
        todo: list[tuple[int, NewTopic]] = []
        for i, t in enumerate(topics):
            try:
                configs = self._check_new_topic(t.name, t.num_partitions,
                                                 t.replication_factor, t.configs,
                                                 t.validate_configs)
            except KafkaError as e:
                out.append(e)
                continue
            out.append(_ZERO)
            todo.append((i, dataclasses.replace(t, configs=configs)))
        if len(todo) > 1 and self.quorum.is_active_controller():
            decided: dict[int, _Created] = {}

            def decide(img: MetadataImage) -> ControllerResult[None]:
                decided.clear()
                records: list[MetadataRecord] = []
                for i, t in todo:
                    try:
                        if t.assignments:
                            self._check_assignments(img, t.assignments, None)
                        else:
                            self._check_rf(t.replication_factor,
                                           sum(not b.fenced for b in img.brokers.values()))
                    except KafkaError as e:
                        decided[i] = (e.code, e.message, _ZERO)
                        continue
                    if t.name in img.topics or any(
                            isinstance(r, TopicRecord) and r.name == t.name for r in records):
                        decided[i] = (ErrorCode.TOPIC_ALREADY_EXISTS, None, _ZERO)
                        continue
                    code, recs = self.quorum.controller.create_topic(
                        img, t.name, t.num_partitions, t.replication_factor, t.configs,
                        assignments=t.assignments)
                    tid = next((r.topic_id for r in recs
                                if isinstance(r, TopicRecord) and r.name == t.name), _ZERO)
                    decided[i] = (ErrorCode.of(code), None, _ZERO if code else tid)
                    if not code:
                        records.extend(recs)
                return ControllerResult(records, None)

            try:
                await self.commit(decide)
            except NotControllerError:
                pass  # the controller moved between the check and the commit: forward
            else:
                for i, t in todo:
                    code, message, tid = decided[i]
                    out[i] = self._created(t, code, message, tid)
                return out
        for i, t in todo:
            try:
                out[i] = await self._create_one(t.name, t.num_partitions,
                                                t.replication_factor, t.configs, forwarded,
                                                t.assignments)
            except KafkaError as e:
                out[i] = e
        return out

    def _created(self, t: NewTopic, code: ErrorCode, message: str | None,
                 tid: uuid.UUID) -> uuid.UUID | KafkaError:
        if code == ErrorCode.TOPIC_ALREADY_EXISTS and message is None:
            message = f"Topic '{t.name}' already exists."
        if code:
            return KafkaError(code, message)
        log.info("[broker=%d] created topic %s (%s) with %d partition(s), RF %d, "
                 "configs %s", self.broker_id, t.name, tid, t.num_partitions,
                 t.replication_factor, t.configs)
        return tid

    def _check_new_topic(self, name: str, num_partitions: int, replication_factor: int,
                         configs: dict[str, str] | None,
                         validate_configs: Callable[[dict[str, str]], None] | None,
                         ) -> dict[str, str]:
        """The checks a new topic passes before the controller decides on it; its
        configs (a copy)."""
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
        return configs

    async def _create_one(self, name: str, num_partitions: int, replication_factor: int,
                          configs: dict[str, str], forwarded: bool,
                          assignments: list[tuple[int, ...]] | None) -> uuid.UUID:
        created: list[uuid.UUID] = []  # set by a decision taken here

        def decide(img: MetadataImage) -> ControllerResult[_Created]:
            if assignments:
                self._check_assignments(img, assignments, None)
            else:
                self._check_rf(replication_factor,
                               sum(not b.fenced for b in img.brokers.values()))
            code, recs = self.quorum.controller.create_topic(
                img, name, num_partitions, replication_factor, configs,
                assignments=assignments)
            for r in recs:
                if isinstance(r, TopicRecord) and r.name == name:
                    created.append(r.topic_id)
            return _code_result((code, recs)).map(
                lambda c: (c, None, created[0] if created and not c else _ZERO))

        manual = [{"partition_index": i, "broker_ids": list(a)}
                  for i, a in enumerate(assignments or ())]
        body = {"topics": [{"name": name,
                            "num_partitions": -1 if manual else num_partitions,
                            "replication_factor": -1 if manual else replication_factor,
                            "assignments": manual,
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": 30000, "validate_only": False}

        def relayed(resp: Any) -> _Created:
            t = resp.topics[0]
            return ErrorCode.of(t.error_code), t.error_message, t.topic_id

        code, message, tid = await self.submit(decide, Forward(
            19, 7, body, relayed, lambda r: r.topics[0].error_code == ErrorCode.NOT_CONTROLLER,
            applied=lambda img, r: r[0] != ErrorCode.NONE or name in img.topics,
        ), forwarded=forwarded)
        if code == ErrorCode.TOPIC_ALREADY_EXISTS and message is None:
            message = f"Topic '{name}' already exists."
        if code:
            raise KafkaError(code, message)
        if created:
            log.info("[broker=%d] created topic %s (%s) with %d partition(s), RF %d, "
                     "configs %s", self.broker_id, name, tid, num_partitions,
                     replication_factor, configs)
        return tid

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

    async def delete_topic(self, name: str, *, forwarded: bool = False) -> uuid.UUID:
        t = self.image.topics.get(name)
        if t is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        tid = t.topic_id
        code = await self.submit(
            lambda img: _code_result(self.quorum.controller.delete_topic(img, name)),
            Forward(20, 6, {"topics": [{"name": name, "topic_id": _ZERO}], "timeout_ms": 30000},
                    lambda r: ErrorCode.of(r.responses[0].error_code),
                    lambda r: r.responses[0].error_code == ErrorCode.NOT_CONTROLLER,
                    applied=lambda img, c: c != ErrorCode.NONE or img.topic_by_id(tid) is None),
            forwarded=forwarded)
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
        body = {"topics": [{"name": name, "count": count, "assignments": [
            {"broker_ids": list(a)} for a in assignments] if assignments else None}],
            "timeout_ms": 30000, "validate_only": False}
        code, message = await self.submit(
            lambda img: _code_result(self.quorum.controller.create_partitions(
                img, name, count, assignments)).map(_no_message),
            Forward(37, 3, body,
                    lambda r: (ErrorCode.of(r.results[0].error_code), r.results[0].error_message),
                    lambda r: r.results[0].error_code == ErrorCode.NOT_CONTROLLER,
                    applied=lambda img, r: r[0] != ErrorCode.NONE or (
                        name in img.topics and len(img.topics[name].partitions) >= count)),
            forwarded=forwarded)
        if code:
            raise KafkaError(code, message)

    async def set_topic_configs(self, name: str, changes: dict[str, str | None], *,
                                forwarded: bool = False) -> None:
        await self.set_configs(CONFIG_RESOURCE_TOPIC, name, changes, forwarded=forwarded)

    async def set_configs(self, resource_type: int, name: str, changes: dict[str, str | None],
                          *, forwarded: bool = False) -> None:
        """ConfigRecords for a topic or a broker (name "" = the cluster-wide default),
        written by the controller (forwarded to it from any other broker)."""
        body = {"resources": [{
            "resource_type": resource_type, "resource_name": name,
            "configs": [{"name": k, "config_operation": 0 if v is not None else 1,
                         "value": v} for k, v in changes.items()]}],
            "validate_only": False}
        code, message = await self.submit(
            lambda img: _code_result(self.quorum.controller.alter_config(
                img, resource_type, name, changes)).map(_no_message),
            Forward(44, 1, body,
                    lambda r: (ErrorCode.of(r.responses[0].error_code), r.responses[0].error_message),
                    lambda r: r.responses[0].error_code == ErrorCode.NOT_CONTROLLER,
                    applied=lambda img, r: r[0] != ErrorCode.NONE or all(
                        img.configs(resource_type, name).get(k) == v
                        for k, v in changes.items())),
            forwarded=forwarded)
        if code:
            raise KafkaError(code, message)

    async def update_features(self, levels: dict[str, int], *, forwarded: bool = False) -> None:
        """FeatureLevelRecords for the changed features, written by the controller."""
        body = {"timeout_ms": 30000, "validate_only": False, "feature_updates": [
            {"feature": k, "max_version_level": v, "upgrade_type": 1}
            for k, v in levels.items()]}
        code, message = await self.submit(
            lambda img: _code_result(
                self.quorum.controller.update_features(img, levels)).map(_no_message),
            Forward(57, 1, body, lambda r: (ErrorCode.of(r.error_code), r.error_message),
                    lambda r: r.error_code == ErrorCode.NOT_CONTROLLER,
                    applied=lambda img, r: r[0] != ErrorCode.NONE or all(
                        img.features.get(k) == v for k, v in levels.items())),
            forwarded=forwarded)
        if code:
            raise KafkaError(code, message)

    # ------------------------------------------------------------------ producer ids

    async def allocate_producer_block(self, broker_id: int, broker_epoch: int, *,
                                      forwarded: bool = False) -> tuple[ErrorCode, int, int]:
        """A committed block of producer ids for ``broker_id``: (error, first, count)."""

        def decide(img: MetadataImage) -> ControllerResult[tuple[ErrorCode, int, int]]:
            code, recs, _ = self.quorum.controller.allocate_producer_ids(
                img, broker_id, broker_epoch)
            if code:
                return ControllerResult([], (ErrorCode.of(code), -1, 0))
            got = committed_producer_block(img, recs[0])  # type: ignore[arg-type]
            if got is None:
                return ControllerResult(recs, (ErrorCode.UNKNOWN_SERVER_ERROR, -1, 0))
            return ControllerResult(recs, (ErrorCode.NONE, got[0], got[1]))

        try:
            return await self.submit(decide, Forward(
                67, 0, {"broker_id": broker_id, "broker_epoch": broker_epoch},
                lambda r: (ErrorCode.of(r.error_code), r.producer_id_start, r.producer_id_len),
                lambda r: r.error_code == ErrorCode.NOT_CONTROLLER), forwarded=forwarded)
        except KafkaError as e:
            if forwarded:
                return e.code, -1, 0
            raise

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

    def _alter_partition_decision(
        self, broker_id: int, topic_id: uuid.UUID, partition: int, leader_epoch: int,
        partition_epoch: int, new_isr: tuple[int, ...], member_epochs: tuple[int, ...],
    ) -> Callable[[MetadataImage], ControllerResult[ErrorCode]]:
        return lambda img: _code_result(self.quorum.controller.alter_partition(
            img, topic_id, partition, broker_id, leader_epoch, partition_epoch, new_isr,
            member_epochs))

    async def alter_partition_local(self, broker_id: int, topic_id: uuid.UUID, partition: int,
                                    leader_epoch: int, partition_epoch: int,
                                    new_isr: tuple[int, ...],
                                    member_epochs: tuple[int, ...] = (), *,
                                    forwarded: bool = False) -> ErrorCode:
        """AlterPartition as the active controller (NOT_CONTROLLER elsewhere)."""
        try:
            return await self.submit(self._alter_partition_decision(
                broker_id, topic_id, partition, leader_epoch, partition_epoch, new_isr,
                member_epochs), None, forwarded=True)
        except KafkaError as e:
            return e.code

    async def alter_partition(self, change: IsrChange) -> ErrorCode:
        """Leader -> controller: ask for an ISR change (Kafka's AlterPartition)."""
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

        def relayed(resp: Any) -> ErrorCode:
            if resp.error_code:
                return ErrorCode.of(resp.error_code)
            return ErrorCode.of(resp.topics[0].partitions[0].error_code)

        try:
            return await self.submit(self._alter_partition_decision(
                self.broker_id, change.topic_id, change.partition, change.leader_epoch,
                change.partition_epoch, change.new_isr, change.member_epochs),
                Forward(56, 3, body, relayed,
                        lambda r: r.error_code == ErrorCode.NOT_CONTROLLER),
                forwarded=False)
        except KafkaError as e:
            return e.code


_Created = tuple[ErrorCode, str | None, uuid.UUID]


@dataclass(frozen=True)
class NewTopic:
    """One topic of a CreateTopics request (`ControllerChannel.create_topics`)."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]
    assignments: list[tuple[int, ...]] | None = None
    validate_configs: Callable[[dict[str, str]], None] | None = None
_ZERO = uuid.UUID(int=0)


def _no_message(code: ErrorCode) -> tuple[ErrorCode, str | None]:
    return code, None


def _code_result(decision: tuple[int, list[MetadataRecord]]) -> ControllerResult[ErrorCode]:
    code, records = decision
    return ControllerResult(records if code == ErrorCode.NONE else [], ErrorCode.of(code))


@dataclass(frozen=True)
class Forward(Generic[R]):
    """How another broker asks the active controller for a decision: the request it
    sends, how the answer reads as the decision's response, whether the answer says
    NOT_CONTROLLER (then it is sent again, to the next controller), and what the local
    image shows once the change is applied (None: no wait)."""

    api_key: int
    version: int
    body: dict[str, Any]
    response: Callable[[Any], R]
    not_controller: Callable[[Any], bool]
    applied: Callable[[MetadataImage, R], bool] | None = None


class _ControllerMoved(Exception):
    """The controller a request went to is no longer the quorum's controller."""


class _Local(Exception):
    """The controller turned out to be this broker: decide locally."""
