from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import prereq, tiers
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


def _compat_cells(item: pytest.Item, rep: pytest.TestReport) -> None:
    """The cells go with the report (to the xdist controller, which writes the file)."""
    from tests.compat import cells_for
    if rep.when == "call" or rep.skipped or rep.failed:
        params = getattr(getattr(item, "callspec", None), "params", {})
        cells = cells_for(item.nodeid, params)
        if cells:
            rep.user_properties.append(("compat_cells", [list(c) for c in cells]))


_MODULE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    mod = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[mod] = _MODULE_SECONDS.get(mod, 0.0) + report.duration
    if report.nodeid.startswith(_SIM_MODULES):
        _SIM_SEEN.append(report.nodeid)
    for name, cells in report.user_properties:
        if name != "compat_cells":
            continue
        outcome = "passed" if report.passed else "skipped" if report.skipped else "failed"
        for feature, client in cells:
            tests = _COMPAT.setdefault((feature, client), {})
            if tests.get(report.nodeid) != "failed":
                tests[report.nodeid] = outcome


# The simulation campaigns' base seed (tests/cluster/sim_seed.py) is drawn once per run,
# here, so that every xdist worker uses the one printed at the end.
_SIM_MODULES = ("tests/cluster/test_simulation.py", "tests/cluster/test_replication_sim.py")
_SIM_SEEN: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _SIM_SEEN:
        return
    from tests.cluster.sim_seed import BASE_SEED, BASE_SEED_FIXED
    how = "fixed by JOCKO_SIM_BASE_SEED" if BASE_SEED_FIXED else "drawn at random for this run"
    terminalreporter.write_line(
        f"cluster simulation base seed: {BASE_SEED} ({how}; replay a run with "
        f"JOCKO_SIM_BASE_SEED={BASE_SEED})"
    )


# ------------------------------------------------------------------ tiers (tests/support/tiers.py)
_TIERS: dict[str, str] = {}
_CURRENT_TIER: list[str | None] = [None]
_PLAN: list[str] = [""]


def pytest_configure(config: pytest.Config) -> None:
    for tier in tiers.TIERS:
        config.addinivalue_line("markers", f"{tier}: {tiers.DESCRIPTIONS[tier]}")
    if os.environ.get("JOCKO_TEST_TIER_GUARD") == "1":
        tiers.install_guard(lambda: _CURRENT_TIER[0])
    config.pluginmanager.register(_Order(), "jocko-tier-order")
    import random
    if not hasattr(config, "workerinput"):
        import tempfile
        _PLAN[0] = os.path.join(tempfile.mkdtemp(prefix="jocko-tiers-"), "plan.json")
        draw = random.SystemRandom().randrange
        if "JOCKO_SIM_BASE_SEED" not in os.environ:
            os.environ.setdefault("JOCKO_SIM_RUN_SEED", str(draw(10**9)))
        os.environ["JOCKO_TEST_COLLECTION_SEED"] = str(draw(10**9))
    else:
        # xdist workers must collect the same tests: a seed drawn at import by a test
        # module (a parameter id) is drawn from one seed per run in every worker;
        # `_Order` reseeds from the OS once the collection is done
        random.seed(os.environ.get("JOCKO_TEST_COLLECTION_SEED"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _TIERS.update(tiers.classify(items))  # markers before -m deselects


class _Order:
    """After -m/-k deselection: the heaviest xdist groups first; the plan (groups,
    weights) for the xdist controller's scheduler, written by the first worker."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        import random
        random.seed()  # see pytest_configure
        selected = {i.nodeid: _TIERS.get(i.nodeid, "inprocess") for i in items}
        tiers.order(items, selected)
        winput = getattr(config, "workerinput", None)
        if winput and winput.get("workerid") == "gw0" and winput.get("jocko_tier_plan"):
            tiers.write_plan(winput["jocko_tier_plan"], selected)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["jocko_tier_plan"] = _PLAN[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "load":
        return None  # an explicit --dist other than the default keeps its own
    return tiers.make_scheduler(config, log, _PLAN[0])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    _CURRENT_TIER[0] = _TIERS.get(item.nodeid)
    yield
    _CURRENT_TIER[0] = None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # py4j (the Spark tests' gateway) logs "Closing down clientserver connection" from
    # __del__ at interpreter exit, after pytest closed the streams: a "Logging error"
    # traceback at the end of every run that had Spark in it. Nothing to say by then.
    import logging
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if hasattr(session.config, "workerinput"):
        return  # the xdist controller has every report and writes the files
    if _PLAN[0]:
        import shutil
        shutil.rmtree(os.path.dirname(_PLAN[0]), ignore_errors=True)
    durations_out = os.environ.get("JOCKO_TEST_DURATIONS_OUT")
    if durations_out and _MODULE_SECONDS:
        tiers.write_durations(Path(durations_out), _MODULE_SECONDS)
    if not _COMPAT:
        return
    import json
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
    _compat_cells(item, rep)
