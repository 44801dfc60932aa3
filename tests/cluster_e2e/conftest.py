from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Three jocko-py broker processes in one cluster (raft voters, gossip) on loopback."""
    c = Cluster(tmp_path)
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One three-broker cluster shared by the tests of a module (see `shared_cluster`)."""
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture
def shared_cluster(module_cluster: Cluster) -> Cluster:
    """The module's cluster, whole again: a broker an earlier test left dead is restarted
    and every broker is registered before the test starts (bounded waits)."""
    dead = [b for b in module_cluster.brokers.values() if b not in module_cluster.alive()]
    for b in dead:
        b.kill()  # reap an exited process before starting it again
        b.start()
    module_cluster.wait_registered(set(module_cluster.brokers))
    return module_cluster
