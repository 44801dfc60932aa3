"""Apache Kafka 4.4.0's own share consumer (`kafka-console-share-consumer`, a
KafkaShareConsumer) against one broker process: it joins the share group, is assigned
the topic's partitions once their share state is initialized, receives every record
once and leaves; the group is Empty afterwards (ShareGroupDescribe)."""

from __future__ import annotations

import importlib.util
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from jocko_py.client import Client
from tests.groups.harness import BROKER_OVERRIDES, wait_until
from tests.support import kafka44
from tests.support.broker import BrokerProcess
from tests.support.prereq import missing

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]
CONSOLE = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    why = kafka44.missing()
    if why:
        missing(why)
    if importlib.util.find_spec("jocko_py.broker.handlers.share_fetch") is None:
        pytest.skip("ShareFetch (issue 24's share partition) is not on this branch")
    b = BrokerProcess(tmp_path / "data", overrides=dict(BROKER_OVERRIDES))
    b.start()
    try:
        yield b
    finally:
        b.stop()


def test_kafka_console_share_consumer_reads_every_record(broker: BrokerProcess) -> None:
    with Client(broker.bootstrap) as c:
        c.create_topic("work", 2, 1)
    proc = subprocess.Popen(
        ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{kafka44.JARS}/*",
         CONSOLE, "--bootstrap-server", broker.bootstrap, "--topic", "work", "--group", "sq",
         "--max-messages", "20", "--timeout-ms", "30000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with Client(broker.bootstrap) as c:
            def member_has_partitions() -> bool:
                c.request(10, 3, {"key": "sq", "key_type": 0})
                g = c.request(77, 1, {"group_ids": ["sq"],
                                      "include_authorized_operations": False}).groups[0]
                return g.error_code == 0 and any(m.assignment.topic_partitions
                                                 for m in g.members)
            wait_until(member_has_partitions, 60, "the share consumer's partitions")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        try:
            for i in range(20):
                producer.send("work", f"v{i}".encode(), partition=i % 2)
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=10)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert sorted(out.split()) == sorted(f"v{i}" for i in range(20)), (out, err)
    with Client(broker.bootstrap) as c:
        deadline = time.monotonic() + 10
        while True:
            g = c.request(77, 1, {"group_ids": ["sq"],
                                  "include_authorized_operations": False}).groups[0]
            if g.group_state == "Empty" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (g.group_state, g.members, g.assignor_name) == ("Empty", [], "simple")
        assert g.assignment_epoch == g.group_epoch
