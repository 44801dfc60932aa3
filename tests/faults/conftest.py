from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.lab import Lab, can_isolate
from tests.support.prereq import missing


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """Three brokers, each in a network namespace with a tmpfs disk of its own, started;
    everything removed afterwards (even on failure)."""
    ok, why = can_isolate()
    if not ok:
        missing(f"fault lab {why}")
    lab = Lab(tmp_path / "lab")
    try:
        lab.open()
        lab.start()
        yield lab
    finally:
        lab.close()
