"""The broker is as lenient as Kafka about what a client sends (issue 12, item 1).

Apache Kafka parses a request body and never looks at what follows it, skips tagged
fields it does not know, and does not check their order; each case here has the real
client that sends it (where one does) and a hand-built frame.
"""

from __future__ import annotations

import struct

import confluent_kafka
from confluent_kafka.admin import AdminClient

from jocko_py.broker import api
from jocko_py.broker.handlers import load_all
from jocko_py.protocol import codec
from tests.badinput import wire as w
from tests.support.e2e import TargetBroker, create_topics, unique_suffix

SUFFIX = unique_suffix()


def _metadata_v12_body(topics: list[str] | None, tags: bytes = b"\x00") -> bytes:
    """Metadata v12: topics (compact nullable array of {topic_id, name, tags}),
    allow_auto_topic_creation, include_topic_authorized_operations, tagged fields."""
    if topics is None:
        arr = w.uvarint(0)
    else:
        arr = w.uvarint(len(topics) + 1) + b"".join(
            b"\x00" * 16 + w.compact_string(t) + b"\x00" for t in topics
        )
    return arr + w.i8(0) + w.i8(0) + tags


def _ask(conn: w.Conn, payload: bytes, cid: int) -> bytes:
    return conn.request(w.frame(payload), cid, header_v1=True)


def test_confluent_kafka_list_topics(target: TargetBroker) -> None:
    """librdkafka 2.16's AdminClient.list_topics() sends "Metadata v12" with 3 bytes after
    the body; Kafka answers it, so must we (before: the connection was closed)."""
    assert confluent_kafka.libversion()[1] >= 0x021000FF, confluent_kafka.libversion()
    topic = f"lenient-{SUFFIX}"
    create_topics(target.bootstrap, [topic], partitions=2)
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    md = admin.list_topics(timeout=15)
    assert topic in md.topics
    assert sorted(md.topics[topic].partitions) == [0, 1]
    assert len(md.brokers) == 1
    # one named topic, as admin UIs ask
    md = admin.list_topics(topic=topic, timeout=15)
    assert list(md.topics) == [topic]


def test_trailing_bytes_after_a_flexible_body_are_ignored(target: TargetBroker) -> None:
    c = w.Conn(*target.host_port)
    try:
        for extra in (b"\x00", b"\x00\x00\x00", b"garbage" * 10):
            cid = c.cid()
            body = _ask(c, w.header_v2(w.API_METADATA, 12, cid) + _metadata_v12_body(None) + extra,
                        cid)
            assert struct.unpack(">i", body[:4])[0] == 0  # throttle_time_ms
        cid = c.cid()  # the connection is still good
        assert w.parse_api_versions_v0(c.request(w.api_versions_v0(cid), cid)).error_code == 0
    finally:
        c.close()


def test_trailing_bytes_after_a_classic_body_are_ignored(target: TargetBroker) -> None:
    topic = f"lenient-v4-{SUFFIX}"
    c = w.Conn(*target.host_port)
    try:
        cid = c.cid()
        frame = w.metadata_v4(cid, [topic], auto_create=True)
        frame = w.frame(frame[4:] + b"\x01\x02\x03\x04\x05")
        errors = w.parse_metadata_v4_topic_errors(c.request(frame, cid))
        assert errors == {topic: 0} or errors == {topic: 5}  # created (or leader not yet)
    finally:
        c.close()


def test_unknown_tagged_fields_are_skipped_in_any_order(target: TargetBroker) -> None:
    """Unknown tags in the request header, the body and a nested struct are skipped; Kafka's
    generated readers do not check that tags come in increasing order either."""
    topic = f"lenient-tags-{SUFFIX}"
    create_topics(target.bootstrap, [topic], partitions=1)
    tags = w.uvarint(2) + w.uvarint(77) + w.uvarint(2) + b"xy" + w.uvarint(5) + w.uvarint(0)
    c = w.Conn(*target.host_port)
    try:
        cid = c.cid()
        header = w.header_v1(w.API_METADATA, 12, cid) + tags
        topic_entry = b"\x00" * 16 + w.compact_string(topic) + tags
        body = w.uvarint(2) + topic_entry + w.i8(0) + w.i8(0) + tags
        resp = _ask(c, header + body, cid)
        assert topic.encode() in resp
        # the topic's error code (after throttle, brokers, cluster id, controller id) is 0:
        # checked through a second, plain request answering the same
        cid = c.cid()
        plain = _ask(c, w.header_v2(w.API_METADATA, 12, cid) + _metadata_v12_body([topic]), cid)
        assert plain == resp
    finally:
        c.close()


def test_decoder_counts_trailing_bytes_instead_of_failing() -> None:
    load_all()
    frame = w.header_v2(w.API_METADATA, 12, 7) + _metadata_v12_body(None) + b"\x01\x02\x03"
    req = codec.decode_request(frame, api.served_versions())
    assert req.trailing == 3
    assert req.body.topics is None
    req = codec.decode_request(frame[:-3], api.served_versions())
    assert req.trailing == 0
