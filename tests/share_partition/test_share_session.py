"""The share session cache (broker/share/session.py): epochs 0 (open), -1 (close) and
the ones between, Kafka's errors, the session limit and partitions added and forgotten."""

from __future__ import annotations

import uuid

from jocko_py.broker.share.session import MAX_EPOCH, ShareSessionCache, next_epoch
from jocko_py.protocol.errors import ErrorCode as E

T = uuid.uuid4()


def test_open_then_consecutive_epochs() -> None:
    c = ShareSessionCache()
    d = c.fetch("g", "m", 0, [(T, 0)], [], False, now=0)
    assert d.error == E.NONE and d.partitions == ((T, 0),)
    assert c.fetch("g", "m", 1, [(T, 1)], [], True, now=1).partitions == ((T, 0), (T, 1))
    assert c.fetch("g", "m", 2, [], [(T, 0)], False, now=2).partitions == ((T, 1),)
    assert c.acknowledge("g", "m", 3, now=3).error == E.NONE
    s = c.get("g", "m")
    assert s is not None and s.epoch == 4


def test_wrong_epoch_and_missing_session() -> None:
    c = ShareSessionCache()
    assert c.fetch("g", "m", 1, [], [], False, 0).error == E.SHARE_SESSION_NOT_FOUND
    assert c.acknowledge("g", "m", 1, 0).error == E.SHARE_SESSION_NOT_FOUND
    assert c.fetch("g", "m", -1, [], [], False, 0).error == E.SHARE_SESSION_NOT_FOUND
    c.fetch("g", "m", 0, [(T, 0)], [], False, 0)
    assert c.fetch("g", "m", 5, [], [], False, 0).error == E.INVALID_SHARE_SESSION_EPOCH
    assert c.acknowledge("g", "m", 2, 0).error == E.INVALID_SHARE_SESSION_EPOCH
    s = c.get("g", "m")
    assert s is not None and s.epoch == 1  # errors do not move the epoch


def test_acknowledgements_in_the_opening_fetch_are_refused() -> None:
    c = ShareSessionCache()
    assert c.fetch("g", "m", 0, [(T, 0)], [], True, 0).error == E.INVALID_REQUEST
    assert c.get("g", "m") is None


def test_acknowledge_cannot_open_a_session() -> None:
    c = ShareSessionCache()
    assert c.acknowledge("g", "m", 0, 0).error == E.INVALID_SHARE_SESSION_EPOCH


def test_reopen_replaces_the_session() -> None:
    c = ShareSessionCache()
    c.fetch("g", "m", 0, [(T, 0)], [], False, 0)
    c.fetch("g", "m", 1, [], [], False, 0)
    d = c.fetch("g", "m", 0, [(T, 2)], [], False, 0)
    assert d.partitions == ((T, 2),)
    s = c.get("g", "m")
    assert s is not None and s.epoch == 1


def test_close_with_fetch_and_with_acknowledge() -> None:
    c = ShareSessionCache()
    c.fetch("g", "m", 0, [(T, 0)], [], False, 0)
    d = c.fetch("g", "m", -1, [], [], True, 0)
    assert d.error == E.NONE and d.closing and d.partitions == ()
    assert c.get("g", "m") is None
    c.fetch("g", "m", 0, [(T, 0)], [], False, 0)
    assert c.acknowledge("g", "m", -1, 0).closing
    assert len(c) == 0


def test_session_limit() -> None:
    c = ShareSessionCache(max_sessions=2)
    c.fetch("g", "a", 0, [], [], False, 0)
    c.fetch("g", "b", 0, [], [], False, 0)
    assert c.fetch("g", "c", 0, [], [], False, 0).error == E.SHARE_SESSION_LIMIT_REACHED
    # an existing member may reopen; a freed slot may be taken
    assert c.fetch("g", "a", 0, [], [], False, 0).error == E.NONE
    c.remove("g", "b")
    assert c.fetch("g", "c", 0, [], [], False, 0).error == E.NONE


def test_sessions_are_per_group_and_member_and_die_with_their_connection() -> None:
    c = ShareSessionCache()
    c.fetch("g1", "m", 0, [], [], False, 0, connection="c1")
    c.fetch("g2", "m", 0, [], [], False, 0, connection="c2")
    assert [s.group_id for s in c.close_connection("c1")] == ["g1"]
    assert c.get("g2", "m") is not None


def test_epoch_wraps_to_one() -> None:
    assert next_epoch(MAX_EPOCH) == 1 and next_epoch(5) == 6


def test_by_duration_parses_iso_8601_durations() -> None:
    from jocko_py.broker.share.manager import _iso_duration_ms

    assert _iso_duration_ms("PT1H") == 3_600_000
    assert _iso_duration_ms("P1DT2M3.5S") == 86_400_000 + 120_000 + 3_500
    assert _iso_duration_ms("PT0S") == 0
    for bad in ("P", "PT", "1H", "PT1X", ""):
        assert _iso_duration_ms(bad) is None
