"""franz-go's own share-group tests against three jocko-py brokers, in `make test` (issue 24,
"What must be shown"): TestShareGroup, TestShareGroupETL, TestShareGroupAckOnClose,
TestShareGroupOffsetsAdmin and TestConsumeRegexShareSkipsInternal of franz-go's newest
release (tests/kgo_suite.py's VERSION), its `pkg/kgo` tests as `make kgo-share` runs them
(`KGO_SEEDS` the three brokers, `KGO_TEST_RF=3`), with `KGO_TEST_RECORDS` lowered to
keep the run short. Every one must pass (a skip is a failure here). The side-by-side
with Apache Kafka 4.4.0 at 50,000 records stays in `make kgo-share`.

franz-go's source and its compiled tests come from build/franz-go-VERSION, which
`make go-deps` prepares (`python -m tests.kgo_suite --prepare`); without it the test
prepares it itself, compiling for half a minute or more.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.kgo_suite import (
    SHARE_TESTS,
    VERSION,
    SuiteError,
    jocko_cluster,
    prepared_source,
    run_suite,
)
from tests.support.prereq import missing

pytestmark = [pytest.mark.clients, pytest.mark.cluster, pytest.mark.timeout(600)]

RECORDS = 5000  # KGO_TEST_RECORDS (the suite's default is 500,000)
GO_TIMEOUT = "5m"  # go test -timeout


def failure_output(log: Path, test: str, limit: int = 60) -> str:
    """The last `limit` output lines `go test -json` logged for `test` and its subtests."""
    lines: list[str] = []
    for raw in log.read_text().splitlines():
        try:
            ev = json.loads(raw)
        except ValueError:
            continue
        name = str(ev.get("Test") or "")
        if (name == test or name.startswith(test + "/")) and ev.get("Output"):
            lines.append(str(ev["Output"]).rstrip("\n"))
    return "\n".join(lines[-limit:])


def test_franz_go_share_group_tests(tmp_path: Path) -> None:
    if shutil.which("go") is None:
        missing("no `go` on PATH: franz-go's share-group tests need Go")
    try:
        src = prepared_source(VERSION)
    except SuiteError as e:
        missing(f"franz-go {VERSION}: {e}")
    log = tmp_path / "go-test.jsonl"
    with jocko_cluster(tmp_path / "cluster") as seeds:
        results = run_suite(src, seeds, list(SHARE_TESTS), GO_TIMEOUT, log, rounds=1,
                            records=RECORDS)
    print("\n".join(f"{t}: {o} ({s:.1f} s)" for t, (o, s) in results.items()))
    bad = {t: o for t, (o, _) in results.items() if o != "pass"}
    assert not bad, f"franz-go {VERSION} against jocko-py: {bad}\n" + "\n\n".join(
        f"--- {t}\n{failure_output(log, t)}" for t in bad)
