"""kcat (librdkafka's command-line client) against a real broker process.

kcat's producer reads records from stdin, so this test differs from the library ones:
values are printable (no delimiters), every record carries the same two headers (`-H`),
and the timestamps are the CreateTime librdkafka stamps at produce time (kcat cannot set
them): the test checks they fall inside the produce window and never go down within a
partition, and the re-read after a restart must return exactly the same timestamps.
Per codec: 10,000 records produced (one `kcat -P -p N` per partition, idempotent so that
retries cannot reorder), read back byte for
byte with `kcat -C -o beginning -e -J`, offsets by timestamp checked with `kcat -Q`
(ListOffsets) and `kcat -C -o s@TS` (ListOffsets + Fetch).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from tests.support.e2e import (
    CODECS,
    Dataset,
    Rec,
    TargetBroker,
    assert_same_records,
    create_topics,
    make_dataset,
    timestamp_queries,
    unique_suffix,
    with_offsets,
)
from tests.support.prereq import not_applicable, requires

pytestmark = [
    pytest.mark.clients,
    requires(shutil.which("kcat") is not None, "kcat not installed: make kcat"),
]

SUFFIX = unique_suffix()
HEADERS = (("origin", b"kcat-e2e"), ("mode", b"a=b"))
TSTYPES = {"create": 0, "logappend": 1}


def kcat(args: list[str], *, stdin: bytes | None = None, timeout: float = 120) -> bytes:
    proc = subprocess.run(
        ["kcat", *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, (
        f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode(errors='replace')}"
    )
    return proc.stdout


@pytest.fixture(scope="module")
def datasets() -> dict[str, Dataset]:
    """Topics produced successfully in this module, by codec."""
    return {}


def produce(bootstrap: str, ds: Dataset, codec: str) -> None:
    header_args = [a for k, v in HEADERS for a in ("-H", f"{k}={v.decode()}")]
    for p, recs in ds.by_partition().items():
        lines = b"".join((r.key or b"") + b"\t" + (r.value or b"") + b"\n" for r in recs)
        out = kcat(
            [
                "-P",
                "-b",
                bootstrap,
                "-t",
                ds.topic,
                "-p",
                str(p),
                "-K",
                "\t",
                "-X",
                f"compression.codec={codec}",
                # Keeps a retried batch from overtaking later ones (order is checked).
                "-X",
                "enable.idempotence=true",
                *header_args,
            ],
            stdin=lines,
        )
        assert out == b""


def consume(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Rec]]:
    """One `kcat -C` (simple consumer: every partition assigned, no group) from the
    beginning until end of every partition."""
    raw = kcat(["-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-J"])
    out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    for line in raw.decode().splitlines():
        j = json.loads(line)
        hs = j.get("headers") or []
        out.setdefault(j["partition"], []).append(
            Rec(
                partition=j["partition"],
                offset=j["offset"],
                key=None if j["key"] is None else j["key"].encode(),
                value=None if j["payload"] is None else j["payload"].encode(),
                headers=tuple(
                    (hs[i], None if hs[i + 1] is None else hs[i + 1].encode())
                    for i in range(0, len(hs), 2)
                ),
                timestamp=j["ts"],
                timestamp_type=TSTYPES.get(j["tstype"], -2),
            )
        )
    # Delivery order within a partition is the client's business; offsets must be in order.
    for recs in out.values():
        assert [r.offset for r in recs] == sorted(r.offset for r in recs), "out of order"
    return out


def check_offsets_by_time(bootstrap: str, ds: Dataset) -> None:
    assert ds.first_read is not None
    queries = timestamp_queries(ds.first_read)
    wrong = []
    # kcat -Q takes one timestamp per partition per run: one run per query round.
    rounds: dict[int, list[tuple[int, int, int | None]]] = {}
    seen: dict[int, int] = {}
    for p, ts, want in queries:
        rounds.setdefault(seen.get(p, 0), []).append((p, ts, want))
        seen[p] = seen.get(p, 0) + 1
    for qs in rounds.values():
        args = ["-Q", "-b", bootstrap]
        for p, ts, _ in qs:
            args += ["-t", f"{ds.topic}:{p}:{ts}"]
        got: dict[int, int] = {}
        for line in kcat(args).decode().splitlines():
            # "<topic> [<partition>] offset <offset>"
            name, part, word, off = line.split(" ", 3)
            assert name == ds.topic and word == "offset", f"unexpected kcat -Q output {line!r}"
            got[int(part.strip("[]"))] = int(off)
        for p, ts, want in qs:
            if got.get(p) != (-1 if want is None else want):
                wrong.append(f"kcat -Q p{p} ts={ts}: want offset {want}, got {got.get(p)}")
    # kcat -o s@TS: ListOffsets by time, then fetch the first record from there.
    for p, recs in ds.first_read.items():
        mid = recs[len(recs) // 2]
        line = kcat(
            [
                "-C",
                "-b",
                bootstrap,
                "-t",
                ds.topic,
                "-p",
                str(p),
                "-o",
                f"s@{mid.timestamp}",
                "-c",
                "1",
                "-e",
                "-q",
                "-J",
            ]
        ).decode()
        j = json.loads(line)
        want_off = next(r.offset for r in recs if r.timestamp >= mid.timestamp)
        want_key = recs[want_off].key
        if (
            (j["offset"], j["ts"]) != (want_off, mid.timestamp)
            or want_key is None
            or (j["key"] != want_key.decode())
        ):
            wrong.append(f"kcat -o s@{mid.timestamp} p{p}: want offset {want_off}, got {line}")
    assert not wrong, f"{ds.topic}: offsets by timestamp wrong:\n" + "\n".join(wrong)


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_read_back(
    target: TargetBroker, datasets: dict[str, Dataset], codec: str
) -> None:
    ds = make_dataset(f"e2e-kcat-{codec}-{SUFFIX}", printable=True, fixed_headers=HEADERS)
    create_topics(target.bootstrap, [ds.topic], ds.partitions)
    t0 = int(time.time() * 1000)
    produce(target.bootstrap, ds, codec)
    t1 = int(time.time() * 1000)
    got = consume(target.bootstrap, ds.topic, ds.partitions)
    # Keys, values, headers and offsets byte for byte; timestamps checked just below.
    assert_same_records(
        with_offsets(ds.by_partition()), got, f"kcat {codec}", check_timestamps=False
    )
    for p, recs in got.items():
        stamps = [r.timestamp for r in recs]
        assert all(t0 - 1000 <= s <= t1 + 1000 for s in stamps), (
            f"p{p}: CreateTime outside the produce window [{t0}, {t1}]: "
            f"{min(stamps)}..{max(stamps)}"
        )
        assert stamps == sorted(stamps), f"p{p}: timestamps go down within the partition"
        assert {r.timestamp_type for r in recs} == {0}, f"p{p}: not all CreateTime"
    ds.first_read = got
    datasets[codec] = ds


@pytest.mark.parametrize("codec", CODECS)
def test_offsets_by_timestamp(
    target: TargetBroker, datasets: dict[str, Dataset], codec: str
) -> None:
    if codec not in datasets:
        not_applicable(f"test_produce_and_read_back[{codec}] did not produce the topic")
    check_offsets_by_time(target.bootstrap, datasets[codec])


def test_read_again_after_restart(target: TargetBroker, datasets: dict[str, Dataset]) -> None:
    if not target.can_restart:
        not_applicable("external broker (JOCKO_TEST_BOOTSTRAP): the test cannot restart it")
    if not datasets:
        not_applicable("no codec's topic was produced earlier in this module")
    target.restart()
    for codec, ds in datasets.items():
        assert ds.first_read is not None
        got = consume(target.bootstrap, ds.topic, ds.partitions)
        # Exactly what was read before the restart, timestamps included.
        assert_same_records(ds.first_read, got, f"kcat {codec} after restart")
    check_offsets_by_time(target.bootstrap, next(iter(datasets.values())))
    missing = sorted(set(CODECS) - set(datasets))
    assert not missing, f"re-read the others, but these codecs had failed before: {missing}"
