"""A rolling restart of three real brokers under load (Kafka 4.x clean shutdown, KIP-966).

Each broker in turn gets SIGTERM (controlled shutdown, every log flushed, the
clean-shutdown marker written with its broker epoch), starts again and registers with
that epoch as its previous one; the next is stopped only once it is back in every ISR.
Meanwhile an idempotent acks=all producer (librdkafka) writes to an RF=3,
``min.insync.replicas=2`` topic, and a watcher polls Metadata every 50 ms for the time
each partition's ISR is under min ISR. Checked: every acknowledged record is read back
exactly once, the producer saw no error, the time under min ISR is (near) zero, and the
controller took every restart for a clean one (the restarted broker kept its eligible
leader replica places instead of being treated as having lost data).

Run as a script, it measures bounces on any checkout (``--repo``), for before/after
comparisons: ``python -m tests.cluster_e2e.test_rolling_restart --bounces 9 --repo DIR``
prints the time from each restart to every ISR full again and the median.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from jocko_py.client import Client
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

TOPIC = "rolling"
PARTITIONS = 3
RF = 3
MIN_ISR = 2
# No writes: min.insync.replicas=3, so whichever broker is down is an eligible leader
# replica (ELR) of it; a restart taken for an unclean one would take it out of the ELR
# until it is back in the ISR, a clean one keeps it there.
STRICT = "rolling-strict"
# A rolling restart keeps at least two of three replicas up and in sync: the ISR is
# never expected under min ISR (a follower would have to lag replica.lag.time.max.ms,
# 6 s here, with one broker down). The bound leaves room for the watcher's 50 ms
# sampling and a transitional image on one broker, with a wide margin on this shared
# 2-core machine; an unclean-style restart that emptied ISRs would blow it.
UNDER_MIN_ISR_BOUND_S = 1.0


class IsrWatch(threading.Thread):
    """Polls Metadata (~every 50 ms) from a live broker other than the one being
    bounced; keeps each partition's latest ISR and the time it spent under min ISR."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(name="isr-watch", daemon=True)
        self.cluster = cluster
        self.stop = threading.Event()
        self.avoid: int | None = None  # the broker being bounced
        self.isr: dict[int, list[int]] = {}
        self.leader: dict[int, int] = {}
        self.seen_at = 0.0
        self.under_s = {p: 0.0 for p in range(PARTITIONS)}
        self.leaderless_s = {p: 0.0 for p in range(PARTITIONS)}
        self.lowest = {p: RF for p in range(PARTITIONS)}
        self.polls = 0
        self._clients: dict[int, Client] = {}
        # (time, replicas) whenever a replica of STRICT was in neither its ISR nor its ELR
        self.strict_dropped: list[tuple[float, list[int]]] = []
        # every change seen: (time, partition -> (leader, ISR)), when asked for
        self.timeline: list[tuple[float, dict[int, tuple[int, list[int]]]]] | None = None
        self._last_got: dict[int, tuple[int, list[int]]] | None = None

    def _poll(self) -> dict[int, tuple[int, list[int]]] | None:
        for bid, b in self.cluster.brokers.items():
            if bid == self.avoid or b.proc is None or b.proc.poll() is not None:
                continue
            try:
                c = self._clients.get(bid) or Client(b.bootstrap, timeout=2)
                self._clients[bid] = c
                r = c.request(75, 0, {"topics": [{"name": TOPIC}, {"name": STRICT}],
                                      "response_partition_limit": 100, "cursor": None})
                by_name = {t.name: t for t in r.topics if not t.error_code}
                parts = {p.partition_index: (p.leader_id, sorted(p.isr_nodes))
                         for p in by_name[TOPIC].partitions}
                for p in by_name[STRICT].partitions:
                    isr, elr = set(p.isr_nodes), set(p.eligible_leader_replicas or ())
                    gone = sorted(set(p.replica_nodes) - isr - elr)
                    if gone:  # a replica neither in sync nor eligible: treated as unclean
                        self.strict_dropped.append((time.monotonic(), gone))
                if len(parts) == PARTITIONS:
                    return parts
            except Exception:  # unreachable, timed out, an error answer: the next one
                old = self._clients.pop(bid, None)
                if old is not None:
                    old.close()
        return None

    def run(self) -> None:
        last = time.monotonic()
        while not self.stop.is_set():
            got = self._poll()
            now = time.monotonic()
            if got is not None:
                self.polls += 1
                for p, (leader, isr) in got.items():
                    self.lowest[p] = min(self.lowest[p], len(isr))
                    if len(isr) < MIN_ISR:
                        self.under_s[p] += now - last
                    if leader < 0:
                        self.leaderless_s[p] += now - last
                if self.timeline is not None and got != self._last_got:
                    self.timeline.append((now, got))
                    self._last_got = got
                self.isr = {p: isr for p, (_, isr) in got.items()}
                self.leader = {p: leader for p, (leader, _) in got.items()}
                self.seen_at, last = now, now
            self.stop.wait(0.05)
        for c in self._clients.values():
            c.close()

    def full_since(self, t: float) -> bool:
        return self.seen_at > t and len(self.isr) == PARTITIONS and all(
            len(isr) == RF for isr in self.isr.values())


class Load(threading.Thread):
    """An idempotent acks=all producer writing numbered values round-robin."""

    def __init__(self, bootstrap: str, rate: float = 300.0) -> None:
        super().__init__(name="load", daemon=True)
        self.stop = threading.Event()
        self.rate = rate
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []  # delivery failures and fatal client errors
        self.sent = 0
        self.undelivered = -1
        self._lock = threading.Lock()
        self.config = {
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 2000, "error_cb": self._on_error}

    def _on_error(self, err: Any) -> None:
        if err.fatal() or (not err.retriable() and err.code() not in _TRANSIENT):
            with self._lock:
                self.errors.append(f"client error: {err}")

    def _done(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.acked[msg.partition()].append(msg.value())
            else:
                self.errors.append(f"delivery: {err}")

    def run(self) -> None:
        p = Producer(self.config)  # dropped at the end: no reconnecting once all stopped
        next_at = time.monotonic()
        while not self.stop.is_set():
            p.produce(TOPIC, f"{self.sent:08d}".encode(), partition=self.sent % PARTITIONS,
                      on_delivery=self._done)
            self.sent += 1
            next_at += 1.0 / self.rate
            while (delay := next_at - time.monotonic()) > 0:
                p.poll(delay)
        self.undelivered = p.flush(60)


def _transient_codes() -> set[int]:
    from confluent_kafka import KafkaError
    # connection-level reports librdkafka raises through error_cb while a broker it
    # talks to restarts; it reconnects by itself (not errors of a request)
    return {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
            KafkaError._RESOLVE}


_TRANSIENT = _transient_codes()


def _read_all(bootstrap: str, expect: int, timeout: float = 60) -> dict[int, list[bytes]]:
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "rolling-reader",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    cons.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout
    try:
        while sum(map(len, got.values())) < expect and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None or m.error():
                continue
            part, value = m.partition(), m.value()
            assert part is not None and value is not None
            got[part].append(value)
    finally:
        cons.close()
    return got


def _create_topic(c: Cluster) -> None:
    with Client(c.brokers[1].bootstrap) as cl:
        cl.create_topic(TOPIC, PARTITIONS, RF, {"min.insync.replicas": str(MIN_ISR)})
        cl.create_topic(STRICT, 1, RF, {"min.insync.replicas": str(RF)})
    c.wait_for(f"{TOPIC} with full ISRs on every broker", lambda: all(
        len(c.partition_state(t, p, via=b)[1]) == RF
        for b in c.alive() for t, n in ((TOPIC, PARTITIONS), (STRICT, 1))
        for p in range(n)))


def bounce(c: Cluster, watch: IsrWatch, bid: int, timeout: float = 60.0) -> dict[str, float]:
    """SIGTERM ``bid``, start it again, wait until every ISR is full: the timings (s)."""
    b = c.brokers[bid]
    watch.avoid = bid
    t0 = time.monotonic()
    b.stop_gracefully(timeout=30)
    t1 = time.monotonic()
    b.start()
    t2 = time.monotonic()
    deadline = t2 + timeout
    # (the watcher keeps asking the others: a starting broker answers once caught up)
    while not watch.full_since(t2):
        if time.monotonic() > deadline:
            raise TimeoutError(f"broker {bid}: ISRs not full {timeout}s after its restart "
                               f"(last seen {watch.isr})\n" + c.log_tails())
        time.sleep(0.02)
    t3 = watch.seen_at
    watch.avoid = None
    return {"stop": t1 - t0, "start": t2 - t1, "full_isr_after_listening": t3 - t2,
            "full_isr_after_start": t3 - t1, "full_isr_after_sigterm": t3 - t0}


def back_to_back(c: Cluster, watch: IsrWatch, times: int, timeout: float = 90.0
                 ) -> dict[str, float]:
    """The fault campaign's clean-bounce-leader: SIGTERM the leader of partition 0 and
    start it again, ``times`` in a row, each time waiting only until it is registered
    again (not until it is back in the ISRs); then until every ISR is full: the time
    from the last start to that (s)."""
    for _ in range(times):
        bid = watch.leader.get(0, -1)
        if bid < 0:
            bid = sorted(c.brokers)[0]
        b = c.brokers[bid]
        b.stop_gracefully(timeout=30)
        b.start()
        c.wait_for(f"broker {bid} registered again", lambda b=b: b.broker_id in {
            x.node_id for x in c.metadata(via=b).brokers}, 60)
    t0 = time.monotonic()
    while not watch.full_since(t0):
        if time.monotonic() > t0 + timeout:
            raise TimeoutError(f"ISRs not full {timeout}s after the bounces "
                               f"(last seen {watch.isr})\n" + c.log_tails())
        time.sleep(0.02)
    return {"full_isr_after_last_start": watch.seen_at - t0}


def _controller_lines(c: Cluster, what: str) -> list[str]:
    out = []
    for b in c.brokers.values():
        text = b.log_path.read_text(errors="replace") if b.log_path.exists() else ""
        out += [line for line in text.splitlines() if what in line]
    return out


def test_rolling_restart_under_load_keeps_min_isr_and_every_record(cluster: Cluster) -> None:
    _create_topic(cluster)
    watch = IsrWatch(cluster)
    load = Load(cluster.bootstrap)
    watch.start()
    load.start()
    timings: dict[int, dict[str, float]] = {}
    try:
        time.sleep(1.0)  # the stream is flowing before the first bounce
        for bid in sorted(cluster.brokers):
            timings[bid] = bounce(cluster, watch, bid)
        time.sleep(0.5)
    finally:
        load.stop.set()
        load.join(90)
        watch.stop.set()
        watch.join(10)
    acked = sum(map(len, load.acked.values()))
    print(f"\nrolling restart: {load.sent} sent, {acked} acknowledged, {watch.polls} ISR polls")
    for bid, t in timings.items():
        print(f"  broker {bid}: " + ", ".join(f"{k} {v:.2f}s" for k, v in t.items()))
    print("  time under min ISR per partition: " + ", ".join(
        f"p{p} {s:.3f}s (smallest ISR {watch.lowest[p]})" for p, s in watch.under_s.items()))
    print(f"  polls that saw a {STRICT} replica outside its ISR and ELR: "
          f"{len(watch.strict_dropped)}")

    assert not load.errors, load.errors[:5]
    assert load.undelivered == 0 and acked == load.sent, (load.undelivered, acked, load.sent)
    assert acked > 0
    for p, s in watch.under_s.items():
        assert s < UNDER_MIN_ISR_BOUND_S, (p, watch.under_s, watch.lowest)
    # every restart was taken for a clean one: the restarted broker kept its ELR places
    # (seen in STRICT's ELR; and the active controller logs its decision)
    assert not watch.strict_dropped, watch.strict_dropped[:5]
    for bid in cluster.brokers:
        assert _controller_lines(cluster, f"broker {bid} restarted cleanly"), \
            f"broker {bid}'s restart not taken as clean\n" + cluster.log_tails()
    assert not _controller_lines(cluster, "restarted uncleanly")
    got = _read_all(cluster.bootstrap, acked)
    for p in range(PARTITIONS):
        assert len(got[p]) == len(set(got[p])), f"partition {p}: a record read twice"
        assert got[p] == load.acked[p], (
            f"partition {p}: read {len(got[p])}, acknowledged {len(load.acked[p])}")


def main() -> None:
    """Measure clean bounces on a checkout (see the module docstring)."""
    import tests.support.broker as support

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bounces", type=int, default=9)
    ap.add_argument("--back-to-back", type=int, default=0, metavar="ROUNDS",
                    help="instead: ROUNDS rounds of five leader bounces in a row")
    ap.add_argument("--timeline", action="store_true", help="print every ISR change seen")
    ap.add_argument("--keep", type=Path, help="run in (and keep) this directory")
    ap.add_argument("--repo", type=Path, default=support.REPO,
                    help="the checkout whose jocko_py the brokers run")
    args = ap.parse_args()
    support.REPO = args.repo.resolve()  # BrokerProcess runs `python -m jocko_py.cli` there
    with tempfile.TemporaryDirectory(prefix="jocko-bounce-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        c = Cluster(root)
        try:
            c.start()
            _create_topic(c)
            watch, load = IsrWatch(c), Load(c.bootstrap)
            t_origin = time.monotonic()
            if args.timeline:
                watch.timeline = []
            watch.start()
            load.start()
            time.sleep(1.0)
            runs = []
            for i in range(args.back_to_back):
                t = back_to_back(c, watch, 5)
                print(f"round {i + 1}: full ISR {t['full_isr_after_last_start']:.2f}s after "
                      f"the last start; under min ISR so far " + ", ".join(
                          f"p{p} {v:.2f}s" for p, v in watch.under_s.items())
                      + "; leaderless so far " + ", ".join(
                          f"p{p} {v:.2f}s" for p, v in watch.leaderless_s.items()), flush=True)
            for i in range(args.bounces if not args.back_to_back else 0):
                bid = sorted(c.brokers)[i % len(c.brokers)]
                t = bounce(c, watch, bid)
                runs.append(t)
                print(f"bounce {i + 1} (broker {bid}): " +
                      ", ".join(f"{k} {v:.2f}s" for k, v in t.items()), flush=True)
            load.stop.set()
            load.join(90)
            watch.stop.set()
            watch.join(10)
            for k in ("full_isr_after_listening", "full_isr_after_start",
                      "full_isr_after_sigterm"):
                vals = [r[k] for r in runs]
                if vals:
                    print(f"{k}: median {statistics.median(vals):.2f}s, "
                          f"worst {max(vals):.2f}s")
            print("under min ISR per partition: " + ", ".join(
                f"p{p} {s:.3f}s" for p, s in watch.under_s.items()))
            print("leaderless per partition: " + ", ".join(
                f"p{p} {s:.3f}s" for p, s in watch.leaderless_s.items()))
            print(f"acknowledged {sum(map(len, load.acked.values()))} of {load.sent}")
            for at, seen in watch.timeline or []:
                print(f"  {at - t_origin:7.2f}s " + "  ".join(
                    f"p{p} leader {ld} ISR {isr}" for p, (ld, isr) in sorted(seen.items())))
            print(f"polls that saw a {STRICT} replica outside its ISR and ELR: "
                  f"{len(watch.strict_dropped)} {watch.strict_dropped[:1]}")
            print(f"producer errors: {len(load.errors)} {load.errors[:3]}; "
                  f"clean restarts logged: {len(_controller_lines(c, 'restarted cleanly'))}, "
                  f"unclean: {len(_controller_lines(c, 'restarted uncleanly'))}")
        finally:
            c.stop()


if __name__ == "__main__":
    main()
