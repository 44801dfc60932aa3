"""`jocko-py produce|consume|topic|groups|cluster` as a user runs them: real processes
against a real broker (the plugin's in-process `kafka_broker`), exact output checked,
cross-checked with kafka-python and confluent-kafka."""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from jocko_py.cli import build_parser
from jocko_py.client import murmur2
from jocko_py.embedded import EmbeddedBroker
from tests.support.broker import REPO
from tests.support.cluster import Cluster, running_cluster


def cli(broker: EmbeddedBroker | str, *args: str, stdin: str | None = None,
        boot: bool = True) -> subprocess.CompletedProcess[str]:
    extra = ["--bootstrap-server", str(broker)] if boot else []
    return subprocess.run([sys.executable, "-m", "jocko_py.cli", *args, *extra], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def create(broker: EmbeddedBroker, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    admin.close()


def read_all(broker: EmbeddedBroker, topic: str, partitions: int,
             expect: int) -> dict[int, list]:  # type: ignore[type-arg]
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=5000)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning()
    out: dict[int, list] = {p: [] for p in range(partitions)}  # type: ignore[type-arg]
    n = 0
    for m in c:
        out[m.partition].append(m)
        n += 1
        if n == expect:
            break
    c.close()
    return out


def test_murmur2_matches_the_java_client() -> None:
    # Kafka's UtilsTest.testMurmur2 vectors
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(bytes([ord("a"), ord("b"), ord("c")])) == 479470107


def test_produce_by_key_like_java_in_batches(kafka_broker: EmbeddedBroker) -> None:
    ours, theirs = topic_name("bykey"), topic_name("bykey-ref")
    create(kafka_broker, ours, 4)
    create(kafka_broker, theirs, 4)
    keys = [f"user-{i}" for i in range(3000)]
    produce_stats = kafka_broker.broker.stats.requests[0]
    before = produce_stats.count
    r = cli(kafka_broker, "produce", ours, "--key-separator", ":",
            stdin="".join(f"{k}:v{i}\n" for i, k in enumerate(keys)))
    assert r.returncode == 0, r.stderr
    assert r.stderr == f"produced 3000 records to {ours} (partitions 0,1,2,3)\n"
    # 3000 lines in batches of 1000: a few Produce requests, not one per line
    assert produce_stats.count - before <= 4
    # librdkafka's murmur2_random partitioner is the Java client's
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                  "partitioner": "murmur2_random"})
    for i, k in enumerate(keys):
        p.produce(theirs, key=k.encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0
    got, ref = read_all(kafka_broker, ours, 4, 3000), read_all(kafka_broker, theirs, 4, 3000)
    for part in range(4):
        assert [m.key for m in got[part]] == [m.key for m in ref[part]]
        assert [m.value for m in got[part]] == [m.value for m in ref[part]]
    assert sum(len(v) for v in got.values()) == 3000


def test_produce_json_input_and_consume_formats(kafka_broker: EmbeddedBroker) -> None:
    t = topic_name("json")
    create(kafka_broker, t, 1)
    lines = [
        {"key": None, "value": "first", "headers": {"source": "cli"},
         "timestamp": "2024-05-01T12:00:00Z"},
        {"key": "k2", "value": {"n": 2}, "headers": [["a", "1"], ["b", None]],
         "timestamp": 1714564800001},
        {"value": None, "timestamp": 1714564800002},
    ]
    r = cli(kafka_broker, "produce", t, "--format", "json",
            stdin="".join(json.dumps(x) + "\n" for x in lines))
    assert r.returncode == 0, r.stderr
    r = cli(kafka_broker, "consume", t, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.splitlines()] == [
        {"topic": t, "partition": 0, "offset": 0, "timestamp": 1714564800000, "key": None,
         "value": "first", "headers": [["source", "cli"]]},
        {"topic": t, "partition": 0, "offset": 1, "timestamp": 1714564800001, "key": "k2",
         "value": '{"n": 2}', "headers": [["a", "1"], ["b", None]]},
        {"topic": t, "partition": 0, "offset": 2, "timestamp": 1714564800002, "key": None,
         "value": None, "headers": []},
    ]
    r = cli(kafka_broker, "consume", t, "--print-timestamp", "--print-partition",
            "--print-offset", "--print-headers", "--print-key")
    assert r.stdout == (
        "CreateTime:1714564800000\tPartition:0\tOffset:0\tsource:cli\tnull\tfirst\n"
        "CreateTime:1714564800001\tPartition:0\tOffset:1\ta:1,b:null\tk2\t{\"n\": 2}\n"
        "CreateTime:1714564800002\tPartition:0\tOffset:2\tNO_HEADERS\tnull\tnull\n")
    r = cli(kafka_broker, "consume", t, "--format", "json", "--encoding", "hex",
            "--offset", "1", "--max-messages", "1")
    assert json.loads(r.stdout)["key"] == b"k2".hex()
    # Kafka's console-consumer spelling is accepted too
    r = cli(kafka_broker, "consume", t, "--offset", "latest", "--from-beginning",
            "--max-messages", "1")
    assert r.returncode == 0 and r.stdout == "first\n", r.stdout + r.stderr


def test_consume_all_partitions_stops_at_the_end(kafka_broker: EmbeddedBroker) -> None:
    t = topic_name("all")
    create(kafka_broker, t, 3)
    r = cli(kafka_broker, "produce", t, "--key-separator", "=",
            stdin="".join(f"k{i}=v{i}\n" for i in range(30)))
    assert r.returncode == 0, r.stderr
    t0 = time.monotonic()
    r = cli(kafka_broker, "consume", t, "--print-key", "--key-separator", "=")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 8, "stops at the end offsets, not after an idle timeout"
    assert sorted(r.stdout.splitlines()) == sorted(f"k{i}=v{i}" for i in range(30))
    r = cli(kafka_broker, "consume", t, "--partition", "1", "--print-partition")
    assert r.stdout and all(line.startswith("Partition:1\t") for line in r.stdout.splitlines())


def test_consume_group_commits_and_follow(kafka_broker: EmbeddedBroker) -> None:
    t, group = topic_name("grp"), f"g-{uuid.uuid4().hex[:6]}"
    create(kafka_broker, t, 2)
    cli(kafka_broker, "produce", t, stdin="".join(f"a{i}\n" for i in range(20)))
    r = cli(kafka_broker, "consume", t, "--group", group)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == sorted(f"a{i}" for i in range(20))
    r = cli(kafka_broker, "groups", "describe", group, "--format", "json")
    assert r.returncode == 0, r.stderr
    desc = json.loads(r.stdout)[0]
    assert desc["state"] == "Empty"
    assert sum(p["current_offset"] for p in desc["partitions"]) == 20
    assert all(p["lag"] == 0 for p in desc["partitions"])
    # the group resumes where it stopped: only the new records
    cli(kafka_broker, "produce", t, stdin="b0\nb1\n")
    r = cli(kafka_broker, "consume", t, "--group", group)
    assert sorted(r.stdout.split()) == ["b0", "b1"]

    live = topic_name("live")
    create(kafka_broker, live, 1)
    follower = subprocess.Popen(
        [sys.executable, "-m", "jocko_py.cli", "consume", live, "--follow",
         "--bootstrap-server", str(kafka_broker)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        # whenever it starts (from the earliest offset of an empty topic), it waits for these
        cli(kafka_broker, "produce", live, stdin="live1\nlive2\n")
        assert follower.stdout is not None
        got = [follower.stdout.readline().strip() for _ in range(2)]
        assert got == ["live1", "live2"]
        # it is past the end now, and still waiting: a new record shows up
        cli(kafka_broker, "produce", live, stdin="live3\n")
        assert follower.stdout.readline().strip() == "live3"
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=20)
    assert follower.returncode == 130 and "Traceback" not in err, err


def test_topic_create_uses_broker_defaults_and_alter(
        kafka_broker_factory: Callable[..., EmbeddedBroker]) -> None:
    b = kafka_broker_factory({"num.partitions": "3"})
    r = cli(b, "topic", "create", "orders")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"Created topic orders \([0-9a-f-]{36}\) with 3 partitions, "
                        r"replication factor 1\n", r.stdout), r.stdout
    r = cli(b, "topic", "alter", "orders", "--partitions", "5", "--config", "retention.ms=60000")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("Topic orders: partitions 3 -> 5\n"
                        "Topic orders: set retention.ms=60000\n")
    r = cli(b, "topic", "describe", "orders", "--format", "json")
    d = json.loads(r.stdout)
    assert [(x["name"], x["partition_count"], x["configs"]) for x in d] == [
        ("orders", 5, {"retention.ms": "60000"})]
    assert [p["partition"] for p in d[0]["partitions"]] == [0, 1, 2, 3, 4]
    r = cli(b, "topic", "alter", "orders", "--delete-config", "retention.ms")
    assert r.stdout == "Topic orders: retention.ms back to its default\n"
    r = cli(b, "topic", "describe", "orders")
    assert "Config:" not in r.stdout and r.stdout.count("\tPartition: ") == 5
    r = cli(b, "topic", "list", "--format", "json")
    assert json.loads(r.stdout) == ["orders"]
    r = cli(b, "groups", "list", "--format", "json")
    assert json.loads(r.stdout) == []
    r = cli(b, "cluster", "status", "--format", "json")
    status = json.loads(r.stdout)
    assert status["controller"] == 0 and [x["id"] for x in status["brokers"]] == [0]


@pytest.mark.parametrize("args, stderr", [
    (["topic", "list", "--bootstrap-server", "localhost"],
     "error: --bootstrap-server: 'localhost' is not host:port\n"),
    (["consume", "no-such-topic"], "error: topic 'no-such-topic' does not exist\n"),
    (["topic", "describe", "no-such-topic"], "error: topic 'no-such-topic' does not exist\n"),
    (["consume", "x", "--offset", "soon"],
     "error: --offset: 'soon' is not earliest, latest or an offset\n"),
    (["groups", "describe", "no-such-group"],
     "error: consumer group 'no-such-group' does not exist\n"),
    (["groups", "delete", "no-such-group"],
     "error: consumer group 'no-such-group' does not exist\n"),
    (["groups", "reset-offsets", "g", "--all-topics", "--to-datetime", "yesterday"],
     "error: --to-datetime: 'yesterday' is not an ISO-8601 date-time "
     "(e.g. 2024-05-01T12:00:00+00:00)\n"),
    (["share-groups", "reset-offsets", "g", "--all-topics", "--to-datetime", "yesterday"],
     "error: --to-datetime: 'yesterday' is not an ISO-8601 date-time "
     "(e.g. 2024-05-01T12:00:00+00:00)\n"),
    (["produce", "x", "--header", "novalue"], "error: --header expects NAME=VALUE, got "
     "'novalue'\n"),
    (["produce", "json-errors", "--format", "json"], "error: line 2: not a JSON object: "
     "Expecting value\n"),
    (["topic", "create", "t", "--config", "retention.ms"],
     "error: --config expects KEY=VALUE, got 'retention.ms'\n"),
])
def test_user_errors_are_one_line(kafka_broker: EmbeddedBroker, args: list[str],
                                  stderr: str) -> None:
    boot = "--bootstrap-server" not in args
    r = cli(kafka_broker, *args, stdin='{"value": "ok"}\nnot json\n', boot=boot)
    assert r.returncode == 1
    assert r.stderr == stderr


def test_unreachable_broker_is_one_line() -> None:
    r = cli("127.0.0.1:1", "topic", "list")
    assert r.returncode == 1
    assert r.stderr == "error: cannot reach 127.0.0.1:1: Connection refused\n"


def test_broken_pipe_is_quiet(kafka_broker: EmbeddedBroker) -> None:
    t = topic_name("pipe")
    create(kafka_broker, t, 1)
    cli(kafka_broker, "produce", t, stdin="".join(f"line {i} {'x' * 200}\n"
                                                   for i in range(20000)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jocko_py.cli", "consume", t, "--bootstrap-server",
         str(kafka_broker)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"line 0 ")
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read().decode()
    proc.wait(30)
    assert proc.returncode == 141 and err == "", err


def test_version_and_every_flag_has_help() -> None:
    r = subprocess.run([sys.executable, "-m", "jocko_py.cli", "--version"],
                       capture_output=True, text=True, timeout=30, cwd=REPO)
    assert re.fullmatch(r"jocko-py \d+\.\d+\.\d+\S*\n", r.stdout), r.stdout

    missing: list[str] = []

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, child in a.choices.items():
                    walk(child, f"{path} {name}")
            elif a.option_strings and a.dest != "help" and not a.help:
                missing.append(f"{path} {a.option_strings[0]}")
    walk(build_parser(), "jocko-py")
    assert not missing, f"flags without help: {missing}"
    for cmd in ("broker", "topic", "produce", "consume", "cluster"):
        r = subprocess.run([sys.executable, "-m", "jocko_py.cli", cmd, "--help"],
                           capture_output=True, text=True, timeout=30, cwd=REPO)
        assert "example" in r.stdout, f"{cmd} --help has no examples"


@pytest.mark.parametrize("line, expected", [
    ("jocko-py to", ["topic"]),
    ("jocko-py topic al", ["alter"]),
    ("jocko-py consume orders --print-k", ["--print-key"]),
    ("jocko-py groups re", ["reset-offsets"]),
    ("jocko-py groups reset-offsets g --to-e", ["--to-earliest"]),
])
def test_bash_completion(line: str, expected: list[str]) -> None:
    script = subprocess.run([sys.executable, "-m", "jocko_py.cli", "completion", "bash"],
                            capture_output=True, text=True, timeout=30, cwd=REPO).stdout
    words = line.split(" ")
    probe = (script + f"\nCOMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; "
             "_jocko_py; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == expected, out.stderr


def test_two_cli_members_share_a_group(kafka_broker: EmbeddedBroker) -> None:
    t, group = topic_name("shared"), f"g-{uuid.uuid4().hex[:6]}"
    create(kafka_broker, t, 4)

    def member() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "jocko_py.cli", "consume", t, "--group", group, "--follow",
             "--print-partition", "--bootstrap-server", str(kafka_broker)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)

    def describe() -> dict:  # type: ignore[type-arg]
        r = cli(kafka_broker, "groups", "describe", group, "--format", "json")
        return json.loads(r.stdout)[0] if r.returncode == 0 else {}

    members = [member()]
    try:
        deadline = time.monotonic() + 40
        for n in (1, 2):
            while not (d := describe()) or d["state"] != "Stable" or d["members"] != n or \
                    len({p["consumer_id"] for p in d["partitions"]}) != n:
                assert time.monotonic() < deadline, d
                time.sleep(0.3)
            if n == 1:  # the second one joins a stable group: the first rejoins (heartbeat)
                members.append(member())
        cli(kafka_broker, "produce", t, "--key-separator", ":",
            stdin="".join(f"k{i}:v{i}\n" for i in range(40)))
        while sum(p["current_offset"] or 0 for p in describe()["partitions"]) < 40:
            assert time.monotonic() < deadline
            time.sleep(0.3)
    finally:
        outs = []
        for m in members:
            m.send_signal(signal.SIGINT)
            outs.append(m.communicate(timeout=20)[0])
    seen = [{line.split("\t")[0] for line in o.splitlines()} for o in outs]
    assert seen[0] and seen[1] and not seen[0] & seen[1], seen  # disjoint partitions
    assert sorted(line.split("\t")[1] for o in outs for line in o.splitlines()) == \
        sorted(f"v{i}" for i in range(40))


def _wait_end_offset(bootstrap: str, topic: str, at_least: int, timeout: float = 30) -> None:
    from jocko_py.client import Client, KafkaError

    deadline = time.monotonic() + timeout
    while True:
        try:
            with Client(bootstrap) as boot, boot.for_leader(topic, 0) as c:
                if c.list_offset(topic, 0, -1)[0] >= at_least:
                    return
        except (KafkaError, OSError):
            pass
        assert time.monotonic() < deadline, f"{topic} did not reach offset {at_least}"
        time.sleep(0.05)


def test_produce_shows_progress(kafka_broker: EmbeddedBroker) -> None:
    t = topic_name("progress")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jocko_py.cli", "produce", t, "--progress",
         "--bootstrap-server", str(kafka_broker)], stdin=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=REPO)
    assert proc.stdin is not None and proc.stderr is not None
    for chunk in range(3):  # input trickles in for over a second
        proc.stdin.write("".join(f"v{chunk}-{i}\n" for i in range(100)).encode())
        proc.stdin.flush()
        if chunk == 0:  # the CLI is up (it wrote the first chunk): a slow start would
            _wait_end_offset(str(kafka_broker), t, 100)  # take in all three at once
        time.sleep(0.6)
    proc.stdin.close()
    err = proc.stderr.read().decode()
    assert proc.wait(30) == 0, err
    progress = re.search(r"\r(\d+ records \(\d+/s\))", err)
    assert progress, repr(err)
    # the progress line is wiped before the summary
    assert err.endswith("\r" + " " * len(progress.group(1)) + "\r"
                        f"produced 300 records to {t} (partitions 0)\n"), repr(err)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as c:
        yield c


def test_groups_in_a_cluster_from_any_broker(cluster: Cluster) -> None:
    """The group's coordinator and the partitions' leaders are spread over three brokers:
    every tool finds them, whichever broker it is pointed at."""
    t, group = topic_name("spread"), f"g-{uuid.uuid4().hex[:6]}"
    everyone = cluster.bootstrap
    r = cli(everyone, "topic", "create", t, "--partitions", "3", "--replication-factor", "3")
    assert r.returncode == 0, r.stderr
    r = cli(everyone, "produce", t, "--key-separator", ":",
            stdin="".join(f"k{i}:v{i}\n" for i in range(30)))
    assert r.returncode == 0, r.stderr
    r = cli(everyone, "consume", t, "--group", group, "--max-messages", "10")
    assert r.returncode == 0 and len(r.stdout.split()) == 10, r.stderr
    views = []
    for addr in everyone.split(","):
        r = cli(addr, "groups", "describe", group, "--format", "json")
        assert r.returncode == 0, r.stderr
        views.append(json.loads(r.stdout))
        r = cli(addr, "groups", "list", "--format", "json")
        assert group in [g["group"] for g in json.loads(r.stdout)]
    assert views[0] == views[1] == views[2]
    parts = views[0][0]["partitions"]
    assert sum(p["current_offset"] for p in parts) == 10
    assert sum(p["log_end_offset"] for p in parts if p["lag"] is not None) - 10 == \
        sum(p["lag"] for p in parts)


def test_consume_hides_transaction_markers_and_read_committed_hides_aborted(
        kafka_broker: EmbeddedBroker) -> None:
    t = topic_name("txn")
    create(kafka_broker, t, 1)
    p = Producer({"bootstrap.servers": str(kafka_broker), "transactional.id": f"tx-{t}"})
    p.init_transactions(30)
    for values, commit in ((["c1", "c2"], True), (["a1"], False), (["c3"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(t, v.encode())
        p.flush(30)  # an abort purges what librdkafka has not sent yet
        (p.commit_transaction if commit else p.abort_transaction)(30)
    # read_uncommitted (the default, as Kafka's console consumer): every data record,
    # never a marker (the log holds 4 records and 3 markers)
    r = cli(kafka_broker, "consume", t, "--print-offset")
    assert r.returncode == 0, r.stderr
    assert "\x00" not in r.stdout
    assert [ln.split("\t")[1] for ln in r.stdout.splitlines()] == ["c1", "c2", "a1", "c3"]
    r = cli(kafka_broker, "consume", t, "--isolation-level", "read_committed")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["c1", "c2", "c3"]
    r = cli(kafka_broker, "consume", t, "--isolation-level", "committed")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_ctrl_c_at_any_moment_of_a_group_join_exits_130_and_leaves(
        kafka_broker: EmbeddedBroker) -> None:
    """Ctrl-C while `consume --group` is joining (the first join of a group waits for
    `group.initial.rebalance.delay.ms`), syncing or reading: exit 130, no traceback, and
    the member has left the group."""
    import random

    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rnd = random.Random(seed)
    t = topic_name("intr")
    create(kafka_broker, t, 2)
    cli(kafka_broker, "produce", t, stdin="x\ny\n")
    for attempt in range(6):
        group = f"g-intr-{attempt}-{uuid.uuid4().hex[:6]}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "jocko_py.cli", "consume", t, "--group", group, "--follow",
             "--bootstrap-server", str(kafka_broker)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=REPO)
        # spread over start-up, FindCoordinator, the two JoinGroups (the second waits
        # ~3 s), SyncGroup and the first fetches; jittered by the printed seed
        time.sleep(0.8 * attempt + 0.6 + rnd.uniform(0, 0.8))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 130, f"attempt {attempt}: rc {proc.returncode}: {err}"
        assert "Traceback" not in err, err
        deadline = time.monotonic() + 10
        while True:
            r = cli(kafka_broker, "groups", "describe", group, "--format", "json")
            desc = json.loads(r.stdout)[0] if r.returncode == 0 else {}
            if desc.get("members") == 0:
                break
            assert time.monotonic() < deadline, f"attempt {attempt}: still a member: {r.stdout}"
            time.sleep(0.2)


def test_leave_after_an_interrupted_join_uses_a_new_connection(
        kafka_broker: EmbeddedBroker) -> None:
    """The root cause behind Ctrl-C tracebacks during a join: a JoinGroup interrupted
    before its answer left that answer on the coordinator connection, and LeaveGroup read
    it as its own. Deterministic: a second JoinGroup is sent and not read (it waits out the
    rebalance), then leave() must still take the member out of the group at once."""
    from jocko_py.cli.data import GroupMember
    from jocko_py.client import Client
    from jocko_py.protocol import codec

    t, group = topic_name("lv"), f"g-lv-{uuid.uuid4().hex[:6]}"
    create(kafka_broker, t, 1)
    with Client(str(kafka_broker)) as boot:
        member = GroupMember(boot, group, t, [0])
        member.join()
        # a new join (as after a rebalance), interrupted before its answer: the
        # coordinator answers it only when the rebalance completes
        member.coord.sock.sendall(codec.encode_request(11, 5, 999, "jocko-py-cli", {
            "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 30000,
            "member_id": member.member_id, "group_instance_id": None,
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}))
        t0 = time.monotonic()
        member.leave()
        assert time.monotonic() - t0 < 5
    r = cli(kafka_broker, "groups", "describe", group, "--format", "json")
    assert r.returncode == 0, r.stderr
    desc = json.loads(r.stdout)[0]
    assert desc["members"] == 0 and desc["state"] == "Empty", desc


def test_share_groups_list_describe_delete(kafka_broker: EmbeddedBroker) -> None:
    """`jocko-py share-groups` on a share group one member joined by ShareGroupHeartbeat:
    listed (and not by `groups list`), its member and state described, deletion refused
    while it has the member (one line) and done once it left."""
    from jocko_py.client import Client

    t, group, member = topic_name("sharecli"), f"sg-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())
    with Client(str(kafka_broker)) as c:
        c.create_topic(t, 2)
        coord = c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]
        assert coord.error_code == 0
        with Client(f"{coord.host}:{coord.port}") as cc:
            epoch, deadline = 0, time.monotonic() + 30
            while True:
                r = cc.request(76, 1, {"group_id": group, "member_id": member,
                                       "member_epoch": epoch, "rack_id": None,
                                       "subscribed_topic_names": [t]})
                assert r.error_code == 0, r
                epoch = r.member_epoch
                if r.assignment is not None and r.assignment.topic_partitions:
                    break
                assert time.monotonic() < deadline, r
                time.sleep(0.3)
            assert group in cli(kafka_broker, "share-groups", "list").stdout.split()
            assert group not in cli(kafka_broker, "groups", "list").stdout.split()
            r2 = cli(kafka_broker, "share-groups", "describe", group, "--members")
            assert r2.returncode == 0 and member in r2.stdout and f"{t}:0,1" in r2.stdout, r2
            st = cli(kafka_broker, "share-groups", "describe", group, "--state",
                     "--format", "json")
            assert json.loads(st.stdout)[0]["state"] == "Stable", st
            busy = cli(kafka_broker, "share-groups", "delete", group)
            assert busy.returncode == 1 and busy.stderr == (
                f"error: share group '{group}' has active members: stop its consumers first\n")
            cc.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": -1,
                               "rack_id": None, "subscribed_topic_names": None})
    done = cli(kafka_broker, "share-groups", "delete", group)
    assert done.returncode == 0 and done.stdout == f"Deleted share group '{group}'\n", done
    gone = cli(kafka_broker, "share-groups", "describe", group, "--members")
    assert gone.returncode == 1 and gone.stderr == (
        f"error: share group '{group}' does not exist\n"), gone
