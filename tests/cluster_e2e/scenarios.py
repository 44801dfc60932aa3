"""The two scenarios every client runs against a three-broker cluster on loopback.

`leader_kill_scenario`: an RF=3 topic with min.insync.replicas=2; the client's idempotent
acks=all producer streams numbered records (values b"000000", b"000001", ...), paced so
that the stream lasts several seconds; once a third of them are acknowledged (or written,
for kcat, whose producer reports nothing per record) the leader of partition 0 is killed
with SIGKILL; the producer must finish with every record acknowledged; the killed broker
is restarted and rejoins every ISR; the client reads the topic back: every record exactly
once, and per partition in the order produced (strictly increasing numbers); then every
replica's log is identical.

`coordinator_kill_scenario`: one group member of the client consumes a 3-partition RF=3
topic and commits what it processed; once it processed and committed a first batch, the
group's coordinator (FindCoordinator: the leader of the group's __consumer_offsets
partition) is killed with SIGKILL and a second batch is produced (confluent-kafka,
idempotent, acks=all). The same member process keeps going: it processes the second
batch and its commits reach the new coordinator (the committed offsets become the log end
offsets); then it stops cleanly, and the killed broker comes back.

Both return timings that the test prints (`-s` shows them). Every wait is bounded.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from jocko_py.client import Client
from tests.groups.harness import Worker
from tests.support.cluster import Cluster

PARTITIONS = 3
RECORDS = 1500
KILL_AFTER = RECORDS // 3
# The producers send PACE_EVERY records, then sleep PACE_PAUSE_S: 1,500 records take
# about five seconds, so the kill lands mid-stream and the failover happens under load.
PACE_EVERY = 30
PACE_PAUSE_S = 0.1
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
GROUP_BATCH = 300


def values(n: int = RECORDS, prefix: str = "") -> list[bytes]:
    return [f"{prefix}{i:06d}".encode() for i in range(n)]


def partition_of(i: int) -> int:
    """The partition of record i, for clients that produce to an explicit partition."""
    return i % PARTITIONS


def create_topic(cluster: Cluster, name: str, partitions: int = PARTITIONS) -> None:
    """An RF=3 topic with min.insync.replicas=2, through a broker that is not the
    controller's (forwarded), visible with its full ISR on every broker (bounded)."""
    with Client(cluster.brokers[2].bootstrap) as cl:
        cl.create_topic(name, partitions, 3, TOPIC_CONFIGS)
    cluster.wait_for(f"{name} with full ISR on every broker", lambda: all(
        len(cluster.partition_state(name, p, via=b)[1]) == 3
        for b in cluster.alive() for p in range(partitions)))


def wait_until(what: str, pred: Callable[[], Any], timeout: float,
               diag: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{diag()}")
        time.sleep(0.1)


def wait_back_in_isr(cluster: Cluster, broker: int, topics: dict[str, int],
                     timeout: float = 90) -> None:
    cluster.wait_for(f"broker {broker} back in every ISR", lambda: all(
        broker in cluster.partition_state(t, p)[1]
        for t, n in topics.items() for p in range(n)), timeout=timeout)


def assert_replicas_agree(cluster: Cluster, topic: str, partitions: int = PARTITIONS) -> None:
    """Every replica's log of every partition is byte for byte the same (bounded wait:
    a follower may still be fetching the tail)."""
    for p in range(partitions):
        def same(p: int = p) -> bool:
            logs = []
            for b in cluster.brokers.values():
                segs = sorted((b.data_dir / f"{topic}-{p}").glob("*.log"))
                logs.append(b"".join(s.read_bytes() for s in segs))
            return all(x == logs[0] for x in logs)
        cluster.wait_for(f"{topic}-{p} identical on every replica", same, timeout=30)


def check_exactly_once_in_order(sent: list[bytes], got: dict[int, list[bytes]], what: str,
                                explicit_partitions: bool = True) -> None:
    """Every sent value read back exactly once; per partition in the order sent (the
    values are zero-padded sequence numbers, so: strictly increasing); with explicit
    partitions, record i in partition i % PARTITIONS."""
    problems = []
    counts = Counter(v for vs in got.values() for v in vs)
    dups = sorted(v for v, c in counts.items() if c > 1)
    missing = sorted(set(sent) - set(counts))
    extra = sorted(set(counts) - set(sent))
    if dups:
        problems.append(f"{len(dups)} read more than once, first {dups[:5]}")
    if missing:
        problems.append(f"{len(missing)} acknowledged but not read, first {missing[:5]}")
    if extra:
        problems.append(f"{len(extra)} read but never sent, first {extra[:5]}")
    for p, vs in sorted(got.items()):
        bad = next((i for i in range(1, len(vs)) if vs[i] <= vs[i - 1]), None)
        if bad is not None:
            problems.append(f"partition {p} out of order at index {bad}: "
                            f"{vs[max(0, bad - 2):bad + 2]}")
        if explicit_partitions:
            wrong = [v for v in vs if v in counts and partition_of(int(v[-6:])) != p]
            if wrong:
                problems.append(f"partition {p} holds {len(wrong)} records of other "
                                f"partitions, first {wrong[:3]}")
    assert not problems, (f"{what}: read {sum(counts.values())} of {len(sent)} records: "
                          + "; ".join(problems))


# --------------------------------------------------------------------------- leader kill


class Producing(Protocol):
    """A client's producer streaming the records (started by the scenario's caller)."""

    def progress(self) -> int:
        """Records acknowledged so far (kcat: written to its stdin)."""

    def finish(self, timeout: float) -> None:
        """Wait (bounded) for the end of the stream; AssertionError unless every record
        was acknowledged."""

    def describe(self) -> str:
        """Diagnostics for a failure (the client's output tails)."""


def leader_kill_scenario(cluster: Cluster, topic: str,
                         start: Callable[[list[bytes]], Producing],
                         read_back: Callable[[], dict[int, list[bytes]]],
                         explicit_partitions: bool = True) -> dict[str, float]:
    create_topic(cluster, topic)
    sent = values()
    leader = cluster.partition_state(topic, 0)[0]
    t0 = time.monotonic()
    prod = start(sent)
    try:
        wait_until(f"{KILL_AFTER} records acknowledged before the kill",
                   lambda: prod.progress() >= KILL_AFTER, 90, prod.describe)
        progress_at_kill = prod.progress()
        assert progress_at_kill < len(sent), (
            f"the stream ended before the kill ({progress_at_kill}): pace it slower")
        cluster.brokers[leader].kill()
        t_kill = time.monotonic()
        prod.finish(120)
        t_done = time.monotonic()
    except BaseException:
        print(prod.describe())
        raise
    new_leader = cluster.wait_for("a new leader of partition 0", lambda: (
        lp := cluster.partition_state(topic, 0)[0]) not in (leader, -1) and lp)
    assert new_leader != leader
    cluster.brokers[leader].start()
    wait_back_in_isr(cluster, leader, {topic: PARTITIONS})
    t_back = time.monotonic()
    got = read_back()
    check_exactly_once_in_order(sent, got, f"{topic} after killing leader {leader}",
                                explicit_partitions)
    assert_replicas_agree(cluster, topic)
    return {"produce_s": t_done - t0, "after_kill_s": t_done - t_kill,
            "acked_at_kill": progress_at_kill, "rejoin_s": t_back - t_done,
            "total_s": time.monotonic() - t0}


class ThreadProducing:
    """An in-process producer loop run in a thread: `send(values, acked, errors)` must
    produce every value (value i to partition i % PARTITIONS), count acknowledgements
    in `acked` (a one-element list, updated from callbacks) and append failures to
    `errors`, and return once everything was acknowledged or failed."""

    def __init__(self, name: str,
                 send: Callable[[list[bytes], list[int], list[str]], None],
                 sent: list[bytes]) -> None:
        self.name = name
        self.acked = [0]
        self.errors: list[str] = []
        self.crash: BaseException | None = None

        def run() -> None:
            try:
                send(sent, self.acked, self.errors)
            except BaseException as e:  # reported by finish()
                self.crash = e

        self.total = len(sent)
        self.thread = threading.Thread(target=run, name=f"{name}-producer", daemon=True)
        self.thread.start()

    def progress(self) -> int:
        if self.crash is not None:
            raise AssertionError(f"{self.name} producer failed: {self.crash!r}")
        return self.acked[0]

    def finish(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.name}: producer still running after {timeout}s"
        assert self.crash is None, f"{self.name} producer failed: {self.crash!r}"
        assert not self.errors, f"{self.name}: {len(self.errors)} sends failed: {self.errors[:5]}"
        assert self.acked[0] == self.total, f"{self.name}: {self.acked[0]} of {self.total} acked"

    def describe(self) -> str:
        return f"{self.name}: {self.acked[0]} acked, errors {self.errors[:5]}, crash {self.crash!r}"


# --------------------------------------------------------------------------- coordinator kill


class Member(Protocol):
    """One group member process of the client under test."""

    def records(self) -> list[tuple[int, int, bytes]]:
        """(partition, offset, value) of every record it processed so far."""

    def alive(self) -> bool: ...

    def stop_cleanly(self) -> None:
        """SIGTERM; AssertionError unless it committed, left and exited cleanly."""

    def kill(self) -> None: ...

    def describe(self) -> str: ...


def find_coordinator(cluster: Cluster, group: str) -> int:
    def ask() -> int | None:
        for b in cluster.alive():
            try:
                with Client(b.bootstrap, timeout=5) as c:
                    r = c.request(10, 3, {"key": group, "key_type": 0})
                if r.error_code == 0:
                    return int(r.node_id)
            except OSError:
                continue
        return None
    return int(cluster.wait_for(f"the coordinator of {group}", ask, timeout=30))


def committed_offsets(cluster: Cluster, group: str, topic: str,
                      partitions: int = PARTITIONS) -> dict[int, int] | None:
    """The group's committed offsets as its coordinator answers OffsetFetch; None while
    no coordinator answers (moving, loading)."""
    try:
        node = find_coordinator(cluster, group)
        with Client(cluster.brokers[node].bootstrap, timeout=5) as c:
            r = c.request(9, 8, {"groups": [{"group_id": group, "topics": [
                {"name": topic, "partition_indexes": list(range(partitions))}]}]})
    except (OSError, TimeoutError):
        return None
    g = r.groups[0]
    if g.error_code:
        return None
    return {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions
            if not p.error_code}


def end_offsets(cluster: Cluster, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    out = {}
    for p in range(partitions):
        leader = cluster.partition_state(topic, p)[0]
        with Client(cluster.brokers[leader].bootstrap, timeout=5) as c:
            out[p] = c.list_offset(topic, p, -1)[0]
    return out


def produce_confluent(bootstrap: str, topic: str, vals: list[bytes]) -> None:
    """Idempotent acks=all, value i of the batch to partition i % PARTITIONS; every
    record acknowledged (bounded)."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    prod = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000})
    for i, v in enumerate(vals):
        prod.produce(topic, value=v, partition=partition_of(i), on_delivery=delivered)
        prod.poll(0)
    assert prod.flush(90) == 0, "records left undelivered"
    assert not errors, errors[:5]


def coordinator_kill_scenario(cluster: Cluster, topic: str, group: str,
                              start_member: Callable[[str, str, str], Member],
                              ) -> dict[str, float]:
    create_topic(cluster, topic)
    first, second = values(GROUP_BATCH, "a"), values(GROUP_BATCH, "b")
    produce_confluent(cluster.bootstrap, topic, first)
    t0 = time.monotonic()
    member = start_member(cluster.bootstrap, topic, group)
    killed: int | None = None
    try:
        def processed() -> set[bytes]:
            return {v for _, _, v in member.records()}

        def check_alive() -> None:
            assert member.alive(), f"the member exited\n{member.describe()}"

        def done(batch: list[bytes]) -> bool:
            check_alive()
            return processed() >= set(batch)

        def committed_all(ends: dict[int, int]) -> bool:
            check_alive()
            return committed_offsets(cluster, group, topic) == ends

        wait_until("the first batch processed", lambda: done(first), 90, member.describe)
        t_first = time.monotonic()
        ends = end_offsets(cluster, topic)
        wait_until("the first batch committed", lambda: committed_all(ends), 30,
                   lambda: f"committed {committed_offsets(cluster, group, topic)}, "
                   f"end {ends}\n{member.describe()}")
        killed = find_coordinator(cluster, group)
        cluster.brokers[killed].kill()
        t_kill = time.monotonic()
        produce_confluent(cluster.bootstrap, topic, second)
        wait_until("the second batch processed after the coordinator was killed",
                   lambda: done(second), 90, member.describe)
        t_second = time.monotonic()
        ends = end_offsets(cluster, topic)
        wait_until("the second batch committed to the new coordinator",
                   lambda: committed_all(ends), 60,
                   lambda: f"committed {committed_offsets(cluster, group, topic)}, "
                   f"end {ends}, coordinator now {find_coordinator(cluster, group)}\n"
                   f"{member.describe()}")
        t_committed = time.monotonic()
        new_coordinator = find_coordinator(cluster, group)
        assert new_coordinator != killed
        member.stop_cleanly()
    finally:
        member.kill()
    recs = member.records()
    # Nothing lost; at-least-once allows repeats, which are counted (and must be
    # the same record at the same offset).
    by_pos: dict[tuple[int, int], bytes] = {}
    for p, o, v in recs:
        assert by_pos.setdefault((p, o), v) == v, f"{p}/{o} read as {by_pos[(p, o)]!r} and {v!r}"
    assert {v for v in by_pos.values()} == set(first) | set(second)
    assert committed_offsets(cluster, group, topic) == end_offsets(cluster, topic)
    cluster.brokers[killed].start()
    wait_back_in_isr(cluster, killed, {topic: PARTITIONS})
    return {"first_batch_s": t_first - t0, "second_batch_after_kill_s": t_second - t_kill,
            "committed_after_kill_s": t_committed - t_kill,
            "repeats": len(recs) - len(by_pos), "coordinator": float(killed),
            "new_coordinator": float(new_coordinator)}


class WorkerMember:
    """A tests/groups worker (output format: tests/groups/workers/common.py)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker.start()

    def records(self) -> list[tuple[int, int, bytes]]:
        return [(p, o, v.encode()) for p, o, v in self.worker.records()]

    def alive(self) -> bool:
        return self.worker.alive()

    def stop_cleanly(self) -> None:
        assert self.worker.stop_cleanly(), f"did not stop cleanly\n{self.worker.diag()}"

    def kill(self) -> None:
        self.worker.kill()

    def describe(self) -> str:
        return self.worker.diag()
