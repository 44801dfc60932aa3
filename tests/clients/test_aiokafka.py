"""aiokafka 0.14 against a real broker process.

Per codec: 10,000 records (keys, two headers, explicit CreateTime timestamps, ~100-byte
values) produced with the client's defaults (acks=1, not idempotent) plus compression,
read back byte for byte by assign() (group_id=None), offsets_for_times checked; then one
broker crash-restart (SIGKILL) and every codec's topic read again.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka import codec as acodec

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
    "gzip": True,
    "snappy": acodec.has_snappy(),
    "lz4": acodec.has_lz4(),
    "zstd": acodec.has_zstd(),
}


@pytest.fixture(scope="module")
def datasets() -> dict[str, Dataset]:
    """Topics produced successfully in this module, by codec."""
    return {}


async def _produce(bootstrap: str, ds: Dataset, codec: str) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        client_id="jocko-e2e-aiokafka",
    )
    await producer.start()
    try:
        futures = []
        for r in ds.records:
            futures.append(
                await producer.send(
                    ds.topic,
                    key=r.key,
                    value=r.value,
                    partition=r.partition,
                    timestamp_ms=r.timestamp,
                    headers=list(r.headers),
                )
            )
        mds = await asyncio.wait_for(asyncio.gather(*futures), timeout=120)
        assert [md.partition for md in mds] == [r.partition for r in ds.records]
    finally:
        await producer.stop()


async def _consume(
    bootstrap: str, topic: str, partitions: int, deadline_s: float
) -> dict[int, list[Rec]]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        client_id="jocko-e2e-aiokafka",
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + deadline_s

        async def behind() -> bool:
            for tp in tps:
                if await consumer.position(tp) < end[tp]:
                    return True
            return False

        while await behind():
            if time.monotonic() > deadline:
                pos = {tp.partition: (await consumer.position(tp), end[tp]) for tp in tps}
                raise TimeoutError(f"{topic}: (position, end offset) by partition: {pos}")
            batches = await consumer.getmany(*tps, timeout_ms=500)
            for tp, msgs in batches.items():
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
        await consumer.stop()


async def _offsets_for_times(bootstrap: str, ds: Dataset) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        expected = ds.by_partition()
        wrong = []
        for p, ts, want in ds.timestamp_queries():
            tp = TopicPartition(ds.topic, p)
            got = (await consumer.offsets_for_times({tp: ts}))[tp]
            if want is None:
                if got is not None:
                    wrong.append(f"p{p} ts={ts}: want None, got {got}")
            elif got is None or got.offset != want or got.timestamp != expected[p][want].timestamp:
                wrong.append(
                    f"p{p} ts={ts}: want offset {want} ts {expected[p][want].timestamp}, got {got}"
                )
        assert not wrong, f"{ds.topic}: offsets_for_times wrong:\n" + "\n".join(wrong)
    finally:
        await consumer.stop()


def consume(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Rec]]:
    return asyncio.run(asyncio.wait_for(_consume(bootstrap, topic, partitions, 120), 150))


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_read_back(
    target: TargetBroker, datasets: dict[str, Dataset], codec: str
) -> None:
    assert HAS_CODEC[codec], f"aiokafka cannot {codec}: its codec library is missing"
    ds = make_dataset(f"e2e-aiokafka-{codec}-{SUFFIX}")
    create_topics(target.bootstrap, [ds.topic], ds.partitions)
    asyncio.run(asyncio.wait_for(_produce(target.bootstrap, ds, codec), 150))
    got = consume(target.bootstrap, ds.topic, ds.partitions)
    assert_same_records(with_offsets(ds.by_partition()), got, f"aiokafka {codec}")
    ds.first_read = got
    datasets[codec] = ds


@pytest.mark.parametrize("codec", CODECS)
def test_offsets_for_times(target: TargetBroker, datasets: dict[str, Dataset], codec: str) -> None:
    if codec not in datasets:
        not_applicable(f"test_produce_and_read_back[{codec}] did not produce the topic")
    asyncio.run(asyncio.wait_for(_offsets_for_times(target.bootstrap, datasets[codec]), 120))


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
            with_offsets(ds.by_partition()), got, f"aiokafka {codec} after kill -9 restart"
        )
    ds = next(iter(datasets.values()))
    asyncio.run(asyncio.wait_for(_offsets_for_times(target.bootstrap, ds), 120))
    missing = sorted(set(CODECS) - set(datasets))
    assert not missing, f"re-read the others, but these codecs had failed before: {missing}"
