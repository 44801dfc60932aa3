"""The pytest plugin (entry point `pytest11`): real Kafka-compatible brokers as fixtures.

Installed with the package, so a suite gets these fixtures by `pip install jocko-py`
alone (no Docker, no JVM):

- `kafka_broker` (session): a jocko-py broker in this process, on its own thread and
  event loop (see `embedded.py`), on a free loopback port with a temporary data dir.
  Yields an `EmbeddedBroker`; its `bootstrap_servers` is what clients need. Works from
  sync tests, async tests (pytest-asyncio, anyio) and threads alike.
- `kafka_bootstrap` (session): the same broker's `host:port` string.
- `kafka_broker_factory` (function): a callable starting a fresh broker with the given
  property overrides (`kafka_broker_factory(**{"log.retention.ms": "1000"})` or a dict);
  every broker it started is stopped after the test.
- `kafka_cluster` (session): three brokers as subprocesses forming one cluster (raft
  metadata quorum, gossip, replication); yields a `BrokerCluster` whose
  `bootstrap_servers` lists all three.

Being session-scoped, `kafka_broker` and `kafka_cluster` are shared by the tests of a
run: give each test its own topic names. Options: `--jocko-cluster-size N` (3); the ini
setting `jocko_broker_properties` (KEY=VALUE lines) configures both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jocko_py.embedded import BrokerCluster, EmbeddedBroker


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jocko-py", "jocko-py Kafka broker fixtures")
    group.addoption("--jocko-cluster-size", type=int, default=3,
                    help="brokers in the kafka_cluster fixture (default 3)")
    parser.addini("jocko_broker_properties", type="linelist", default=[],
                  help="KEY=VALUE broker properties for kafka_broker and kafka_cluster, "
                  "one per line")


def _ini_properties(config: pytest.Config) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in config.getini("jocko_broker_properties"):
        key, sep, value = str(line).partition("=")
        if not sep:
            raise pytest.UsageError(f"jocko_broker_properties: {line!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A real jocko-py broker for the whole test session (in-process, own thread)."""
    broker = EmbeddedBroker(tmp_path_factory.mktemp("jocko-py-broker"),
                            overrides=_ini_properties(request.config))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: EmbeddedBroker) -> str:
    """`host:port` of the session's broker."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def kafka_broker_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., EmbeddedBroker]]:
    """Start fresh brokers with property overrides; all stopped after the test."""
    started: list[EmbeddedBroker] = []

    def make(overrides: dict[str, str] | None = None, **props: Any) -> EmbeddedBroker:
        merged = dict(overrides or {}) | {k: str(v) for k, v in props.items()}
        b = EmbeddedBroker(tmp_path_factory.mktemp("jocko-py-broker"), overrides=merged)
        started.append(b)
        return b.start()

    try:
        yield make
    finally:
        for b in started:
            b.stop()


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerCluster]:
    """Three (`--jocko-cluster-size`) jocko-py brokers forming one cluster."""
    size = int(request.config.getoption("--jocko-cluster-size"))
    cluster = BrokerCluster(size, tmp_path_factory.mktemp("jocko-py-cluster"),
                            overrides=_ini_properties(request.config))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
