"""The Java producer and consumer (kafka-clients 4.4.0, the newest release) against a real broker process.

Driven by tests/java/src/main/java/jockopy/e2e/E2EClient.java (build: `make java-deps`),
one JVM per phase for all codecs: produce (one KafkaProducer per codec, default settings,
so enable.idempotence=true and acks=all, plus compression.type), consume (assign +
seekToBeginning, no group.id), offsets-for-times. Records go through TSV files and are
compared byte for byte here. Then one broker restart and every topic read again.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.e2e import (
    CODECS,
    JAVA_CLASSES,
    JAVA_JARS_4,
    Dataset,
    TargetBroker,
    assert_same_records,
    create_topics,
    group_by_partition,
    make_dataset,
    read_tsv,
    unique_suffix,
    with_offsets,
    write_tsv,
)
from tests.support.prereq import not_applicable, requires

pytestmark = [
    pytest.mark.clients,
    pytest.mark.java,
    requires(shutil.which("java") is not None, "no java on PATH"),
]

SUFFIX = unique_suffix()
JVM_TIMEOUT = 300


def java(mode: str, bootstrap: str, *args: str) -> str:
    if not (JAVA_CLASSES / ".done").exists():
        pytest.fail(f"{JAVA_CLASSES} missing: run `make java-deps` (tests/java/Makefile)")
    cp = f"{JAVA_CLASSES}:{JAVA_JARS_4}/*"
    cmd = [
        "java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp,
        "jockopy.e2e.E2EClient", mode, bootstrap, *args,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, timeout=JVM_TIMEOUT, text=True, check=False)
    assert proc.returncode == 0, (
        f"E2EClient {mode} exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
        f"stderr:\n{proc.stderr[-5000:]}"
    )
    return proc.stdout


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("java")


@pytest.fixture(scope="module")
def produced(target: TargetBroker, workdir: Path) -> dict[str, Dataset]:
    """All codecs' topics created and produced by one JVM run."""
    sets = {c: make_dataset(f"e2e-java-{c}-{SUFFIX}") for c in CODECS}
    create_topics(target.bootstrap, [ds.topic for ds in sets.values()])
    args = []
    for codec, ds in sets.items():
        path = workdir / f"in-{codec}.tsv"
        write_tsv(path, ds.topic, ds.records)
        args.append(f"{codec}={path}")
    java("produce", target.bootstrap, *args)
    return sets


def read_all(target: TargetBroker, workdir: Path, sets: dict[str, Dataset], name: str) -> None:
    out = workdir / f"{name}.tsv"
    java(
        "consume",
        target.bootstrap,
        str(out),
        *(f"{ds.topic}:{ds.partitions}" for ds in sets.values()),
    )
    got = read_tsv(out)
    failures = []
    for codec, ds in sets.items():
        try:
            assert_same_records(
                with_offsets(ds.by_partition()),
                group_by_partition(got.get(ds.topic, []), ds.partitions),
                f"java {codec} ({name})",
            )
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)


def test_produce_all_codecs_and_read_back(
    target: TargetBroker, workdir: Path, produced: dict[str, Dataset]
) -> None:
    read_all(target, workdir, produced, "first-read")


def test_offsets_for_times(
    target: TargetBroker, workdir: Path, produced: dict[str, Dataset]
) -> None:
    queries = workdir / "queries.tsv"
    expected: dict[tuple[str, int, int], tuple[int, int]] = {}
    with open(queries, "w") as f:
        for ds in produced.values():
            by_p = ds.by_partition()
            for p, ts, want in ds.timestamp_queries():
                f.write(f"{ds.topic}\t{p}\t{ts}\n")
                expected[(ds.topic, p, ts)] = (
                    (-1, -1)
                    if want is None
                    else (
                        want,
                        by_p[p][want].timestamp,
                    )
                )
    out = workdir / "offsets.tsv"
    java("offsets-for-times", target.bootstrap, str(queries), str(out))
    got: dict[tuple[str, int, int], tuple[int, int]] = {}
    for line in out.read_text().splitlines():
        topic, part, qts, off, rts = line.split("\t")
        got[(topic, int(part), int(qts))] = (int(off), int(rts))
    wrong = [
        f"{k}: want (offset, timestamp) {v}, got {got.get(k)}"
        for k, v in expected.items()
        if got.get(k) != v
    ]
    assert not wrong, "offsetsForTimes wrong:\n" + "\n".join(wrong)


def test_read_again_after_restart(
    target: TargetBroker, workdir: Path, produced: dict[str, Dataset]
) -> None:
    if not target.can_restart:
        not_applicable("external broker (JOCKO_TEST_BOOTSTRAP): the test cannot restart it")
    target.restart()
    read_all(target, workdir, produced, "after-restart")
