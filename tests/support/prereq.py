"""Prerequisites of tests, and the one rule for skips under CI.

`make test` installs every tool the suite uses (kcat, Java jars, Go modules, Spark jars)
and runs as root (the fault lab's network namespaces and tmpfs disks), with
JOCKO_TEST_STRICT=1. There a test whose prerequisite is missing FAILS, saying what is
missing, so a broken set-up cannot pass as "all green" with the fault tests silently
dropped. In a local run the same test skips with the same words.

- `require(ok, what)` inside a test or fixture, `requires(ok, what)` as a mark:
  a prerequisite (a tool, root, `ip`, a tmpfs mount, a built jar).
- `not_applicable(why)`: a skip that is right in every run, CI included (an external
  broker the test cannot restart, a follow-on test whose producer test failed, which
  already fails the run, an explicit opt-out such as JOCKO_ALLOW_PURE_PYTHON).

Any other skip (a bare `pytest.skip`, an `importorskip`) counts as a missing
prerequisite: tests/conftest.py's report hook turns it into a failure under strict mode.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

STRICT = os.environ.get("JOCKO_TEST_STRICT") == "1"

MISSING = "missing prerequisite: "
NOT_APPLICABLE = "not applicable: "
STRICT_FAILURE = "JOCKO_TEST_STRICT=1 (make test installs every tool and runs as root): "


def missing(what: str) -> NoReturn:
    """This test cannot run without `what`: a failure under strict mode, else a skip."""
    if STRICT:
        pytest.fail(STRICT_FAILURE + MISSING + what, pytrace=False)
    pytest.skip(MISSING + what)


def require(ok: bool, what: str) -> None:
    """`missing(what)` unless `ok`."""
    if not ok:
        missing(what)


def requires(ok: bool, what: str) -> pytest.MarkDecorator:
    """A mark for tests that need `what` (evaluated at import, as skipif is): a skip in a
    local run; the report hook makes it a failure under strict mode."""
    return pytest.mark.skipif(not ok, reason=MISSING + what)


def not_applicable(why: str) -> NoReturn:
    """A skip that stays a skip under strict mode: the test does not apply to this run."""
    pytest.skip(NOT_APPLICABLE + why)


def strict_verdict(reason: str) -> str | None:
    """Under strict mode, the failure message for a skip with this reason (None: the skip
    stands). Only `not_applicable` skips stand."""
    if not STRICT or NOT_APPLICABLE in reason:
        return None
    return reason if STRICT_FAILURE in reason else STRICT_FAILURE + reason.removeprefix(
        "Skipped: ")
