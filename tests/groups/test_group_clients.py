"""Every client's group consumer against jocko-py (classic protocol).

Per client: three consumers in one group share a 6-partition topic; a clean
leave and a crash are taken over within the session timeout; commits after
processing give at-least-once (exactly once without failures); a restarted
consumer resumes from the committed offsets; offsets survive a broker restart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.groups.harness import JAVA, run_group_scenario
from tests.support.broker import BrokerProcess

KINDS = [
    "kafka_python",
    "aiokafka",
    "confluent",
    JAVA,
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", KINDS)
def test_group_scenario(kind: str, gbroker: BrokerProcess, tmp_path: Path) -> None:
    run_group_scenario(kind, gbroker, tmp_path / "work")
