from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh single-node jocko-py broker process on a free loopback port."""
    b = BrokerProcess(tmp_path / "data")
    b.start()
    try:
        yield b
    finally:
        b.stop()
