"""`jocko-py groups list|describe|delete|reset-offsets` against a real broker."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from tests.groups.harness import committed_offsets, wait_until
from tests.support.broker import REPO, BrokerProcess

T0 = 1_700_000_000_000


def cli(b: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jocko_py.cli", "groups", *args, "--bootstrap-server",
         b.bootstrap], capture_output=True, text=True, timeout=60, cwd=REPO)


@pytest.mark.timeout(120)
def test_groups_cli(gbroker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    with Client(gbroker.bootstrap) as c:
        c.create_topic("cli-t", 2)
        for p in (0, 1):
            c.produce("cli-t", p, rb.build_batch(
                [rb.NewRecord(None, b"v%d" % i, (), T0 + i * 1000) for i in range(10)]))
        c.request(10, 3, {"key": "cli-g", "key_type": 0})
        r = c.request(8, 9, {"group_id": "cli-g", "generation_id_or_member_epoch": -1,
                             "member_id": "", "group_instance_id": None, "topics": [
                                 {"name": "cli-t", "partitions": [
                                     {"partition_index": 0, "committed_offset": 3,
                                      "committed_metadata": ""},
                                     {"partition_index": 1, "committed_offset": 10,
                                      "committed_metadata": ""}]}]})
        assert all(p.error_code == 0 for p in r.topics[0].partitions)

    out = cli(gbroker, "list")
    assert out.returncode == 0 and "cli-g" in out.stdout.split(), out
    out = cli(gbroker, "list", "--state", "Stable")
    assert "cli-g" not in out.stdout.split()

    out = cli(gbroker, "describe", "cli-g")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("cli-g ")]
    assert [r[1:6] for r in rows] == [["cli-t", "0", "3", "10", "7"],
                                      ["cli-t", "1", "10", "10", "0"]], out.stdout
    assert "state Empty" in out.stdout

    def reset(*how: str) -> dict[int, int]:
        res = cli(gbroker, "reset-offsets", "cli-g", "--topic", "cli-t", *how, "--execute")
        assert res.returncode == 0, res.stdout + res.stderr
        return committed_offsets(gbroker.bootstrap, "cli-g", "cli-t", 2)

    def plan(out: subprocess.CompletedProcess[str]) -> list[list[str]]:
        lines = out.stdout.splitlines()
        assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET",
                                    "NEW-OFFSET", "LOG-END-OFFSET", "LAG"], out.stdout
        return [line.split()[1:] for line in lines if line.startswith("cli-g ")]

    # the plan: previous committed offset, new offset, log end offset, lag after the reset
    dry = cli(gbroker, "reset-offsets", "cli-g", "--topic", "cli-t", "--to-earliest")
    assert dry.returncode == 0 and "dry run" in dry.stdout
    assert plan(dry) == [["cli-t", "0", "3", "0", "10", "10"],
                         ["cli-t", "1", "10", "0", "10", "10"]], dry.stdout
    assert committed_offsets(gbroker.bootstrap, "cli-g", "cli-t", 2) == {0: 3, 1: 10}
    with Client(gbroker.bootstrap) as c:
        c.create_topic("cli-u", 1)
        c.produce("cli-u", 0, rb.build_batch([rb.NewRecord(None, b"u%d" % i) for i in range(5)]))
    dry = cli(gbroker, "reset-offsets", "cli-g", "--topic", "cli-u", "--to-offset", "2")
    assert plan(dry) == [["cli-u", "0", "-", "2", "5", "3"]], dry.stdout  # nothing committed
    assert reset("--to-earliest") == {0: 0, 1: 0}
    assert reset("--to-latest") == {0: 10, 1: 10}
    res = cli(gbroker, "reset-offsets", "cli-g", "--topic", "cli-t", "--to-offset", "4",
              "--execute")
    assert res.returncode == 0 and "dry run" not in res.stdout
    assert plan(res) == [["cli-t", "0", "10", "4", "10", "6"],
                         ["cli-t", "1", "10", "4", "10", "6"]], res.stdout
    assert committed_offsets(gbroker.bootstrap, "cli-g", "cli-t", 2) == {0: 4, 1: 4}
    assert reset("--to-offset", "99") == {0: 10, 1: 10}
    when = datetime.fromtimestamp((T0 + 5500) / 1000, UTC).isoformat()
    assert reset("--to-datetime", when) == {0: 6, 1: 6}
    res = cli(gbroker, "reset-offsets", "cli-g", "--topic", "cli-t:1", "--to-offset", "2",
              "--execute")
    assert res.returncode == 0
    assert committed_offsets(gbroker.bootstrap, "cli-g", "cli-t", 2) == {0: 6, 1: 2}

    # an active group cannot be reset, describe shows its member, delete refuses
    consumer = KafkaConsumer("cli-t", bootstrap_servers=gbroker.bootstrap, group_id="cli-g",
                             enable_auto_commit=False, session_timeout_ms=6000)
    try:
        wait_until(lambda: bool(consumer.poll(200) is not None and consumer.assignment()),
                   30, "the consumer to join")
        res = cli(gbroker, "reset-offsets", "cli-g", "--all-topics", "--to-earliest",
                  "--execute")
        assert res.returncode == 1 and "inactive" in res.stderr
        out = cli(gbroker, "describe", "cli-g")
        assert "state Stable" in out.stdout and "kafka-python" in out.stdout
        assert cli(gbroker, "delete", "cli-g").returncode == 1
    finally:
        consumer.close()
    out = cli(gbroker, "delete", "cli-g")
    assert out.returncode == 0 and "Deleted group cli-g" in out.stdout
    assert "cli-g" not in cli(gbroker, "list").stdout.split()
