"""Fixtures for the Kafka-parity tests (issue 12): one broker process per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.e2e import TargetBroker


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TargetBroker]:
    """The broker under test (see tests/support/e2e.py), shared by one test module."""
    t = TargetBroker(tmp_path_factory.mktemp("broker"))
    t.start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture(autouse=True)
def _broker_still_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests that use the module's broker fail if it died meanwhile."""
    yield
    if "target" not in request.fixturenames:
        return
    target: TargetBroker = request.getfixturevalue("target")
    if not target.alive():
        pytest.fail(f"the broker process died during this test; log tail:\n{target.log_tail()}")
