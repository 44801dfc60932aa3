"""`construct` classes for Kafka's wire types, compilable.

construct has no bounded varints, compact/nullable strings and arrays, tagged
fields or UUIDs, so this module defines them. Each class knows how to emit code
for `Construct.compile()`, and that code calls the functions in `wire.py`, so a
compiled schema and an uncompiled one decode and encode identically.

`KStruct` is a Kafka struct for one message version: its fields in wire order,
fields absent from that version (parsed as their default; when building,
left out, except that a non-ignorable one holding a non-default value raises
`FieldNotInVersion`, as Kafka's serializers throw UnsupportedVersionException), and for flexible versions the tagged-field section (known tags are
parsed into named fields, unknown tags skipped). Parsing yields a
`wire.Msg` (a dict with attribute access); building accepts any mapping and takes a field's default
when the key is missing.

Compiled code reads from a `wire.Reader` and writes to a `bytearray`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from construct import Construct

from jocko_py.protocol import wire

_IMPORT = "from jocko_py.protocol.wire import *\nfrom jocko_py.protocol.primitives import check_absent\n"


def _ensure_import(code: Any) -> None:
    if not getattr(code, "_jocko_wire", False):
        code.append(_IMPORT)
        code._jocko_wire = True


class Prim(Construct):  # type: ignore[misc]
    """A primitive read by `wire.r_<name>` and written by `wire.w_<name>`."""

    def __init__(self, name: str):
        super().__init__()
        self.kname = name
        self.flagbuildnone = True

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        return getattr(wire, "r_" + self.kname)(stream)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        getattr(wire, "w_" + self.kname)(obj, stream)
        return obj

    def _emitparse(self, code: Any) -> str:
        _ensure_import(code)
        return f"r_{self.kname}(io)"

    def _emitbuild(self, code: Any) -> str:
        _ensure_import(code)
        return f"w_{self.kname}(obj, io)"

    def __repr__(self) -> str:
        return f"Prim({self.kname!r})"


Int8 = Prim("i8")
Int16 = Prim("i16")
UInt16 = Prim("u16")
Int32 = Prim("i32")
UInt32 = Prim("u32")
Int64 = Prim("i64")
Float64 = Prim("f64")
Bool = Prim("bool")
UVarInt = Prim("uvarint")
VarInt = Prim("varint")
VarLong = Prim("varlong")
Uuid = Prim("uuid")
String = Prim("string")
NullableString = Prim("nstring")
CompactString = Prim("cstring")
CompactNullableString = Prim("cnstring")
Bytes = Prim("bytes")
NullableBytes = Prim("nbytes")
CompactBytes = Prim("cbytes")
CompactNullableBytes = Prim("cnbytes")
Records = Prim("records")
CompactRecords = Prim("crecords")


class KArray(Construct):  # type: ignore[misc]
    """Array of `elem`; kind is one of array, narray, carray, cnarray."""

    def __init__(self, kind: str, elem: Construct):
        super().__init__()
        self.kind = kind
        self.elem = elem
        self.flagbuildnone = True

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        return getattr(wire, "r_" + self.kind)(
            stream, lambda r: self.elem._parse(r, context, path)
        )

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        getattr(wire, "w_" + self.kind)(
            obj, stream, lambda v, o: self.elem._build(v, o, context, path)
        )
        return obj

    def _emitparse(self, code: Any) -> str:
        _ensure_import(code)
        return f"r_{self.kind}(io, lambda io: {self.elem._compileparse(code)})"

    def _emitbuild(self, code: Any) -> str:
        _ensure_import(code)
        return f"w_{self.kind}(obj, io, lambda obj, io: {self.elem._compilebuild(code)})"


class NullableStruct(Construct):  # type: ignore[misc]
    """A struct preceded by an int8 marker (-1 null, 1 present)."""

    def __init__(self, struct: Construct):
        super().__init__()
        self.struct = struct
        self.flagbuildnone = True

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        return wire.r_nstruct(stream, lambda r: self.struct._parse(r, context, path))

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        wire.w_nstruct(obj, stream, lambda v, o: self.struct._build(v, o, context, path))
        return obj

    def _emitparse(self, code: Any) -> str:
        _ensure_import(code)
        return f"r_nstruct(io, lambda io: {self.struct._compileparse(code)})"

    def _emitbuild(self, code: Any) -> str:
        _ensure_import(code)
        return f"w_nstruct(obj, io, lambda obj, io: {self.struct._compilebuild(code)})"


@dataclass(frozen=True)
class KField:
    """One field of a struct at one version."""

    name: str
    subcon: Construct | None  # None: absent in this version
    default: Any = None
    tag: int | None = None  # set for tagged fields of flexible versions
    # absent fields only: False when the spec does not mark the field ignorable,
    # so building a message that sets it to a non-default value is an error
    ignorable: bool = True


class FieldNotInVersion(ValueError):
    """A non-ignorable field has a non-default value in a version that cannot
    carry it (Kafka: UnsupportedVersionException at serialization). A bug of
    the code that built the message, never of the peer."""


def check_absent(obj: Any, name: str, default: Any, sname: str) -> None:
    if name in obj and obj[name] != default:
        raise FieldNotInVersion(
            f"{sname}.{name}={obj[name]!r} cannot be sent in this version "
            f"(non-ignorable field; default {default!r})"
        )


def _fresh(default: Any) -> Any:
    # mutable defaults must not be shared between parsed messages; a struct's
    # default holds its fields' defaults (possibly nested structs)
    if isinstance(default, list):
        return list(default)
    if isinstance(default, dict):
        return wire.Msg({k: _fresh(v) for k, v in default.items()})
    return default


def _default_src(default: Any) -> str:
    if isinstance(default, list):
        return "[]"
    if isinstance(default, dict):
        items = ", ".join(f"{k!r}: {_default_src(v)}" for k, v in default.items())
        return f"Msg({{{items}}})"
    if default is wire.ZERO_UUID:
        return "ZERO_UUID"
    return repr(default)


class KStruct(Construct):  # type: ignore[misc]
    """A Kafka struct at one version (see the module docstring)."""

    def __init__(self, sname: str, fields: list[KField], flexible: bool):
        super().__init__()
        self.sname = sname
        self.fields = fields
        self.flexible = flexible
        self.flagbuildnone = True
        self.wired = [f for f in fields if f.subcon is not None and f.tag is None]
        self.absent = [f for f in fields if f.subcon is None]
        self.strict_absent = [f for f in self.absent if not f.ignorable]
        self.tagged = sorted(
            (f for f in fields if f.subcon is not None and f.tag is not None),
            key=lambda f: f.tag or 0,
        )

    def __repr__(self) -> str:
        return f"KStruct({self.sname!r}, {len(self.fields)} fields)"

    # uncompiled paths (used by tests to cross-check the compiled code)
    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        result = wire.Msg()
        for f in self.wired:
            assert f.subcon is not None
            result[f.name] = f.subcon._parse(stream, context, path)
        for f in self.absent:
            result[f.name] = _fresh(f.default)
        if self.flexible:
            for f in self.tagged:
                result[f.name] = _fresh(f.default)
            table: wire.TagTable = {}
            for f in self.tagged:
                sc = f.subcon
                assert sc is not None and f.tag is not None
                table[f.tag] = (f.name, (lambda s: lambda r: s._parse(r, context, path))(sc))
            wire.r_tagged(stream, table, result)
        return result

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if obj is None:
            obj = {}
        for f in self.wired:
            assert f.subcon is not None
            f.subcon._build(obj.get(f.name, f.default), stream, context, path)
        for f in self.strict_absent:
            check_absent(obj, f.name, f.default, self.sname)
        if self.flexible:
            entries: list[tuple[int, str, Any, Any]] = []
            for f in self.tagged:
                sc = f.subcon
                assert sc is not None and f.tag is not None
                entries.append(
                    (f.tag, f.name, f.default,
                     (lambda s: lambda v, o: s._build(v, o, context, path))(sc))
                )
            wire.w_tagged(obj, stream, entries)
        return obj

    def _emitparse(self, code: Any) -> str:
        _ensure_import(code)
        n = code.allocateId()
        lines = [f"def parse_ks_{n}(io, this):", "    result = Msg()"]
        for f in self.wired:
            assert f.subcon is not None
            lines.append(f"    result[{f.name!r}] = {f.subcon._compileparse(code)}")
        for f in self.absent:
            lines.append(f"    result[{f.name!r}] = {_default_src(f.default)}")
        if self.flexible:
            for f in self.tagged:
                lines.append(f"    result[{f.name!r}] = {_default_src(f.default)}")
            if self.tagged:
                entries = ", ".join(
                    f"{f.tag}: ({f.name!r}, lambda io: {f.subcon._compileparse(code)})"
                    for f in self.tagged
                    if f.subcon is not None
                )
                code.append(f"TAGS_P_{n} = {{{entries}}}\n")
                lines.append(f"    r_tagged(io, TAGS_P_{n}, result)")
            else:
                lines.append("    r_tagged(io, NO_TAGS, result)")
        lines.append("    return result")
        code.append("\n".join(lines) + "\n")
        if self.flexible and not getattr(code, "_jocko_notags", False):
            code.append("NO_TAGS = {}\n")
            code._jocko_notags = True
        return f"parse_ks_{n}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        _ensure_import(code)
        n = code.allocateId()
        lines = [f"def build_ks_{n}(obj, io, this):", "    objdict = {} if obj is None else obj"]
        for f in self.wired:
            assert f.subcon is not None
            lines.append(f"    obj = objdict.get({f.name!r}, {_default_src(f.default)})")
            lines.append(f"    {f.subcon._compilebuild(code)}")
        for f in self.strict_absent:
            lines.append(
                f"    if {f.name!r} in objdict: check_absent(objdict, {f.name!r}, "
                f"{_default_src(f.default)}, {self.sname!r})"
            )
        if self.flexible:
            if self.tagged:
                entries = ", ".join(
                    f"({f.tag}, {f.name!r}, {_default_src(f.default)}, "
                    f"lambda obj, io: {f.subcon._compilebuild(code)})"
                    for f in self.tagged
                    if f.subcon is not None
                )
                code.append(f"TAGS_B_{n} = [{entries}]\n")
                lines.append(f"    w_tagged(objdict, io, TAGS_B_{n})")
            else:
                lines.append("    io.append(0)")
        lines.append("    return objdict")
        code.append("\n".join(lines) + "\n")
        return f"build_ks_{n}(obj, io, this)"
