"""MetadataImage transitions, record encoding round trips, LocalMetadataLog durability."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jocko_py.cluster.local_log import LocalMetadataLog
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_TOPIC,
    NO_LEADER_CHANGE,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataImage,
    MetadataRecord,
    MetadataRecordError,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode_record,
    encode_record,
)

T1 = uuid.UUID(int=1)

ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
names = st.text(max_size=20)
uuids = st.uuids()
int_tuples = st.lists(ints, max_size=5).map(tuple)
endpoints = st.builds(BrokerEndpoint, names, names, st.integers(0, 65535), st.integers(0, 3)).map(
    lambda e: e
)

records: st.SearchStrategy[MetadataRecord] = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        ints,
        uuids,
        longs,
        st.lists(endpoints, max_size=3).map(tuple),
        st.none() | names,
        st.booleans(),
        st.booleans(),
    ),
    st.builds(UnregisterBrokerRecord, ints, longs),
    st.builds(TopicRecord, names, uuids),
    st.builds(
        PartitionRecord,
        ints,
        uuids,
        int_tuples,
        int_tuples,
        ints,
        ints,
        ints,
        int_tuples,
        int_tuples,
        st.integers(0, 1),
    ),
    st.builds(ConfigRecord, st.integers(0, 32), names, names, st.none() | names),
    st.builds(
        PartitionChangeRecord,
        ints,
        uuids,
        st.none() | int_tuples,
        ints,
        st.none() | int_tuples,
        st.none() | int_tuples,
        st.none() | int_tuples,
        st.integers(-1, 1),
    ),
    st.builds(FenceBrokerRecord, ints, longs),
    st.builds(UnfenceBrokerRecord, ints, longs),
    st.builds(RemoveTopicRecord, uuids),
    st.builds(FeatureLevelRecord, names, st.integers(0, 100)),
    st.builds(ProducerIdsRecord, ints, longs, longs),
    st.builds(BrokerRegistrationChangeRecord, ints, longs, st.integers(-1, 1), st.integers(-1, 1)),
    st.just(NoOpRecord()),
)


@given(records)
def test_record_round_trip_is_exact_and_deterministic(rec: MetadataRecord) -> None:
    data = encode_record(rec)
    assert decode_record(data) == rec
    assert encode_record(decode_record(data)) == data


def test_decode_rejects_unknown_and_newer_versions() -> None:
    with pytest.raises(MetadataRecordError):
        decode_record(b'{"k":999,"v":0,"d":{}}')
    with pytest.raises(MetadataRecordError):
        decode_record(b'{"k":2,"v":7,"d":{"name":"a","topic_id":"00"}}')
    with pytest.raises(MetadataRecordError):
        decode_record(b"\xff garbage")


def test_decode_ignores_unknown_fields_and_fills_defaults() -> None:
    rec = decode_record(
        b'{"k":5,"v":0,"d":{"partition_id":0,"topic_id":"%s","future":1}}' % T1.hex.encode()
    )
    assert rec == PartitionChangeRecord(0, T1)


def _broker(bid: int, rack: str | None = None, epoch: int = 10) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        bid, uuid.UUID(int=100 + bid), epoch, (BrokerEndpoint("PLAINTEXT", "h", 9000 + bid),), rack
    )


def test_image_topics_partitions_and_changes() -> None:
    img = MetadataImage()
    recs: list[MetadataRecord] = [
        _broker(1, "a"),
        _broker(2, "b"),
        UnfenceBrokerRecord(1, 10),
        TopicRecord("orders", T1),
        PartitionRecord(0, T1, (1, 2), (1, 2), leader=1, leader_epoch=0, partition_epoch=0),
        ConfigRecord(CONFIG_RESOURCE_TOPIC, "orders", "retention.ms", "1000"),
        PartitionChangeRecord(0, T1, isr=(2,), leader=2),
        PartitionChangeRecord(0, T1, isr=(1, 2)),
        ProducerIdsRecord(1, 10, 1000),
    ]
    for r in recs:
        img.apply(r)
    assert img.brokers[1].fenced is False and img.brokers[2].fenced is True
    assert img.brokers[1].host == "h" and img.brokers[1].port == 9001
    assert img.brokers[2].rack == "b"
    t = img.topics["orders"]
    assert img.topic_by_id(T1) is t
    p = t.partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (2, (1, 2), 1, 2)
    assert img.topic_configs("orders") == {"retention.ms": "1000"}
    assert img.next_producer_id == 1000

    # Snapshot rebuilds the identical image.
    again = MetadataImage.from_records(img.snapshot())
    assert again.fingerprint() == img.fingerprint()
    other = MetadataImage()
    other.restore(img.snapshot())
    assert other.topics == img.topics and other.brokers == img.brokers

    img.apply(ConfigRecord(CONFIG_RESOURCE_TOPIC, "orders", "retention.ms", None))
    assert img.topic_configs("orders") == {}
    img.apply(RemoveTopicRecord(T1))
    assert img.topics == {} and img.topic_by_id(T1) is None
    img.apply(FenceBrokerRecord(1, 10))
    assert img.brokers[1].fenced
    img.apply(FenceBrokerRecord(2, 9))  # stale epoch: ignored
    assert img.brokers[2].fenced
    img.apply(BrokerRegistrationChangeRecord(2, 10, fenced=-1))
    assert not img.brokers[2].fenced
    img.apply(UnregisterBrokerRecord(2, 10))
    assert 2 not in img.brokers


def test_image_apply_is_total() -> None:
    img = MetadataImage()
    img.apply(PartitionRecord(0, T1, (1,), (1,)))
    img.apply(PartitionChangeRecord(0, T1, leader=NO_LEADER_CHANGE))
    img.apply(RemoveTopicRecord(T1))
    img.apply(TopicRecord("a", T1))
    img.apply(TopicRecord("a", uuid.UUID(int=2)))  # duplicate name ignored
    assert img.topics["a"].topic_id == T1


@given(st.lists(records, max_size=30))
def test_image_is_a_function_of_the_records(recs: list[MetadataRecord]) -> None:
    a = MetadataImage.from_records(recs)
    b = MetadataImage.from_records(recs)
    assert a.fingerprint() == b.fingerprint()
    assert MetadataImage.from_records(a.snapshot()).fingerprint() == a.fingerprint()


def test_local_log_round_trip_and_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "meta"
    path.mkdir()
    with LocalMetadataLog(path) as lg:
        lg.append([_broker(1), TopicRecord("t", T1)])
        lg.append([PartitionRecord(0, T1, (1,), (1,), leader=1)])
        assert len(list(lg.replay())) == 3
    f = path / "__cluster_metadata.log"
    good = f.stat().st_size
    with LocalMetadataLog(f) as lg:
        lg.append([ConfigRecord(2, "t", "x", "y"), NoOpRecord()])
    # Tear the last batch in the middle: the whole batch goes, earlier ones stay.
    with open(f, "r+b") as fh:
        fh.truncate(good + 11)
    with LocalMetadataLog(f) as lg:
        recs = list(lg.replay())
        assert recs == [_broker(1), TopicRecord("t", T1), PartitionRecord(0, T1, (1,), (1,), 1)]
        assert f.stat().st_size == good
        lg.append([NoOpRecord()])
    # Corrupt a byte of the last batch: CRC catches it.
    with open(f, "r+b") as fh:
        fh.seek(-2, 2)
        fh.write(b"\x00")
    with LocalMetadataLog(f) as lg:
        assert len(list(lg.replay())) == 3
        img = MetadataImage.from_records(lg.replay())
        lg.rewrite(img.snapshot())
        lg.append([NoOpRecord()])
    with LocalMetadataLog(f) as lg:
        assert MetadataImage.from_records(lg.replay()).fingerprint() == img.fingerprint()
