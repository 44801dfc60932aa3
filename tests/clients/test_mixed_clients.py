"""Four different clients produce to the same partitions at the same time, each with its
own codec, and every client then reads the whole mix back.

The producers run concurrently on their own connections, so their batches (four codecs)
interleave within a partition (typically 10-20 producer switches per partition here, see
`producer_switches`) and one fetch response carries mixed codecs. Whatever the
interleaving, every reader must see each producer's records complete, byte for byte, in
that producer's order, at contiguous offsets.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Callable

import pytest

from tests.clients import test_aiokafka as aio
from tests.clients import test_confluent_kafka as ck
from tests.clients import test_kafka_python as kp
from tests.clients import test_kcat as kc
from tests.support.e2e import (
    Dataset,
    Rec,
    TargetBroker,
    assert_same_records,
    create_topics,
    make_dataset,
    unique_suffix,
)
from tests.support.prereq import requires

pytestmark = [
    pytest.mark.clients,
    requires(shutil.which("kcat") is not None, "kcat not installed: make kcat"),
]

SUFFIX = unique_suffix()
PER_PRODUCER = 5_000
# producer name -> codec it uses
PRODUCERS = {"kafkapy": "gzip", "confluent": "zstd", "aiokafka": "lz4", "kcat": "snappy"}


@pytest.fixture(scope="module")
def mixed(target: TargetBroker) -> tuple[str, dict[str, Dataset]]:
    topic = f"e2e-mixed-{SUFFIX}"
    create_topics(target.bootstrap, [topic])
    sets: dict[str, Dataset] = {}
    for name in PRODUCERS:
        # Printable values so that kcat's JSON output can carry every producer's records.
        kw = {"fixed_headers": kc.HEADERS} if name == "kcat" else {}
        ds = make_dataset(f"{name}-{SUFFIX}", n=PER_PRODUCER, printable=True, **kw)  # type: ignore[arg-type]
        ds.topic = topic
        sets[name] = ds

    def run_aiokafka(bs: str, ds: Dataset, codec: str) -> None:
        asyncio.run(asyncio.wait_for(aio._produce(bs, ds, codec), 150))

    runners: dict[str, Callable[[str, Dataset, str], None]] = {
        "kafkapy": kp.produce,
        "confluent": ck.produce,
        "aiokafka": run_aiokafka,
        "kcat": kc.produce,
    }
    errors: dict[str, BaseException] = {}

    def run(name: str) -> None:
        try:
            runners[name](target.bootstrap, sets[name], PRODUCERS[name])
        except BaseException as e:  # reported below, with the producer's name
            errors[name] = e

    threads = [threading.Thread(target=run, args=(n,), name=f"produce-{n}") for n in PRODUCERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a producer did not finish in 240s"
    assert not errors, f"producers failed: {errors!r}"
    return topic, sets


def producer_switches(recs: list[Rec]) -> int:
    """How often the producer changes from one record to the next, in offset order."""
    tags = [(r.key or b"").split(b"-", 1)[0] for r in recs]
    return sum(1 for a, b in zip(tags, tags[1:], strict=False) if a != b)


def check_mix(what: str, got: dict[int, list[Rec]], sets: dict[str, Dataset]) -> None:
    switches = {p: producer_switches(recs) for p, recs in got.items()}
    what = f"{what} (producer switches by partition: {switches})"
    for p, recs in got.items():
        assert [r.offset for r in recs] == list(range(len(recs))), f"{what} p{p}: offsets"
    total = sum(len(recs) for recs in got.values())
    assert total == PER_PRODUCER * len(sets), f"{what}: read {total} records"
    for name, ds in sets.items():
        prefix = f"{name}-{SUFFIX}-k".encode()
        mine = {
            p: [r for r in recs if r.key is not None and r.key.startswith(prefix)]
            for p, recs in got.items()
        }
        # Offsets interleave with the other producers: compare everything else.
        assert_same_records(
            ds.by_partition(),
            mine,
            f"{what}: {name}'s records",
            check_offsets=False,
            check_timestamps=name != "kcat",
        )


READERS: dict[str, Callable[[str, str, int], dict[int, list[Rec]]]] = {
    "kafka-python": kp.consume,
    "confluent-kafka": ck.consume,
    "aiokafka": aio.consume,
    "kcat": kc.consume,
}


@pytest.mark.parametrize("reader", list(READERS))
def test_every_client_reads_the_mix(
    target: TargetBroker, mixed: tuple[str, dict[str, Dataset]], reader: str
) -> None:
    topic, sets = mixed
    check_mix(reader, READERS[reader](target.bootstrap, topic, 3), sets)
