"""The client workload of a fault run, and the history it records (Jepsen's queue
workload, with Kafka clients).

- Producers (confluent-kafka: librdkafka, idempotent, acks=all) send unique values
  ``<producer>-<n>`` round-robin over the topic's partitions, paced. Each send is an
  invocation; its delivery report completes it: ``ok`` with the offset, ``fail`` when the
  write definitely did not happen (librdkafka never sent it), ``info`` when it may or may
  not have (a timeout: the record can still be in the log). A producer whose instance
  raises a fatal error (the idempotence state is lost) is replaced by a new instance and
  the replacement is recorded as a restart.
- Assign consumers read every partition from the beginning with ``assign``; subscribe
  consumers form a group with ``subscribe`` and commit what they processed. Every polled
  record is recorded with the consumer, its assignment session (a new one after every
  rebalance), partition, offset and value.
- The final read: after the faults healed, every partition is read in full from its
  leader with jocko-py's own client, keeping each record's batch producer id, epoch and
  sequence (to tell a broker's failure to deduplicate from a client's re-send).

Every call here is bounded; threads stop on ``Workload.stop()``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from jocko_py.client import Client
from jocko_py.client import KafkaError as JockoKafkaError
from jocko_py.protocol.records import decode_records, iter_batches

# librdkafka's own log lines (connection refused while a broker is down, ...) go to this
# logger, not stderr; a campaign writes them to its log file.
RDKAFKA_LOG = logging.getLogger("tests.faults.rdkafka")

# librdkafka errors after which the record was never handed to a broker.
DEFINITE_FAILURES = {KafkaError._PURGE_QUEUE, KafkaError.MSG_SIZE_TOO_LARGE,
                     KafkaError._MSG_TIMED_OUT_QUEUE if hasattr(KafkaError, "_MSG_TIMED_OUT_QUEUE")
                     else -99999}


@dataclass
class Send:
    proc: str
    value: str
    partition: int
    t_invoke: float
    t_done: float | None = None
    outcome: str = "pending"  # ok | fail | info | pending
    offset: int = -1
    error: str = ""


@dataclass
class Poll:
    proc: str
    session: int
    partition: int
    offset: int
    value: str
    t: float


@dataclass
class FinalRecord:
    offset: int
    value: str
    producer_id: int
    producer_epoch: int
    sequence: int


@dataclass
class History:
    t0: float = field(default_factory=time.monotonic)
    sends: list[Send] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    restarts: list[tuple[float, str, str]] = field(default_factory=list)
    commits: list[tuple[float, str, int, int]] = field(default_factory=list)
    final: dict[int, list[FinalRecord]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0


class ProducerWorker(threading.Thread):
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int,
                 history: History, rate: float, stop: threading.Event,
                 message_timeout_ms: int = 30000) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.history, self.rate, self.stop_event = history, rate, stop
        self.message_timeout_ms = message_timeout_ms
        self.fatal: str | None = None
        self.error: BaseException | None = None

    def _producer(self) -> Producer:
        return Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": self.message_timeout_ms,
            "request.timeout.ms": 5000, "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 2000, "retry.backoff.ms": 100,
            "error_cb": self._on_error, "client.id": self.name, "logger": RDKAFKA_LOG,
            # idempotence state changes (epoch bumps and why) into the campaign's log
            "debug": "eos"})

    def _on_error(self, err: Any) -> None:
        if err.fatal():
            self.fatal = str(err)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported by Workload.check_threads
            self.error = e

    def _run(self) -> None:
        h = self.history
        p = self._producer()
        n = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            if self.fatal:
                with h.lock:
                    h.restarts.append((h.now(), self.name, self.fatal))
                self._drain(p, 5)
                self.fatal = None
                p = self._producer()
            s = Send(self.name, f"{self.name}-{n}", n % self.partitions, h.now())
            with h.lock:
                h.sends.append(s)
            try:
                p.produce(self.topic, s.value.encode(), partition=s.partition,
                          on_delivery=lambda err, msg, s=s: self._done(s, err, msg))
            except BufferError:
                s.outcome, s.t_done, s.error = "fail", h.now(), "local queue full"
            except Exception as e:  # a fatal producer refuses new records
                s.outcome, s.t_done, s.error = "fail", h.now(), f"produce(): {e}"
            n += 1
            p.poll(0)
            next_at += interval
            if next_at < time.monotonic() - 1:
                next_at = time.monotonic()  # fell behind (a stall): do not burst to catch up
            while (delay := next_at - time.monotonic()) > 0:
                p.poll(delay)  # returns early when it served a delivery report
        self._drain(p, self.message_timeout_ms / 1000 + 5)

    def _drain(self, p: Producer, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(p) and time.monotonic() < deadline:
            p.poll(0.1)

    def _done(self, s: Send, err: Any, msg: Any) -> None:
        s.t_done = self.history.now()
        if err is None:
            # librdkafka reports some successes without an offset (a retry the broker
            # answered as a duplicate it could not place): kept as -1
            off = msg.offset()
            s.outcome, s.offset = "ok", off if off is not None and off >= 0 else -1
        else:
            s.error = str(err)
            s.outcome = "fail" if err.code() in DEFINITE_FAILURES else "info"


class ConsumerWorker(threading.Thread):
    """mode "assign": every partition from offset 0; mode "subscribe": the group."""

    def __init__(self, name: str, mode: str, bootstrap: str, topic: str, partitions: int,
                 history: History, stop: threading.Event, group: str) -> None:
        super().__init__(name=name, daemon=True)
        self.mode, self.bootstrap, self.topic, self.partitions = mode, bootstrap, topic, partitions
        self.history, self.stop_event, self.group = history, stop, group
        self.session = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:
            self.error = e

    def _on_assign(self, c: Any, parts: Any) -> None:
        self.session += 1

    def _on_revoke(self, c: Any, parts: Any) -> None:
        self.session += 1

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        h = self.history
        c = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
            "socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 2000,
            "client.id": self.name, "logger": RDKAFKA_LOG})
        try:
            if self.mode == "assign":
                c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
                self.session = 1
            else:
                c.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self.stop_event.is_set():
                msgs = c.consume(500, 0.5)
                polled = []
                for m in msgs:
                    if m.error():
                        continue
                    polled.append(Poll(self.name, self.session, m.partition(), m.offset(),
                                       (m.value() or b"").decode(), h.now()))
                if polled:
                    with h.lock:
                        h.polls.extend(polled)
                    if self.mode == "subscribe":
                        last: dict[int, int] = {}
                        for pl in polled:
                            last[pl.partition] = pl.offset + 1
                        try:
                            c.commit(offsets=[TopicPartition(self.topic, p, o)
                                              for p, o in last.items()], asynchronous=True)
                            with h.lock:
                                h.commits.extend((h.now(), self.name, p, o)
                                                 for p, o in last.items())
                        except Exception:
                            pass  # a commit during a fault may fail: reprocessing is allowed
        finally:
            c.close()


class Workload:
    def __init__(self, bootstrap: str, topic: str, partitions: int, producers: int = 3,
                 rate: float = 60.0, assign_consumers: int = 1,
                 subscribe_consumers: int = 2) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.history = History()
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.producers = [ProducerWorker(f"p{i}", bootstrap, topic, partitions, self.history,
                                         rate, self.stop_producing) for i in range(producers)]
        self.consumers = [ConsumerWorker(f"a{i}", "assign", bootstrap, topic, partitions,
                                         self.history, self.stop_consuming, f"jf-assign-{i}")
                          for i in range(assign_consumers)]
        self.consumers += [ConsumerWorker(f"s{i}", "subscribe", bootstrap, topic, partitions,
                                          self.history, self.stop_consuming, "jf-group")
                           for i in range(subscribe_consumers)]

    def start(self) -> None:
        for t in [*self.producers, *self.consumers]:
            t.start()

    def stop(self, drain_s: float = 45.0) -> None:
        """Stop producing, wait (bounded) for every delivery report, then stop consuming."""
        self.stop_producing.set()
        for t in self.producers:
            t.join(drain_s)
        self.stop_consuming.set()
        for c in self.consumers:
            c.join(30)

    def thread_errors(self) -> list[str]:
        out = []
        for t in [*self.producers, *self.consumers]:
            if t.is_alive():
                out.append(f"{t.name} did not stop")
            if t.error is not None:
                out.append(f"{t.name} crashed: {t.error!r}")
        return out


def final_read(bootstrap: str, topic: str, partitions: int, history: History,
               timeout: float = 60.0) -> None:
    """Read every partition in full from its leader (bounded), into ``history.final``."""
    for p in range(partitions):
        deadline = time.monotonic() + timeout
        while True:
            try:
                history.final[p] = _read_partition(bootstrap, topic, p)
                break
            except (OSError, ConnectionError, JockoKafkaError) as e:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"final read of {topic}-{p}: {e}") from e
                time.sleep(0.5)


def _read_partition(bootstrap: str, topic: str, partition: int) -> list[FinalRecord]:
    out: list[FinalRecord] = []
    with Client(bootstrap, timeout=10) as boot:
        c = boot.for_leader(topic, partition)
        try:
            end, _ = c.list_offset(topic, partition, -1)
            offset = 0
            while offset < end:
                resp = c.fetch(topic, partition, offset, max_wait_ms=100, max_bytes=4 << 20)
                data = resp.records or b""
                if not data:
                    raise ConnectionError(f"empty fetch at {offset} below end {end}")
                mv = memoryview(data)
                for pos, h in iter_batches(mv, validate_crc=True, allow_partial_tail=True):
                    for r in decode_records(mv[pos:pos + h.size], h):
                        if r.offset < offset:
                            continue
                        out.append(FinalRecord(r.offset, (r.value or b"").decode(),
                                               h.producer_id, h.producer_epoch,
                                               h.base_sequence + (r.offset - h.base_offset)))
                    offset = h.base_offset + h.last_offset_delta + 1
        finally:
            if c is not boot:
                c.close()
    return out
