"""The `jocko-py topic|produce|consume` commands against a real broker, cross-checked
with independent clients (kafka-python's admin client, kcat) in both directions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from kafka.admin import KafkaAdminClient

from tests.support.broker import REPO
from tests.support.e2e import TargetBroker, create_topics, unique_suffix
from tests.support.prereq import requires

pytestmark = pytest.mark.clients

SUFFIX = unique_suffix()
needs_kcat = requires(shutil.which("kcat") is not None, "kcat not installed")


def cli(
    target: TargetBroker, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jocko_py.cli", *args, "--bootstrap-server", target.bootstrap],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


def admin_topics(target: TargetBroker) -> dict[str, int]:
    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        names = [n for n in admin.list_topics() if not n.startswith("__")]
        return {t["name"]: len(t["partitions"]) for t in admin.describe_topics(names)}
    finally:
        admin.close()


def test_topic_create_list_describe_delete(target: TargetBroker) -> None:
    name = f"cli-topic-{SUFFIX}"
    r = cli(target, "topic", "create", name, "--partitions", "4")
    assert r.returncode == 0, r.stderr
    assert admin_topics(target).get(name) == 4

    r = cli(target, "topic", "list")
    assert r.returncode == 0, r.stderr
    assert name in r.stdout.split()

    r = cli(target, "topic", "describe", name)
    assert r.returncode == 0, r.stderr
    assert "PartitionCount: 4" in r.stdout
    assert sum(1 for line in r.stdout.splitlines() if "Partition:" in line) == 4

    r = cli(target, "topic", "create", name, "--partitions", "4")
    assert r.returncode != 0 and "TOPIC_ALREADY_EXISTS" in r.stderr

    r = cli(target, "topic", "delete", name)
    assert r.returncode == 0, r.stderr
    assert name not in admin_topics(target)


def test_topic_create_invalid_name_fails(target: TargetBroker) -> None:
    r = cli(target, "topic", "create", "bad/name")
    assert r.returncode != 0
    assert "INVALID_TOPIC_EXCEPTION" in r.stderr
    assert "Traceback" not in r.stderr, "a Kafka error code is reported in one line"


@needs_kcat
def test_cli_produce_then_kcat_reads(target: TargetBroker) -> None:
    name = f"cli-produce-{SUFFIX}"
    create_topics(target.bootstrap, [name], partitions=2)
    lines = [f"key-{i}\tvalue {i} ü" for i in range(1000)]
    r = cli(target, "produce", name, "--partition", "1", "--key-separator", "\t",
            stdin="\n".join(lines) + "\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = subprocess.run(
        ["kcat", "-C", "-b", target.bootstrap, "-t", name, "-p", "1", "-o", "beginning",
         "-e", "-q", "-J"],
        capture_output=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    got = [json.loads(line) for line in out.decode().splitlines()]
    assert [(j["offset"], j["key"], j["payload"]) for j in got] == [
        (i, f"key-{i}", f"value {i} ü") for i in range(1000)
    ]


@needs_kcat
def test_kcat_produce_then_cli_consumes(target: TargetBroker) -> None:
    name = f"cli-consume-{SUFFIX}"
    create_topics(target.bootstrap, [name], partitions=1)
    lines = [f"k{i}\tv{i}" for i in range(500)]
    subprocess.run(
        ["kcat", "-P", "-b", target.bootstrap, "-t", name, "-p", "0", "-K", "\t",
         "-X", "compression.codec=zstd"],
        input=("\n".join(lines) + "\n").encode(), capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    r = cli(target, "consume", name, "--partition", "0", "--offset", "-2", "--print-key",
            "--key-separator", "\t", "--timeout", "3")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == lines
