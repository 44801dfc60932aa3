"""Prometheus metrics scraped over HTTP from a real broker process while kafka-python
produces and consumes; every checked value is compared with what the test sent."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from jocko_py.broker.stats import STRUCT_ARRAYS, BrokerStats
from jocko_py.client import Client, KafkaError
from tests.support.broker import REPO, BrokerProcess, free_port
from tests.support.cluster import running_cluster

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides={
        "jocko.metrics.addr": f"127.0.0.1:{free_port()}",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "2",
    })
    b.start()
    try:
        yield b
    finally:
        b.stop()


def scrape(b: BrokerProcess) -> Samples:
    url = f"http://{b.overrides['jocko.metrics.addr']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def total(samples: Samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, lv), v in samples.items() if n == name and want <= lv)


def test_metrics_follow_real_produce_and_consume(broker: BrokerProcess) -> None:
    topic = "metrics-orders"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    admin.close()

    sent = {0: 0, 1: 0}
    value_bytes = 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    for i in range(300):
        part = i % 3 % 2  # 200 records to partition 0, 100 to partition 1
        v = f"value-{i:04d}".encode() * 3
        producer.send(topic, key=str(i).encode(), value=v, partition=part)
        sent[part] += 1
        value_bytes += len(v)
    producer.flush()
    producer.close()

    m = scrape(broker)
    assert value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 300
    bytes_in = value(m, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    # batches are stored as produced: what came in is exactly what the logs hold
    log_size = sum(value(m, "kafka_log_log_size", topic=topic, partition=str(p))
                   for p in (0, 1))
    assert bytes_in == log_size and bytes_in > value_bytes
    for p, n in sent.items():
        assert value(m, "kafka_log_log_logendoffset", topic=topic, partition=str(p)) == n
        assert value(m, "kafka_cluster_partition_highwatermark", topic=topic,
                     partition=str(p)) == n
        assert value(m, "kafka_log_log_numlogsegments", topic=topic, partition=str(p)) == 1
        assert value(m, "kafka_log_log_logstartoffset", topic=topic, partition=str(p)) == 0
    produces = value(m, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produces >= 1
    assert value(m, "kafka_network_requestmetrics_totaltime_seconds_count",
                 request="Produce") == produces
    assert value(m, "kafka_network_requestmetrics_totaltime_seconds_bucket",
                 request="Produce", le="+Inf") == produces
    assert value(m, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(m, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(m, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(m, "process_resident_memory_bytes") > 10_000_000
    assert value(m, "process_cpu_seconds_total") > 0
    assert value(m, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert 0 < value(m, "jocko_log_dir_filesystem_used_bytes") < value(
        m, "jocko_log_dir_filesystem_size_bytes")

    # a consumer group reads everything and commits
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id="billing",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=15000)
    got = 0
    for _ in consumer:
        got += 1
        if got == 300:
            break
    assert got == 300
    consumer.commit()
    m = scrape(broker)
    assert value(m, "kafka_server_socketservermetrics_connection_count") >= 1
    assert value(m, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in
    assert value(m, "kafka_server_brokertopicmetrics_messagesout_total", topic=topic) >= 300
    for p, n in sent.items():
        lv = {"consumergroup": "billing", "topic": topic, "partition": str(p)}
        assert value(m, "kafka_consumergroup_current_offset", **lv) == n
        assert value(m, "kafka_consumergroup_lag", **lv) == 0
    assert value(m, "kafka_consumergroup_members", consumergroup="billing",
                 state="Stable") == 1
    consumer.close()

    # 40 more records to partition 1: the group's lag there is exactly 40
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for _ in range(40):
        producer.send(topic, value=b"late", partition=1)
    producer.flush()
    producer.close()
    m = scrape(broker)
    assert value(m, "kafka_consumergroup_lag", consumergroup="billing", topic=topic,
                 partition="1") == 40
    assert value(m, "kafka_consumergroup_lag", consumergroup="billing", topic=topic,
                 partition="0") == 0
    assert value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 340

    # a failed request is counted by its error code
    before = total(m, "kafka_network_requestmetrics_errors_total", request="Fetch",
                   error="OFFSET_OUT_OF_RANGE")
    with Client(broker.bootstrap) as c, pytest.raises(KafkaError):
        c.fetch(topic, 0, 10_000_000)
    m = scrape(broker)
    assert total(m, "kafka_network_requestmetrics_errors_total", request="Fetch",
                 error="OFFSET_OUT_OF_RANGE") == before + 1
    assert value(m, "kafka_server_brokertopicmetrics_failedfetchrequests_total",
                 topic=topic) >= 1


def test_metrics_endpoint_is_http(broker: BrokerProcess) -> None:
    """Also: every metric the example Grafana dashboard queries is served (raft and
    gossip ones only in a cluster)."""
    base = f"http://{broker.overrides['jocko.metrics.addr']}"
    dashboard = (REPO / "examples/grafana/jocko-py-dashboard.json").read_text()
    queried = set(re.findall(r"\b((?:kafka|process|jocko)_[a-z_]+)", dashboard))
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    served = {f.name for f in text_string_to_metric_families(text)}
    missing = {q for q in queried
               if re.sub(r"_(total|bucket)$", "", q) not in served and "raftmetrics" not in q
               and not q.startswith("jocko_gossip")}
    assert not missing, f"the dashboard queries metrics the broker does not serve: {missing}"
    with urllib.request.urlopen(base + "/", timeout=10) as r:
        assert b"/metrics" in r.read()
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/nope", timeout=10)
    assert e.value.code == 404


def test_metrics_off_by_default(tmp_path: Path) -> None:
    port = free_port()
    b = BrokerProcess(tmp_path / "data")
    b.start()
    try:
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
        assert "metrics on" not in b.log_tail()
    finally:
        b.stop()


def test_cluster_metrics_raft_gossip_and_replication(tmp_path: Path) -> None:
    metrics_ports = {i: free_port() for i in (1, 2, 3)}
    with running_cluster(tmp_path / "cluster", 3, per_broker=lambda i: {
            "jocko.metrics.addr": f"127.0.0.1:{metrics_ports[i]}"}) as cluster:
        def scrape_id(i: int) -> Samples:
            url = f"http://127.0.0.1:{metrics_ports[i]}/metrics"
            with urllib.request.urlopen(url, timeout=10) as r:
                text = r.read().decode()
            return {(s.name, frozenset(s.labels.items())): s.value
                    for f in text_string_to_metric_families(text) for s in f.samples}

        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        admin.create_topics([NewTopic("replicated", num_partitions=3, replication_factor=3)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        for i in range(30):
            producer.send("replicated", f"r{i}".encode(), partition=i % 3)
        producer.flush()
        producer.close()

        ms = {i: scrape_id(i) for i in (1, 2, 3)}
        leaders = {value(m, "kafka_server_raftmetrics_current_leader") for m in ms.values()}
        assert len(leaders) == 1 and leaders.pop() in (1, 2, 3)
        assert sum(value(m, "kafka_controller_kafkacontroller_activecontrollercount")
                   for m in ms.values()) == 1
        assert sum(value(m, "kafka_server_raftmetrics_current_state", state="leader")
                   for m in ms.values()) == 1
        for m in ms.values():
            assert value(m, "jocko_gossip_members", state="alive") == 3
            assert value(m, "kafka_server_replicamanager_underreplicatedpartitions") == 0
            assert value(m, "kafka_server_raftmetrics_high_watermark") > 0
            assert total(m, "kafka_server_replicamanager_partitioncount") >= 3
            # every replica holds the 10 records of each partition
            for p in range(3):
                assert value(m, "kafka_log_log_logendoffset", topic="replicated",
                             partition=str(p)) == 10
        assert sum(value(m, "kafka_server_replicamanager_leadercount")
                   for m in ms.values()) >= 3
        assert sum(total(m, "kafka_server_brokertopicmetrics_messagesin_total",
                         topic="replicated") for m in ms.values()) == 30
        assert sum(total(m, "kafka_server_brokertopicmetrics_replicationbytesout_total",
                         topic="replicated") for m in ms.values()) > 0

        # one broker goes away: the others see it dead and their partitions short of it
        cluster.brokers[3].kill()
        deadline = time.monotonic() + 30
        while True:
            ms = {i: scrape_id(i) for i in (1, 2)}
            urp = sum(value(m, "kafka_server_replicamanager_underreplicatedpartitions")
                      for m in ms.values())
            alive = [value(m, "jocko_gossip_members", state="alive") for m in ms.values()]
            if urp >= 3 and alive == [2, 2]:
                break
            assert time.monotonic() < deadline, f"under-replicated {urp}, alive {alive}"
            time.sleep(0.25)


def test_error_counting_knows_every_struct_array_and_its_fast_paths_agree() -> None:
    generated = set()
    for f in (REPO / "jocko_py/protocol/messages/_generated").glob("*.py"):
        generated |= set(re.findall(r"KField\('(\w+)', KArray\('\w+', KStruct", f.read_text()))
    assert generated == set(STRUCT_ARRAYS)
    fetch = {"error_code": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": p, "error_code": p % 3, "records": b"", "aborted_transactions": []}
        for p in range(7)]}]}
    produce = {"responses": [{"name": "t", "partition_responses": [
        {"index": p, "error_code": 6 if p == 2 else 0, "record_errors": []}
        for p in range(3)]}]}
    for key, body in ((1, fetch), (0, produce)):
        fast, general = BrokerStats(), BrokerStats()
        fast.count_errors(key, body)
        general.count_errors(1000 + key, body)  # an API without a fast path
        assert {c: n for (_, c), n in fast.errors.items()} == \
            {c: n for (_, c), n in general.errors.items()}
        assert fast.errors


def test_share_group_metrics_follow_membership(broker: BrokerProcess) -> None:
    """A share group (KIP-932) joined by one member through ShareGroupHeartbeat: counted by
    state, with its members and the partitions given share state; Empty once it left;
    never among the consumer groups' metrics."""
    import uuid

    topic, group, member = "share-metrics", "share-metrics-group", str(uuid.uuid4())
    with Client(broker.bootstrap) as c:
        c.create_topic(topic, 3)
        coord = c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]
        assert coord.error_code == 0 and coord.port == broker.port
        deadline = time.monotonic() + 30
        epoch = 0
        while True:  # until the member has its assignment (the group's state initialized)
            r = c.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch,
                                  "rack_id": None, "subscribed_topic_names": [topic]})
            assert r.error_code == 0, r
            epoch = r.member_epoch
            if r.assignment is not None and r.assignment.topic_partitions:
                break
            assert time.monotonic() < deadline, r
            time.sleep(0.3)
        s = scrape(broker)
        assert value(s, "kafka_server_group_coordinator_metrics_share_group_count",
                     state="Stable") == 1
        assert value(s, "kafka_sharegroup_members", sharegroup=group, state="Stable") == 1
        assert value(s, "kafka_sharegroup_partitions", sharegroup=group) == 3
        assert not [k for k in s if k[0] == "kafka_consumergroup_members"
                    and ("consumergroup", group) in k[1]]
        left = c.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": -1,
                                 "rack_id": None, "subscribed_topic_names": None})
        assert left.error_code == 0, left
    s = scrape(broker)
    assert value(s, "kafka_server_group_coordinator_metrics_share_group_count",
                 state="Empty") == 1
    assert value(s, "kafka_sharegroup_members", sharegroup=group, state="Empty") == 0
