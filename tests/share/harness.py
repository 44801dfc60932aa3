"""Share groups (KIP-932) driven by the Java client 4.4.0, against Apache Kafka 4.4.0 and
jocko-py (issue 24, "What must be shown").

- `ShareBroker`: the broker under test, "kafka44" (one Apache Kafka 4.4.0 node,
  tests/support/kafka44.py) or "jocko" (one `jocko-py broker`), both started with
  `BROKER_CONFIG` (a 1 s minimum lock duration, so a group may set a short
  `share.record.lock.duration.ms`).
- `jocko_missing()`: which piece of issue 24 jocko-py still lacks for these tests (the
  share APIs it does not advertise, the broker configs it does not know), or None.
- `ShareWorker`: tests/java/share/ShareClient.java's `consume` mode in its own JVM (a
  KafkaShareConsumer in explicit acknowledgement mode), its output parsed: the
  deliveries (`Delivery`) and which of them a successful commitSync confirmed.
- `set_group_config` (IncrementalAlterConfigs on the GROUP resource, as Kafka's Admin
  sends it) and `produce_values` (one batch per 500 values to partition 0).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jocko_py.client import Client, KafkaError
from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.records import NewRecord, build_batch
from tests.support import kafka44
from tests.support.broker import REPO, BrokerProcess, terminate

CLASSES = REPO / ".cache-extra" / "share-44-classes"
JAVA_OPTS = ["-Xms32m", "-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]

# broker configs both brokers start with: groups may lower their lock duration to 1 s
BROKER_CONFIG = {
    "group.share.min.record.lock.duration.ms": "1000",
}
# the APIs the share consumer needs, with the issue-24 helper that builds each
SHARE_APIS = {
    76: "ShareGroupHeartbeat (share-group)",
    77: "ShareGroupDescribe (share-group)",
    78: "ShareFetch (share-part)",
    79: "ShareAcknowledge (share-part)",
    90: "DescribeShareGroupOffsets (share-coord)",
}


def java_missing() -> str | None:
    """Why the Java share worker cannot run here, or None."""
    if why := kafka44.missing():
        return why
    if not (CLASSES / ".done").exists():
        return "ShareClient not compiled (make -C tests/java share-44)"
    return None


def require_offsets_api(b: ShareBroker) -> None:
    """A test reading DescribeShareGroupOffsets: on jocko-py, `missing` until it serves it."""
    from tests.support.prereq import missing

    if b.kind == "jocko" and (why := jocko_missing(b.bootstrap, apis=(90,))):
        missing(why)


def api_keys(bootstrap: str) -> set[int]:
    with Client(bootstrap, timeout=10) as c:
        r = c.request(18, 3, {"client_software_name": "jocko-py-tests",
                              "client_software_version": "1"})
        return {k.api_key for k in r.api_keys}


def jocko_missing(bootstrap: str | None = None, configs: bool = True,
                  apis: tuple[int, ...] = (76, 77, 78, 79)) -> str | None:
    """The issue-24 pieces jocko-py lacks for the share tests, or None: the broker configs
    `BROKER_CONFIG` names (checked without a broker; unless not `configs`) and, given a
    running broker, the share APIs it does not advertise."""
    from jocko_py.broker.config import DEFAULTS

    try:
        from jocko_py.broker.group.group_configs import GROUP_CONFIGS
        bounds = {b[0] for d in GROUP_CONFIGS.values() for b in (d.lo, d.hi) if b}
    except ImportError:
        bounds = set()
    unknown = [k for k in BROKER_CONFIG if k not in DEFAULTS and k not in bounds] \
        if configs else []
    if unknown:
        return f"jocko-py does not know the broker config(s) {', '.join(unknown)} (share-group)"
    if bootstrap is not None:
        have = api_keys(bootstrap)
        lacking = [SHARE_APIS[k] for k in apis if k not in have]
        if lacking:
            return "jocko-py does not serve " + ", ".join(lacking)
    return None


class ShareBroker:
    """One broker of `kind` ("kafka44" or "jocko") under `root`, with `BROKER_CONFIG`."""

    def __init__(self, kind: str, root: Path, extra: dict[str, str] | None = None,
                 defaults: bool = False) -> None:
        """`defaults`: the broker's own configs, without `BROKER_CONFIG`."""
        self.kind = kind
        conf = ({} if defaults else BROKER_CONFIG) | dict(extra or {})
        self.proc: BrokerProcess
        if kind == "kafka44":
            self.proc = kafka44.ApacheKafka44(root / "data", extra=conf)
        else:
            self.proc = BrokerProcess(root / "data", overrides=conf | {
                "group.initial.rebalance.delay.ms": "0"})

    @property
    def bootstrap(self) -> str:
        return self.proc.bootstrap

    def start(self) -> ShareBroker:
        if isinstance(self.proc, kafka44.ApacheKafka44):
            self.proc.start(timeout=120)
            self.proc.wait_ready(timeout=120)
        else:
            self.proc.start(timeout=60)
        return self

    def stop(self) -> None:
        self.proc.stop()

    def alive(self) -> bool:
        return self.proc.proc is not None and self.proc.proc.poll() is None

    def log_tail(self) -> str:
        return self.proc.log_tail()


def create_topic(bootstrap: str, topic: str, partitions: int = 1, replication: int = 1,
                 timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with Client(bootstrap, timeout=30) as c:
        while True:
            try:
                c.create_topic(topic, partitions, replication)
                break
            except KafkaError as e:
                if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        while time.monotonic() < deadline:  # until the partition has a leader
            md = c.metadata([topic])
            if all(p.leader_id >= 0 and not p.error_code
                   for t in md.topics for p in t.partitions) and md.topics[0].partitions:
                return
            time.sleep(0.2)
    raise TimeoutError(f"topic {topic} has no leader after {timeout}s")


def set_group_config(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource `group` (resource type 32)."""
    with Client(bootstrap, timeout=30) as c:
        r = c.request(44, 1, {"resources": [{
            "resource_type": 32, "resource_name": group,
            "configs": [{"name": k, "config_operation": 0, "value": v}
                        for k, v in configs.items()]}], "validate_only": False})
        res = r.responses[0]
        if res.error_code:
            raise KafkaError(res.error_code, res.error_message)


def produce_values(bootstrap: str, topic: str, values: list[str]) -> None:
    """`values` in order to partition 0 of `topic` (its leader), acks=all."""
    with Client(bootstrap, timeout=30) as c0:
        c = c0.for_leader(topic, 0)
        try:
            for i in range(0, len(values), 500):
                batch = build_batch([NewRecord(None, v.encode()) for v in values[i:i + 500]])
                c.produce(topic, 0, batch)
        finally:
            if c is not c0:
                c.close()


@dataclass(frozen=True)
class Delivery:
    worker: str
    partition: int
    offset: int
    count: int  # the delivery count the client saw
    action: str  # accept | release | reject | (held: nothing)
    value: str
    committed: bool  # a commitSync that covered it succeeded


class ShareWorker:
    """tests/java/share/ShareClient.java `consume` in its own JVM."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, workdir: Path,
                 hold: bool = False, max_poll: int = 100, quiet: bool = False,
                 pause_ms: int = 0, acquire_mode: str | None = None) -> None:
        self.name = name
        self.out = workdir / f"{name}.out"
        self.log = workdir / f"{name}.log"
        cmd = ["java", *JAVA_OPTS, "-cp", f"{CLASSES}:{kafka44.JARS}/*", "ShareClient",
               "consume", "--bootstrap", bootstrap, "--topic", topic, "--group", group,
               "--out", str(self.out), "--max-poll", str(max_poll)]
        if hold:
            cmd += ["--hold", "1"]
        if quiet:
            cmd += ["--quiet", "1"]
        if pause_ms:
            cmd += ["--pause-ms", str(pause_ms)]
        if acquire_mode:
            cmd += ["--acquire-mode", acquire_mode]
        with open(self.log, "ab") as lf:
            self.proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, cwd=REPO)

    def lines(self) -> list[str]:
        try:
            return self.out.read_text().splitlines()
        except FileNotFoundError:
            return []

    def deliveries(self) -> list[Delivery]:
        """Every record the worker got, in order, with whether a commit confirmed it."""
        out: list[Delivery] = []
        pending: list[list[str]] = []
        for ln in self.lines():
            parts = ln.split(" ", 5)
            if parts[0] == "R" and len(parts) == 6:
                pending.append(parts)
            elif parts[0] in ("C", "E"):
                out += [self._delivery(p, parts[0] == "C") for p in pending]
                pending = []
        return out + [self._delivery(p, False) for p in pending]

    def _delivery(self, p: list[str], committed: bool) -> Delivery:
        return Delivery(self.name, int(p[1]), int(p[2]), int(p[3]), p[4], p[5], committed)

    def has_line(self, prefix: str) -> bool:
        return any(ln.startswith(prefix) for ln in self.lines())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        terminate(self.proc, 20.0, signal.SIGTERM)

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "<no log>"


@contextmanager
def workers(*ws: ShareWorker) -> Iterator[tuple[ShareWorker, ...]]:
    try:
        yield ws
    finally:
        for w in ws:
            w.stop()


def wait_until(what: str, pred: Callable[[], Any], timeout: float,
               on_timeout: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{on_timeout()}")
        time.sleep(0.25)
