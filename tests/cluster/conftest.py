from __future__ import annotations

import pytest

from tests.cluster.sim_seed import BASE_SEED, BASE_SEED_FIXED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    how = "fixed by JOCKO_SIM_BASE_SEED" if BASE_SEED_FIXED else "drawn at random for this run"
    terminalreporter.write_line(
        f"cluster simulation base seed: {BASE_SEED} ({how}; replay a run with "
        f"JOCKO_SIM_BASE_SEED={BASE_SEED})"
    )
