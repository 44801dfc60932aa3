"""How this broker authenticates as a client of the other brokers: the settings an
inter-broker channel (`broker/inter_broker.py`) dials with, built by the session's
`SecurityManager` from the inter-broker listener's configuration."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ClientSecurity:
    """How this broker connects to the others' inter-broker listener. With
    ``cluster_key`` the channel authenticates with JOCKO-CLUSTER as broker
    ``cluster_broker_id`` (instead of ``sasl_mechanism``)."""

    ssl: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""
    cluster_broker_id: int = -1
    cluster_key: Callable[[], bytes | None] | None = None
