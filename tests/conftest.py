from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import prereq
from tests.support.broker import BrokerProcess

# A run started in the background of a non-interactive shell (`nohup make test &`)
# inherits SIGINT ignored, and so would every tool the tests start: the tests that stop a
# CLI consumer with Ctrl-C (SIGINT, exit 130) would wait for it in vain. A handler here
# is reset to the default on exec, so the children take SIGINT as a user's Ctrl-C.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh single-node jocko-py broker process on a free loopback port."""
    b = BrokerProcess(tmp_path / "data")
    b.start()
    try:
        yield b
    finally:
        b.stop()


# Under JOCKO_TEST_STRICT=1 (make test) a skip is a failure unless the test said it does
# not apply (tests/support/prereq.py has the rule and the helpers).
STRICT = prereq.STRICT


# outcomes of the tests behind the README's compatibility matrix (tests/compat.py)
_COMPAT: dict[tuple[str, str], dict[str, str]] = {}


def _compat_record(item: pytest.Item, rep: pytest.TestReport) -> None:
    from tests.compat import cells_for
    if rep.when == "call" or rep.skipped or rep.failed:
        params = getattr(getattr(item, "callspec", None), "params", {})
        outcome = "passed" if rep.passed else "skipped" if rep.skipped else "failed"
        for cell in cells_for(item.nodeid, params):
            tests = _COMPAT.setdefault(cell, {})
            if tests.get(item.nodeid) != "failed":
                tests[item.nodeid] = outcome


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # py4j (the Spark tests' gateway) logs "Closing down clientserver connection" from
    # __del__ at interpreter exit, after pytest closed the streams: a "Logging error"
    # traceback at the end of every run that had Spark in it. Nothing to say by then.
    import logging
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if not _COMPAT:
        return
    import json
    import os
    import time
    out = Path(os.environ.get("JOCKO_COMPAT_RESULTS", Path(__file__).parent.parent / "build"
                              / "compat-results.json"))
    try:
        old = json.loads(out.read_text()) if out.exists() else {"cells": []}
    except (OSError, ValueError):
        old = {"cells": []}
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cells = {(c["feature"], c["client"]): c for c in old.get("cells", [])}
    for (feature, client), tests in _COMPAT.items():
        cell = cells.setdefault((feature, client), {"feature": feature, "client": client,
                                                    "tests": {}})
        cell["run"] = stamp
        cell["tests"].update(tests)  # tests this run did not run keep their last outcome
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"cells": list(cells.values())}, indent=1))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()  # type: ignore[attr-defined]
    if STRICT and rep.skipped and not hasattr(rep, "wasxfail"):
        reason = str(rep.longrepr[2]) if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        failure = prereq.strict_verdict(reason)
        if failure is not None:
            rep.outcome = "failed"
            rep.longrepr = failure
    _compat_record(item, rep)
