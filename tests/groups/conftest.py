"""Fixtures for the consumer-group tests: a fresh broker tuned for fast rebalances."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.groups.harness import BROKER_OVERRIDES
from tests.support.broker import BrokerProcess


@pytest.fixture
def gbroker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=dict(BROKER_OVERRIDES))
    b.start()
    try:
        yield b
    finally:
        b.stop()
