"""The fault checker finds each anomaly it claims to, on hand-made histories."""

from __future__ import annotations

from tests.faults.checker import availability, check
from tests.faults.workload import FinalRecord, History, Poll, Send


def history(final: dict[int, list[tuple[int, str, int, int, int]]], sends: list[Send],
            polls: list[Poll] | None = None) -> History:
    h = History()
    h.final = {p: [FinalRecord(*r) for r in recs] for p, recs in final.items()}
    h.sends = sends
    h.polls = polls or []
    return h


def ok(v: str, p: int, o: int, t: float = 0.0) -> Send:
    return Send("p0", v, p, t, t + 0.1, "ok", o)


def rec(o: int, v: str, pid: int = 7, epoch: int = 0, seq: int | None = None) -> tuple:
    return (o, v, pid, epoch, o if seq is None else seq)


def test_a_clean_history_is_valid() -> None:
    h = history({0: [rec(0, "a"), rec(1, "b")]}, [ok("a", 0, 0), ok("b", 0, 1)],
                [Poll("c", 1, 0, 0, "a", 1.0), Poll("c", 1, 0, 1, "b", 1.1)])
    r = check(h)
    assert r["valid"] and r["acknowledged"] == 2 and not any(r["errors"].values())


def test_lost_and_unseen() -> None:
    h = history({0: [rec(0, "a"), rec(2, "c")]},
                [ok("a", 0, 0), ok("b", 0, 1), ok("c", 0, 2), ok("d", 0, 3)])
    r = check(h)
    # b: acknowledged at 1, the log has a later offset, b is gone -> lost.
    # d: acknowledged at 3, nothing read at or after 3 -> unseen.
    assert r["errors"]["lost"] == 1 and r["errors"]["unseen"] == 1 and not r["valid"]
    assert r["errors"]["inconsistent_offsets"] == 0


def test_inconsistent_offsets() -> None:
    h = history({0: [rec(0, "a"), rec(1, "c")]}, [ok("a", 0, 0), ok("b", 0, 1)],
                [Poll("c", 1, 0, 0, "q", 1.0)])
    r = check(h)
    # offset 1 acknowledged for b but holds c; offset 0 polled as q but holds a
    assert r["errors"]["inconsistent_offsets"] == 2


def test_duplicates_told_apart_by_producer_identity() -> None:
    same = history({0: [rec(0, "a", seq=5), rec(1, "a", seq=5)]}, [ok("a", 0, 0)])
    r = check(same)
    assert r["errors"]["duplicates_broker"] == 1 and r["duplicates_client"] == 0
    bumped = history({0: [rec(0, "a", epoch=0, seq=5), rec(1, "a", epoch=1, seq=0)]},
                     [ok("a", 0, 0)])
    r = check(bumped)
    assert r["errors"]["duplicates_broker"] == 0 and r["duplicates_client"] == 1
    assert r["valid"]


def test_failed_then_visible_and_unexpected() -> None:
    h = history({0: [rec(0, "a"), rec(1, "zzz")]}, [Send("p0", "a", 0, 0, 1, "fail")])
    r = check(h)
    assert r["errors"]["failed_visible"] == 1 and r["errors"]["unexpected"] == 1


def test_indeterminate_is_not_an_error_either_way() -> None:
    h = history({0: [rec(0, "a")]}, [Send("p0", "a", 0, 0, 1, "info"),
                                     Send("p0", "b", 0, 0, 1, "info")])
    r = check(h)
    assert r["valid"] and r["indeterminate"] == 2 and r["indeterminate_in_log"] == 1


def test_pending_sends_make_a_run_invalid() -> None:
    r = check(history({}, [Send("p0", "a", 0, 0)]))
    assert r["pending"] == 1 and not r["valid"]


def test_poll_skips_and_nonmonotonic_polls_within_a_session() -> None:
    final = {0: [rec(i, f"v{i}") for i in range(5)]}
    polls = [Poll("c", 1, 0, 0, "v0", 1), Poll("c", 1, 0, 3, "v3", 2),   # skips 1, 2
             Poll("c", 1, 0, 2, "v2", 3),                                # goes back
             Poll("c", 2, 0, 0, "v0", 4)]                                # new session: fine
    r = check(history(final, [ok(f"v{i}", 0, i) for i in range(5)], polls))
    assert r["errors"]["poll_skips"] == 1 and r["errors"]["nonmonotonic_polls"] == 1


def test_availability_is_the_first_ack_of_a_write_invoked_after_the_fault() -> None:
    h = history({}, [ok("x", 0, 0, t=9.0),            # invoked before: not counted
                     Send("p0", "y", 0, 10.5, 13.0, "ok", 1),
                     Send("p0", "z", 1, 10.2, 10.4, "ok", 0)])
    [f] = availability(h, [{"nemesis": "kill-leader", "t_start": 10.0, "affected": [0, 1]}])
    assert f["first_ack_worst_s"] == 3.0 and f["first_ack_median_s"] == 3.0
    assert f["partitions_without_ack"] == 0
