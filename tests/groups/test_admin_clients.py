"""Group administration through real admin clients (confluent-kafka and kafka-python).

They parse ListGroups / DescribeGroups (member assignments) / OffsetFetch v8+ /
DeleteGroups / OffsetCommit-as-alter responses from jocko-py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.groups.harness import Producer, Worker, create_topic, processed, wait_until
from tests.support.broker import BrokerProcess


@pytest.mark.timeout(120)
def test_admin_clients_manage_groups(gbroker: BrokerProcess, tmp_path: Any) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    create_topic(gbroker.bootstrap, "adm-t", 3)
    prod = Producer(gbroker.bootstrap, "adm-t", 3)
    prod.produce(30)
    w = Worker("kafka_python", gbroker.bootstrap, "adm-t", "adm-g", tmp_path).start()
    ck = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    kp = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
    try:
        wait_until(lambda: set(processed([w])) == set(prod.values), 40, "the group to consume")

        # confluent-kafka
        listed = ck.list_consumer_groups(request_timeout=10).result()
        states = {g.group_id: g.state for g in listed.valid}
        assert states.get("adm-g") == ConsumerGroupState.STABLE
        stable_only = ck.list_consumer_groups(
            states={ConsumerGroupState.EMPTY}, request_timeout=10).result()
        assert "adm-g" not in {g.group_id for g in stable_only.valid}
        desc = ck.describe_consumer_groups(["adm-g"], request_timeout=10)["adm-g"].result()
        assert desc.state == ConsumerGroupState.STABLE and len(desc.members) == 1
        assigned = {tp.partition for tp in desc.members[0].assignment.topic_partitions}
        assert assigned == {0, 1, 2} and desc.partition_assignor == "range"
        offs = ck.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("adm-g")], request_timeout=10)["adm-g"].result()
        assert {tp.partition: tp.offset for tp in offs.topic_partitions} == {0: 10, 1: 10, 2: 10}
        failed = ck.delete_consumer_groups(["adm-g"], request_timeout=10)["adm-g"]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty|non-empty"):
            failed.result()

        # kafka-python
        groups = kp.list_groups(states_filter=["Stable"])
        assert "adm-g" in {g["group_id"] for g in groups}, groups
        kdesc = kp.describe_groups(["adm-g"])["adm-g"]
        assert kdesc["group_state"] == "Stable" and len(kdesc["members"]) == 1, kdesc

        assert w.stop_cleanly()
        ck.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "adm-g", [TopicPartition("adm-t", 0, 3)])], request_timeout=10)["adm-g"].result()
        kp.alter_group_offsets("adm-g", {KTP("adm-t", 1): OffsetAndMetadata(4, "", -1)})
        got = kp.list_group_offsets({"adm-g": None})["adm-g"]
        assert {tp.partition: om.offset for tp, om in got.items()} == {0: 3, 1: 4, 2: 10}
        ck.delete_consumer_groups(["adm-g"], request_timeout=10)["adm-g"].result()
        after = ck.list_consumer_groups(request_timeout=10).result()
        assert "adm-g" not in {g.group_id for g in after.valid}
    finally:
        w.kill()
        kp.close()
        prod.close()
