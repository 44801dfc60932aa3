from __future__ import annotations

import pytest

from tests.cluster.sim_seed import BASE_SEED, BASE_SEED_FIXED

_campaigns_collected = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    global _campaigns_collected
    _campaigns_collected = any(
        i.nodeid.startswith(("tests/cluster/test_simulation.py",
                             "tests/cluster/test_replication_sim.py")) for i in items
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _campaigns_collected:
        return
    how = "fixed by JOCKO_SIM_BASE_SEED" if BASE_SEED_FIXED else "drawn at random for this run"
    terminalreporter.write_line(
        f"cluster simulation base seed: {BASE_SEED} ({how}; replay a run with "
        f"JOCKO_SIM_BASE_SEED={BASE_SEED})"
    )
