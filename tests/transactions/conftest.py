"""One single-node broker per test module, with timers short enough for tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.broker import BrokerProcess

OVERRIDES = {
    # the timed-out transaction test waits for one pass of the abort timer
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", overrides=OVERRIDES)
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(autouse=True)
def _broker_alive(txn_broker: BrokerProcess) -> Iterator[None]:
    yield
    if txn_broker.proc is None or txn_broker.proc.poll() is not None:
        pytest.fail(f"the broker died during this test:\n{txn_broker.log_tail()}")
