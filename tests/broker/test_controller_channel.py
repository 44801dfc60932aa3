"""The one commit-or-forward path (`ControllerChannel.submit`), in-process over a fake
quorum: on the active controller a decision's records are committed before its
response is given; elsewhere the request is forwarded and the answer read back; a
forwarded request is never forwarded again. (Forwarding between real brokers is
covered by tests/security/test_inter_broker.py and tests/cluster_e2e.)"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from jocko_py.broker.controller_channel import ControllerChannel, Forward
from jocko_py.cluster.controller import ControllerConfig
from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_BROKER,
    ConfigRecord,
    MetadataImage,
    MetadataRecord,
)
from jocko_py.cluster.quorum import MetadataQuorum
from jocko_py.protocol.errors import ErrorCode, KafkaError


class FakeQuorum(MetadataQuorum):
    """An in-memory quorum: proposals apply at once; ``active`` says whether this
    broker is the active controller."""

    def __init__(self, active: bool) -> None:
        super().__init__(1, ControllerConfig())
        self._image = MetadataImage()
        self.active = active
        self.proposed: list[list[MetadataRecord]] = []

    @property
    def image(self) -> MetadataImage:
        return self._image

    def is_active_controller(self) -> bool:
        return self.active

    def controller_id(self) -> int:
        return 1 if self.active else 2

    async def propose(self, records: list[MetadataRecord]) -> None:
        assert self.lock.locked(), "a decision is committed under the quorum's lock"
        self.proposed.append(records)
        self.publish(self._image.apply_batch(records))


def _config(key: str, value: str) -> ConfigRecord:
    return ConfigRecord(CONFIG_RESOURCE_BROKER, "", key, value)


def _decide(key: str, calls: list[MetadataImage]) -> Any:
    def decide(img: MetadataImage) -> ControllerResult[str]:
        calls.append(img)
        if key in img.configs(CONFIG_RESOURCE_BROKER, ""):
            return ControllerResult([], "already")
        return ControllerResult([_config(key, "v")], "set")
    return decide


def _forward() -> Forward[str]:
    return Forward(44, 1, {}, lambda r: str(r.answer), lambda r: bool(r.not_controller),
                   applied=lambda img, resp: resp != "set" or bool(
                       img.configs(CONFIG_RESOURCE_BROKER, "")))


def test_active_controller_commits_then_answers() -> None:
    async def run() -> None:
        q = FakeQuorum(active=True)
        ch = ControllerChannel(q, 1)
        calls: list[MetadataImage] = []
        assert await ch.submit(_decide("k", calls), _forward(), forwarded=False) == "set"
        assert q.image.configs(CONFIG_RESOURCE_BROKER, "") == {"k": "v"}
        # decided again on the committed image: no records, nothing proposed
        assert await ch.submit(_decide("k", calls), None, forwarded=True) == "already"
        assert q.proposed == [[_config("k", "v")]]
        assert len(calls) == 2
    asyncio.run(run())


def test_forwarded_request_on_a_non_controller_is_not_controller() -> None:
    async def run() -> None:
        q = FakeQuorum(active=False)
        ch = ControllerChannel(q, 1)
        calls: list[MetadataImage] = []
        for forward in (_forward(), None):
            with pytest.raises(KafkaError) as e:
                await ch.submit(_decide("k", calls), forward, forwarded=True)
            assert e.value.code == ErrorCode.NOT_CONTROLLER
        assert calls == [] and q.proposed == []
    asyncio.run(run())


def test_non_controller_forwards_and_waits_until_applied() -> None:
    async def run() -> None:
        q = FakeQuorum(active=False)
        ch = ControllerChannel(q, 1)
        sent: list[tuple[int, int]] = []

        async def controller_request(api_key: int, version: int, body: dict[str, Any],
                                     ok: Any = None) -> Any:
            sent.append((api_key, version))
            resp = SimpleNamespace(answer="set", not_controller=False)
            assert ok is not None and ok(resp)
            assert not ok(SimpleNamespace(answer="", not_controller=True))
            # the controller commits; this broker applies the record a moment later
            loop = asyncio.get_running_loop()
            loop.call_later(0.05, lambda: q.publish(q.image.apply_batch([_config("k", "v")])))
            return resp

        ch._controller_request = controller_request  # type: ignore[method-assign]
        calls: list[MetadataImage] = []
        got = await ch.submit(_decide("k", calls), _forward(), forwarded=False)
        assert got == "set" and sent == [(44, 1)] and calls == []
        assert q.image.configs(CONFIG_RESOURCE_BROKER, "") == {"k": "v"}  # waited for it
    asyncio.run(run())


def test_an_exception_in_a_decision_commits_nothing() -> None:
    async def run() -> None:
        q = FakeQuorum(active=True)
        ch = ControllerChannel(q, 1)

        def decide(img: MetadataImage) -> ControllerResult[str]:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "no")

        with pytest.raises(KafkaError):
            await ch.submit(decide, None, forwarded=False)
        assert q.proposed == [] and not q.lock.locked()
        assert q.image.records_applied == 0
    asyncio.run(run())


def test_controller_result_map_keeps_the_records() -> None:
    r = ControllerResult([_config("a", "1")], uuid.UUID(int=7))
    assert r.map(str) == ControllerResult([_config("a", "1")], str(uuid.UUID(int=7)))
