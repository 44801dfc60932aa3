"""``ControllerResult``: what every controller decision returns (Kafka's
``org.apache.kafka.controller.ControllerResult``).

A decision is a pure function of the metadata image and a request: it returns the
records to commit (possibly none) and the response to give once they are committed.
The caller (the broker's controller channel, holding the quorum's lock) proposes the
records and only then hands out the response; a decision never writes anything itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from jocko_py.cluster.metadata import MetadataRecord

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    records: list[MetadataRecord]
    response: T

    def map(self, fn: Callable[[T], U]) -> ControllerResult[U]:
        """The same records with the response turned into another form (the wire's)."""
        return ControllerResult(self.records, fn(self.response))
