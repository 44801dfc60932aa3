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
