"""The API registry: which handler serves which API key and versions.

Handlers register themselves with `@api(key, min, max)`; ApiVersions is derived
from these registrations, so the broker never advertises a version it does not
implement. `advertise_min` lets an API advertise versions below what it
serves (Produce v0-2: advertised for librdkafka's sake, KAFKA-18659, but not decoded:
a request of them closes the connection, as Kafka 4 does). `broker_only`
marks the controller APIs (Kafka's controller listener): advertised and served only
to brokers; any other connection sending one is closed, as Kafka closes a connection
that sends an API its listener does not enable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jocko_py.protocol import messages
from jocko_py.protocol.codec import RequestHeader

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker
    from jocko_py.broker.security.session import Session
    from jocko_py.cluster.metadata import BrokerImage


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    broker: Broker
    peer: str
    # the connection's listener and principal (None: an in-process caller)
    session: Session | None = None
    # the connection sends big Fetch reads from the file (sendfile: no TLS on it)
    zero_copy: bool = False

    @property
    def version(self) -> int:
        return self.header.api_version

    def address_of(self, b: BrokerImage) -> tuple[str, int] | None:
        """Where the client reaches broker ``b``: its endpoint for the listener this
        request came in on (as Kafka answers Metadata), None if it has no such one."""
        if self.session is None or not b.endpoints:
            return b.host, b.port
        name = self.session.listener.name
        for e in b.endpoints:
            if e.name == name:
                return e.host, e.port
        return None


Handler = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True)
class ApiEntry:
    key: int
    min_version: int
    max_version: int
    handler: Handler
    advertised_min: int
    # a controller API (Kafka serves it only on the controller listener): served only to
    # brokers (`SecurityManager.is_cluster_peer`), and not advertised to anyone else
    broker_only: bool = False


class NoResponse:
    """Returned by a handler when the protocol sends no reply (acks=0 produce)."""


NO_RESPONSE = NoResponse()

_REGISTRY: dict[int, ApiEntry] = {}


def api(
    key: int, min_version: int, max_version: int, *, advertise_min: int | None = None,
    broker_only: bool = False,
) -> Callable[[Handler], Handler]:
    lo, hi = messages.spec_versions(key)
    if not (lo <= min_version <= max_version <= hi):
        raise ValueError(f"API {key}: versions {min_version}-{max_version} outside spec {lo}-{hi}")

    def register(fn: Handler) -> Handler:
        adv = min_version if advertise_min is None else advertise_min
        _REGISTRY[key] = ApiEntry(key, min_version, max_version, fn, adv, broker_only)
        return fn

    return register


def registry() -> dict[int, ApiEntry]:
    return _REGISTRY


def served_versions() -> dict[int, tuple[int, int]]:
    """Versions the decoder accepts (not the advertised-only ones below them)."""
    return {k: (e.min_version, e.max_version) for k, e in _REGISTRY.items()}


def advertised_versions(broker: bool = False) -> list[tuple[int, int, int]]:
    """(key, min, max) of the APIs advertised to a client (``broker``: to a broker,
    the broker-only ones included)."""
    return sorted((k, e.advertised_min, e.max_version) for k, e in _REGISTRY.items()
                  if broker or not e.broker_only)
