"""The committed generated schemas match what the generator makes from the specs.

The specs are vendored under `specs/kafka-protocol/` (Apache-2.0 reference data),
so this runs on a clean checkout. `make check-generated` runs the same check.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.prereq import missing

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs" / "kafka-protocol"
GENERATOR = REPO / "tools" / "gen_protocol.py"
OUT = REPO / "jocko_py" / "protocol" / "messages"


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


@pytest.fixture
def specs() -> Path:
    if not (SPECS / "message-specs").is_dir():
        missing(f"Kafka JSON specs not found at {SPECS} (vendored specs missing)")
    return SPECS


def test_generated_code_is_up_to_date(specs: Path) -> None:
    result = _run("--specs", specs, "--out", OUT, "--check")
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout


def test_check_detects_a_hand_edit(specs: Path, tmp_path: Path) -> None:
    """The check is not vacuous: a copy with one edited module is reported stale."""
    out = tmp_path / "messages"
    assert _run("--specs", specs, "--out", out).returncode == 0
    target = out / "_generated" / "api_versions.py"
    target.write_text(target.read_text() + "\n# hand edit\n")
    result = _run("--specs", specs, "--out", out, "--check")
    assert result.returncode == 1
    assert "api_versions.py" in result.stderr


def test_generation_is_deterministic(specs: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert _run("--specs", specs, "--out", a).returncode == 0
    assert _run("--specs", specs, "--out", b).returncode == 0
    files_a = {p.name: p.read_bytes() for p in (a / "_generated").glob("*.py")}
    files_b = {p.name: p.read_bytes() for p in (b / "_generated").glob("*.py")}
    assert files_a and files_a == files_b


def test_makefile_default_specs_are_the_vendored_ones() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "SPECS ?= specs/kafka-protocol" in makefile
    assert (SPECS / "README.md").is_file(), "vendored specs keep their README and licence note"
