"""jocko-py's operability of share groups (issue 24 item 4): the console's share-groups
pages (jocko_py/console.py) against a share group a Java KafkaShareConsumer uses, checked
against `jocko-py share-groups describe`'s view."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.share.harness import (
    ShareBroker,
    ShareWorker,
    create_topic,
    java_missing,
    jocko_missing,
    produce_values,
    set_group_config,
    wait_until,
)
from tests.support.broker import free_port
from tests.support.prereq import missing

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]
N = 30


@pytest.fixture(scope="module")
def jocko_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ShareBroker, str]]:
    if why := java_missing() or jocko_missing():
        missing(why)
    port = free_port()
    b = ShareBroker("jocko", tmp_path_factory.mktemp("share-console"),
                    extra={"jocko.console.addr": f"127.0.0.1:{port}"}).start()
    try:
        if why := jocko_missing(b.bootstrap, apis=(76, 77, 78, 79, 90)):
            missing(why)
        yield b, f"http://127.0.0.1:{port}"
    finally:
        b.stop()


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return str(r.read().decode())


def text_of(dom: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


def test_share_group_pages(jocko_console: tuple[ShareBroker, str], tmp_path: Path) -> None:
    b, url = jocko_console
    tag = uuid.uuid4().hex[:8]
    topic, group = f"console-{tag}", f"console-sg-{tag}"
    create_topic(b.bootstrap, topic)
    set_group_config(b.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce_values(b.bootstrap, topic, [f"a-{i}" for i in range(N)])
    w = ShareWorker("c0", b.bootstrap, topic, group, tmp_path)
    try:
        wait_until("all records accepted", lambda: len(
            {d.offset for d in w.deliveries() if d.committed}) == N, timeout=90,
            on_timeout=w.log_tail)
        listing = text_of(fetch(url + "/share-groups"))
        assert re.search(rf"{group} Stable 1 1 0\b", listing), listing
        page = fetch(url + f"/share-groups/{group}")
        text = text_of(page)
        assert f"Share group {group}" in text and "State Stable" in text, text
        assert re.search(rf"{topic} 0 \d+ 0\b", text), text  # start offset, lag 0
        assert re.search(r"Total lag 0 ?\.", text), text
        assert f"{topic}: [0]" in text  # the member's assignment
    finally:
        w.stop()
    produce_values(b.bootstrap, topic, [f"a-{i}" for i in range(N, N + 7)])
    text = text_of(fetch(url + f"/share-groups/{group}"))
    assert re.search(r"Total lag 7 ?\.", text), text  # the group's lag counts the new records
    with pytest.raises(urllib.error.HTTPError) as e:
        fetch(url + "/share-groups/no-such-group")
    assert e.value.code == 404


@pytest.fixture(scope="module")
def jocko_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ShareBroker, str]]:
    if why := java_missing() or jocko_missing():
        missing(why)
    addr = f"127.0.0.1:{free_port()}"
    b = ShareBroker("jocko", tmp_path_factory.mktemp("share-metrics"),
                    extra={"jocko.metrics.addr": addr}).start()
    try:
        if why := jocko_missing(b.bootstrap):
            missing(why)
        yield b, f"http://{addr}/metrics"
    finally:
        b.stop()


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(fetch(url)):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def test_share_partition_metrics(jocko_metrics: tuple[ShareBroker, str], tmp_path: Path) -> None:
    """A holder takes 20 records and sits on them: their locks expire (counted), another
    member accepts everything; then nothing is acquired, lag 0; new records show as lag."""
    b, url = jocko_metrics
    tag = uuid.uuid4().hex[:8]
    topic, group = f"metrics-{tag}", f"metrics-sg-{tag}"
    create_topic(b.bootstrap, topic)
    set_group_config(b.bootstrap, group, {"share.auto.offset.reset": "earliest",
                                          "share.record.lock.duration.ms": "2000"})
    produce_values(b.bootstrap, topic, [f"a-{i}" for i in range(N)])
    holder = ShareWorker("holder", b.bootstrap, topic, group, tmp_path, hold=True,
                         max_poll=20, acquire_mode="record_limit")
    other: ShareWorker | None = None
    lv = {("sharegroup", group), ("topic", topic), ("partition", "0")}
    try:
        wait_until("the holder to hold records", lambda: holder.has_line("HELD"), timeout=60,
                   on_timeout=holder.log_tail)
        held = len(holder.deliveries())
        s = scrape(url)
        mine = {k: v for k, v in s.items() if lv <= k[1]}
        assert s[("kafka_sharegroup_records", frozenset(lv | {("state", "acquired")}))] == \
            held, mine
        other = ShareWorker("other", b.bootstrap, topic, group, tmp_path)
        wait_until("all accepted", lambda: len(
            {d.offset for d in other.deliveries() if d.committed}) == N, timeout=60,
            on_timeout=other.log_tail)
        s = scrape(url)
        mine = {k: v for k, v in s.items() if lv <= k[1]}
        assert s.get(("kafka_sharegroup_lock_expiries_total", frozenset(lv)), 0) >= held, mine
        assert s[("kafka_sharegroup_records", frozenset(lv | {("state", "acquired")}))] == 0, \
            mine
        assert s[("kafka_sharegroup_lag", frozenset(lv))] == 0, mine
    finally:
        holder.kill()
        if other is not None:
            other.stop()
    produce_values(b.bootstrap, topic, [f"a-{i}" for i in range(5)])
    s = scrape(url)
    assert s[("kafka_sharegroup_lag", frozenset(lv))] == 5, {
        k: v for k, v in s.items() if lv <= k[1]}
