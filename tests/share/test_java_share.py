"""Java kafka-clients 4.4.0 `KafkaShareConsumer`s in one share group (issue 24, "What must be
shown"), each test against Apache Kafka 4.4.0 and against jocko-py (tests/share/conftest.py).

The workers (tests/java/share/ShareClient.java) acknowledge explicitly, choosing accept,
release or reject from the record's value ("a-", "r1-": release the first delivery,
"rl-": release always, "rj-": reject), and print each record with the delivery count the
broker gave it and whether the commitSync of its acknowledgement succeeded.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from jocko_py.admin import GroupAdmin
from jocko_py.client import Client, KafkaError
from tests.share.harness import (
    Delivery,
    ShareBroker,
    ShareWorker,
    create_topic,
    produce_values,
    require_offsets_api,
    set_group_config,
    wait_until,
    workers,
)

pytestmark = [pytest.mark.java, pytest.mark.timeout(400)]

LOCK_MS = 3000
LIMIT = 3  # share.delivery.count.limit of the groups here


def _setup(b: ShareBroker, values: list[str]) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"share-{tag}", f"sg-{tag}"
    create_topic(b.bootstrap, topic)
    set_group_config(b.bootstrap, group, {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": str(LOCK_MS),
        "share.delivery.count.limit": str(LIMIT),
    })
    produce_values(b.bootstrap, topic, values)
    return topic, group


def _all(ws: tuple[ShareWorker, ...]) -> list[Delivery]:
    return [d for w in ws for d in w.deliveries()]


def _diag(b: ShareBroker, ws: tuple[ShareWorker, ...]) -> str:
    return "\n".join([*(f"--- {w.name}: {w.lines()[-5:]}\n{w.log_tail(10)}" for w in ws),
                      f"--- broker ({b.kind}):\n{b.log_tail()}"])


def _lag(b: ShareBroker, group: str, topic: str) -> int:
    """The group's lag on partition 0 (DescribeShareGroupOffsets v1); -1 while unknown."""
    with Client(b.bootstrap, timeout=15) as c:
        adm = GroupAdmin(c)
        try:
            return adm.share_offsets(group, [topic]).get((topic, 0), (-1, -1))[1]
        except KafkaError:  # the coordinator still loading
            return -1
        finally:
            adm.close()


def test_three_consumers_accept_every_record_exactly_once(
        share_broker: ShareBroker, tmp_path: Path) -> None:
    n = 3000
    topic, group = _setup(share_broker, [f"a-{i}" for i in range(n)])
    ws = tuple(ShareWorker(f"c{i}", share_broker.bootstrap, topic, group, tmp_path)
               for i in range(3))
    with workers(*ws):
        wait_until(f"{n} records accepted", lambda: len(
            {d.offset for d in _all(ws) if d.action == "accept" and d.committed}) >= n,
            timeout=180, on_timeout=lambda: _diag(share_broker, ws))
        time.sleep(1.0)  # anything delivered twice would show by now
    ds = _all(ws)
    accepted = Counter(d.offset for d in ds if d.action == "accept" and d.committed)
    assert sorted(accepted) == list(range(n))
    twice = {o: c for o, c in accepted.items() if c != 1}
    assert not twice, f"accepted more than once: {dict(list(twice.items())[:10])}"
    assert all(d.count == 1 for d in ds), [d for d in ds if d.count != 1][:5]
    print({w.name: len(w.deliveries()) for w in ws})


def test_release_comes_back_reject_never_and_limit_archives(
        share_broker: ShareBroker, tmp_path: Path) -> None:
    require_offsets_api(share_broker)  # the group's lag says when all are done
    values = [f"{kind}-{i}" for i in range(10) for kind in ("a", "r1", "rj", "rl")]
    topic, group = _setup(share_broker, values)
    by_offset = dict(enumerate(values))
    ws = tuple(ShareWorker(f"c{i}", share_broker.bootstrap, topic, group, tmp_path)
               for i in range(2))
    with workers(*ws):
        # every record ends acknowledged or archived: the group's lag
        # (DescribeShareGroupOffsets v1) is 0 once the last one is
        wait_until("all records accepted, rejected or archived", lambda: len(
            {d.offset for d in _all(ws)}) == len(values) and _lag(
            share_broker, group, topic) == 0, timeout=120,
            on_timeout=lambda: _diag(share_broker, ws))
        time.sleep(LOCK_MS / 1000 + 1.0)  # a record not archived would be delivered again
    ds = _all(ws)
    seen: dict[int, list[Delivery]] = {}
    for d in ds:
        seen.setdefault(d.offset, []).append(d)
    for off, v in by_offset.items():
        got = sorted(seen.get(off, []), key=lambda d: d.count)
        counts = [d.count for d in got]
        if v.startswith("a-"):
            assert counts == [1] and got[0].committed, (v, got)
        elif v.startswith("r1-"):  # released once, back with delivery count 2, accepted
            assert counts == [1, 2], (v, got)
            assert [d.action for d in got] == ["release", "accept"] and got[1].committed
        elif v.startswith("rj-"):  # rejected: never delivered again
            assert counts == [1] and got[0].action == "reject", (v, got)
        else:  # released every time: archived after the limit, never delivered again
            assert counts == list(range(1, LIMIT + 1)), (v, got)


def test_sigkilled_holder_records_go_to_another_member_after_the_lock(
        share_broker: ShareBroker, tmp_path: Path) -> None:
    n = 40
    topic, group = _setup(share_broker, [f"a-{i}" for i in range(n)])
    holder = ShareWorker("holder", share_broker.bootstrap, topic, group, tmp_path,
                         hold=True, max_poll=n)
    other: ShareWorker | None = None
    try:
        wait_until("the holder to hold records", lambda: holder.has_line("HELD"),
                   timeout=90, on_timeout=lambda: _diag(share_broker, (holder,)))
        held = {d.offset for d in holder.deliveries()}
        assert held
        holder.kill()
        killed = time.monotonic()
        other = ShareWorker("other", share_broker.bootstrap, topic, group, tmp_path)
        wait_until("every record accepted by the other member", lambda: {
            d.offset for d in other.deliveries() if d.committed} >= set(range(n)),
            timeout=90, on_timeout=lambda: _diag(share_broker, (holder, other)))
        took = time.monotonic() - killed
    finally:
        holder.kill()
        if other is not None:
            other.stop()
    again = {d.offset: d.count for d in other.deliveries() if d.offset in held}
    assert set(again) == held
    assert all(c == 2 for c in again.values()), again  # the holder's was the first delivery
    print(f"{len(held)} held records redelivered {took:.1f} s after the SIGKILL "
          f"(lock {LOCK_MS} ms)")
