"""tests/faults/summary.py: campaign reports added up and checked against the bar."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults import nemesis
from tests.faults.summary import FAMILIES, add_up, family, main, shortfalls


def test_every_nemesis_has_a_family() -> None:
    for name in [*nemesis.NEMESES, *nemesis.MATRIX]:
        assert family(name) in FAMILIES, name
    assert family("clean-bounce-leader") == "matrix"
    assert family("power-loss-quick-leader") == "power-loss"
    assert family("partition-isolate-leader-all") == "partition"


def _report(per: dict[str, float], commit: str = "abc1234", **kw: object) -> dict[str, object]:
    rep: dict[str, object] = {
        "commit": commit, "runs": 2, "invalid_runs": 0, "faults": 2 * len(per),
        "acknowledged": 1000, "wall_s": 600.0, "duplicates_client": 0,
        "producer_restarts": 0, "errors": {"lost": 0, "unseen": 0},
        "per_nemesis": {n: {"count": 2, "fault_s": m * 60, "not_recovered": 0}
                        for n, m in per.items()}}
    rep.update(kw)
    return rep


def test_minutes_add_up_per_nemesis_and_family() -> None:
    tot = add_up([_report({"kill-leader": 20, "pause-leader": 31}),
                  _report({"kill-random": 12, "kill-leader": 1}, commit="def5678")])
    assert tot["per_nemesis"]["kill-leader"] == pytest.approx(21)
    assert tot["per_family"] == pytest.approx({"kill": 33, "pause": 31})
    assert tot["fault_min"] == pytest.approx(64)
    assert tot["commits"] == ["abc1234", "def5678"]
    assert tot["acknowledged"] == 2000 and tot["runs"] == 4
    assert shortfalls(tot, 60, 30) == []
    assert shortfalls(tot, 100, 32) == ["64.0 min under fault in all, under 100",
                                        "pause: 31.0 min under fault, under 32"]


def test_an_error_or_invalid_run_fails_the_bar() -> None:
    bad = _report({"kill-leader": 40}, errors={"lost": 1, "unseen": 0}, invalid_runs=1)
    short = shortfalls(add_up([bad]), 30, 30)
    assert "1 invalid run(s)" in short and "lost: 1" in short


def test_main_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, short = tmp_path / "good.json", tmp_path / "short.json"
    good.write_text(json.dumps(_report({"kill-leader": 40})))
    short.write_text(json.dumps(_report({"kill-leader": 10})))
    assert main([str(good), "--min-total", "30"]) == 0
    assert "bar (30 min in all, 30 per family): met" in capsys.readouterr().out
    assert main([str(short), "--min-total", "30"]) == 1
    assert main([str(tmp_path / "missing.json")]) == 2
