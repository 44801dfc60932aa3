"""confluent-kafka (librdkafka) against a real broker process.

Per codec: 10,000 records (keys, two headers, explicit CreateTime timestamps, ~100-byte
values) produced with librdkafka's defaults (acks=all) plus compression and
enable.idempotence=true (without it librdkafka may reorder a retried batch behind later
ones, which broke the byte-for-byte order check against Kafka 3.9 under load), read back byte
for byte by assign() (group.id is mandatory in this binding but no group API is used: no
subscribe, no commits), offsets_for_times checked; then one broker crash-restart (SIGKILL) and
every codec's topic read again. On failure, JOCKO_E2E_RDKAFKA_DEBUG=protocol,msg (for example)
turns on librdkafka's debug log in the captured output.
"""

from __future__ import annotations

import os
import time
from typing import Any, cast

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from tests.support.e2e import (
    CODECS,
    Dataset,
    Header,
    Rec,
    TargetBroker,
    assert_same_records,
    create_topics,
    make_dataset,
    unique_suffix,
    with_offsets,
)
from tests.support.prereq import not_applicable

pytestmark = pytest.mark.clients

SUFFIX = unique_suffix()
DEBUG = os.environ.get("JOCKO_E2E_RDKAFKA_DEBUG", "")
TS_TYPE = {TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}


def _conf(bootstrap: str, **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": "jocko-e2e-confluent"}
    if DEBUG:
        conf["debug"] = DEBUG
    conf.update(extra)
    return conf


@pytest.fixture(scope="module")
def datasets() -> dict[str, Dataset]:
    """Topics produced successfully in this module, by codec."""
    return {}


def produce(bootstrap: str, ds: Dataset, codec: str) -> None:
    producer = Producer(
        _conf(
            bootstrap,
            **{"compression.type": codec, "linger.ms": 5, "enable.idempotence": True},
        )
    )
    errors: list[str] = []
    delivered = 0

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        nonlocal delivered
        if err is not None:
            errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")
        else:
            delivered += 1

    deadline = time.monotonic() + 120
    for r in ds.records:
        while True:
            try:
                producer.produce(
                    ds.topic,
                    key=r.key,
                    value=r.value,
                    partition=r.partition,
                    timestamp=r.timestamp,
                    headers=list(r.headers),
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                assert time.monotonic() < deadline, "producer queue stayed full for 120s"
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(120)
    assert remaining == 0, f"{remaining} records not delivered after 120s"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:3]}"
    assert delivered == len(ds.records)


RETRIABLE = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._TRANSPORT,
}


def high_watermark(consumer: Consumer, tp: TopicPartition, deadline_s: float = 30) -> int:
    """get_watermark_offsets does not retry; right after a restart a broker may still be
    loading its partitions (Kafka answers NOT_LEADER_FOR_PARTITION for a moment)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return int(consumer.get_watermark_offsets(tp, timeout=10)[1])
        except KafkaException as e:
            if e.args[0].code() not in RETRIABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def consume(
    bootstrap: str, topic: str, partitions: int, deadline_s: float = 120
) -> dict[int, list[Rec]]:
    consumer = Consumer(
        _conf(
            bootstrap,
            **{
                "group.id": f"jocko-e2e-unused-{SUFFIX}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
            },
        )
    )
    try:
        end = {p: high_watermark(consumer, TopicPartition(topic, p)) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
        next_offset = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + deadline_s
        while any(next_offset[p] < end[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: next offset {next_offset}, end offsets {end}")
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                err = m.error()
                if err is not None:
                    raise AssertionError(f"{topic}: consume error {err}")
                ts_type, ts = m.timestamp()
                p, off = m.partition(), m.offset()
                assert p is not None and off is not None
                headers = m.headers() or []
                assert isinstance(headers, list)
                out[p].append(
                    Rec(
                        partition=p,
                        offset=off,
                        key=m.key(),
                        value=m.value(),
                        headers=cast(tuple[Header, ...], tuple(headers)),
                        timestamp=ts,
                        timestamp_type=TS_TYPE.get(ts_type, -2),
                    )
                )
                next_offset[p] = off + 1
        return out
    finally:
        consumer.close()


def check_offsets_for_times(bootstrap: str, ds: Dataset) -> None:
    consumer = Consumer(
        _conf(bootstrap, **{"group.id": f"jocko-e2e-unused-{SUFFIX}", "enable.auto.commit": False})
    )
    try:
        wrong = []
        for p, ts, want in ds.timestamp_queries():
            (got,) = consumer.offsets_for_times([TopicPartition(ds.topic, p, ts)], timeout=30)
            if got.error is not None:
                wrong.append(f"p{p} ts={ts}: error {got.error}")
            elif got.offset != (-1 if want is None else want):
                wrong.append(f"p{p} ts={ts}: want offset {want}, got {got.offset}")
        assert not wrong, f"{ds.topic}: offsets_for_times wrong:\n" + "\n".join(wrong)
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_read_back(
    target: TargetBroker, datasets: dict[str, Dataset], codec: str
) -> None:
    ds = make_dataset(f"e2e-confluent-{codec}-{SUFFIX}")
    create_topics(target.bootstrap, [ds.topic], ds.partitions)
    produce(target.bootstrap, ds, codec)
    got = consume(target.bootstrap, ds.topic, ds.partitions)
    assert_same_records(with_offsets(ds.by_partition()), got, f"confluent-kafka {codec}")
    ds.first_read = got
    datasets[codec] = ds


@pytest.mark.parametrize("codec", CODECS)
def test_offsets_for_times(target: TargetBroker, datasets: dict[str, Dataset], codec: str) -> None:
    if codec not in datasets:
        not_applicable(f"test_produce_and_read_back[{codec}] did not produce the topic")
    check_offsets_for_times(target.bootstrap, datasets[codec])


def test_log_append_time_topic(target: TargetBroker) -> None:
    """message.timestamp.type=LogAppendTime: the broker stamps each batch with its append
    time (batch header + attributes, CRC recomputed); records keep their keys, values and
    headers, and offsets_for_times works on the append times."""
    ds = make_dataset(f"e2e-confluent-logappend-{SUFFIX}", n=2000)
    create_topics(
        target.bootstrap, [ds.topic], ds.partitions, {"message.timestamp.type": "LogAppendTime"}
    )
    t0 = int(time.time() * 1000)
    produce(target.bootstrap, ds, "gzip")
    t1 = int(time.time() * 1000)
    got = consume(target.bootstrap, ds.topic, ds.partitions)
    assert_same_records(
        with_offsets(ds.by_partition()), got, "LogAppendTime topic", check_timestamps=False
    )
    for p, recs in got.items():
        assert {r.timestamp_type for r in recs} == {1}, f"p{p}: not all LogAppendTime"
        stamps = [r.timestamp for r in recs]
        assert all(t0 - 1000 <= s <= t1 + 1000 for s in stamps), (
            f"p{p}: append times {min(stamps)}..{max(stamps)} outside [{t0}, {t1}]"
        )
        assert stamps == sorted(stamps), f"p{p}: append times go down"
    consumer = Consumer(_conf(target.bootstrap, **{"group.id": f"jocko-e2e-unused-{SUFFIX}"}))
    try:
        for p, recs in got.items():
            last = recs[-1].timestamp
            want = next(r.offset for r in recs if r.timestamp >= last)
            (res,) = consumer.offsets_for_times([TopicPartition(ds.topic, p, last)], timeout=30)
            assert res.offset == want, f"p{p}: offset for append time {last}: {res.offset}"
            (res,) = consumer.offsets_for_times([TopicPartition(ds.topic, p, t0 - 60_000)], 30)
            assert res.offset == 0
    finally:
        consumer.close()


def test_read_again_after_crash_restart(target: TargetBroker, datasets: dict[str, Dataset]) -> None:
    """The broker is killed with SIGKILL (no clean shutdown, recovery runs on start)."""
    if not target.can_restart:
        not_applicable("external broker (JOCKO_TEST_BOOTSTRAP): the test cannot restart it")
    if not datasets:
        not_applicable("no codec's topic was produced earlier in this module")
    target.restart(hard=True)
    for codec, ds in datasets.items():
        got = consume(target.bootstrap, ds.topic, ds.partitions)
        assert_same_records(
            with_offsets(ds.by_partition()), got, f"confluent-kafka {codec} after kill -9 restart"
        )
    check_offsets_for_times(target.bootstrap, next(iter(datasets.values())))
    missing = sorted(set(CODECS) - set(datasets))
    assert not missing, f"re-read the others, but these codecs had failed before: {missing}"
