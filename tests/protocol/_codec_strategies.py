"""Hypothesis strategies and helpers for the codec tests, derived from the schemas.

`values(struct)` walks a `KStruct` tree (`KArray`, `NullableStruct`, `Prim`) and
yields values whose shape is exactly what parsing returns: every field of the
version is present, fields absent from the version hold their default. A value
from it therefore round-trips to an equal `Container`.

`with_unknown_tags(struct)` returns a copy of the tree in which every flexible
struct carries extra tagged fields under tags the real schema does not know, so
bytes built with it exercise "unknown tags are skipped".
"""

from __future__ import annotations

import uuid
from typing import Any

from construct import Construct
from hypothesis import strategies as st

from jocko_py.broker import api
from jocko_py.broker.handlers import load_all
from jocko_py.protocol.primitives import KArray, KField, KStruct, NullableStruct, Prim

# small sizes keep examples cheap; the shapes, not the volumes, are under test
MAX_LIST = 3
MAX_TEXT = 8
MAX_BYTES = 12

_INTS: dict[str, tuple[int, int]] = {
    "i8": (-(2**7), 2**7 - 1),
    "i16": (-(2**15), 2**15 - 1),
    "u16": (0, 2**16 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "u32": (0, 2**32 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "uvarint": (0, 2**32 - 1),
    "varint": (-(2**31), 2**31 - 1),
    "varlong": (-(2**63), 2**63 - 1),
}

_text = st.text(max_size=MAX_TEXT)
_bin = st.binary(max_size=MAX_BYTES)
_uuids = st.one_of(st.just(uuid.UUID(int=0)), st.uuids(allow_nil=True))


def _prim(name: str) -> st.SearchStrategy[Any]:
    if name in _INTS:
        lo, hi = _INTS[name]
        # favour the edges: they are where encodings go wrong
        return st.one_of(st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]), st.integers(lo, hi))
    if name == "f64":
        return st.floats(allow_nan=False)
    if name == "bool":
        return st.booleans()
    if name == "uuid":
        return _uuids
    if name in ("string", "cstring"):
        return _text
    if name in ("nstring", "cnstring"):
        return st.none() | _text
    if name in ("bytes", "cbytes"):
        return _bin
    if name in ("nbytes", "cnbytes", "records", "crecords"):
        return st.none() | _bin
    raise AssertionError(f"no strategy for primitive {name!r}")


_CACHE: dict[int, st.SearchStrategy[Any]] = {}


def values(con: Construct) -> st.SearchStrategy[Any]:
    """Values of the type `con` describes, shaped as its parser returns them."""
    key = id(con)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    s: st.SearchStrategy[Any]
    if isinstance(con, Prim):
        s = _prim(con.kname)
    elif isinstance(con, KArray):
        items = st.lists(values(con.elem), max_size=MAX_LIST)
        s = st.none() | items if con.kind in ("narray", "cnarray") else items
    elif isinstance(con, NullableStruct):
        s = st.none() | values(con.struct)
    elif isinstance(con, KStruct):
        fields: dict[str, st.SearchStrategy[Any]] = {}
        for f in con.fields:
            if f.subcon is None or (f.tag is not None and not con.flexible):
                fields[f.name] = st.just(f.default)
            elif f.tag is not None:
                # a tagged field is often left at its default (then it is not written)
                fields[f.name] = st.just(f.default) | values(f.subcon)
            else:
                fields[f.name] = values(f.subcon)
        s = st.fixed_dictionaries(fields)
    else:
        raise AssertionError(f"no strategy for {con!r}")
    _CACHE[key] = s
    # keep the construct alive so its id is never reused for another one
    _KEEP.append(con)
    return s


_KEEP: list[Construct] = []

UNKNOWN_PREFIX = "zz_unknown_"


def _unused_tags(struct: KStruct) -> list[int]:
    used = {f.tag for f in struct.fields if f.tag is not None}
    low = next(t for t in range(len(used) + 1) if t not in used)  # between known tags if a gap
    return [low, 10_000 + len(used)]


def with_unknown_tags(con: Construct) -> Construct:
    """A copy of the tree whose flexible structs also carry tags the real schema lacks."""
    if isinstance(con, Prim):
        return con
    if isinstance(con, KArray):
        return KArray(con.kind, with_unknown_tags(con.elem))
    if isinstance(con, NullableStruct):
        return NullableStruct(with_unknown_tags(con.struct))
    assert isinstance(con, KStruct), con
    fields = [
        KField(f.name, None if f.subcon is None else with_unknown_tags(f.subcon), f.default, f.tag)
        for f in con.fields
    ]
    if con.flexible:
        low, high = _unused_tags(con)
        fields.append(KField(f"{UNKNOWN_PREFIX}{low}", Prim("cbytes"), b"", low))
        fields.append(KField(f"{UNKNOWN_PREFIX}{high}", Prim("cnstring"), None, high))
    return KStruct(con.sname, fields, con.flexible)


def strip_unknown(v: Any) -> Any:
    """`v` without the fields `with_unknown_tags` added."""
    if isinstance(v, dict):
        return {k: strip_unknown(x) for k, x in v.items() if not k.startswith(UNKNOWN_PREFIX)}
    if isinstance(v, list):
        return [strip_unknown(x) for x in v]
    return v


def has_unknown(v: Any) -> bool:
    """True when some added unknown tag holds a non-default value (so it is on the wire)."""
    if isinstance(v, dict):
        for k, x in v.items():
            if k.startswith(UNKNOWN_PREFIX) and x not in (b"", None):
                return True
            if has_unknown(x):
                return True
    if isinstance(v, list):
        return any(has_unknown(x) for x in v)
    return False


def served() -> list[tuple[int, int]]:
    """Every (api key, version) the broker decodes, advertised-but-rejected ones included."""
    load_all()
    return [
        (key, v)
        for key, (lo, hi) in sorted(api.served_versions().items())
        for v in range(lo, hi + 1)
    ]
