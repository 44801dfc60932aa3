"""The Go clients franz-go, Sarama and kafka-go against a real broker process.

Driven by tests/clients/go (one Go module, CLI `gokafka`, built once per session into
.cache/go-bin; `make go-deps` downloads its modules). Per library and codec (none, gzip,
snappy, lz4, zstd): 2,000 records (keys, two headers, explicit CreateTime timestamps, ~100-byte
values, null keys/values/header values; the Python client modules use 10,000, fewer here to
keep the 15 Go runs quick) over 3 partitions, produced with acks=all and the library's
idempotent producer (franz-go's default; Sarama's Producer.Idempotent; kafka-go has none),
read back byte for byte with the same library by assigned partitions from the beginning (no
group), and read once more with confluent-kafka as a cross-check of what the broker stored.
kafka-go reads null and zero-length bytes both as nil, so its own read-back compares them as
equal (the cross-check does not). Per library one consumer group: two members join and
share a 4-partition topic (DescribeGroups shows both owning partitions), then the records
are produced; every record is processed and committed, and the broker's committed offsets
equal the log end offsets. Then one broker restart (SIGTERM): every topic read again with
its library and the committed offsets still there.

`JOCKO_E2E_GO_DEBUG=1` turns on the libraries' debug logs (franz-go kgo.BasicLogger at
debug level, sarama.Logger, kafka-go Logger), shown on failure. Library versions: go.mod.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker import REPO, terminate
from tests.support.e2e import (
    CODECS,
    Dataset,
    Header,
    Rec,
    TargetBroker,
    assert_same_records,
    create_topics,
    group_by_partition,
    make_dataset,
    unique_suffix,
    with_offsets,
    write_tsv,
)
from tests.support.prereq import not_applicable, requires

pytestmark = [
    pytest.mark.clients,
    requires(shutil.which("go") is not None, "no `go` on PATH: Go client tests need Go"),
]

GO_MODULE = REPO / "tests" / "clients" / "go"
GO_BIN = REPO / ".cache" / "go-bin" / "gokafka"
LIBS = ("franz", "sarama", "kafkago")
RECORDS = 2_000
GROUP_PARTITIONS = 4
RUN_TIMEOUT_S = 60  # gokafka -timeout; the subprocess gets a little more
DEBUG = os.environ.get("JOCKO_E2E_GO_DEBUG", "") not in ("", "0")
SUFFIX = unique_suffix()


# --------------------------------------------------------------------------- the Go program


@pytest.fixture(scope="session")
def gokafka() -> Path:
    """`go build` once per session (incremental: quick when nothing changed). Built
    beside and renamed into place: another xdist worker (or suite) may be running the
    binary or building it at the same time."""
    GO_BIN.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOFLAGS="-mod=mod -buildvcs=false")
    part = GO_BIN.with_name(f"{GO_BIN.name}.{os.getpid()}")
    proc = subprocess.run(
        ["go", "build", "-o", str(part), "."],
        cwd=GO_MODULE, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        part.unlink(missing_ok=True)
        pytest.fail(f"go build in {GO_MODULE} failed:\n{proc.stdout}\n{proc.stderr}")
    os.replace(part, GO_BIN)
    return GO_BIN


def go_args(gobin: Path, lib: str, mode: str, bootstrap: str, topic: str, *args: str) -> list[str]:
    cmd = [
        str(gobin), "-lib", lib, "-mode", mode, "-brokers", bootstrap, "-topic", topic,
        "-timeout", f"{RUN_TIMEOUT_S}s", *args,
    ]  # fmt: skip
    if DEBUG:
        cmd.append("-debug")
    return cmd


def run_go(gobin: Path, lib: str, mode: str, bootstrap: str, topic: str, *args: str) -> list[Any]:
    """Run gokafka to completion; its JSON lines, or a failure with its stderr."""
    cmd = go_args(gobin, lib, mode, bootstrap, topic, *args)
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S + 30, check=False
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not exit in time\nstderr:\n{_tail(e.stderr)}")
    if proc.returncode != 0:
        pytest.fail(
            f"gokafka {lib} {mode} {topic} exited {proc.returncode}\n"
            f"stderr:\n{_tail(proc.stderr)}\nstdout (last lines):\n{_tail(proc.stdout, 1500)}"
        )
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _tail(s: str | bytes | None, n: int = 6000) -> str:
    if s is None:
        return ""
    if isinstance(s, bytes):
        s = s.decode(errors="replace")
    return s[-n:]


def _unb64(v: str | None) -> bytes | None:
    return None if v is None else base64.b64decode(v)


def to_rec(line: dict[str, Any]) -> Rec:
    headers: tuple[Header, ...] = tuple((k, _unb64(v)) for k, v in line["headers"])
    return Rec(
        partition=line["partition"],
        offset=line["offset"],
        timestamp=line["timestamp"],
        key=_unb64(line["key"]),
        value=_unb64(line["value"]),
        headers=headers,
    )


def _blur(b: bytes | None) -> bytes:
    return b"" if b is None else b


def blur_nulls(by_partition: dict[int, list[Rec]]) -> dict[int, list[Rec]]:
    """kafka-go hands out nil for a zero-length key, value or header value as for a null
    one (read.go readNewBytes allocates only when n > 0), whatever the broker sends; what
    kafka-go reads is compared with null and empty both as b"". (The confluent-kafka
    cross-check of what kafka-go produced tells null from empty.)"""
    return {
        p: [
            replace(
                r,
                key=_blur(r.key),
                value=_blur(r.value),
                headers=tuple((k, _blur(v)) for k, v in r.headers),
            )
            for r in rs
        ]
        for p, rs in by_partition.items()
    }


def expected(ds: Dataset, lib: str) -> dict[int, list[Rec]]:
    """The records as `lib` should read them, at offsets 0, 1, 2, ... per partition."""
    exp = with_offsets(ds.by_partition())
    return blur_nulls(exp) if lib == "kafkago" else exp


def records_of(lines: list[Any]) -> list[Rec]:
    return [to_rec(x) for x in lines if x["type"] == "record"]


def go_produce(gobin: Path, lib: str, bootstrap: str, ds: Dataset, codec: str, tmp: Path) -> None:
    path = tmp / f"{ds.topic}.tsv"
    write_tsv(path, ds.topic, ds.records)
    lines = run_go(gobin, lib, "produce", bootstrap, ds.topic, "-codec", codec, "-in", str(path))
    assert lines == [{"type": "produced", "count": len(ds.records)}], lines


def go_consume(gobin: Path, lib: str, bootstrap: str, ds: Dataset) -> dict[int, list[Rec]]:
    lines = run_go(
        gobin, lib, "consume", bootstrap, ds.topic,
        "-partitions", str(ds.partitions), "-n", str(len(ds.records)),
    )  # fmt: skip
    got = group_by_partition(records_of(lines), ds.partitions)
    return blur_nulls(got) if lib == "kafkago" else got


# --------------------------------------------------------------------------- Python cross-check


def python_read(bootstrap: str, ds: Dataset, deadline_s: float = 60) -> dict[int, list[Rec]]:
    """confluent-kafka (librdkafka) reads the topic by assign() from the beginning."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"jocko-e2e-go-unused-{SUFFIX}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign(
            [TopicPartition(ds.topic, p, OFFSET_BEGINNING) for p in range(ds.partitions)]
        )
        got: list[Rec] = []
        deadline = time.monotonic() + deadline_s
        while len(got) < len(ds.records):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{ds.topic}: read {len(got)} of {len(ds.records)} records")
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None:
                    raise AssertionError(f"{ds.topic}: consume error {m.error()}")
                _, ts = m.timestamp()
                p, off = m.partition(), m.offset()
                assert p is not None and off is not None
                headers: tuple[Header, ...] = tuple(m.headers() or [])
                got.append(
                    Rec(
                        partition=p,
                        offset=off,
                        key=m.key(),
                        value=m.value(),
                        headers=headers,
                        timestamp=ts,
                    )
                )
        return group_by_partition(got, ds.partitions)
    finally:
        consumer.close()


# --------------------------------------------------------------------------- produce / read back


@pytest.fixture(scope="module")
def datasets() -> dict[tuple[str, str], Dataset]:
    """Topics produced and read back successfully in this module, by (library, codec)."""
    return {}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("go")


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("lib", LIBS)
def test_produce_and_read_back(
    target: TargetBroker,
    gokafka: Path,
    workdir: Path,
    datasets: dict[tuple[str, str], Dataset],
    lib: str,
    codec: str,
) -> None:
    ds = make_dataset(f"e2e-go-{lib}-{codec}-{SUFFIX}", n=RECORDS)
    create_topics(target.bootstrap, [ds.topic], ds.partitions)
    go_produce(gokafka, lib, target.bootstrap, ds, codec, workdir)
    got = go_consume(gokafka, lib, target.bootstrap, ds)
    assert_same_records(expected(ds, lib), got, f"{lib} {codec}")
    datasets[(lib, codec)] = ds


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("lib", LIBS)
def test_python_client_reads_what_go_produced(
    target: TargetBroker, datasets: dict[tuple[str, str], Dataset], lib: str, codec: str
) -> None:
    if (lib, codec) not in datasets:
        not_applicable(f"test_produce_and_read_back[{lib}-{codec}] did not pass")
    ds = datasets[(lib, codec)]
    got = python_read(target.bootstrap, ds)
    assert_same_records(
        with_offsets(ds.by_partition()), got, f"confluent-kafka reads {lib} {codec}"
    )


# --------------------------------------------------------------------------- consumer groups


class Member:
    """One `gokafka -mode group` process; a thread collects its JSON lines."""

    def __init__(self, lib: str, cmd: list[str], stderr_path: Path) -> None:
        self.lib = lib
        self.stderr_path = stderr_path
        self.lines: list[Any] = []
        self._lock = threading.Lock()
        with open(stderr_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                with self._lock:
                    self.lines.append(json.loads(line))

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.lines)

    def records(self) -> list[Rec]:
        return records_of(self.snapshot())

    def of_type(self, kind: str) -> list[Any]:
        return [x for x in self.snapshot() if x["type"] == kind]

    def terminate(self, timeout: float = 30) -> int:
        rc, forced = terminate(self.proc, timeout)
        if forced:
            return -9
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def describe(self, name: str) -> str:
        other = [x for x in self.snapshot() if x["type"] != "record"]
        return (
            f"{name}: exit {self.proc.poll()}, {len(self.records())} records, "
            f"control lines {other}\n  stderr:\n{_tail(self.stderr_path.read_text(errors='replace'), 3000)}"
        )


@pytest.fixture(scope="module")
def groups() -> dict[str, tuple[str, Dataset]]:
    """Group id and topic of each library's passed group test, by library."""
    return {}


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.kill()


def committed_offsets(bootstrap: str, group: str) -> tuple[dict[int, int], str]:
    """The group's committed offsets and state as the broker reports them (confluent admin)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    offs = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=15
    )[group].result()
    desc = admin.describe_consumer_groups([group], request_timeout=15)[group].result()
    return {tp.partition: tp.offset for tp in offs.topic_partitions}, desc.state.name


def wait_for_assignment(bootstrap: str, group: str, members: list[Member], lib: str) -> None:
    """Bounded wait until DescribeGroups shows the group Stable with both members and the
    topic's partitions split between them (every member owns at least one)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 45
    last: object = None
    while True:
        try:
            desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
            owned = [
                sorted(tp.partition for tp in m.assignment.topic_partitions) for m in desc.members
            ]
            last = (desc.state.name, owned)
            parts = sorted(p for o in owned for p in o)
            if (
                desc.state.name == "STABLE"
                and len(owned) == 2
                and all(owned)
                and parts == list(range(GROUP_PARTITIONS))
            ):
                return
        except Exception as e:  # the group may not exist yet
            last = e
        if time.monotonic() > deadline or any(m.proc.poll() is not None for m in members):
            pytest.fail(
                f"{lib}: group {group} not stable with two members owning "
                f"{GROUP_PARTITIONS} partitions; last DescribeGroups: {last}\n"
                + "\n".join(m.describe(f"member {i}") for i, m in enumerate(members))
            )
        time.sleep(0.2)


@pytest.mark.parametrize("lib", LIBS)
def test_consumer_group_two_members(
    target: TargetBroker,
    gokafka: Path,
    workdir: Path,
    groups: dict[str, tuple[str, Dataset]],
    members: list[Member],
    lib: str,
) -> None:
    """Both members join first (so each surely owns partitions), then the records are
    produced; each member prints and commits what it processed; SIGTERM when all are seen."""
    ds = make_dataset(f"e2e-go-{lib}-group-{SUFFIX}", n=RECORDS, partitions=GROUP_PARTITIONS)
    create_topics(target.bootstrap, [ds.topic], ds.partitions)
    group = f"e2e-go-{lib}-g-{SUFFIX}"
    for i in range(2):
        cmd = go_args(gokafka, lib, "group", target.bootstrap, ds.topic, "-group", group)
        members.append(Member(lib, cmd, workdir / f"{group}-member{i}.stderr"))

    def state() -> str:
        return "\n".join(m.describe(f"member {i}") for i, m in enumerate(members))

    wait_for_assignment(target.bootstrap, group, members, lib)
    go_produce(gokafka, lib, target.bootstrap, ds, "lz4", workdir)

    def seen() -> set[tuple[int, int]]:
        return {(r.partition, r.offset) for m in members for r in m.records()}

    deadline = time.monotonic() + 60
    while len(seen()) < len(ds.records):
        if time.monotonic() > deadline or any(m.proc.poll() is not None for m in members):
            pytest.fail(f"{lib}: the group processed {len(seen())} of {len(ds.records)}\n{state()}")
        time.sleep(0.2)
    codes = [m.terminate() for m in members]
    assert codes == [0, 0], f"{lib}: members exited {codes}\n{state()}"
    assert all(m.of_type("done") for m in members), f"{lib}: no 'done' line\n{state()}"

    # Every record processed, byte for byte (a record processed twice must be the same).
    by_pos: dict[tuple[int, int], Rec] = {}
    for m in members:
        for r in m.records():
            prev = by_pos.setdefault((r.partition, r.offset), r)
            assert prev == r, f"{lib}: offset {r.partition}/{r.offset} read differently: {prev} {r}"
    got = group_by_partition(by_pos.values(), ds.partitions)
    if lib == "kafkago":
        got = blur_nulls(got)
    assert_same_records(expected(ds, lib), got, f"{lib} group")
    counts = [len(m.records()) for m in members]
    assert all(counts), f"{lib}: one member processed nothing ({counts})\n{state()}"

    # The broker holds the committed offsets: the log end offset of every partition.
    want = {p: len(rs) for p, rs in ds.by_partition().items()}
    offsets, group_state = committed_offsets(target.bootstrap, group)
    assert offsets == want, f"{lib}: committed {offsets}, want {want}\n{state()}"
    assert group_state == "EMPTY", f"{lib}: group state {group_state} after both members left"
    groups[lib] = (group, ds)


# --------------------------------------------------------------------------- restart


def test_restart_broker(target: TargetBroker) -> None:
    if not target.can_restart:
        not_applicable("external broker (JOCKO_TEST_BOOTSTRAP): the test cannot restart it")
    target.restart()


@pytest.mark.parametrize("lib", LIBS)
def test_read_again_after_restart(
    target: TargetBroker,
    gokafka: Path,
    datasets: dict[tuple[str, str], Dataset],
    groups: dict[str, tuple[str, Dataset]],
    lib: str,
) -> None:
    if not target.can_restart:
        not_applicable("external broker (JOCKO_TEST_BOOTSTRAP): the test cannot restart it")
    mine = {codec: ds for (lb, codec), ds in datasets.items() if lb == lib}
    if not mine and lib not in groups:
        not_applicable(f"no {lib} topic was produced earlier in this module")
    failures = []
    for codec, ds in mine.items():
        got = go_consume(gokafka, lib, target.bootstrap, ds)
        try:
            assert_same_records(expected(ds, lib), got, f"{lib} {codec} after restart")
        except AssertionError as e:
            failures.append(str(e))
    if lib in groups:
        group, ds = groups[lib]
        want = {p: len(rs) for p, rs in ds.by_partition().items()}
        offsets, _ = committed_offsets(target.bootstrap, group)
        if offsets != want:
            failures.append(f"{lib} group {group}: committed {offsets} after restart, want {want}")
    assert not failures, "\n".join(failures)
    missing = sorted(set(CODECS) - set(mine))
    assert not missing, f"re-read the others, but these {lib} codecs had failed before: {missing}"
