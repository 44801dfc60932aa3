"""Every rule of the compatibility matrix (tests/compat.py) still names a real test, so
a renamed or deleted test cannot leave a cell silently unverified."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.compat import RULES, cells_for

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("feature", "client", "pattern"), RULES)
def test_rule_names_an_existing_test(feature: str, client: str | None, pattern: str) -> None:
    path, _, name = pattern.replace("\\.", ".").partition("::")
    text = (ROOT / path).read_text()
    name = re.split(r"[\[.*\\]", name)[0]
    assert re.search(rf"^(async )?def {re.escape(name)}", text, re.M), (feature, pattern)


def test_cells_take_the_client_from_the_parameter() -> None:
    nodeid = "tests/groups/test_group_clients.py::test_group_scenario[confluent]"
    assert ("consumer group: share partitions, leave and kill, commits, resume",
            "confluent-kafka") in cells_for(nodeid, {"kind": "confluent"})
