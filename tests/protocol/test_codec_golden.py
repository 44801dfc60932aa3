"""Golden request frames captured from real clients decode and re-encode byte for byte.

`golden/frames.json` holds requests that kafka-python, aiokafka and
confluent-kafka (librdkafka) sent to a jocko-py broker through a recording
proxy (regenerate with `python -m tests.protocol.golden.capture`). Each frame
must decode with no bytes left over, and encoding the decoded header and body
must give the same bytes back: nothing a real client sends is lost or changed.
Frames of APIs the broker does not serve still go through the spec schemas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jocko_py.protocol import codec, messages
from jocko_py.protocol.wire import Reader, r_nstring, r_tagged
from tests.protocol._codec_strategies import served

FRAMES = json.loads((Path(__file__).parent / "golden" / "frames.json").read_text())
SERVED: dict[int, tuple[int, int]] = {}
for _key, _v in served():
    _lo, _hi = SERVED.get(_key, (_v, _v))
    SERVED[_key] = (min(_lo, _v), max(_hi, _v))


def _id(rec: dict[str, Any]) -> str:
    return f"{rec['client']}-{messages.api_name(rec['api_key'])}-v{rec['api_version']}"


CASES = [pytest.param(rec, id=f"{_id(rec)}-{i}") for i, rec in enumerate(FRAMES)]


def decode_any(frame: bytes) -> tuple[codec.RequestHeader, Any]:
    """decode_request for served versions; the same steps by hand for the others."""
    header = codec.peek_header(frame)
    rng = SERVED.get(header.api_key)
    if rng is not None and rng[0] <= header.api_version <= rng[1]:
        req = codec.decode_request(frame, SERVED)
        return req.header, req.body
    r = Reader(frame, 8)
    header.client_id = r_nstring(r)
    if messages.request_flexible(header.api_key, header.api_version):
        r_tagged(r, {}, {})
    body = messages.request_schema(header.api_key, header.api_version).parse(r)
    assert r.pos == r.end, f"{r.end - r.pos} trailing bytes"
    return header, body


def test_golden_frames_cover_each_client() -> None:
    clients = {rec["client"] for rec in FRAMES}
    assert {"kafka-python", "aiokafka", "librdkafka"} <= clients
    kinds = {(rec["client"], rec["api_key"]) for rec in FRAMES}
    for client in clients:
        for key in (0, 1, 3, 18):  # produce, fetch, metadata, api versions
            assert (client, key) in kinds, (client, key)


@pytest.mark.parametrize("rec", CASES)
def test_golden_frame_decodes_and_reencodes_identically(rec: dict[str, Any]) -> None:
    frame = bytes.fromhex(rec["frame"])
    header, body = decode_any(frame)
    assert (header.api_key, header.api_version) == (rec["api_key"], rec["api_version"])
    again = codec.encode_request(
        header.api_key, header.api_version, header.correlation_id, header.client_id, body
    )
    assert bytes(again[4:]) == frame
