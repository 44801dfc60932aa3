"""The produce path's record-structure walk: the C extension (`_recwalk.c`) and the
pure-Python fallback give the same answer on valid and corrupt input."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jocko_py.protocol import records as rb
from jocko_py.protocol.records import NewRecord, build_batch, parse_header
from tests.support.prereq import not_applicable

native = rb.walk_records_native


def test_native_walk_is_built() -> None:
    """`pip install -e .` builds the extension (setup.py); the broker uses it."""
    if os.environ.get("JOCKO_ALLOW_PURE_PYTHON"):
        not_applicable("JOCKO_ALLOW_PURE_PYTHON set: the build may lack a C compiler")
    assert native is not None, "jocko_py.protocol._recwalk was not built (no C compiler?)"
    assert rb._walk is native


def body(records: list[NewRecord]) -> bytes:
    b = build_batch(records)
    return b[rb.HEADER_SIZE :]


def both(data: bytes, require_keys: bool) -> tuple[int, int, int, int]:
    py = rb.walk_records_py(data, require_keys)
    if native is not None:
        assert native(data, require_keys) == py, data[:64].hex()
        assert native(memoryview(bytearray(data)), require_keys) == py
    return py


@pytest.mark.parametrize("value_size", [0, 10, 100, 1000, 10_000, 100_000])
def test_valid_batches_walk_to_their_record_count(value_size: int) -> None:
    recs = [NewRecord(b"k%d" % i, os.urandom(value_size), (("h", b"v"),), 1000 + i)
            for i in range(7)]
    assert both(body(recs), False) == (0, 7, 0, 0)
    assert both(body(recs), True) == (0, 7, 0, 0)


def test_record_without_key_is_refused_only_when_keys_are_required() -> None:
    data = body([NewRecord(b"k", b"v", (), 1), NewRecord(None, b"v", (), 2)])
    assert both(data, False) == (0, 2, 0, 0)
    assert both(data, True)[:2] == (4, 1)


def test_corrupt_shapes() -> None:
    assert both(b"\x00", False)[0] == 3  # length 0
    assert both(b"\x01", False)[0] == 3  # length -1
    assert both(b"\x14abc", False) == (3, 0, 10, 3)  # claims 10, 3 left
    assert both(b"\xff\xff\xff\xff\xff\x01", False)[0] == 2  # 6-byte varint
    assert both(b"\x80", False)[0] == 1  # runs past the end
    assert both(b"\x02\x00", True)[0] == 1  # record too short for its key length


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300), st.booleans())
def test_native_and_python_agree_on_random_bytes(data: bytes, require_keys: bool) -> None:
    both(data, require_keys)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(0, 300), st.data())
def test_native_and_python_agree_on_mutated_batches(n: int, size: int, d: st.DataObject) -> None:
    data = bytearray(body([NewRecord(b"key", bytes(size), (), 5) for _ in range(n)]))
    for _ in range(d.draw(st.integers(0, 3))):
        if data:
            i = d.draw(st.integers(0, len(data) - 1))
            data[i] = d.draw(st.integers(0, 255))
    if d.draw(st.booleans()) and data:
        del data[d.draw(st.integers(0, len(data) - 1)) :]
    both(bytes(data), d.draw(st.booleans()))


def test_validate_record_structure_counts_with_the_header() -> None:
    batch = build_batch([NewRecord(b"k", b"v", (), 1)] * 3)
    h = parse_header(batch)
    rb.validate_record_structure(batch, h)
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_record_structure(batch, h._replace(records_count=4))
