"""Shared pieces of the end-to-end real-client tests (tests/clients, tests/badinput).

- `TargetBroker`: the broker under test. By default a `jocko-py broker` subprocess
  (`BrokerProcess`); `JOCKO_TEST_BOOTSTRAP=host:port` points the tests at an already
  running external broker (restart tests skip); `JOCKO_TEST_KAFKA_REF=1` starts the
  reference Apache Kafka 3.9 from `.cache/kafka-ref` (see tests/java/kafka-ref) instead
  of jocko-py, restartable, to check that the tests themselves are right.
- `Dataset`/`Rec`: the deterministic records every client produces (keys, headers,
  timestamps, ~100-byte values) and `assert_same_records`, a byte-for-byte comparison
  that names the first differences.
- A tab-separated, base64 interchange format for records, shared with the Java client
  (tests/java/src/main/java/jockopy/e2e/E2EClient.java).
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tests.support.broker import REPO, BrokerProcess, free_port

CODECS: tuple[str, ...] = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_CODEC = 10_000
PARTITIONS = 3
VALUE_SIZE = 100

Header = tuple[str, bytes | None]


# --------------------------------------------------------------------------- broker


class TargetBroker:
    """The broker the e2e tests talk to: jocko-py, reference Kafka, or external."""

    def __init__(self, workdir: Path) -> None:
        self.external = os.environ.get("JOCKO_TEST_BOOTSTRAP", "").strip()
        self.kind = "external" if self.external else "jocko-py"
        self.proc: BrokerProcess | None = None
        if not self.external:
            if os.environ.get("JOCKO_TEST_KAFKA_REF", "") not in ("", "0"):
                self.kind = "kafka-ref"
                self.proc = KafkaRefProcess(workdir / "data")
            else:
                self.proc = BrokerProcess(workdir / "data")

    @property
    def bootstrap(self) -> str:
        if self.proc is not None:
            return self.proc.bootstrap
        return self.external

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.bootstrap.rpartition(":")
        return host, int(port)

    @property
    def can_restart(self) -> bool:
        return self.proc is not None

    def start(self) -> None:
        if self.proc is not None:
            self.proc.start(timeout=90.0 if self.kind == "kafka-ref" else 20.0)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def restart(self, *, hard: bool = False) -> None:
        """Stop and start again on the same port and data dir: gracefully (SIGTERM), or
        with `hard` as a crash would (SIGKILL, no shutdown code runs)."""
        assert self.proc is not None, "cannot restart an external broker"
        if hard:
            self.proc.kill()
        elif self.kind == "jocko-py":
            self.proc.stop_gracefully()  # a graceful restart must really be one
        else:
            self.proc.stop()
        self.start()

    def alive(self) -> bool:
        if self.proc is None:
            return True
        return self.proc.proc is not None and self.proc.proc.poll() is None

    def log_tail(self, n: int = 60) -> str:
        return self.proc.log_tail(n) if self.proc is not None else "<external broker>"


class KafkaRefProcess(BrokerProcess):
    """Apache Kafka 3.9 (KRaft, single node) run by tests/java/kafka-ref/run-kafka.sh."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        # Its own free port: port + 1 is often an ephemeral port of some client by now.
        self.controller_port = free_port()

    def command(self) -> list[str]:
        script = REPO / "tests" / "java" / "kafka-ref" / "run-kafka.sh"
        return ["bash", str(script), str(self.port), str(self.data_dir), str(self.controller_port)]


def unique_suffix() -> str:
    """Topic names stay unique across runs against a long-lived external broker."""
    return uuid.uuid4().hex[:8]


def create_topics(
    bootstrap: str,
    names: Iterable[str],
    partitions: int = PARTITIONS,
    configs: dict[str, str] | None = None,
) -> None:
    """CreateTopics through kafka-python's admin client, then wait until every
    partition has a leader in Metadata (bounded)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    names = list(names)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics(
            [
                NewTopic(n, num_partitions=partitions, replication_factor=1, topic_configs=configs)
                for n in names
            ],
            timeout_ms=30_000,
        )
        deadline = time.monotonic() + 30
        while True:
            meta = admin.describe_topics(names)
            ready = all(
                t["error_code"] == 0
                and len(t["partitions"]) == partitions
                and all(p["leader_id"] >= 0 for p in t["partitions"])
                for t in meta
            )
            if ready:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {names} not ready after 30s: {meta}")
            time.sleep(0.2)
    finally:
        admin.close()


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Rec:
    """One record as produced or as read back. `offset` is -1 for expected records;
    `timestamp_type` is 0 (CreateTime) / 1 (LogAppendTime) / -1 (unknown)."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int
    offset: int = -1
    timestamp_type: int = -1


@dataclass
class Dataset:
    """The records one client produces to one topic, in production order."""

    topic: str
    records: list[Rec]
    partitions: int = PARTITIONS
    # Read-back of the first consume, kept to compare the re-read after a restart.
    first_read: dict[int, list[Rec]] | None = field(default=None, repr=False)

    def by_partition(self) -> dict[int, list[Rec]]:
        out: dict[int, list[Rec]] = {p: [] for p in range(self.partitions)}
        for r in self.records:
            out[r.partition].append(r)
        return out

    def timestamp_queries(self) -> list[tuple[int, int, int | None]]:
        return timestamp_queries(self.by_partition())


def timestamp_queries(by_partition: dict[int, list[Rec]]) -> list[tuple[int, int, int | None]]:
    """(partition, timestamp, expected offset or None) triples for ListOffsets by time:
    before every record, exact record timestamps, timestamps just after and just before
    a record, and after the last record (no offset). The expected offset is the first
    record (records at offsets 0, 1, ... in list order) with a timestamp >= the query."""
    queries: list[tuple[int, int, int | None]] = []
    for p, recs in sorted(by_partition.items()):
        if not recs:
            continue
        stamps = [r.timestamp for r in recs]
        candidates = [
            stamps[0] - 60_000,
            stamps[0],
            stamps[len(stamps) // 3],
            stamps[len(stamps) // 2] + 1,
            stamps[(2 * len(stamps)) // 3] - 1,
            stamps[-1],
            stamps[-1] + 1,
        ]
        for ts in candidates:
            want = next((off for off, s in enumerate(stamps) if s >= ts), None)
            queries.append((p, ts, want))
    return queries


def make_dataset(
    topic: str,
    n: int = RECORDS_PER_CODEC,
    partitions: int = PARTITIONS,
    *,
    base_ts: int | None = None,
    printable: bool = False,
    fixed_headers: tuple[Header, ...] | None = None,
    null_header_values: bool = True,
) -> Dataset:
    """Deterministic records: record i goes to partition i % partitions with key
    "<topic>-k<i>", a VALUE_SIZE-byte value (binary unless `printable`), headers
    ("seq", str(i)) and ("bin", 8 bytes, hex if `printable`) unless `fixed_headers`,
    and
    timestamp base_ts + i (base_ts defaults to 10 minutes ago, inside retention)."""
    if base_ts is None:
        base_ts = (int(time.time() * 1000) // 1000) * 1000 - 600_000
    records: list[Rec] = []
    for i in range(n):
        digest = hashlib.blake2b(f"{topic}/{i}".encode(), digest_size=32).digest()
        prefix = f"{topic}|{i:06d}|".encode()
        if printable:
            body = (digest.hex() * 4).encode()
        else:
            body = digest + bytes(range(256))[i % 200 : i % 200 + 40] + digest
        value: bytes | None = (prefix + body)[:VALUE_SIZE].ljust(VALUE_SIZE, b"=")
        key: bytes | None = f"{topic}-k{i:06d}".encode()
        bin_header: bytes | None = digest[:8].hex().encode() if printable else digest[:8]
        if not printable:
            # the binary sets also carry the protocol's edge values: empty and null
            # values, null keys, null header values
            if i % 997 == 500:
                value = b""
            if i % 1009 == 7:
                key = None
            elif i % 1013 == 11:  # never both: a record needs a key or a value
                value = None
            if i % 1019 == 13 and null_header_values:  # kafka-python cannot send these
                bin_header = None
        headers = (
            fixed_headers
            if fixed_headers is not None
            else (("seq", str(i).encode()), ("bin", bin_header))
        )
        records.append(
            Rec(
                partition=i % partitions,
                key=key,
                value=value,
                headers=headers,
                timestamp=base_ts + i,
            )
        )
    return Dataset(topic=topic, records=records, partitions=partitions)


def _show(r: Rec) -> str:
    v = r.value if r.value is None or len(r.value) <= 24 else r.value[:24] + b"..."
    return (
        f"Rec(offset={r.offset}, ts={r.timestamp}, tstype={r.timestamp_type}, key={r.key!r}, "
        f"value={v!r} (len {None if r.value is None else len(r.value)}), headers={r.headers!r})"
    )


def assert_same_records(
    expected: dict[int, list[Rec]],
    actual: dict[int, list[Rec]],
    what: str,
    *,
    check_timestamps: bool = True,
    check_offsets: bool = True,
) -> None:
    """Byte-for-byte: per partition the same records in the same order (key, value,
    headers in order, timestamp, CreateTime), at offsets 0, 1, 2, ... Fails with the
    first few differences."""
    problems: list[str] = []
    for p in sorted(set(expected) | set(actual)):
        exp = expected.get(p, [])
        got = actual.get(p, [])
        if len(exp) != len(got):
            problems.append(f"partition {p}: expected {len(exp)} records, read {len(got)}")
        shown = 0
        for i, (e, g) in enumerate(zip(exp, got, strict=False)):
            diffs = []
            if e.key != g.key:
                diffs.append("key")
            if e.value != g.value:
                diffs.append("value")
            if e.headers != g.headers:
                diffs.append("headers")
            if check_timestamps and e.timestamp != g.timestamp:
                diffs.append("timestamp")
            if check_timestamps and g.timestamp_type not in (-1, 0):
                diffs.append("timestamp_type (want CreateTime=0)")
            if check_offsets and g.offset != i:
                diffs.append(f"offset (want {i})")
            if diffs:
                if shown < 3:
                    problems.append(
                        f"partition {p} #{i}: {', '.join(diffs)} differ\n"
                        f"    expected {_show(e)}\n    read     {_show(g)}"
                    )
                shown += 1
        if shown > 3:
            problems.append(f"partition {p}: {shown} records differ in total")
    if problems:
        raise AssertionError(f"{what}: records differ:\n" + "\n".join(problems))


def group_by_partition(records: Iterable[Rec], partitions: int) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    for recs in out.values():
        recs.sort(key=lambda r: r.offset)
    return out


def with_offsets(expected: dict[int, list[Rec]]) -> dict[int, list[Rec]]:
    return {p: [replace(r, offset=i) for i, r in enumerate(rs)] for p, rs in expected.items()}


# --------------------------------------------------------------------------- TSV format
# One record per line, tab-separated:
#   topic partition offset timestamp timestamp_type key value nheaders [hkey hvalue]...
# key, value, header keys (UTF-8) and header values are base64; "-" stands for null.


def _b64(b: bytes | None) -> str:
    return "-" if b is None else base64.b64encode(b).decode()


def _unb64(s: str) -> bytes | None:
    return None if s == "-" else base64.b64decode(s)


def tsv_line(topic: str, r: Rec) -> str:
    cols = [
        topic,
        str(r.partition),
        str(r.offset),
        str(r.timestamp),
        str(r.timestamp_type),
        _b64(r.key),
        _b64(r.value),
        str(len(r.headers)),
    ]
    for hk, hv in r.headers:
        cols += [_b64(hk.encode()), _b64(hv)]
    return "\t".join(cols)


def write_tsv(path: Path, topic: str, records: Sequence[Rec]) -> None:
    with open(path, "w", encoding="ascii") as f:
        for r in records:
            f.write(tsv_line(topic, r) + "\n")


def read_tsv(path: Path) -> dict[str, list[Rec]]:
    out: dict[str, list[Rec]] = {}
    with open(path, encoding="ascii") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            nh = int(cols[7])
            headers: list[Header] = []
            for h in range(nh):
                hk = _unb64(cols[8 + 2 * h])
                hv = _unb64(cols[9 + 2 * h])
                assert hk is not None
                headers.append((hk.decode(), hv))
            out.setdefault(cols[0], []).append(
                Rec(
                    partition=int(cols[1]),
                    offset=int(cols[2]),
                    timestamp=int(cols[3]),
                    timestamp_type=int(cols[4]),
                    key=_unb64(cols[5]),
                    value=_unb64(cols[6]),
                    headers=tuple(headers),
                )
            )
    return out


# --------------------------------------------------------------------------- Java

JAVA_JARS = REPO / ".cache" / "java-test-jars"  # kafka-clients 3.9 (tests/java/pom.xml)
# kafka-clients 4.4.0, the newest release (tests/java/kafka4/pom.xml): "the Java client"
JAVA_JARS_4 = REPO / ".cache" / "java-test-jars-4"
JAVA_CLASSES = REPO / ".cache" / "java-test-classes"
