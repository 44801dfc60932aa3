"""Incremental fetch sessions (KIP-227, issue 12 item 3).

Unit tests of the session cache and context rules (`broker/fetch_session.py`), raw
requests for the session errors, and real consumers over many partitions watched on the
wire (tests/parity/wire_tap.py): kafka-python and the Java consumer (kafka-clients 4.4.0)
open a session with a full fetch and then fetch incrementally, naming only the
partitions whose position moved and getting back only partitions with news.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from jocko_py.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSessionCache,
    next_epoch,
)
from jocko_py.client import Client
from jocko_py.protocol.errors import ErrorCode
from tests.parity.wire_tap import WireTap
from tests.support.broker import REPO, BrokerProcess, free_port
from tests.support.e2e import create_topics
from tests.support.prereq import missing

PARTITIONS = 64
JAVA_PARTITIONS = 1000  # the figure: a Java consumer over 1,000 partitions


# --------------------------------------------------------------------------- unit


@dataclass
class FP:
    topic: str
    partition: int
    fetch_offset: int = 0
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    max_bytes: int = 1 << 20


@dataclass
class RR:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = 10
    last_stable_offset: int = 10
    log_start_offset: int = 0
    records: bytes | None = b""
    diverging_epoch: tuple[int, int] | None = None


def _open(cache: FetchSessionCache, n: int, now: int = 0, privileged: bool = False) -> int:
    parts = [FP("t", i) for i in range(n)]
    ctx = cache.new_context(0, INITIAL_EPOCH, privileged, parts, (), now)
    sid, answer = ctx.respond([RR() for _ in parts], now)
    assert answer == list(range(n))
    return sid


def test_full_fetch_opens_a_session_and_incremental_fetches_carry_only_news() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, 4)
    assert sid != 0 and len(cache) == 1
    # nothing changed: the session is read whole, nothing is answered
    ctx = cache.new_context(sid, 1, False, [], (), 1)
    assert ctx.kind == "incremental" and len(ctx.to_read) == 4
    assert ctx.respond([RR() for _ in range(4)], 1) == (sid, [])
    # partition 2 has records, partition 3's high watermark moved
    ctx = cache.new_context(sid, 2, False, [FP("t", 1, fetch_offset=5)], (), 2)
    assert [p.fetch_offset for p in ctx.to_read] == [0, 5, 0, 0]
    results = [RR(), RR(), RR(records=b"x"), RR(high_watermark=11)]
    assert ctx.respond(results, 2) == (sid, [2, 3])
    # the partition that had data went to the end of the order
    ctx = cache.new_context(sid, 3, False, [], [("t", 0)], 3)
    assert [p.partition for p in ctx.to_read] == [1, 3, 2]
    # an error is always answered
    assert ctx.respond([RR(), RR(error=ErrorCode.NOT_LEADER_OR_FOLLOWER), RR()], 3)[1] == [1]
    assert cache.counters.created == 1 and cache.counters.incremental_fetches == 3


def test_session_errors() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, 2)
    ctx = cache.new_context(sid + 1, 1, False, [], (), 1)
    assert ctx.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    ctx = cache.new_context(sid, 2, False, [], (), 1)
    assert ctx.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(sid, 1, False, [], (), 1).kind == "incremental"
    # a retry of the same epoch (the response was lost) is refused: the client restarts
    assert cache.new_context(sid, 1, False, [], (), 1).error == \
        ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # epoch -1 with the id closes the session; epoch 0 with the id replaces it
    ctx = cache.new_context(sid, FINAL_EPOCH, False, [FP("t", 0)], (), 2)
    assert ctx.kind == "sessionless" and ctx.respond([RR()], 2) == (0, [0]) and len(cache) == 0
    sid = _open(cache, 2)
    ctx = cache.new_context(sid, INITIAL_EPOCH, False, [FP("t", 0)], (), 3)
    new, _ = ctx.respond([RR()], 3)
    assert new not in (0, sid) and list(cache.sessions) == [new]
    assert next_epoch(2**31 - 1) == 1


def test_eviction_policy() -> None:
    cache = FetchSessionCache(2, eviction_ms=1000)
    a = _open(cache, 5, now=0)
    b = _open(cache, 10, now=500)
    # full: a consumer's new session, however big, finds no room (id 0: it keeps
    # fetching in full)
    assert _open(cache, 3, now=600) == 0 and _open(cache, 50, now=600) == 0
    assert cache.counters.not_cached == 2
    # a follower's session evicts the consumer session with the fewest partitions
    c = _open(cache, 1, now=700, privileged=True)
    assert set(cache.sessions) == {b, c} and a not in cache.sessions
    # ... but never another follower's
    d = _open(cache, 1, now=800, privileged=True)
    assert set(cache.sessions) == {c, d}
    assert _open(cache, 100, now=900, privileged=True) == 0
    # a session idle past eviction_ms goes first, whoever asks
    cache.new_context(d, 1, True, [], (), 1900)
    e = _open(cache, 1, now=1901)
    assert set(cache.sessions) == {d, e}
    assert cache.counters.evicted == 3
    assert FetchSessionCache(0).new_context(0, 0, False, [], (), 0).respond([], 0)[0] == 0


# --------------------------------------------------------------------------- on the wire


@pytest.fixture(scope="module")
def tapped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, WireTap]]:
    port = free_port()
    tap = WireTap(("127.0.0.1", port)).start()
    b = BrokerProcess(tmp_path_factory.mktemp("sessions") / "data", port=port, overrides={
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{tap.port}"})
    b.start()
    try:
        yield b, tap
    finally:
        b.stop()
        tap.close()


def _produce(bootstrap: str, topic: str, per_partition: int,
             partitions: int = PARTITIONS) -> None:
    create_topics(bootstrap, [topic], partitions=partitions)
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        # several batches per partition, so that a consumer needs several fetches
        for rnd in range(4):
            for i in range(per_partition * partitions // 4):
                p.send(topic, f"v{rnd}-{i}".encode(), partition=i % partitions)
            p.flush(timeout=60)
    finally:
        p.close(timeout=10)


def _check_sessions(fetches: list, topic: str | None, min_incremental: int = 2,
                    partitions: int = PARTITIONS) -> tuple[list[int], list[int]]:
    """Fetches of `topic` used one session: a full fetch at epoch 0 answered with a
    session id, then incremental fetches with that id and rising epochs that name fewer
    partitions than the session holds and get back fewer."""
    mine = [f for f in fetches if topic is None or f.request.session_epoch > 0
            or any(t.topic == topic for t in f.request.topics)]
    assert mine, "no fetch seen"
    opened = [f for f in mine if f.request.session_epoch == INITIAL_EPOCH
              and f.response.session_id != 0]
    assert opened, [(f.request.session_id, f.request.session_epoch) for f in mine[:5]]
    sid = opened[0].response.session_id
    incremental = [f for f in mine if f.request.session_id == sid and f.request.session_epoch > 0]
    assert len(incremental) >= min_incremental
    assert all(f.response.error_code == 0 and f.response.session_id == sid
               for f in incremental)
    # epochs 1, 2, 3, ... each once, none skipped (the tap lists requests in the order
    # they are sent, and registers each before forwarding it, so none misses its
    # response; one connection answers in order, so only the last may be in flight)
    epochs = sorted(f.request.session_epoch for f in incremental)
    assert epochs == list(range(1, len(epochs) + 1)), epochs
    sent = [sum(len(t.partitions) for t in f.request.topics) for f in incremental]
    got = [sum(len(t.partitions) for t in f.response.responses) for f in incremental]
    # an incremental response leaves out the partitions with nothing new
    assert min(got) < partitions, (sent, got)
    return sent, got


def test_kafka_python_consumer_uses_incremental_sessions(
        tapped: tuple[BrokerProcess, WireTap]) -> None:
    broker, tap = tapped
    bootstrap = f"127.0.0.1:{tap.port}"
    topic = "sessions-kp"
    _produce(bootstrap, topic, 20)
    c = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      enable_auto_commit=False, fetch_max_wait_ms=100,
                      max_partition_fetch_bytes=256, fetch_max_bytes=2048)
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        c.seek_to_beginning()
        got = 0
        for _ in range(400):
            for recs in c.poll(timeout_ms=200).values():
                got += len(recs)
            if got >= 20 * PARTITIONS:
                break
        assert got == 20 * PARTITIONS
    finally:
        c.close()
    sent, _ = _check_sessions(tap.snapshot(), topic)
    # and an incremental request names only the partitions whose position moved
    assert min(sent) < PARTITIONS, sent


def test_java_consumer_uses_incremental_sessions(
        tapped: tuple[BrokerProcess, WireTap], tmp_path: Path) -> None:
    """The Java consumer (kafka-clients 4.4.0, a group member subscribed to 1,000
    partitions) opens a session and keeps fetching incrementally, by topic id (v18, the
    newest both speak)."""
    broker, tap = tapped
    bootstrap = f"127.0.0.1:{tap.port}"
    jars = REPO / ".cache" / "java-test-jars-4"
    classes = REPO / ".cache" / "java-test-classes"
    if not (jars / ".done").exists() or not (classes / ".done").exists():
        missing("Java test jars not fetched (make java-deps)")
    topic = "sessions-java"
    _produce(bootstrap, topic, 2, partitions=JAVA_PARTITIONS)
    before = len(tap.snapshot())
    out = tmp_path / "out.txt"
    proc = subprocess.Popen(
        ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
         "-cp", f"{classes}:{jars}/*", "jockopy.groups.GroupClient", "--bootstrap", bootstrap,
         "--topic", topic, "--group", "sessions-java", "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        def records() -> int:
            try:
                return sum(1 for line in out.read_text().splitlines() if line.startswith("R "))
            except FileNotFoundError:
                return 0
        while records() < 2 * JAVA_PARTITIONS and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        assert records() == 2 * JAVA_PARTITIONS
        # idle: a few incremental fetches with nothing new (bounded: a loaded machine
        # sends fewer in a given time)
        idle_from = len(tap.snapshot())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(
                1 for f in tap.snapshot()[idle_from:] if f.request.session_epoch > 0) < 3:
            time.sleep(0.2)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    fetches = tap.snapshot()[before:]
    assert {f.version for f in fetches} == {18}
    sent, got = _check_sessions(fetches, None, partitions=JAVA_PARTITIONS)
    # idle incremental fetches name no partition and get none back
    assert min(sent) == 0 and min(got) == 0, (sent, got)


def test_session_errors_on_the_wire(tapped: tuple[BrokerProcess, WireTap]) -> None:
    broker, _ = tapped
    with Client(broker.bootstrap) as c:
        c.create_topic("sessions-raw", partitions=3)
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": INITIAL_EPOCH,
                "topics": [{"topic": "sessions-raw", "partitions": [
                    {"partition": p, "fetch_offset": 0, "current_leader_epoch": -1,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 100} for p in range(3)]}],
                "forgotten_topics_data": [], "rack_id": ""}
        r = c.request(1, 12, body)
        sid = r.session_id
        assert r.error_code == 0 and sid != 0
        assert sum(len(t.partitions) for t in r.responses) == 3
        r = c.request(1, 12, {**body, "session_id": sid, "session_epoch": 1, "topics": [],
                              "forgotten_topics_data": [{"topic": "sessions-raw",
                                                         "partitions": [0]}]})
        assert (r.error_code, r.session_id) == (0, sid)
        assert r.responses == []  # nothing new for partitions 1 and 2 (empty)
        r = c.request(1, 12, {**body, "session_id": sid, "session_epoch": 5, "topics": []})
        assert (r.error_code, r.session_id, r.responses) == (
            ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
        r = c.request(1, 12, {**body, "session_id": sid + 1, "session_epoch": 1, "topics": []})
        assert r.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # sessionless (what jocko-py's own followers send): no session id back
        r = c.request(1, 12, {**body, "session_epoch": FINAL_EPOCH})
        assert (r.error_code, r.session_id) == (0, 0)


def test_session_by_topic_id_after_the_topic_is_recreated(
        tapped: tuple[BrokerProcess, WireTap]) -> None:
    """A session names topics by id (v13+): once its topic is deleted and created again
    under the same name, the session's partition answers UNKNOWN_TOPIC_ID rather than
    the new topic's records; a request naming the topic by name at v12 in that session
    gets FETCH_SESSION_TOPIC_ID_ERROR."""
    broker, _ = tapped
    name = "sessions-recreated"
    with Client(broker.bootstrap) as c:
        c.create_topic(name)
        tid = c.metadata([name]).topics[0].topic_id
        body = {"replica_state": {"replica_id": -1, "replica_epoch": -1}, "max_wait_ms": 0,
                "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                "session_epoch": INITIAL_EPOCH, "topics": [{"topic_id": tid, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "current_leader_epoch": -1,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1000}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        r = c.request(1, 17, body)
        sid = r.session_id
        assert r.error_code == 0 and sid != 0
        r = c.request(1, 12, {**body, "session_id": sid, "session_epoch": 1, "topics": []})
        assert r.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        r = c.request(1, 17, body)
        sid = r.session_id
        c.delete_topic(name)
        c.create_topic(name)
        r = c.request(1, 17, {**body, "session_id": sid, "session_epoch": 1, "topics": []})
        assert r.error_code == 0
        [t] = r.responses
        assert t.topic_id == tid
        assert [p.error_code for p in t.partitions] == [ErrorCode.UNKNOWN_TOPIC_ID]
