"""Registry of the generated schemas: compiled lazily, cached per (api, version).

`request_schema(api_key, version)` / `response_schema(...)` return a compiled
construct for that version; `data_schema(name, version)` covers headers and the
record layouts of `__consumer_offsets` and the metadata log. Parsed messages are
`wire.Msg` dicts (attribute and item access, snake_case names); every
field of every version is present, absent ones holding their default.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import Any

from jocko_py.protocol.errors import UnsupportedVersionError
from jocko_py.protocol.messages._generated import APIS, DATA
from jocko_py.protocol.wire import Reader


@cache
def _module(mod: str) -> ModuleType:
    return importlib.import_module(f"jocko_py.protocol.messages._generated.{mod}")


def api_name(api_key: int) -> str:
    entry = APIS.get(api_key)
    return entry[0] if entry else f"Unknown({api_key})"


def api_keys() -> list[int]:
    return sorted(APIS)


def spec_versions(api_key: int) -> tuple[int, int]:
    lo, hi = _module(APIS[api_key][1]).VALID_VERSIONS
    return int(lo), int(hi)


def request_flexible(api_key: int, version: int) -> bool:
    f = _module(APIS[api_key][1]).REQUEST_FLEXIBLE_FROM
    return f is not None and version >= f


def response_flexible(api_key: int, version: int) -> bool:
    f = _module(APIS[api_key][1]).RESPONSE_FLEXIBLE_FROM
    return f is not None and version >= f


class Schema:
    """A compiled schema: `parse(reader)` and `build(obj, out)`."""

    __slots__ = ("struct", "compiled", "parsefunc", "buildfunc")

    def __init__(self, struct: Any):
        self.struct = struct
        self.compiled = struct.compile()
        self.parsefunc = self.compiled.parsefunc
        self.buildfunc = self.compiled.buildfunc

    def parse(self, reader: Reader) -> Any:
        return self.parsefunc(reader, None)

    def parse_bytes(self, data: bytes | memoryview) -> Any:
        return self.parsefunc(Reader(data), None)

    def build(self, obj: Any, out: bytearray | None = None) -> bytearray:
        if out is None:
            out = bytearray()
        self.buildfunc(obj, out, None)
        return out


def _schema(mod: str, table: str, version: int, what: str) -> Schema:
    factories = getattr(_module(mod), table)
    factory = factories.get(version)
    if factory is None:
        raise UnsupportedVersionError(f"{what} has no version {version}")
    return Schema(factory())


@cache
def request_schema(api_key: int, version: int) -> Schema:
    if api_key not in APIS:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    return _schema(APIS[api_key][1], "REQUEST", version, f"{api_name(api_key)} request")


@cache
def response_schema(api_key: int, version: int) -> Schema:
    if api_key not in APIS:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    return _schema(APIS[api_key][1], "RESPONSE", version, f"{api_name(api_key)} response")


@cache
def response_element_schema(api_key: int, version: int, field: str) -> Schema:
    """The compiled schema of one element of the response's top-level array `field`
    (to encode array elements on their own, e.g. to cache them; see `wire.Encoded`)."""
    struct = response_schema(api_key, version).struct
    for f in struct.fields:
        if f.name == field and f.subcon is not None and hasattr(f.subcon, "elem"):
            return Schema(f.subcon.elem)
    raise UnsupportedVersionError(f"{api_name(api_key)} response v{version} has no array {field}")


@cache
def data_schema(name: str, version: int) -> Schema:
    return _schema(DATA[name], "SCHEMA", version, name)


def data_versions(name: str) -> tuple[int, int]:
    table = _module(DATA[name]).SCHEMA
    return min(table), max(table)
