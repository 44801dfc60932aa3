"""Bad input over raw sockets: the broker answers or drops the offending connection, and
nothing else notices.

Frames are built by hand (tests/badinput/wire.py, `struct` only). Expected answers were
checked against Apache Kafka 3.9.2 (JOCKO_TEST_KAFKA_REF=1); where the issue asks for
something else than Kafka 3.9 does, the test says so.

After every test, `_still_serving` checks that the broker still serves: a raw connection
opened at the start of the module (the witness) still answers ApiVersions, a fresh
connection does too, and a kafka-python producer that has been connected all along
still gets records acknowledged.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.badinput import wire as w
from tests.support.e2e import TargetBroker, create_topics, unique_suffix

SUFFIX = unique_suffix()
MAX_REQUEST = 104_857_600  # socket.request.max.bytes default


@pytest.fixture(scope="module")
def good_topic(target: TargetBroker) -> str:
    name = f"badinput-ok-{SUFFIX}"
    create_topics(target.bootstrap, [name], partitions=1)
    return name


@pytest.fixture(scope="module")
def witness(target: TargetBroker) -> Iterator[w.Conn]:
    c = w.Conn(*target.host_port)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def producer(target: TargetBroker, good_topic: str) -> Iterator[KafkaProducer]:
    p = KafkaProducer(bootstrap_servers=target.bootstrap, client_id="jocko-badinput-witness")
    try:
        p.send(good_topic, b"warm-up").get(timeout=30)
        yield p
    finally:
        p.close(timeout=10)


def api_versions(c: w.Conn) -> w.ApiVersionsV0:
    cid = c.cid()
    return w.parse_api_versions_v0(c.request(w.api_versions_v0(cid), cid))


@pytest.fixture(autouse=True)
def _still_serving(
    target: TargetBroker, witness: w.Conn, producer: KafkaProducer, good_topic: str
) -> Iterator[None]:
    yield
    av = api_versions(witness)
    assert av.error_code == 0 and w.API_PRODUCE in av.ranges, "witness connection broken"
    fresh = w.Conn(*target.host_port)
    try:
        assert api_versions(fresh).error_code == 0
    finally:
        fresh.close()
    md = producer.send(good_topic, b"still-serving").get(timeout=30)
    assert md.offset >= 0


def rss_kib(target: TargetBroker) -> int | None:
    if target.proc is None or target.proc.proc is None:
        return None
    try:
        status = Path(f"/proc/{target.proc.proc.pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def connect(target: TargetBroker) -> w.Conn:
    return w.Conn(*target.host_port)


# --------------------------------------------------------------------------- framing


@pytest.mark.parametrize(
    "size", [MAX_REQUEST + 1, 0x7FFFFFFF, -1, -0x80000000], ids=["max+1", "int32max", "-1", "min"]
)
def test_oversized_or_negative_frame_size_closes_connection(
    target: TargetBroker, size: int
) -> None:
    before = rss_kib(target)
    c = connect(target)
    try:
        c.send(struct.pack(">i", size) + b"\x00" * 64)
        assert c.closed_by_peer(10), f"frame size {size}: connection still open after 10s"
    finally:
        c.close()
    after = rss_kib(target)
    if before is not None and after is not None:
        # The size is checked before any buffer is allocated.
        assert after - before < 64 * 1024, f"broker RSS grew {before} -> {after} KiB"


def test_frame_of_exactly_max_size_is_not_rejected_early(target: TargetBroker) -> None:
    """socket.request.max.bytes is inclusive: a frame announcing exactly that many bytes
    is read on (Kafka keeps the connection open while the bytes arrive)."""
    c = connect(target)
    try:
        cid = c.cid()
        c.send(struct.pack(">i", MAX_REQUEST) + w.header_v1(w.API_API_VERSIONS, 0, cid))
        assert not c.closed_by_peer(2), "frame of exactly socket.request.max.bytes rejected"
    finally:
        c.close()


def test_zero_length_frame_closes_connection(target: TargetBroker) -> None:
    c = connect(target)
    try:
        c.send(struct.pack(">i", 0))
        assert c.closed_by_peer(10), "empty frame (no request header): connection still open"
    finally:
        c.close()


def test_truncated_frame_then_eof(target: TargetBroker) -> None:
    c = connect(target)
    try:
        c.send(struct.pack(">i", 100) + b"\x00" * 10)
        c.sock.shutdown(1)  # SHUT_WR: the rest of the frame never comes
        assert c.closed_by_peer(10), "half-sent frame + EOF: connection not closed"
    finally:
        c.close()


def test_truncated_frame_does_not_block_other_connections(target: TargetBroker) -> None:
    stuck = connect(target)
    try:
        cid = stuck.cid()
        whole = w.api_versions_v0(cid)
        stuck.send(whole[:7])  # size and part of the header, then nothing
        other = connect(target)
        try:
            t0 = time.monotonic()
            assert api_versions(other).error_code == 0
            assert time.monotonic() - t0 < 5
        finally:
            other.close()
        # The stuck connection is still usable once the rest arrives.
        stuck.send(whole[7:])
        resp = stuck.recv_frame()
        assert struct.unpack(">i", resp[:4])[0] == cid
    finally:
        stuck.close()


@pytest.mark.parametrize(
    "payload",
    [
        # Request header cut inside the correlation id.
        w.header_v1(w.API_API_VERSIONS, 0, 7)[:5],
        # Metadata v4 announcing 5 topics but carrying one, no allow_auto_topic_creation.
        w.header_v1(w.API_METADATA, 4, 7) + w.i32(5) + w.string("a"),
        # Produce v7 whose records field claims 1000 bytes and has 10.
        w.header_v1(w.API_PRODUCE, 7, 7)
        + w.string(None)
        + w.i16(1)
        + w.i32(1000)
        + w.i32(1)
        + w.string("t")
        + w.i32(1)
        + w.i32(0)
        + w.i32(1000)
        + b"\x00" * 10,
        # client_id length beyond the frame.
        w.i16(w.API_API_VERSIONS) + w.i16(0) + w.i32(7) + w.i16(500) + b"abc",
        # An array count of 2**31-1 in a tiny frame: must not be allocated up front.
        w.header_v1(w.API_METADATA, 4, 7) + w.i32(0x7FFFFFFF) + w.string("a") + w.i8(0),
        # Flexible ApiVersions v3 whose compact string length is a runaway varint.
        w.header_v2(w.API_API_VERSIONS, 3, 7) + b"\xff" * 12,
        # Flexible ApiVersions v3 whose compact string claims 1000 bytes, has 3.
        w.header_v2(w.API_API_VERSIONS, 3, 7) + w.uvarint(1001) + b"abc",
    ],
    ids=[
        "header",
        "metadata-array",
        "produce-records",
        "client-id",
        "huge-array-count",
        "runaway-varint",
        "compact-string",
    ],
)
def test_request_cut_short_inside_a_complete_frame_closes_connection(
    target: TargetBroker, payload: bytes
) -> None:
    c = connect(target)
    try:
        c.send(w.frame(payload))
        assert c.closed_by_peer(10), "malformed request: connection not closed"
    finally:
        c.close()


# --------------------------------------------------------------------------- versions


def closed_or_unsupported_version(c: w.Conn, cid: int) -> str:
    """Accept what the issue allows for a request the broker cannot parse: the connection
    is closed, or a response with our correlation id carrying UNSUPPORTED_VERSION (35)
    as its first error code. Returns which one happened."""
    c.sock.settimeout(10)
    try:
        head = c.recv_exact(4)
    except (ConnectionError, OSError):
        return "closed"
    (size,) = struct.unpack(">i", head)
    resp = c.recv_exact(size)
    (got_cid,) = struct.unpack(">i", resp[:4])
    assert got_cid == cid, f"response correlation id {got_cid}, expected {cid}"
    codes = [struct.unpack(">h", resp[i : i + 2])[0] for i in range(4, min(len(resp) - 1, 16))]
    assert w.UNSUPPORTED_VERSION in codes, f"response is not UNSUPPORTED_VERSION: {resp.hex()}"
    return "unsupported-version"


@pytest.mark.parametrize("api_key", [9999, 32767, 1000, -1])
def test_unknown_api_key(target: TargetBroker, api_key: int) -> None:
    c = connect(target)
    try:
        cid = c.cid()
        c.send(w.frame(w.header_v1(api_key, 0, cid) + b"\x00" * 16))
        closed_or_unsupported_version(c, cid)
    finally:
        c.close()


@pytest.mark.parametrize("version", [99, 32767])
def test_api_versions_unknown_version_gets_v0_reply_with_supported_range(
    target: TargetBroker, version: int
) -> None:
    """KIP-511: a client newer than the broker sends ApiVersions at its own latest version
    (flexible header v2); the broker answers in the v0 layout (response header v0) with
    UNSUPPORTED_VERSION and its own ApiVersions range, so the client can retry lower."""
    c = connect(target)
    try:
        cid = c.cid()
        body = c.request(w.api_versions_flexible(cid, version), cid)
        av = w.parse_api_versions_v0(body)
        assert av.error_code == w.UNSUPPORTED_VERSION, av
        assert w.API_API_VERSIONS in av.ranges, f"no ApiVersions range in {av}"
        lo, hi = av.ranges[w.API_API_VERSIONS]
        assert lo == 0 and lo <= hi < version, (lo, hi)
        # The client then retries at a version in range on the same connection.
        assert api_versions(c).error_code == 0
    finally:
        c.close()


@pytest.mark.parametrize(
    "api_key, version",
    [(w.API_METADATA, 99), (w.API_PRODUCE, 99), (w.API_CREATE_TOPICS, 99), (w.API_METADATA, 32767)],
    ids=["metadata-v99", "produce-v99", "createtopics-v99", "metadata-v32767"],
)
def test_other_api_at_unsupported_version(target: TargetBroker, api_key: int, version: int) -> None:
    c = connect(target)
    try:
        cid = c.cid()
        c.send(w.frame(w.header_v2(api_key, version, cid) + b"\x00" * 16))
        closed_or_unsupported_version(c, cid)
    finally:
        c.close()


# --------------------------------------------------------------------------- produce


def produce_one(c: w.Conn, topic: str, batch: bytes) -> tuple[int, int]:
    cid = c.cid()
    resp = w.parse_produce_v7(c.request(w.produce_v7(cid, topic, 0, batch), cid))
    assert list(resp) == [(topic, 0)], resp
    return resp[(topic, 0)]


def good_batch(n: int = 2) -> bytes:
    return w.record_batch_v2(
        [(f"k{i}".encode(), f"v{i}".encode()) for i in range(n)], int(time.time() * 1000)
    )


def check_rejected_batch(target: TargetBroker, topic: str, bad: bytes, allowed: set[int]) -> None:
    """The bad batch gets one of `allowed` and is not appended: the good batches before
    and after it get consecutive base offsets. The connection stays usable."""
    c = connect(target)
    try:
        err, first = produce_one(c, topic, good_batch(2))
        assert err == w.NONE
        err, _ = produce_one(c, topic, bad)
        assert err in allowed, f"error code {err}, expected one of {sorted(allowed)}"
        err, second = produce_one(c, topic, good_batch(2))
        assert err == w.NONE
        assert second == first + 2, f"bad batch was appended: base offsets {first}, {second}"
    finally:
        c.close()


@pytest.fixture(scope="module")
def produce_topic(target: TargetBroker) -> str:
    name = f"badinput-produce-{SUFFIX}"
    create_topics(target.bootstrap, [name], partitions=1)
    return name


def test_produce_bad_crc_is_corrupt_message(target: TargetBroker, produce_topic: str) -> None:
    bad = w.record_batch_v2([(b"k", b"v"), (b"k2", b"v2")], int(time.time() * 1000), bad_crc=True)
    check_rejected_batch(target, produce_topic, bad, {w.CORRUPT_MESSAGE})


def test_produce_flipped_record_byte_is_corrupt_message(
    target: TargetBroker, produce_topic: str
) -> None:
    good = bytearray(good_batch(2))
    good[-3] ^= 0xFF  # inside the last record: covered by the CRC
    check_rejected_batch(target, produce_topic, bytes(good), {w.CORRUPT_MESSAGE})


@pytest.mark.parametrize("magic", [0, 1])
def test_produce_old_magic_is_rejected(
    target: TargetBroker, produce_topic: str, magic: int
) -> None:
    """Produce v3+ must carry magic 2 batches. Kafka 3.9 answers INVALID_RECORD (87);
    Kafka 4 UNSUPPORTED_FOR_MESSAGE_FORMAT (43)."""
    bad = w.record_batch_v2([(b"k", b"v")], int(time.time() * 1000), magic=magic)
    check_rejected_batch(
        target, produce_topic, bad, {w.INVALID_RECORD, w.UNSUPPORTED_FOR_MESSAGE_FORMAT}
    )


@pytest.mark.parametrize("magic", [3, 99, -1])
def test_produce_unknown_magic_is_corrupt_message(
    target: TargetBroker, produce_topic: str, magic: int
) -> None:
    """An unknown magic byte: Kafka 3.9 answers CORRUPT_MESSAGE (2)."""
    bad = w.record_batch_v2([(b"k", b"v")], int(time.time() * 1000), magic=magic)
    check_rejected_batch(target, produce_topic, bad, {w.CORRUPT_MESSAGE})


def test_produce_batch_length_beyond_the_records_is_rejected(
    target: TargetBroker, produce_topic: str
) -> None:
    """batchLength claims 50 bytes more than the records field holds. Kafka 3.9 answers
    INVALID_RECORD (87); CORRUPT_MESSAGE (2) is as reasonable, so either is accepted."""
    good = bytearray(good_batch(2))
    good[8:12] = struct.pack(">i", struct.unpack(">i", good[8:12])[0] + 50)
    check_rejected_batch(target, produce_topic, bytes(good), {w.CORRUPT_MESSAGE, w.INVALID_RECORD})


# --------------------------------------------------------------------------- topic names

BAD_NAMES = ["bad/name", "..", ".", "x" * 250, "sp ace", "star*", ""]


def test_create_topics_invalid_names(target: TargetBroker) -> None:
    c = connect(target)
    try:
        ok = f"badinput-valid-{SUFFIX}"
        longest = f"{SUFFIX}-" + "y" * (249 - len(SUFFIX) - 1)
        cid = c.cid()
        resp = w.parse_create_topics_v4(
            c.request(w.create_topics_v4(cid, [*BAD_NAMES, ok, longest]), cid)
        )
        want = {n: w.INVALID_TOPIC_EXCEPTION for n in BAD_NAMES} | {ok: 0, longest: 0}
        assert resp == want
    finally:
        c.close()


@pytest.mark.parametrize("auto_create", [True, False], ids=["auto-create", "no-auto-create"])
def test_metadata_invalid_names(target: TargetBroker, auto_create: bool) -> None:
    c = connect(target)
    try:
        names = [n for n in BAD_NAMES if n]
        cid = c.cid()
        resp = w.parse_metadata_v4_topic_errors(
            c.request(w.metadata_v4(cid, names, auto_create), cid)
        )
        assert resp == {n: w.INVALID_TOPIC_EXCEPTION for n in names}
    finally:
        c.close()


@pytest.mark.parametrize(
    "name", ["bad/name", "..", "x" * 250], ids=["slash", "dotdot", "250-chars"]
)
def test_produce_invalid_topic_name(target: TargetBroker, name: str) -> None:
    if target.kind != "jocko-py":
        pytest.xfail(
            "Apache Kafka 3.9 answers UNKNOWN_TOPIC_OR_PARTITION (3) for a produce to an "
            "invalid name; the issue asks jocko-py for INVALID_TOPIC_EXCEPTION (17)"
        )
    c = connect(target)
    try:
        err, _ = produce_one(c, name, good_batch(1))
        assert err == w.INVALID_TOPIC_EXCEPTION
    finally:
        c.close()


# --------------------------------------------------------------------------- framing that is fine


def test_request_sent_one_byte_at_a_time(target: TargetBroker) -> None:
    c = connect(target)
    try:
        cid = c.cid()
        for b in w.api_versions_v0(cid):
            c.send(bytes([b]))
            time.sleep(0.002)
        resp = c.recv_frame()
        assert struct.unpack(">i", resp[:4])[0] == cid
        assert w.parse_api_versions_v0(resp[4:]).error_code == 0
    finally:
        c.close()


def test_pipelined_requests_are_answered_in_order(target: TargetBroker, good_topic: str) -> None:
    """Many requests in one write, mixed APIs: one response each, in request order."""
    c = connect(target)
    try:
        frames = []
        cids = []
        for i in range(30):
            cid = c.cid()
            cids.append(cid)
            if i % 3 == 0:
                frames.append(w.api_versions_v0(cid))
            elif i % 3 == 1:
                frames.append(w.metadata_v4(cid, [good_topic], False))
            else:
                frames.append(w.produce_v7(cid, good_topic, 0, good_batch(1)))
        c.send(b"".join(frames))
        got = [struct.unpack(">i", c.recv_frame()[:4])[0] for _ in cids]
        assert got == cids
    finally:
        c.close()


def test_acks0_produce_gets_no_response(target: TargetBroker, produce_topic: str) -> None:
    c = connect(target)
    try:
        cid0 = c.cid()
        c.send(w.produce_v7(cid0, produce_topic, 0, good_batch(1), acks=0))
        cid1 = c.cid()
        body = c.request(w.api_versions_v0(cid1), cid1)  # asserts the next answer is cid1
        assert w.parse_api_versions_v0(body).error_code == 0
    finally:
        c.close()


def test_acks0_produce_with_bad_crc_closes_connection(
    target: TargetBroker, produce_topic: str
) -> None:
    """With acks=0 there is no response to carry the error, so Kafka closes the connection
    (KafkaApis: "the client has no way to know about the error otherwise")."""
    c = connect(target)
    try:
        bad = w.record_batch_v2([(b"k", b"v")], int(time.time() * 1000), bad_crc=True)
        c.send(w.produce_v7(c.cid(), produce_topic, 0, bad, acks=0))
        assert c.closed_by_peer(10), "acks=0 produce failed silently, connection kept open"
    finally:
        c.close()


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_produce_garbage_records_with_a_valid_crc_is_rejected(
    target: TargetBroker, produce_topic: str, codec: str
) -> None:
    """The CRC is right but the records (or the compressed stream) are garbage. Kafka
    decodes the records of every produced batch (LogValidator) and refuses it; storing it
    would hand every consumer of the partition a batch it cannot read. Kafka 3.9 answers
    CORRUPT_MESSAGE/INVALID_RECORD for plain records and UNKNOWN_SERVER_ERROR (-1) for a
    compressed stream its decompressor fails on; any of the three is accepted, what
    matters is that nothing is appended."""
    garbage = bytes((i * 73 + 41) % 256 for i in range(200))
    bad = w.record_batch_v2(
        [(b"k", b"v"), (b"k2", b"v2")],
        int(time.time() * 1000),
        codec=CODEC_IDS[codec],
        records_blob=garbage,
    )
    allowed = {w.CORRUPT_MESSAGE, w.INVALID_RECORD, w.UNKNOWN_SERVER_ERROR}
    check_rejected_batch(target, produce_topic, bad, allowed)


def test_produce_decompression_bomb_is_refused_without_inflating_it(
    target: TargetBroker, produce_topic: str
) -> None:
    """A 100 KiB gzip stream that inflates to 96 MiB: the broker stops decompressing at
    its limit (64 MiB) instead of allocating what the stream claims. jocko-py answers
    MESSAGE_TOO_LARGE; Kafka, which streams the records, finds the zero bytes are not
    records (CORRUPT_MESSAGE). Nothing is appended either way, and the broker's memory
    does not grow by the inflated size."""
    import gzip

    bomb = gzip.compress(bytes(96 << 20), compresslevel=9)
    assert len(bomb) < 200_000
    bad = w.record_batch_v2(
        [(b"k", b"v")], int(time.time() * 1000), codec=CODEC_IDS["gzip"], records_blob=bomb
    )
    before = rss_kib(target)
    allowed = {w.MESSAGE_TOO_LARGE} if target.kind == "jocko-py" else {w.CORRUPT_MESSAGE}
    check_rejected_batch(target, produce_topic, bad, allowed)
    after = rss_kib(target)
    if before is not None and after is not None:
        assert after - before < 90 * 1024, f"RSS grew from {before} to {after} KiB"


def test_produce_two_batches_in_one_partition_is_invalid_record(
    target: TargetBroker, produce_topic: str
) -> None:
    """Produce v3+ carries exactly one batch per partition (Kafka: INVALID_RECORD)."""
    check_rejected_batch(target, produce_topic, good_batch(1) + good_batch(1), {w.INVALID_RECORD})


def test_produce_empty_records_is_invalid_record(target: TargetBroker, produce_topic: str) -> None:
    check_rejected_batch(target, produce_topic, b"", {w.INVALID_RECORD})


@pytest.mark.parametrize("count", [1, 3], ids=["fewer", "more"])
def test_produce_records_count_disagrees_with_the_records(
    target: TargetBroker, produce_topic: str, count: int
) -> None:
    """recordsCount says 1 or 3, the batch holds 2 well-formed records, CRC valid.
    Kafka 3.9: INVALID_RECORD."""
    recs = b"".join(w.record_v2(i, i, b"k", b"v") for i in range(2))
    bad = w.record_batch_v2([(b"k", b"v")] * count, int(time.time() * 1000), records_blob=recs)
    check_rejected_batch(target, produce_topic, bad, {w.INVALID_RECORD, w.CORRUPT_MESSAGE})


def test_produce_unknown_partition(target: TargetBroker, produce_topic: str) -> None:
    c = connect(target)
    try:
        cid = c.cid()
        resp = w.parse_produce_v7(c.request(w.produce_v7(cid, produce_topic, 7, good_batch()), cid))
        assert resp[(produce_topic, 7)][0] == w.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        c.close()


def test_produce_invalid_acks(target: TargetBroker, produce_topic: str) -> None:
    c = connect(target)
    try:
        cid = c.cid()
        req = w.produce_v7(cid, produce_topic, 0, good_batch(), acks=2)
        assert (
            w.parse_produce_v7(c.request(req, cid))[(produce_topic, 0)][0]
            == w.INVALID_REQUIRED_ACKS
        )
    finally:
        c.close()


# --------------------------------------------------------------------------- CreateTopics arguments


def create_topics_raw(
    target: TargetBroker, topics: list[bytes], validate_only: bool = False
) -> dict[str, int]:
    c = connect(target)
    try:
        cid = c.cid()
        body = w.array(topics) + w.i32(10_000) + w.i8(1 if validate_only else 0)
        req = w.frame(w.header_v1(w.API_CREATE_TOPICS, 4, cid) + body)
        return w.parse_create_topics_v4(c.request(req, cid))
    finally:
        c.close()


def topic_entry(
    name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None
) -> bytes:
    cfg = [w.string(k) + w.string(v) for k, v in (configs or {}).items()]
    return w.string(name) + w.i32(partitions) + w.i16(rf) + w.array([]) + w.array(cfg)


@pytest.mark.parametrize(
    "partitions, rf, configs, want",
    [
        (0, 1, None, 37),  # INVALID_PARTITIONS
        (-5, 1, None, 37),
        (-1, -1, None, 0),  # -1 = broker defaults (num.partitions, default.replication.factor)
        (1, 3, None, 38),  # INVALID_REPLICATION_FACTOR: one broker
        (1, 0, None, 38),
        (1, 1, {"no.such.config": "1"}, 40),  # INVALID_CONFIG
        (1, 1, {"retention.ms": "abc"}, 40),
    ],
    ids=[
        "partitions-0",
        "partitions-neg",
        "defaults",
        "rf-3",
        "rf-0",
        "unknown-config",
        "bad-value",
    ],
)
def test_create_topics_bad_arguments(
    target: TargetBroker, partitions: int, rf: int, configs: dict[str, str] | None, want: int
) -> None:
    """Codes as Apache Kafka 3.9.2 answers them (checked)."""
    name = f"badinput-args-{unique_suffix()}"
    assert create_topics_raw(target, [topic_entry(name, partitions, rf, configs)]) == {name: want}


def test_create_topics_duplicate_name_is_invalid_request(target: TargetBroker) -> None:
    name = f"badinput-dup-{SUFFIX}"
    assert create_topics_raw(target, [topic_entry(name), topic_entry(name)]) == {name: 42}


def test_create_topics_validate_only_creates_nothing(target: TargetBroker) -> None:
    name = f"badinput-validate-{SUFFIX}"
    assert create_topics_raw(target, [topic_entry(name)], validate_only=True) == {name: 0}
    c = connect(target)
    try:
        cid = c.cid()
        meta = w.parse_metadata_v4_topic_errors(c.request(w.metadata_v4(cid, [name], False), cid))
        assert meta == {name: w.UNKNOWN_TOPIC_OR_PARTITION}
    finally:
        c.close()
