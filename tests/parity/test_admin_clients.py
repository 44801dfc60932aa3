"""The admin calls of confluent-kafka and kafka-python against jocko-py, one after the
other on one topic and one committed group, each checked for the answer Kafka gives.
(ACLs, SCRAM credentials and transactions belong to other issues.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    ElectionType,
    Producer,
    TopicCollection,
)
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic as KPNewTopic

from tests.support.e2e import TargetBroker, unique_suffix

SUFFIX = unique_suffix()


def _wait(fs: object) -> object:
    if isinstance(fs, dict):
        return {k: f.result(timeout=30) for k, f in fs.items()}
    return fs.result(timeout=30)  # type: ignore[attr-defined]


def test_confluent_kafka_admin_calls(target: TargetBroker) -> None:
    b = target.bootstrap
    topic, group = f"ck-admin-{SUFFIX}", f"ck-group-{SUFFIX}"
    a = AdminClient({"bootstrap.servers": b})
    _wait(a.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "100000"})]))
    deadline = time.monotonic() + 20
    while topic not in a.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    p = Producer({"bootstrap.servers": b})
    for i in range(30):
        p.produce(topic, b"x", partition=i % 3)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False})
    c.assign([CTP(topic, i, 0) for i in range(3)])
    n = 0
    while n < 30 and time.monotonic() < deadline + 20:
        m = c.poll(0.5)
        if m is not None and not m.error():
            n += 1
    c.commit(asynchronous=False)
    c.close()
    assert n == 30

    cluster = _wait(a.describe_cluster())
    assert [n.id for n in cluster.nodes] == [0]  # type: ignore[attr-defined]
    [desc] = _wait(a.describe_topics(TopicCollection([topic]))).values()  # type: ignore[union-attr]
    assert [pi.id for pi in desc.partitions] == [0, 1, 2]
    _wait(a.create_partitions([NewPartitions(topic, 4)]))
    cfg = _wait(a.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]))
    [entries] = cfg.values()  # type: ignore[union-attr]
    assert entries["retention.ms"].value == "100000"
    groups = _wait(a.list_consumer_groups())
    assert group in {g.group_id for g in groups.valid}  # type: ignore[attr-defined]
    [gd] = _wait(a.describe_consumer_groups([group])).values()  # type: ignore[union-attr]
    assert gd.group_id == group and gd.members == []
    [offs] = _wait(a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])).values()  # type: ignore[union-attr]
    assert sorted((tp.partition, tp.offset) for tp in offs.topic_partitions) == [
        (0, 10), (1, 10), (2, 10)]
    _wait(a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [
        CTP(topic, 0, 1)])]))
    lo = _wait(a.list_offsets({CTP(topic, 0): OffsetSpec.latest(),
                               CTP(topic, 1): OffsetSpec.earliest(),
                               CTP(topic, 2): OffsetSpec.max_timestamp()}))
    got = {tp.partition: r.offset for tp, r in lo.items()}  # type: ignore[union-attr]
    # max timestamp: the first record carrying the largest timestamp (records sent in the
    # same millisecond share it)
    assert got[0] == 10 and got[1] == 0 and 0 <= got[2] < 10, got
    dr = _wait(a.delete_records([CTP(topic, 0, 2)]))
    assert [r.low_watermark for r in dr.values()] == [2]  # type: ignore[union-attr]
    el = _wait(a.elect_leaders(ElectionType.PREFERRED, [CTP(topic, 0)]))
    assert "ELECTION_NOT_NEEDED" in str(el)
    _wait(a.delete_consumer_groups([group]))
    _wait(a.delete_topics([topic]))


@pytest.fixture
def kp_admin(target: TargetBroker) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=target.bootstrap, request_timeout_ms=20000)
    try:
        yield a
    finally:
        a.close()


def test_kafka_python_admin_calls(target: TargetBroker, kp_admin: KafkaAdminClient) -> None:
    a, b = kp_admin, target.bootstrap
    topic, group = f"kp-admin-{SUFFIX}", f"kp-group-{SUFFIX}"
    a.create_topics([KPNewTopic(topic, 3, 1)])
    p = KafkaProducer(bootstrap_servers=b)
    for i in range(30):
        p.send(topic, b"x", partition=i % 3)
    p.flush(timeout=30)
    p.close(timeout=10)
    c = KafkaConsumer(bootstrap_servers=b, group_id=group, enable_auto_commit=False)
    c.assign([TopicPartition(topic, i) for i in range(3)])
    c.seek_to_beginning()
    n, deadline = 0, time.monotonic() + 30
    while n < 30 and time.monotonic() < deadline:
        n += sum(len(v) for v in c.poll(500).values())
    c.commit()
    c.close()
    assert n == 30

    assert a.describe_cluster()["brokers"][0]["broker_id"] == 0
    assert topic in a.list_topics()
    [t] = [t for t in a.describe_topics([topic])]
    assert len(t["partitions"]) == 3
    dtp = a.describe_topic_partitions([topic])
    assert topic in str(dtp)
    dirs = a.describe_log_dirs()
    assert topic in str(dirs)
    feats = a.describe_features()
    assert feats["metadata.version"]["finalized"] == (33, 33)
    assert a.update_features({"metadata.version": 33}) == {"metadata.version": "OK"}
    assert a.list_partition_reassignments() == {}
    quorum = a.describe_metadata_quorum()
    assert quorum["topics"][0]["partitions"][0]["leader_id"] == 0
    assert group in {g["group_id"] for g in a.list_groups()}
    assert a.describe_groups([group])[group]["group_state"] == "Empty"
    offs = a.list_group_offsets(group)[group]
    assert {tp.partition: o.offset for tp, o in offs.items()} == {0: 10, 1: 10, 2: 10}
    latest = a.list_partition_offsets({TopicPartition(topic, 0): -1})
    assert latest[TopicPartition(topic, 0)].offset == 10
    assert a.delete_records({TopicPartition(topic, 0): 2})[TopicPartition(topic, 0)][
        "low_watermark"] == 2
    a.delete_group_offsets(group, [TopicPartition(topic, 2)])
    assert a.delete_groups([group]) == {group: "OK"}
    a.delete_topics([topic])


async def test_aiokafka_admin_calls(target: TargetBroker) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, RecordsToDelete
    from aiokafka.admin import NewTopic as AIONewTopic
    from aiokafka.admin.config_resource import ConfigResource as AIOConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AIOType
    from aiokafka.structs import TopicPartition as ATP

    b = target.bootstrap
    topic = f"aio-admin-{SUFFIX}"
    a = AIOKafkaAdminClient(bootstrap_servers=b)
    await a.start()
    try:
        await a.create_topics([AIONewTopic(topic, 2, 1)])
        p = AIOKafkaProducer(bootstrap_servers=b)
        await p.start()
        try:
            for i in range(10):
                await p.send_and_wait(topic, b"x", partition=i % 2)
        finally:
            await p.stop()
        assert (await a.describe_cluster())["brokers"][0]["node_id"] == 0
        assert topic in await a.list_topics()
        [t] = await a.describe_topics([topic])
        assert len(t["partitions"]) == 2
        await a.create_partitions({topic: NewPartitions(3)})
        [resp] = await a.describe_configs([AIOConfigResource(AIOType.BROKER, "0")])
        names = {e[0] for e in resp.resources[0][4]}
        assert {"log.segment.bytes", "log.retention.hours", "num.partitions"} <= names
        [resp] = await a.alter_configs([AIOConfigResource(AIOType.TOPIC, topic,
                                                          configs={"retention.ms": "100000"})])
        assert resp.resources[0][0] == 0
        deleted = await a.delete_records({ATP(topic, 0): RecordsToDelete(before_offset=2)})
        assert deleted[ATP(topic, 0)] == 2
        await a.delete_topics([topic])
    finally:
        await a.close()
