"""Tests that cannot vanish: under JOCKO_TEST_STRICT=1 (make test) a test whose
prerequisite is missing fails with the reason, whichever way it skips (the helpers of
tests/support/prereq.py, a bare pytest.skip, an importorskip, a skipif mark, a fixture
that skips); only a `not_applicable` skip stays a skip. Each case runs in a child pytest
with the suite's own conftest as a plugin, once strict and once not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

REPO = Path(__file__).resolve().parent.parent

CASES = '''
import pytest
from tests.support.prereq import missing, not_applicable, require, requires

@pytest.fixture
def lab():
    missing("fault lab needs root (network namespaces, tmpfs mounts)")

def test_missing_in_a_fixture(lab):
    pass

def test_require():
    require(False, "no frobnicator on PATH")

@requires(False, "needs /proc/self/fd")
def test_requires_mark():
    pass

def test_bare_skip():
    pytest.skip("cannot mount tmpfs here: permission denied")

def test_importorskip():
    pytest.importorskip("jocko_no_such_module")

def test_not_applicable():
    not_applicable("external broker (JOCKO_TEST_BOOTSTRAP): the test cannot restart it")

def test_present():
    require(True, "always there")
'''


def run_cases(tmp_path: Path, strict: bool) -> tuple[dict[str, str], str]:
    """Each case's outcome (passed, skipped, failed: a failure or a setup error) and the
    child's report text."""
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {k: v for k, v in os.environ.items() if k != "JOCKO_TEST_STRICT"}
    if strict:
        env["JOCKO_TEST_STRICT"] = "1"
    env["PYTHONPATH"] = str(REPO)
    env["JOCKO_COMPAT_RESULTS"] = str(tmp_path / "compat.json")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", os.devnull, "-rA", "-q",
         "--junitxml", str(tmp_path / "report.xml"), "test_cases.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out: dict[str, str] = {}
    for case in ElementTree.parse(tmp_path / "report.xml").iter("testcase"):
        kinds = {child.tag for child in case}
        out[case.attrib["name"].removeprefix("test_")] = (
            "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds
            else "passed")
    assert len(out) == 7, r.stdout + r.stderr
    return out, r.stdout


def test_missing_prerequisites_fail_under_strict_mode(tmp_path: Path) -> None:
    out, text = run_cases(tmp_path, strict=True)
    assert out == {"missing_in_a_fixture": "failed", "require": "failed",
                   "requires_mark": "failed", "bare_skip": "failed",
                   "importorskip": "failed", "not_applicable": "skipped",
                   "present": "passed"}, text
    for reason in ("fault lab needs root", "no frobnicator on PATH", "needs /proc/self/fd",
                   "cannot mount tmpfs here", "jocko_no_such_module"):
        assert reason in text, f"the failure does not say {reason!r}:\n{text}"
    assert "JOCKO_TEST_STRICT=1" in text, text


def test_missing_prerequisites_skip_in_a_local_run(tmp_path: Path) -> None:
    out, text = run_cases(tmp_path, strict=False)
    assert out == {"missing_in_a_fixture": "skipped", "require": "skipped",
                   "requires_mark": "skipped", "bare_skip": "skipped",
                   "importorskip": "skipped", "not_applicable": "skipped",
                   "present": "passed"}, text
    assert "missing prerequisite: no frobnicator on PATH" in text, text


def test_fault_lab_prerequisites_hold_here() -> None:
    """The fault tests' prerequisites (root, `ip`), checked where the suite runs: under
    make test their absence is this failure, not a quiet skip of tests/faults."""
    from tests.faults.lab import can_isolate
    from tests.support.prereq import require
    ok, why = can_isolate()
    require(ok, f"fault lab {why}")
