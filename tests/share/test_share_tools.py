"""Share-group administration (issue 24 item 4) against Apache Kafka 4.4.0 and jocko-py:
Kafka 4.4.0's own `kafka-share-groups` (`ShareGroupCommand`, from the 4.4.0 tool jars)
with `--list`, `--describe`, `--reset-offsets` and `--delete`, and `jocko-py share-groups`
(jocko_py/cli/share_groups.py) doing the same, each checked against the other's view.

One share group consumes 20 records to the end (a Java KafkaShareConsumer, then stopped:
the group is Empty), then its start offset is reset by each tool and read back by the
other, and the group is deleted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.share.harness import (
    ShareBroker,
    ShareWorker,
    create_topic,
    produce_values,
    require_offsets_api,
    set_group_config,
    wait_until,
)
from tests.support import kafka44
from tests.support.broker import REPO

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
pytestmark = [pytest.mark.java, pytest.mark.timeout(400)]
N = 20


def kafka_tool(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{kafka44.JARS}/*",
         SHARE_GROUPS, "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=120)


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jocko_py.cli", "share-groups", *args,
         "--bootstrap-server", bootstrap],
        capture_output=True, text=True, timeout=60, cwd=REPO)


def _offsets(bootstrap: str, group: str) -> dict[str, tuple[int, int]]:
    """`jocko-py share-groups describe --format json`: "topic-p" -> (start offset, lag)."""
    import json

    r = cli(bootstrap, "describe", group, "--format", "json")
    assert r.returncode == 0, r.stderr
    return {f"{p['topic']}-{p['partition']}": (p["start_offset"], p["lag"])
            for p in json.loads(r.stdout)[0]["partitions"]}


def test_kafka_share_groups_tool_and_jocko_cli(share_broker: ShareBroker,
                                               tmp_path: Path) -> None:
    require_offsets_api(share_broker)
    b = share_broker.bootstrap
    topic, group = f"tools-{tmp_path.name[-12:]}", f"tools-sg-{tmp_path.name[-12:]}"
    topic = topic.replace("_", "-")
    group = group.replace("_", "-")
    create_topic(b, topic)
    set_group_config(b, group, {"share.auto.offset.reset": "earliest"})
    produce_values(b, topic, [f"a-{i}" for i in range(N)])
    w = ShareWorker("c0", b, topic, group, tmp_path)
    try:
        wait_until("all records accepted", lambda: len(
            {d.offset for d in w.deliveries() if d.committed}) == N, timeout=90,
            on_timeout=w.log_tail)
        # a live member: both tools list the group, describe shows it; resetting refuses
        listed = kafka_tool(b, "--list")
        assert listed.returncode == 0 and group in listed.stdout.split(), listed
        assert group in cli(b, "list").stdout.split()
        consumer_groups = subprocess.run(  # as kafka-consumer-groups --list: not a share group
            [sys.executable, "-m", "jocko_py.cli", "groups", "list", "--bootstrap-server", b],
            capture_output=True, text=True, timeout=60, cwd=REPO)
        assert consumer_groups.returncode == 0 and group not in consumer_groups.stdout.split()
        members = cli(b, "describe", group, "--members")
        assert members.returncode == 0 and topic in members.stdout, members
        busy = cli(b, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
        assert busy.returncode == 1 and busy.stderr.count("\n") == 1, busy
        assert "stop its consumers" in busy.stderr
    finally:
        w.stop()
    key = f"{topic}-0"
    wait_until("the group's lag 0 at offset end", lambda: _offsets(b, group).get(key, (0, -1))[1]
               == 0, timeout=30)

    # Kafka's tool describes what jocko-py's CLI describes
    d = kafka_tool(b, "--describe", "--group", group)
    assert d.returncode == 0, d
    row = next(ln.split() for ln in d.stdout.splitlines() if topic in ln.split())
    assert row[0] == group and row[2] == "0", d.stdout  # GROUP TOPIC PARTITION ...

    # Kafka's tool resets to the earliest offset; jocko-py's CLI reads lag N back
    wait_until("the group Empty", lambda: "Empty" in cli(b, "describe", group,
                                                           "--state").stdout, timeout=60)
    r = kafka_tool(b, "--reset-offsets", "--group", group, "--topic", topic,
                   "--to-earliest", "--execute")
    assert r.returncode == 0, r
    assert _offsets(b, group)[key] == (0, N)

    # jocko-py's CLI: a dry run changes nothing, --execute moves to offset 5
    dry = cli(b, "reset-offsets", group, "--topic", topic, "--to-offset", "5")
    assert dry.returncode == 0 and "dry run" in dry.stdout, dry
    assert _offsets(b, group)[key] == (0, N)
    done = cli(b, "reset-offsets", group, "--topic", topic, "--to-offset", "5", "--execute")
    assert done.returncode == 0, done
    assert _offsets(b, group)[key] == (5, N - 5)
    d = kafka_tool(b, "--describe", "--group", group)
    row = next(ln.split() for ln in d.stdout.splitlines() if topic in ln.split())
    assert "5" in row[3:], d.stdout  # START-OFFSET (after LEADER-EPOCH)

    # Kafka's tool deletes the group; both tools then say it does not exist
    gone = kafka_tool(b, "--delete", "--group", group)
    assert gone.returncode == 0, gone
    after = cli(b, "describe", group)
    assert after.returncode == 1 and after.stderr.strip() == (
        f"error: share group '{group}' does not exist"), after
    assert "Traceback" not in after.stderr
    assert group not in kafka_tool(b, "--list").stdout.split()


def test_jocko_cli_delete_and_mistakes(share_broker: ShareBroker, tmp_path: Path) -> None:
    require_offsets_api(share_broker)
    b = share_broker.bootstrap
    group = f"del-sg-{tmp_path.name[-12:]}".replace("_", "-")
    topic = f"del-{tmp_path.name[-12:]}".replace("_", "-")
    create_topic(b, topic)
    # offsets of a group that does not exist yet may be set (Kafka creates it Empty)
    r = cli(b, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert r.returncode == 0, r
    assert group in cli(b, "list").stdout.split()
    assert cli(b, "delete", group).returncode == 0
    missing_ = cli(b, "delete", group)
    assert missing_.returncode == 1 and missing_.stderr.strip() == (
        f"error: share group '{group}' does not exist"), missing_
    bad = cli(b, "reset-offsets", group, "--topic", topic, "--to-datetime", "yesterday")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "ISO-8601" in bad.stderr
