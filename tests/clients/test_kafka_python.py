"""kafka-python 3.x against a real broker process.

Per codec: 10,000 records (keys, two headers, explicit CreateTime timestamps, ~100-byte
values) produced with the client's defaults (idempotent, acks=all) plus compression, read
back byte for byte by assign() (no group), offsets_for_times checked; then one broker
restart and every codec's topic read again.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import codec as kcodec

from tests.support.e2e import (
    CODECS,
    Dataset,
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
HAS_CODEC = {
    "none": True,
    "gzip": kcodec.has_gzip(),
    "snappy": kcodec.has_snappy(),
    "lz4": kcodec.has_lz4(),
    "zstd": kcodec.has_zstd(),
}
CODEC_LIBS = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}


@pytest.fixture(scope="module")
def datasets() -> dict[str, Dataset]:
    """Topics produced successfully in this module, by codec."""
    return {}


def produce(bootstrap: str, ds: Dataset, codec: str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        client_id="jocko-e2e-kafka-python",
    )
    try:
        futures = [
            producer.send(
                ds.topic,
                key=r.key,
                value=r.value,
                partition=r.partition,
                timestamp_ms=r.timestamp,
                headers=list(r.headers),
            )
            for r in ds.records
        ]
        producer.flush(timeout=120)
        for i, f in enumerate(futures):
            md = f.get(timeout=30)
            assert md.partition == ds.records[i].partition
    finally:
        producer.close(timeout=10)


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    deadline_s: float = 120,
    start: dict[int, int] | None = None,
    **config: Any,
) -> dict[int, list[Rec]]:
    """Read every partition from the beginning (or from `start` offsets) to the end
    offsets taken at the start."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        client_id="jocko-e2e-kafka-python",
        **config,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        for p, off in (start or {}).items():
            consumer.seek(TopicPartition(topic, p), off)
        end = consumer.end_offsets(tps)
        out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + deadline_s
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                pos = {tp.partition: (consumer.position(tp), end[tp]) for tp in tps}
                raise TimeoutError(f"{topic}: (position, end offset) by partition: {pos}")
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                for m in msgs:
                    out[tp.partition].append(
                        Rec(
                            partition=m.partition,
                            offset=m.offset,
                            key=m.key,
                            value=m.value,
                            headers=tuple((k, v) for k, v in m.headers),
                            timestamp=m.timestamp,
                            timestamp_type=m.timestamp_type,
                        )
                    )
        return out
    finally:
        consumer.close()


def check_offsets_for_times(bootstrap: str, ds: Dataset) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        expected = ds.by_partition()
        wrong = []
        for p, ts, want in ds.timestamp_queries():
            tp = TopicPartition(ds.topic, p)
            got = consumer.offsets_for_times({tp: ts}, timeout_ms=30_000)[tp]
            if want is None:
                if got is not None:
                    wrong.append(f"p{p} ts={ts}: want None, got {got}")
            elif got is None or got.offset != want or got.timestamp != expected[p][want].timestamp:
                wrong.append(
                    f"p{p} ts={ts}: want offset {want} ts {expected[p][want].timestamp}, got {got}"
                )
        assert not wrong, f"{ds.topic}: offsets_for_times wrong:\n" + "\n".join(wrong)
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_read_back(
    target: TargetBroker, datasets: dict[str, Dataset], codec: str
) -> None:
    assert HAS_CODEC[codec], f"kafka-python cannot {codec}: pip install {CODEC_LIBS.get(codec)}"
    # kafka-python's producer refuses null header values ((str, bytes) tuples only)
    ds = make_dataset(f"e2e-kafkapy-{codec}-{SUFFIX}", null_header_values=False)
    create_topics(target.bootstrap, [ds.topic], ds.partitions)
    produce(target.bootstrap, ds, codec)
    got = consume(target.bootstrap, ds.topic, ds.partitions)
    assert_same_records(with_offsets(ds.by_partition()), got, f"kafka-python {codec}")
    ds.first_read = got
    datasets[codec] = ds


@pytest.mark.parametrize("codec", CODECS)
def test_offsets_for_times(target: TargetBroker, datasets: dict[str, Dataset], codec: str) -> None:
    if codec not in datasets:
        not_applicable(f"test_produce_and_read_back[{codec}] did not produce the topic")
    check_offsets_for_times(target.bootstrap, datasets[codec])


def test_fetch_limits_smaller_than_a_batch(
    target: TargetBroker, datasets: dict[str, Dataset]
) -> None:
    """fetch_max_bytes / max_partition_fetch_bytes of 1 KiB, below one batch: the broker
    still returns the first whole batch (KIP-74), so the consumer makes progress."""
    for codec in ("none", "zstd"):
        if codec not in datasets:
            not_applicable(f"test_produce_and_read_back[{codec}] did not produce the topic")
        ds = datasets[codec]
        got = consume(
            target.bootstrap,
            ds.topic,
            ds.partitions,
            fetch_max_bytes=1024,
            max_partition_fetch_bytes=1024,
        )
        assert_same_records(with_offsets(ds.by_partition()), got, f"kafka-python {codec} 1 KiB")


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_seek_into_the_middle_of_a_batch(
    target: TargetBroker, datasets: dict[str, Dataset], codec: str
) -> None:
    """Fetch from an offset inside a (compressed) batch: the broker may return the whole
    batch, the client drops the records before the fetch offset; nothing is skipped."""
    if codec not in datasets:
        not_applicable(f"test_produce_and_read_back[{codec}] did not produce the topic")
    ds = datasets[codec]
    start = {p: 1 + 997 * (p + 1) for p in range(ds.partitions)}
    got = consume(target.bootstrap, ds.topic, ds.partitions, start=start)
    expected = {p: recs[start[p] :] for p, recs in with_offsets(ds.by_partition()).items()}
    for p, recs in got.items():
        n = len(expected[p]) + start[p]
        assert [r.offset for r in recs] == list(range(start[p], n)), f"partition {p} offsets"
    assert_same_records(expected, got, f"kafka-python {codec} from {start}", check_offsets=False)


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_fetch_out_of_range_offset_resets(
    target: TargetBroker, datasets: dict[str, Dataset], reset: str
) -> None:
    """A fetch beyond the log end gets OFFSET_OUT_OF_RANGE; the client then resets by its
    auto_offset_reset through ListOffsets (earliest: offset 0, latest: the end)."""
    if "none" not in datasets:
        not_applicable("test_produce_and_read_back[none] did not produce the topic")
    ds = datasets["none"]
    tp = TopicPartition(ds.topic, 0)
    n = len(ds.by_partition()[0])
    consumer = KafkaConsumer(
        bootstrap_servers=target.bootstrap, group_id=None, auto_offset_reset=reset
    )
    try:
        consumer.assign([tp])
        consumer.seek(tp, 10**9)
        deadline = time.monotonic() + 30
        first = None
        while first is None and time.monotonic() < deadline:
            msgs = consumer.poll(timeout_ms=500).get(tp, [])
            if msgs:
                first = msgs[0]
            elif reset == "latest" and consumer.position(tp) == n:
                break
        if reset == "earliest":
            assert first is not None, "no record after the reset to earliest"
            assert (first.offset, first.key) == (0, ds.by_partition()[0][0].key)
        else:
            assert first is None, f"read {first} after resetting to latest"
            assert consumer.position(tp) == n
    finally:
        consumer.close()


def test_produce_to_a_new_topic_auto_creates_it(target: TargetBroker) -> None:
    """auto.create.topics.enable (default true): the producer's Metadata request creates
    the topic, the records land and read back."""
    topic = f"e2e-kafkapy-autocreate-{SUFFIX}"
    producer = KafkaProducer(bootstrap_servers=target.bootstrap, client_id="jocko-e2e-kafka-python")
    try:
        mds = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(10)]
        offsets = sorted((md.get(timeout=60).partition, md.get().offset) for md in mds)
    finally:
        producer.close(timeout=10)
    parts = {p for p, _ in offsets}
    got = consume(target.bootstrap, topic, max(parts) + 1)
    assert sorted(r.value or b"" for recs in got.values() for r in recs) == sorted(
        b"v%d" % i for i in range(10)
    )


def test_large_record_round_trip_and_over_the_limit_rejected(target: TargetBroker) -> None:
    """A 900 KB value fits message.max.bytes (1048588 by default) and reads back; a 2 MB
    batch does not: MESSAGE_TOO_LARGE (10) from the broker (the client's own size check
    is raised out of the way with max_request_size)."""
    from kafka.errors import MessageSizeTooLargeError

    topic = f"e2e-kafkapy-large-{SUFFIX}"
    create_topics(target.bootstrap, [topic], partitions=1)
    big = bytes(range(256)) * (900 * 1024 // 256)
    producer = KafkaProducer(
        bootstrap_servers=target.bootstrap,
        max_request_size=8 * 1024 * 1024,
        retries=0,
        client_id="jocko-e2e-kafka-python",
    )
    try:
        md = producer.send(topic, key=b"big", value=big, partition=0).get(timeout=60)
        assert md.offset == 0
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, key=b"huge", value=big * 2 + b"x", partition=0).get(timeout=60)
    finally:
        producer.close(timeout=10)
    got = consume(target.bootstrap, topic, 1)
    assert [(r.offset, r.key, r.value) for r in got[0]] == [(0, b"big", big)]


def test_read_again_after_restart(target: TargetBroker, datasets: dict[str, Dataset]) -> None:
    if not target.can_restart:
        not_applicable("external broker (JOCKO_TEST_BOOTSTRAP): the test cannot restart it")
    if not datasets:
        not_applicable("no codec's topic was produced earlier in this module")
    target.restart()
    for codec, ds in datasets.items():
        got = consume(target.bootstrap, ds.topic, ds.partitions)
        assert_same_records(
            with_offsets(ds.by_partition()), got, f"kafka-python {codec} after restart"
        )
    ds = next(iter(datasets.values()))
    check_offsets_for_times(target.bootstrap, ds)
    # The log end offsets survived the restart: new records land right after the old ones.
    producer = KafkaProducer(bootstrap_servers=target.bootstrap, client_id="jocko-e2e-kafka-python")
    try:
        sizes = {p: len(recs) for p, recs in ds.by_partition().items()}
        for p, n in sizes.items():
            md = producer.send(ds.topic, key=b"after-restart", value=b"x", partition=p).get(30)
            assert md.offset == n, f"partition {p}: new record at offset {md.offset}, want {n}"
    finally:
        producer.close(timeout=10)
    missing = sorted(set(CODECS) - set(datasets))
    assert not missing, f"re-read the others, but these codecs had failed before: {missing}"
