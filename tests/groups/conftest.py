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


_sim_collected = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    global _sim_collected
    _sim_collected = any(i.nodeid.startswith("tests/groups/test_group_sim.py") for i in items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _sim_collected:
        return
    from tests.cluster.sim_seed import BASE_SEED, BASE_SEED_FIXED

    how = "fixed by JOCKO_SIM_BASE_SEED" if BASE_SEED_FIXED else "drawn at random for this run"
    terminalreporter.write_line(
        f"group simulation base seed: {BASE_SEED} ({how}; replay a run with "
        f"JOCKO_SIM_BASE_SEED={BASE_SEED})")
