"""ShareFetch (78) and ShareAcknowledge (79) on the wire against one broker process:
sessions and their errors, acquisition shared between members, accept / release /
reject, a released record delivered again with its delivery count, lock expiry, the
release of a closing session's records, UNKNOWN_TOPIC_ID, and the long poll."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode as E
from tests.support.broker import BrokerProcess

LOCK_MS = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("share") / "data", overrides={
        "group.share.record.lock.duration.ms": str(LOCK_MS)})
    b.start()
    try:
        yield b
    finally:
        b.stop()


def share_fetch(c: Client, member: str, epoch: int, tid: uuid.UUID, acks: Any = None,
                max_wait_ms: int = 0, partitions: tuple[int, ...] = (0,),
                group: str = "sg") -> Any:
    return c.request(78, 2, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "max_records": 500, "batch_size": 500, "share_acquire_mode": 0,
        "is_renew_ack": False,
        "topics": [{"topic_id": tid, "partitions": [
            {"partition_index": p, "acknowledgement_batches": acks or []}
            for p in partitions]}],
        "forgotten_topics_data": []})


def share_ack(c: Client, member: str, epoch: int, tid: uuid.UUID,
              acks: list[tuple[int, int, int]], group: str = "sg") -> Any:
    return c.request(79, 2, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "is_renew_ack": False,
        "topics": [{"topic_id": tid, "partitions": [{
            "partition_index": 0, "acknowledgement_batches": [
                {"first_offset": a, "last_offset": b, "acknowledge_types": [t]}
                for a, b, t in acks]}]}]})


def acquired(r: Any) -> list[tuple[int, int, int]]:
    assert r.error_code == E.NONE, r
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in r.responses for p in t.partitions for a in p.acquired_records]


def test_share_fetch_and_acknowledge(broker: BrokerProcess) -> None:
    c = Client(broker.bootstrap)
    try:
        tid = c.create_topic("q", 1, 1).topic_id
        # the first fetch loads the share partition: latest (the default) starts at the
        # high watermark, so what is produced after it is delivered
        r = share_fetch(c, "m1", 0, tid)
        assert acquired(r) == [] and r.acquisition_lock_timeout_ms == LOCK_MS
        for _ in range(2):
            c.produce("q", 0, rb.build_batch([rb.NewRecord(None, b"v%d" % i)
                                              for i in range(5)]))
        r = share_fetch(c, "m1", 1, tid, max_wait_ms=2000)
        assert acquired(r) == [(0, 9, 1)]
        assert len(r.responses[0].partitions[0].records) > 0
        # another member finds nothing to acquire: the long poll waits, then answers
        assert acquired(share_fetch(c, "m2", 0, tid)) == []
        t0 = time.monotonic()
        assert acquired(share_fetch(c, "m2", 1, tid, max_wait_ms=300)) == []
        assert time.monotonic() - t0 >= 0.25
        # accept 0-4, release 5-6, reject 7-9
        a = share_ack(c, "m1", 2, tid, [(0, 4, 1), (5, 6, 2), (7, 9, 3)])
        assert a.error_code == E.NONE
        assert [p.error_code for t in a.responses for p in t.partitions] == [E.NONE]
        # not the owner any more: INVALID_RECORD_STATE, nothing changes
        a = share_ack(c, "m1", 3, tid, [(5, 5, 1)])
        assert [p.error_code for t in a.responses for p in t.partitions] == [
            E.INVALID_RECORD_STATE]
        # the released records come back with delivery count 2; rejected ones never
        r = share_fetch(c, "m2", 2, tid, max_wait_ms=2000)
        assert acquired(r) == [(5, 6, 2)]
        # piggybacked acknowledgement in ShareFetch; then closing m2's session releases
        # what it still holds
        r = share_fetch(c, "m2", 3, tid, acks=[
            {"first_offset": 5, "last_offset": 5, "acknowledge_types": [2]}])
        assert r.responses[0].partitions[0].acknowledge_error_code == E.NONE
        assert acquired(r) == [(5, 5, 3)]  # released, then acquired in the same request
        assert share_ack(c, "m2", -1, tid, []).error_code == E.NONE
        # m2 held 5 (count 3) and 6 (count 2): both available again
        r = share_fetch(c, "m1", 4, tid, max_wait_ms=2000)
        assert acquired(r) == [(5, 5, 4), (6, 6, 3)]
        # a lock that expires: m3 gets them after the lock duration
        t0 = time.monotonic()
        assert acquired(share_fetch(c, "m3", 0, tid)) == []
        r = share_fetch(c, "m3", 1, tid, max_wait_ms=5000)
        assert acquired(r) == [(5, 5, 5), (6, 6, 4)]
        assert time.monotonic() - t0 >= LOCK_MS / 1000 * 0.8
        # at the delivery count limit (5) a release archives
        a = share_ack(c, "m3", 2, tid, [(5, 6, 2)])
        assert [p.error_code for t in a.responses for p in t.partitions] == [E.NONE]
        assert acquired(share_fetch(c, "m3", 3, tid, max_wait_ms=2000)) == [(6, 6, 5)]
    finally:
        c.close()


def test_session_and_topic_errors(broker: BrokerProcess) -> None:
    c = Client(broker.bootstrap)
    try:
        tid = c.create_topic("q2", 1, 1).topic_id
        assert share_fetch(c, "m", 1, tid).error_code == E.SHARE_SESSION_NOT_FOUND
        assert share_ack(c, "m", 0, tid, []).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert share_fetch(c, "m", 0, tid).error_code == E.NONE
        assert share_fetch(c, "m", 7, tid).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert share_fetch(c, "m", 0, tid, acks=[
            {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]
        ).error_code == E.INVALID_REQUEST
        unknown = uuid.uuid4()
        r = share_fetch(c, "u", 0, unknown)
        assert r.error_code == E.NONE
        assert [(t.topic_id, p.partition_index, p.error_code)
                for t in r.responses for p in t.partitions] == [
            (unknown, 0, E.UNKNOWN_TOPIC_ID)]
        # a partition that does not exist
        r = share_fetch(c, "p", 0, tid, partitions=(3,))
        assert [p.error_code for t in r.responses for p in t.partitions] == [
            E.UNKNOWN_TOPIC_OR_PARTITION]
        assert share_fetch(c, "", 0, tid).error_code == E.INVALID_REQUEST
    finally:
        c.close()


def test_closing_the_connection_releases_the_sessions_records(broker: BrokerProcess) -> None:
    group = "sg-conn"
    admin = Client(broker.bootstrap)
    c1 = Client(broker.bootstrap)
    c2 = Client(broker.bootstrap)
    try:
        tid = admin.create_topic("q3", 1, 1).topic_id
        # a long lock (60 s): what comes back below was released by the close, not expired
        r = admin.request(44, 1, {"resources": [{
            "resource_type": 32, "resource_name": group, "configs": [{
                "name": "share.record.lock.duration.ms", "config_operation": 0,
                "value": "60000"}]}], "validate_only": False})
        assert [x.error_code for x in r.responses] == [0], r
        assert acquired(share_fetch(c1, "m1", 0, tid, group=group)) == []
        admin.produce("q3", 0, rb.build_batch([rb.NewRecord(None, b"x")]))
        r = share_fetch(c1, "m1", 1, tid, max_wait_ms=2000, group=group)
        assert acquired(r) == [(0, 0, 1)] and r.acquisition_lock_timeout_ms == 60000
        assert acquired(share_fetch(c2, "m2", 0, tid, group=group)) == []
        c1.close()
        r = share_fetch(c2, "m2", 1, tid, max_wait_ms=10000, group=group)
        assert acquired(r) == [(0, 0, 2)]
    finally:
        for c in (admin, c1, c2):
            c.close()
