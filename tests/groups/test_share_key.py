"""The share coordinator key is Kafka's: ``"<group>:<topic id>:<partition>"`` with the
topic id as Kafka's ``Uuid.toString()`` (URL-safe base64, no padding), hashed to a
``__share_group_state`` partition with ``Utils.abs(String.hashCode()) % partitions``.
The expected values were computed with Java 21 (String.hashCode, Math.abs,
Base64.getUrlEncoder().withoutPadding())."""

from __future__ import annotations

import uuid

from jocko_py.broker.handlers.find_coordinator import _valid_share_key
from jocko_py.broker.share.coordinator import partition_for
from jocko_py.broker.share.persister import (
    SharePartitionKey,
    kafka_uuid_str,
    parse_kafka_uuid,
)

TOPIC = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
TOPIC_KAFKA = "Dx4tPEtaaXiHlqW0w9Lh8A"


def test_coordinator_key_writes_the_topic_id_as_kafka_does() -> None:
    assert kafka_uuid_str(TOPIC) == TOPIC_KAFKA
    assert SharePartitionKey("g", TOPIC, 3).coordinator_key() == f"g:{TOPIC_KAFKA}:3"
    assert SharePartitionKey("a:b", uuid.UUID(int=0), 0).coordinator_key() \
        == "a:b:AAAAAAAAAAAAAAAAAAAAAA:0"
    assert parse_kafka_uuid(TOPIC_KAFKA) == TOPIC
    for bad in (str(TOPIC), TOPIC.hex, "", "Dx4tPEtaaXiHlqW0w9Lh8", "Dx4tPEtaaXiHlqW0w9Lh8A=",
                "Dx4tPEtaaXiHlqW0w9Lh+A", "Dx4tPEtaaXiHlqW0w9Lh8B"):
        assert parse_kafka_uuid(bad) is None, bad


def test_partition_is_utils_abs_of_java_string_hash() -> None:
    # Java: "share-group:q1w2e3r4t5y6u7i8o9p0aA:7".hashCode() == -218245878, so
    # Utils.abs gives 218245878 % 50 == 28 (toPositive's & 0x7fffffff would give 20)
    assert partition_for("share-group:q1w2e3r4t5y6u7i8o9p0aA:7", 50) == 28
    assert partition_for("g:AAAAAAAAAAAAAAAAAAAAAA:0", 50) == 49  # hash -92982199
    assert partition_for("Aa", 50) == 12  # hash 2112
    # hash == Integer.MIN_VALUE: Utils.abs answers 0
    assert partition_for("polygenelubricants", 7) == 0


def test_find_coordinator_accepts_kafkas_key_form_only() -> None:
    assert _valid_share_key(f"g:{TOPIC_KAFKA}:0")
    assert _valid_share_key(f"a:b:{TOPIC_KAFKA}:12")
    assert not _valid_share_key(f"g:{TOPIC}:0")  # Python's str(uuid)
    assert not _valid_share_key(f"g:{TOPIC.hex}:0")
    assert not _valid_share_key(f":{TOPIC_KAFKA}:0")
    assert not _valid_share_key(f"g:{TOPIC_KAFKA}:-1")
    assert not _valid_share_key(f"g:{TOPIC_KAFKA}:x")
    assert not _valid_share_key("g:nope:0")
