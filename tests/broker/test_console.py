"""The web console in a real browser: headless Chromium (Debian's package) loads every
page and submits the console's forms (a page that posts the form, as a user's click
would); Kafka clients check the effects. Screenshots go to the test's tmp dir."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from jocko_py.admin import GroupAdmin
from jocko_py.client import Client
from jocko_py.console import fmt_bytes
from jocko_py.embedded import EmbeddedBroker
from tests.support.broker import free_port
from tests.support.cluster import FAST, Cluster
from tests.support.prereq import requires

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = requires(CHROMIUM is not None,
                      "chromium not installed (make test installs Debian's package)")


class Browser:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.n = 0

    def _run(self, *args: str, settle: bool = True) -> str:
        assert CHROMIUM is not None
        # settle: let the page's timers run (5 s of virtual time); not for a page that
        # reloads itself, where virtual time never runs out
        budget = ["--virtual-time-budget=5000"] if settle else []
        r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                            "--disable-dev-shm-usage", *budget, *args],
                           capture_output=True, text=True, timeout=90)
        return r.stdout

    def get(self, url: str, shot: bool = False, settle: bool = True) -> str:
        """The page's DOM after Chromium loaded it (and with ``shot`` a screenshot)."""
        self.n += 1
        if shot:
            self._run("--window-size=1200,900",
                      f"--screenshot={self.out}/page-{self.n:02d}.png", url, settle=settle)
        return self._run("--dump-dom", url, settle=settle)

    def submit(self, action: str, fields: dict[str, str]) -> str:
        """Post a form to ``action`` from the browser and return the page it lands on
        (with the form token of the console's pages, as its own forms carry it)."""
        self.n += 1
        root = re.match(r"https?://[^/]+", action)
        assert root is not None
        token = re.search(r'name="csrf" value="([^"]+)"', fetch(root.group(0) + "/produce"))
        assert token is not None
        fields = {**fields, "csrf": token.group(1)}
        inputs = "".join(f'<textarea name="{html.escape(k)}">{html.escape(v)}</textarea>'
                         for k, v in fields.items())
        page = self.out / f"submit-{self.n:02d}.html"
        page.write_text(f'<html><body><form id="f" method="post" action="{action}">{inputs}'
                        "</form><script>document.getElementById('f').submit()</script>"
                        "</body></html>")
        return self._run("--dump-dom", page.as_uri())


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return str(r.read().decode())


def text_of(dom: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", dom))


def shown_records(dom: str) -> list[tuple[int, int]]:
    """(partition, offset) of the message browser's rows, in page order."""
    return [(int(p), int(o)) for p, o in re.findall(
        r"<tr><td>(\d+)</td><td>(\d+)</td><td>\d{4}-\d\d-\d\d ", dom)]


def h1(dom: str) -> str:
    m = re.search(r"<h1>(.*?)</h1>", dom)
    return html.unescape(m.group(1)) if m else ""


@pytest.fixture
def console(kafka_broker_factory: Callable[..., EmbeddedBroker]) -> tuple[EmbeddedBroker, str]:
    port = free_port()
    b = kafka_broker_factory({"jocko.console.addr": f"127.0.0.1:{port}"})
    return b, f"http://127.0.0.1:{port}"


def test_pages_load_and_show_the_cluster(console: tuple[EmbeddedBroker, str],
                                         tmp_path: Path) -> None:
    broker, url = console
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(12):
        producer.send("orders", key=f"k{i}".encode(), value=b'{"amount": %d}' % i,
                      headers=[("source", b"test")], timestamp_ms=1714564800000 + i * 1000)
    producer.flush()
    producer.close()
    br = Browser(tmp_path)

    dom = br.get(url + "/", shot=True)
    assert h1(dom) == "Overview"
    assert "127.0.0.1:" in dom and "alive" in dom
    dom = br.get(url + "/topics")
    assert h1(dom) == "Topics" and ">orders</a>" in dom and 'id="create-topic"' in dom
    dom = br.get(url + "/topics/orders")
    assert h1(dom) == "Topic orders"
    row = re.search(r"<tr><td>0</td>(.*?)</tr>", dom)
    assert row and "<td>12</td>" in row.group(1)  # high watermark and log end
    dom = br.get(url + "/topics/orders/messages?partition=0&format=json&limit=5&order=oldest",
                 shot=True)
    assert "5 record(s), oldest first, partition 0." in text_of(dom)
    assert [o for _, o in shown_records(dom)] == [0, 1, 2, 3, 4]
    assert '"amount": 4' in html.unescape(dom) and "source" in dom
    assert h1(br.get(url + "/groups")) == "Consumer groups"
    # the same server-rendered pages, fetched without a browser
    dom = fetch(url + "/topics/orders/messages?partition=0&timestamp=2024-05-01T12:00:07Z"
                "&limit=5&order=oldest")
    assert [o for _, o in shown_records(dom)] == [7, 8, 9, 10, 11]
    dom = fetch(url + "/topics/orders/messages?partition=0&offset=3&limit=1&format=hex")
    assert b"k3".hex() in dom
    assert h1(fetch(url + "/produce")) == "Produce a message"
    assert len(list(tmp_path.glob("page-*.png"))) == 2


def test_topic_created_and_message_produced_through_the_ui(
        console: tuple[EmbeddedBroker, str], tmp_path: Path) -> None:
    broker, url = console
    br = Browser(tmp_path)
    dom = br.submit(url + "/topics", {"name": "from-ui", "partitions": "3",
                                      "replication_factor": "", "configs": "retention.ms=3600000"})
    assert h1(dom) == "Topic from-ui"
    assert "Created topic from-ui with 3 partition(s)" in text_of(dom)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert len(admin.describe_topics(["from-ui"])[0]["partitions"]) == 3
    finally:
        admin.close()
    with Client(broker.bootstrap_servers) as jc:
        assert {c.name: c.value for c in jc.describe_configs("from-ui")
                if c.config_source == 1} == {"retention.ms": "3600000"}

    dom = br.submit(url + "/produce", {"topic": "from-ui", "partition": "2", "key": "k1",
                                       "value": "hello from the console",
                                       "headers": "origin=ui"})
    assert "Produced to from-ui-2 at offset 0" in text_of(dom)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=5000)
    c.assign([TopicPartition("from-ui", 2)])
    c.seek_to_beginning()
    m = next(iter(c))
    c.close()
    assert (m.key, m.value, m.headers) == (b"k1", b"hello from the console",
                                           [("origin", b"ui")])

    dom = br.submit(url + "/topics/from-ui/delete", {})
    assert "Deleted topic from-ui" in text_of(dom)
    # a post without the console's form token (another site's page) is refused
    req = urllib.request.Request(url + "/topics", data=b"name=csrf-victim", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 403


def test_group_lag_matches_the_group_and_offsets_reset(
        console: tuple[EmbeddedBroker, str], tmp_path: Path) -> None:
    broker, url = console
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.create_topics([NewTopic("events", num_partitions=2, replication_factor=1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(40):
        producer.send("events", value=b"e%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="analytics",
                      enable_auto_commit=False)
    c.commit({TopicPartition("events", 0): OffsetAndMetadata(5, "", -1),
              TopicPartition("events", 1): OffsetAndMetadata(12, "", -1)})
    c.close()
    admin.close()
    with Client(broker.bootstrap_servers) as jc:
        expected = {p: 20 - o for (_, p), o in GroupAdmin(jc).committed("analytics").items()}
    assert expected == {0: 15, 1: 8}

    br = Browser(tmp_path)
    dom = br.get(url + "/groups/analytics", shot=True)
    assert h1(dom) == "Consumer group analytics"
    shown = {int(p): int(lag) for p, lag in re.findall(
        r"<tr><td>events</td><td>(\d+)</td><td>\d+</td><td>\d+</td><td>\d+</td>"
        r"<td><span class=\"lag\">(\d+)</span>", dom)}
    assert shown == expected
    assert 'class="lag-chart"' in dom and "<title>events-0: 15</title>" in dom
    groups = br.get(url + "/groups")
    assert re.search(r">analytics</a></td><td>Empty</td><td>0</td><td>-</td><td>2</td>"
                     r"<td>23</td>", groups)

    dom = br.submit(url + "/groups/analytics/reset", {"to": "earliest"})
    assert "Reset 2 partition(s) to earliest" in text_of(dom)
    with Client(broker.bootstrap_servers) as jc:
        assert GroupAdmin(jc).committed("analytics") == {("events", 0): 0, ("events", 1): 0}


def test_read_only_console_refuses_actions(
        kafka_broker_factory: Callable[..., EmbeddedBroker], tmp_path: Path) -> None:
    port = free_port()
    kafka_broker_factory({"jocko.console.addr": f"127.0.0.1:{port}",
                          "jocko.console.read.only": "true"})
    url = f"http://127.0.0.1:{port}"
    dom = Browser(tmp_path).get(url + "/topics")
    assert h1(dom) == "Topics" and "(read-only)" in dom
    assert not re.search(r"<form[^>]*method=.post", dom)  # no actions
    req = urllib.request.Request(url + "/topics", data=b"name=x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 403


# -- an operator's console: every assigned partition, the message browser, auto-refresh,
# -- 404s, the cluster page ---------------------------------------------------------


def group_rows(dom: str) -> list[tuple[str, int, int | None, int, int | None]]:
    """(topic, partition, committed, log end, lag) of a group page's lag table."""
    def num(v: str) -> int | None:
        return None if v == "-" else int(v)
    return [(t, int(p), num(c), int(e), num(lag)) for t, p, c, e, lag in re.findall(
        r"<tr><td>([\w.-]+)</td><td>(\d+)</td><td>(\d+|-)</td><td>\d+</td><td>(\d+)</td>"
        r"<td><span class=\"lag\">(\d+|-)</span>", dom)]


def cli_rows(bootstrap: str, group: str) -> list[tuple[str, int, int | None, int, int | None]]:
    """The same rows from `jocko-py groups describe --format json`."""
    r = subprocess.run([sys.executable, "-m", "jocko_py.cli", "groups", "describe", group,
                        "--format", "json", "--bootstrap-server", bootstrap],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [(p["topic"], p["partition"], p["current_offset"], p["log_end_offset"], p["lag"])
            for p in json.loads(r.stdout)[0]["partitions"]]


def test_group_page_lists_every_assigned_partition_as_the_cli_does(
        console: tuple[EmbeddedBroker, str], tmp_path: Path) -> None:
    broker, url = console
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.create_topics([NewTopic("wide", num_partitions=6, replication_factor=1),
                         NewTopic("narrow", num_partitions=3, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for t, n in (("wide", 6), ("narrow", 3)):
        for p in range(n):
            for i in range(20):
                producer.send(t, value=b"r%d" % i, partition=p)
    producer.flush()
    producer.close()
    with Client(broker.bootstrap_servers) as jc:  # narrow-2 starts at 8 now
        r = jc.request(21, 2, {"topics": [{"name": "narrow", "partitions": [
            {"partition_index": 2, "offset": 8}]}], "timeout_ms": 10000})
        assert r.topics[0].partitions[0].error_code == 0

    # a classic group: one member owning all 9 partitions, commits on 4 of them
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="dash",
                      enable_auto_commit=False, auto_offset_reset="earliest")
    c.subscribe(["wide", "narrow"])
    deadline = time.monotonic() + 30
    while len(c.assignment()) < 9 and time.monotonic() < deadline:
        c.poll(timeout_ms=200, max_records=1)
        c.pause(*c.assignment())  # joined; read nothing
    assert len(c.assignment()) == 9
    c.commit({TopicPartition("wide", p): OffsetAndMetadata(5, "", -1) for p in range(4)})
    # a consumer-protocol (KIP-848) group: one member owning narrow's 3 partitions,
    # a commit on one
    with Client(broker.bootstrap_servers) as jc:
        hb = {"group_id": "live848", "member_id": str(uuid.uuid4()), "member_epoch": 0,
              "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
              "subscribed_topic_names": ["narrow"], "subscribed_topic_regex": None,
              "server_assignor": None, "topic_partitions": []}
        for _ in range(50):
            r = jc.request(68, 1, hb)
            assert r.error_code == 0, r.error_message
            owned = [{"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
                     for tp in (r.assignment.topic_partitions if r.assignment else [])]
            if owned or hb["topic_partitions"]:
                hb.update(member_epoch=r.member_epoch,
                          topic_partitions=owned or hb["topic_partitions"])
            if sum(len(tp["partitions"]) for tp in hb["topic_partitions"]) == 3 and \
                    r.assignment is None:
                break
            time.sleep(0.1)
        r = jc.request(8, 9, {"group_id": "live848", "generation_id_or_member_epoch":
                              hb["member_epoch"], "member_id": hb["member_id"],
                              "group_instance_id": None, "topics": [{"name": "narrow",
                              "partitions": [{"partition_index": 0, "committed_offset": 10,
                                              "committed_leader_epoch": -1,
                                              "committed_metadata": ""}]}]})
        assert r.topics[0].partitions[0].error_code == 0

        br = Browser(tmp_path)
        dom = br.get(url + "/groups/dash", shot=True)
        rows = group_rows(dom)
        assert len(rows) == 9 and rows == cli_rows(broker.bootstrap_servers, "dash")
        assert ("narrow", 2, None, 20, None) in rows and ("wide", 0, 5, 20, 15) in rows
        # 4 x 15 behind commits; 5 partitions never committed: 4 x 20 + 12 from the log start
        assert "Total lag <b>152</b>: 60 behind committed offsets and 92 unread record(s) " \
               "on 5 assigned partition(s) with no committed offset" in dom
        dom = fetch(url + "/groups/live848")  # the same page without a browser
        assert "consumer protocol" in dom
        rows = group_rows(dom)
        assert rows == cli_rows(broker.bootstrap_servers, "live848") == [
            ("narrow", 0, 10, 20, 10), ("narrow", 1, None, 20, None),
            ("narrow", 2, None, 20, None)]
        assert "Total lag <b>42</b>: 10 behind committed offsets and 32 unread" in dom
        groups = fetch(url + "/groups")
        assert re.search(r">dash</a></td><td>Stable</td><td>1</td><td>[^<]*</td><td>9</td>"
                         r"<td>152 ", groups)
    c.close()


def test_message_browser_pages_merges_searches_and_tails(
        console: tuple[EmbeddedBroker, str], tmp_path: Path) -> None:
    broker, url = console
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.create_topics([NewTopic("feed", num_partitions=3, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    t0 = 1714564800000
    for i in range(30):  # record i: partition i % 3, offset i // 3, one second apart
        producer.send("feed", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3,
                      headers=[("h", b"x%d" % i)], timestamp_ms=t0 + i * 1000)
    producer.flush()

    def at(i: int) -> tuple[int, int]:
        return i % 3, i // 3

    def follow(dom: str, label: str) -> str:
        m = re.search(r'<a href="([^"]+)"[^>]*>' + label + "</a>", html.unescape(dom))
        assert m, f"no {label} link"
        return url + m.group(1)

    br = Browser(tmp_path)
    base = url + "/topics/feed/messages"
    # newest first, all partitions merged by time, pages of 10
    dom = br.get(base + "?limit=10", shot=True)
    assert "10 record(s), newest first, 3 partitions merged by timestamp" in text_of(dom)
    assert shown_records(dom) == [at(i) for i in range(29, 19, -1)]
    dom = br.get(follow(dom, "older →"))
    assert shown_records(dom) == [at(i) for i in range(19, 9, -1)]
    middle = dom  # the same server-rendered pages, fetched without a browser
    dom = fetch(follow(dom, "older →"))
    assert shown_records(dom) == [at(i) for i in range(9, -1, -1)]
    assert "older →" not in dom
    dom = fetch(follow(middle, "← newer"))
    assert shown_records(dom) == [at(i) for i in range(29, 19, -1)]
    # oldest first, and one partition
    dom = fetch(base + "?limit=10&order=oldest")
    assert shown_records(dom) == [at(i) for i in range(10)]
    assert shown_records(fetch(follow(dom, "next →"))) == [at(i) for i in range(10, 20)]
    dom = fetch(base + "?limit=4&partition=1&order=oldest&offset=3")
    assert shown_records(dom) == [(1, 3), (1, 4), (1, 5), (1, 6)]
    # search: key, headers; a bounded scan says how far it read and goes on from there
    dom = fetch(base + "?q=K2&in=key")  # case-insensitive: k2, k20 ... k29
    assert shown_records(dom) == [at(i) for i in range(29, 19, -1)] + [at(2)]
    assert "searched 30 record(s)" in text_of(dom)
    dom = fetch(base + "?q=5&in=headers")
    assert shown_records(dom) == [at(25), at(15), at(5)]
    assert shown_records(fetch(base + "?q=x5&in=key")) == []
    dom = fetch(base + "?q=v1&scan=6")  # reads records 29..24: nothing
    assert shown_records(dom) == [] and "searched 6 record(s)" in text_of(dom)
    assert "at most 6 per page" in text_of(dom)
    dom = fetch(follow(dom, "older →"))  # 23..18: v19, v18
    assert shown_records(dom) == [at(19), at(18)]
    # live tail: the newest page reloading itself every 2 s, a new record on top
    dom = br.get(follow(fetch(base), "live tail"), settle=False)
    assert '<meta http-equiv="refresh" content="2">' in dom
    assert "live tail, refreshing every 2 s" in text_of(dom)
    producer.send("feed", key=b"new", value=b"latest", partition=2, timestamp_ms=t0 + 60_000)
    producer.flush()
    producer.close()
    dom = fetch(base + "?refresh=2&order=newest")
    assert shown_records(dom)[0] == (2, 10) and "latest" in dom
    # transaction markers take offsets but are no records: pages step over them
    tx = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="tx-1")
    tx.init_transactions()
    for batch in ((b"a", b"b"), (b"c",)):
        tx.begin_transaction()
        for v in batch:
            tx.send("txn", value=v, partition=0)
        tx.commit_transaction()  # a marker after each transaction: offsets 2 and 4
    tx.close()
    tx_url = url + "/topics/txn/messages?limit=2"
    dom = fetch(tx_url)
    assert shown_records(dom) == [(0, 3), (0, 1)]
    dom = fetch(follow(dom, "older →"))
    assert shown_records(dom) == [(0, 0)] and "older →" not in html.unescape(dom)


def test_missing_things_are_404_and_pages_refresh_themselves(
        console: tuple[EmbeddedBroker, str], tmp_path: Path) -> None:
    broker, url = console
    with Client(broker.bootstrap_servers) as jc:
        jc.create_topic("present", 2)
    for path in ("/topics/absent", "/topics/absent/messages", "/groups/absent",
                 "/topics/present/messages?partition=2", "/no/such/page"):
        with pytest.raises(urllib.error.HTTPError) as e:
            fetch(url + path)
        assert e.value.code == 404, path
        assert "Not found" in e.value.read().decode()
    assert h1(fetch(url + "/topics/present/messages?partition=1")) == \
        "Messages of present / 1"
    # auto-refresh: off by default, a choice of intervals, kept by the navigation links
    dom = Browser(tmp_path).get(url + "/topics")
    assert 'http-equiv="refresh"' not in dom and 'id="refresh"' in dom
    dom = Browser(tmp_path).get(url + "/topics?refresh=5", settle=False)
    assert '<meta http-equiv="refresh" content="5">' in dom
    assert '<b class="current">5 s</b>' in dom and '<a href="/topics">off</a>' in dom
    assert 'href="/groups?refresh=5"' in dom
    assert 'http-equiv="refresh"' not in fetch(url + "/topics?refresh=7")  # not offered
    assert 'http-equiv="refresh"' not in fetch(url + "/produce?refresh=5")  # a form to fill


def test_cluster_page_single_node(console: tuple[EmbeddedBroker, str], tmp_path: Path) -> None:
    broker, url = console
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for _ in range(100):
        producer.send("load", value=b"x" * 1000)
    producer.flush()
    producer.close()
    dom = Browser(tmp_path).get(url + "/cluster", shot=True)
    assert h1(dom) == "Cluster"
    text = text_of(dom)
    assert re.search(r"jocko-py version\s+\d+\.\d+", text)
    assert re.search(r"uptime\s+\d+(m \d+)?s\s+\(since ", text)
    st = os.statvfs(broker.data_dir)
    row = re.search(r"<tr><td><code>" + re.escape(str(broker.data_dir)) +
                    r"</code></td><td><span class=\"ok\">online</span></td>(.*?)</tr>", dom)
    assert row, dom
    cells = re.findall(r"<td>([^<]*)</td>", row.group(1))
    assert cells[1] == fmt_bytes(st.f_blocks * st.f_frsize)  # filesystem size
    assert float(cells[0].split()[0]) > 90 and cells[0].endswith("KiB")  # the logs: ~100 KiB
    # 100 records of 1000 bytes produced in the last seconds
    since = re.search(r"<tr><td>since start</td><td>([^<]*)</td>", dom)
    assert since and since.group(1).endswith("KiB") and float(since.group(1).split()[0]) > 97
    last10 = re.search(r"<tr><td>last 10 s <span[^>]*>[^<]*</span></td><td>([^<]*)</td>", dom)
    assert last10 and last10.group(1) != "0 B/s"
    assert "Single node: no raft quorum" in text


def test_cluster_page_shows_the_raft_quorum(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 3, dict(FAST))
    port = free_port()
    cluster.brokers[2].overrides["jocko.console.addr"] = f"127.0.0.1:{port}"
    try:
        cluster.start()
        dom = Browser(tmp_path).get(f"http://127.0.0.1:{port}/cluster")
        q = re.search(r"Raft leader <b>(\d+)</b>, epoch <b>(\d+)</b>, high watermark "
                      r"<b>(\d+)</b>, 3 voter\(s\)", dom)
        assert q, dom
        roles = dict(re.findall(r"<tr><td>(\d)</td><td>(leader|follower|observer)</td>", dom))
        assert roles == {str(i): "leader" if str(i) == q.group(1) else "follower"
                         for i in (1, 2, 3)}
        assert "Single node" not in dom
        # the browser reads each partition at its leader, wherever it is
        with Client(cluster.bootstrap) as jc:
            jc.create_topic("spread", 3, 1)

        def leaders() -> set[int] | None:
            ids = [cluster.partition_state("spread", p)[0] for p in range(3)]
            return set(ids) if min(ids) >= 0 else None
        assert len(cluster.wait_for("every partition led", leaders)) > 1
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
        for i in range(9):
            producer.send("spread", value=b"s%d" % i, partition=i % 3,
                          timestamp_ms=1714564800000 + i)
        producer.flush()
        producer.close()
        dom = fetch(f"http://127.0.0.1:{port}/topics/spread/messages")
        assert shown_records(dom) == [(i % 3, i // 3) for i in range(8, -1, -1)]
    finally:
        cluster.stop()
