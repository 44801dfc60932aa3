"""The protocol's known quirks, one test each, through a real broker on raw sockets.

The quirks (also listed in `jocko_py/protocol/codec.py` and DESIGN.md):
- ApiVersions responses always use response header v0, even for flexible versions;
- an ApiVersions request of an unknown version gets a v0 reply with
  UNSUPPORTED_VERSION and the supported ranges;
- the client id in request header v2 keeps its int16 length (not compact);
- a Produce with acks=0 gets no response at all;
- Produce v0-2 are advertised (librdkafka probes them, KAFKA-18659) but a request of
  them closes the connection, as Kafka 4.x does.
Plus: responses to pipelined requests on one connection come back in request order.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jocko_py.protocol import codec, messages
from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.records import NewRecord, build_batch
from jocko_py.protocol.wire import Reader, r_i32, r_tagged
from tests.support.broker import BrokerProcess

PRODUCE, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 2, 3, 18, 19
IO_TIMEOUT = 10.0


class RawClient:
    """Kafka framing over a plain blocking socket, every read bounded by a timeout."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
        self.sock.settimeout(IO_TIMEOUT)

    def close(self) -> None:
        self.sock.close()

    def send(self, frame: bytes | bytearray) -> None:
        self.sock.sendall(frame)

    def _exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exactly(4))
        assert 0 <= size < 64 << 20
        return self._exactly(size)

    def request(
        self, key: int, version: int, corr: int, body: Any, client_id: str | None = "quirks"
    ) -> tuple[int, Any]:
        self.send(codec.encode_request(key, version, corr, client_id, body))
        return codec.decode_response(key, version, self.read_frame())


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # one broker for the module: each test uses its own connection (and topic)
    tmp: Path = tmp_path_factory.mktemp("quirks")
    b = BrokerProcess(tmp / "data")
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    c = RawClient(broker.port)
    try:
        yield c
    finally:
        c.close()


def create_topic(c: RawClient, name: str) -> None:
    body = {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}],
        "timeout_ms": 5000,
    }
    _, resp = c.request(CREATE_TOPICS, 7, 900, body)
    assert resp.topics[0].error_code == ErrorCode.NONE, resp


def produce_body(topic: str, acks: int, value: bytes = b"v") -> dict[str, Any]:
    batch = build_batch([NewRecord(key=None, value=value)])
    return {
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }


def latest_offset(c: RawClient, topic: str) -> int:
    body = {
        "replica_id": -1,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    _, resp = c.request(LIST_OFFSETS, 7, 901, body)
    p = resp.topics[0].partitions[0]
    assert p.error_code == ErrorCode.NONE
    return int(p.offset)


# -- ApiVersions -------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 4, 5])
def test_flexible_api_versions_response_uses_header_v0(client: RawClient, version: int) -> None:
    body = {"client_software_name": "jocko-quirks", "client_software_version": "1"}
    client.send(codec.encode_request(API_VERSIONS, version, 41, "quirks", body))
    frame = client.read_frame()
    r = Reader(frame)
    assert r_i32(r) == 41
    # header v0: the body starts right after the correlation id (no tag section)
    resp = messages.response_schema(API_VERSIONS, version).parse(r)
    assert r.pos == r.end
    assert resp.error_code == ErrorCode.NONE
    assert any(k.api_key == API_VERSIONS and k.max_version >= version for k in resp.api_keys)


def test_other_flexible_responses_use_header_v1(client: RawClient) -> None:
    """The contrast that makes the quirk a quirk: Metadata v12 has the tag section."""
    client.send(codec.encode_request(METADATA, 12, 42, "quirks", {"topics": []}))
    frame = client.read_frame()
    r = Reader(frame)
    assert r_i32(r) == 42
    tags: dict[str, Any] = {}
    r_tagged(r, {}, tags)  # the empty tagged-field section of response header v1
    messages.response_schema(METADATA, 12).parse(r)
    assert r.pos == r.end


def test_metadata_v13_answers_as_v12_with_a_top_level_error_code(client: RawClient) -> None:
    create_topic(client, "quirks-md13")
    body = {"topics": [{"name": "quirks-md13"}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    _, v12 = client.request(METADATA, 12, 45, body)
    _, v13 = client.request(METADATA, 13, 46, body)
    assert v13.error_code == ErrorCode.NONE
    assert v13.topics == v12.topics and v13.cluster_id == v12.cluster_id


def test_unknown_api_versions_version_gets_v0_unsupported_version_reply(
    client: RawClient,
) -> None:
    # a future, flexible ApiVersions version: the broker cannot even parse its body
    frame = bytearray(struct.pack(">ihhih", 0, API_VERSIONS, 127, 43, 6) + b"future")
    frame += b"\x00" + b"\x07garbage\x00"
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    client.send(frame)
    reply = client.read_frame()
    r = Reader(reply)
    assert r_i32(r) == 43
    v0 = messages.response_schema(API_VERSIONS, 0).parse(r)
    assert r.pos == r.end, "the reply is exactly a v0 body after a v0 header"
    assert v0.error_code == ErrorCode.UNSUPPORTED_VERSION
    ranges = {k.api_key: (k.min_version, k.max_version) for k in v0.api_keys}
    assert ranges[API_VERSIONS] == (0, 5)
    assert ranges[PRODUCE][0] == 0
    # and a client of our codec reads it as v0 whatever version it asked for
    corr, body = codec.decode_response(API_VERSIONS, 4, reply)
    assert (corr, body.error_code) == (43, ErrorCode.UNSUPPORTED_VERSION)
    assert body.api_keys == v0.api_keys
    # the connection stays usable: the client retries with a version from the range
    corr, resp = client.request(API_VERSIONS, 3, 44, {})
    assert (corr, resp.error_code) == (44, ErrorCode.NONE)


def test_api_versions_v5_checks_the_cluster_and_node_the_client_means(
        client: RawClient) -> None:
    """KIP-1242, as Apache Kafka 4.4.0 answers: both ids right, the usual answer; either
    wrong, REBOOTSTRAP_REQUIRED; only one of them given, INVALID_REQUEST; the error
    answers carry nothing else, and the connection stays open."""
    _, dc = client.request(60, 0, 69, {"include_cluster_authorized_operations": False})
    cluster, node = dc.cluster_id, dc.brokers[0].broker_id

    def ask(corr: int, cluster_id: str | None, node_id: int) -> Any:
        return client.request(API_VERSIONS, 5, corr, {
            "client_software_name": "jocko-quirks", "client_software_version": "1",
            "cluster_id": cluster_id, "node_id": node_id})[1]
    for corr, (cid, nid) in enumerate([(None, -1), (cluster, node)], 70):
        ok = ask(corr, cid, nid)
        assert ok.error_code == ErrorCode.NONE and ok.api_keys and ok.finalized_features
    for corr, (cid, nid, code) in enumerate([
            ("AAAAAAAAAAAAAAAAAAAAAA", node, ErrorCode.REBOOTSTRAP_REQUIRED),
            (cluster, node + 7, ErrorCode.REBOOTSTRAP_REQUIRED),
            (None, node, ErrorCode.INVALID_REQUEST),
            (cluster, -1, ErrorCode.INVALID_REQUEST)], 80):
        bad = ask(corr, cid, nid)
        assert (bad.error_code, list(bad.api_keys), list(bad.supported_features),
                list(bad.finalized_features), bad.finalized_features_epoch) == (
            code, [], [], [], -1), (cid, nid)


@pytest.mark.parametrize("asked", [0, 1, 2, 3, 4, 5])
def test_decode_response_reads_the_unsupported_version_reply_as_v0(asked: int) -> None:
    body = {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}],
    }
    frame = bytes(codec.encode_response(API_VERSIONS, 0, 8, body))[4:]
    corr, got = codec.decode_response(API_VERSIONS, asked, frame)
    assert corr == 8
    assert got.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in got.api_keys] == [(18, 0, 2)]


# -- request header v2 -------------------------------------------------------------


def test_request_header_v2_client_id_keeps_int16_length() -> None:
    frame = codec.encode_request(METADATA, 12, 5, "abc", {"topics": []})
    # size, key, version, correlation id, then int16 length 3 (a compact string would be 0x04)
    assert frame[12:17] == b"\x00\x03abc"
    assert frame[17] == 0  # then the header's (empty) tag section


@pytest.mark.parametrize(
    ("key", "version", "header_version"),
    [(METADATA, 1, 1), (METADATA, 12, 2), (API_VERSIONS, 3, 2), (PRODUCE, 9, 2)],
)
def test_request_header_matches_kafkas_header_spec(
    key: int, version: int, header_version: int
) -> None:
    """The spec's RequestHeader marks ClientId `flexibleVersions: none`; the codec agrees."""
    frame = bytes(codec.encode_request(key, version, 77, "client-é", {}))
    r = Reader(frame, 4)
    head = messages.data_schema("RequestHeader", header_version).parse(r)
    assert (head.request_api_key, head.request_api_version) == (key, version)
    assert (head.correlation_id, head.client_id) == (77, "client-é")
    messages.request_schema(key, version).parse(r)
    assert r.pos == r.end


@pytest.mark.parametrize("client_id", ["quirks-client", "x" * 200, "", None])
def test_flexible_request_with_client_id_is_answered(
    client: RawClient, client_id: str | None
) -> None:
    """A 200-byte id would be misread if the broker took it as a compact string."""
    corr, resp = client.request(METADATA, 12, 45, {"topics": []}, client_id=client_id)
    assert corr == 45
    assert resp.brokers, resp
    corr, resp = client.request(API_VERSIONS, 4, 46, {}, client_id=client_id)
    assert (corr, resp.error_code) == (46, ErrorCode.NONE)


# -- Produce -----------------------------------------------------------------------


def test_acks_zero_produce_gets_no_response(client: RawClient) -> None:
    create_topic(client, "quirks-acks0")
    client.send(codec.encode_request(PRODUCE, 9, 50, "quirks", produce_body("quirks-acks0", 0)))
    client.send(codec.encode_request(API_VERSIONS, 0, 51, "quirks", {}))
    # the first frame back answers the ApiVersions request: produce had no reply
    corr, _ = codec.decode_response(API_VERSIONS, 0, client.read_frame())
    assert corr == 51
    assert latest_offset(client, "quirks-acks0") == 1, "the acks=0 batch was still appended"


def _produce_v0_frame(version: int, corr: int, topic: str) -> bytes:
    """A Produce v0-2 request by hand: the 4.x specs no longer describe these versions."""
    batch = build_batch([NewRecord(key=None, value=b"v")])
    name, cid = topic.encode(), b"quirks"
    body = struct.pack(">hhih", PRODUCE, version, corr, len(cid)) + cid
    body += struct.pack(">hii", 1, 5000, 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">iii", 1, 0, len(batch)) + bytes(batch)
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_are_advertised_but_close_the_connection(
        broker: BrokerProcess, client: RawClient, version: int) -> None:
    _, versions = client.request(API_VERSIONS, 3, 60, {})
    produce = next(k for k in versions.api_keys if k.api_key == PRODUCE)
    assert produce.min_version == 0, "advertised from v0, as Kafka 4.x does (KAFKA-18659)"

    topic = f"quirks-old-produce-v{version}"
    create_topic(client, topic)
    client.send(_produce_v0_frame(version, 61, topic))
    assert client.sock.recv(1) == b"", "the broker closes the connection, no response"
    other = RawClient(broker.port)
    try:
        assert latest_offset(other, topic) == 0, "nothing was appended"
    finally:
        other.close()


# -- ordering ----------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_request_order(client: RawClient) -> None:
    create_topic(client, "quirks-pipeline")
    plan: list[tuple[int, int, Any]] = []
    for i in range(12):
        kind = i % 4
        if kind == 0:
            plan.append((METADATA, 12, {"topics": [{"name": "quirks-pipeline"}]}))
        elif kind == 1:
            plan.append((PRODUCE, 9, produce_body("quirks-pipeline", 1, b"%d" % i)))
        elif kind == 2:
            plan.append((API_VERSIONS, 3, {}))
        else:
            body = {
                "replica_id": -1,
                "topics": [
                    {
                        "name": "quirks-pipeline",
                        "partitions": [{"partition_index": 0, "timestamp": -1}],
                    }
                ],
            }
            plan.append((LIST_OFFSETS, 7, body))
    # all requests leave in one write, before any response is read
    client.send(
        b"".join(
            bytes(codec.encode_request(k, v, 1000 + i, "quirks", b))
            for i, (k, v, b) in enumerate(plan)
        )
    )
    produced = 0
    for i, (key, version, _) in enumerate(plan):
        corr, resp = codec.decode_response(key, version, client.read_frame())
        assert corr == 1000 + i
        if key == PRODUCE:
            assert resp.responses[0].partition_responses[0].base_offset == produced
            produced += 1
        if key == LIST_OFFSETS:
            # answered after the produces before it, and before the ones after it
            assert resp.topics[0].partitions[0].offset == produced


def _fetch_body(topic: str, offset: int, max_wait_ms: int) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1 << 30,  # never satisfied: the fetch waits its full max_wait_ms
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
    }


def test_reply_is_not_held_behind_a_later_long_poll_in_the_same_read(
    client: RawClient,
) -> None:
    """Kafka answers request n before it starts request n+1: a produce and a long-poll
    fetch sent in one write get the produce reply at once, not after max_wait_ms."""
    import time

    create_topic(client, "quirks-no-hol")
    max_wait_ms = 6000
    client.send(
        bytes(codec.encode_request(PRODUCE, 9, 71, "quirks", produce_body("quirks-no-hol", 1)))
        + bytes(codec.encode_request(1, 12, 72, "quirks", _fetch_body("quirks-no-hol", 1, max_wait_ms)))
    )
    t0 = time.monotonic()
    corr, resp = codec.decode_response(PRODUCE, 9, client.read_frame())
    produce_after = time.monotonic() - t0
    assert corr == 71
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    corr, fetch = codec.decode_response(1, 12, client.read_frame())
    fetch_after = time.monotonic() - t0
    assert corr == 72 and fetch.error_code == ErrorCode.NONE
    # the fetch really parked for its max_wait_ms, and the produce reply did not wait for it
    assert fetch_after >= max_wait_ms / 1000 * 0.9
    assert produce_after < max_wait_ms / 1000 / 2, f"produce reply took {produce_after:.2f}s"


def test_replies_before_a_malformed_frame_are_still_sent(broker: BrokerProcess) -> None:
    """Good requests ahead of garbage in the same read are answered; then only this
    connection closes."""
    c = RawClient(broker.port)
    try:
        good = bytes(codec.encode_request(API_VERSIONS, 3, 81, "quirks", {}))
        # a frame whose header claims ApiVersions v3 but whose body is truncated garbage
        bad_payload = struct.pack(">hhi", API_VERSIONS, 3, 82) + b"\xff"
        c.send(good + struct.pack(">i", len(bad_payload)) + bad_payload)
        corr, resp = codec.decode_response(API_VERSIONS, 3, c.read_frame())
        assert corr == 81 and resp.error_code == ErrorCode.NONE
        with pytest.raises((ConnectionError, OSError)):
            c.read_frame()
    finally:
        c.close()


# -- fields a version cannot carry (no broker needed) ---------------------------------


def test_non_ignorable_field_a_version_cannot_carry_is_an_error() -> None:
    """kafka-protocol README: a non-ignorable field that a version cannot carry must
    raise an error when it has a non-default value (Kafka: UnsupportedVersionException);
    its default, or an ignorable field, is silently left out as Kafka does."""
    from jocko_py.protocol.primitives import FieldNotInVersion

    # AllowAutoTopicCreation exists from Metadata v4 and is not ignorable
    with pytest.raises(FieldNotInVersion, match="allow_auto_topic_creation"):
        codec.encode_request(METADATA, 3, 1, "q", {"topics": None,
                                                  "allow_auto_topic_creation": False})
    codec.encode_request(METADATA, 3, 1, "q", {"topics": None, "allow_auto_topic_creation": True})
    codec.encode_request(METADATA, 4, 1, "q", {"topics": None, "allow_auto_topic_creation": False})
    # ThrottleTimeMs (v3+) is ignorable: dropped from a v0 response without complaint
    body = {"throttle_time_ms": 5, "brokers": [], "topics": []}
    out = b"".join(bytes(p) for p in codec.encode_response_parts(METADATA, 0, 7, body))
    corr, resp = codec.decode_response(METADATA, 0, out[4:])  # after the size prefix
    assert corr == 7 and resp.brokers == []
