"""The web console in a real browser: headless Chromium (Debian's package) loads every
page and submits the console's forms (a page that posts the form, as a user's click
would); Kafka clients check the effects. Screenshots go to the test's tmp dir."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from jocko_py.cli_groups import GroupAdmin
from jocko_py.client import Client
from jocko_py.embedded import EmbeddedBroker, free_port
from tests.support.prereq import requires

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = requires(CHROMIUM is not None,
                      "chromium not installed (make test installs Debian's package)")


class Browser:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.n = 0

    def _run(self, *args: str) -> str:
        assert CHROMIUM is not None
        r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                            "--disable-dev-shm-usage", "--virtual-time-budget=5000", *args],
                           capture_output=True, text=True, timeout=90)
        return r.stdout

    def get(self, url: str, shot: bool = False) -> str:
        """The page's DOM after Chromium loaded it (and with ``shot`` a screenshot)."""
        self.n += 1
        if shot:
            self._run("--window-size=1200,900",
                      f"--screenshot={self.out}/page-{self.n:02d}.png", url)
        return self._run("--dump-dom", url)

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
    dom = br.get(url + "/topics/orders/messages?partition=0&format=json&limit=5", shot=True)
    assert "From offset 0: 5 record(s)." in text_of(dom)
    assert '"amount": 4' in html.unescape(dom) and "source" in dom
    assert h1(br.get(url + "/groups")) == "Consumer groups"
    # the same server-rendered pages, fetched without a browser
    dom = fetch(url + "/topics/orders/messages?partition=0&timestamp=2024-05-01T12:00:07Z")
    assert "From offset 7: 5 record(s)." in text_of(dom)
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
        r"<tr><td>events</td><td>(\d+)</td><td>\d+</td><td>\d+</td><td><span class=\"lag\">"
        r"(\d+)</span>", dom)}
    assert shown == expected
    assert 'class="lag-chart"' in dom and "<title>events-0: 15</title>" in dom
    groups = br.get(url + "/groups")
    assert re.search(r">analytics</a></td><td>Empty</td><td>0</td><td>-</td><td>23</td>", groups)

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
    assert h1(dom) == "Topics" and "(read-only)" in dom and "<form" not in dom
    req = urllib.request.Request(url + "/topics", data=b"name=x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 403
