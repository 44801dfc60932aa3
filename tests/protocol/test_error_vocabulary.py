"""One error vocabulary: `ErrorCode`, `ErrorCode.of` and `KafkaError(code, message)`.

The first tests pin what `ErrorCode.of` and `KafkaError` do. The last one is a lint
over the source of `jocko_py/`: no error code spelled as a bare int (a module
constant copying a code, an int literal put in or compared with an ``error_code``,
an int passed to an ``*Error`` constructor) and no int-to-`ErrorCode` converter
besides `ErrorCode.of` (no ``ErrorCode(x)`` call, no ``_value2member_map_``).
Only `jocko_py/protocol/errors.py` (the table) and the generated message classes
are exempt. Each rule is shown to fire on a planted offence, so the lint cannot
pass by matching nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jocko_py import client
from jocko_py.broker.broker_configs import BrokerConfigError
from jocko_py.broker.security.sasl import SaslFailed
from jocko_py.cluster.quorum import NotControllerError
from jocko_py.commitlog.errors import KafkaStorageError, LogError, OffsetOutOfRangeError
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode, KafkaError

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "jocko_py"
EXEMPT = {"jocko_py/protocol/errors.py"}
EXEMPT_DIRS = ("jocko_py/protocol/messages/_generated",)
# names that are not error codes although they read like one: "path: NAME"
NOT_ERROR_CODES = {"jocko_py/protocol/compression.py: NONE"}  # the codec id
CODE_NAMES = set(ErrorCode.__members__)


# --- ErrorCode.of and KafkaError ------------------------------------------------


def test_of_maps_known_codes_to_their_member() -> None:
    for member in ErrorCode:
        assert ErrorCode.of(int(member)) is member
        assert ErrorCode.of(member) is member
    assert ErrorCode.of(41) is ErrorCode.NOT_CONTROLLER
    assert ErrorCode.of(0) is ErrorCode.NONE


@pytest.mark.parametrize("raw", [-2, 999, 32767, -32768])
def test_of_maps_unknown_codes_to_unknown_server_error(raw: int) -> None:
    # as Kafka's Errors.forCode does for a code it does not know
    assert ErrorCode.of(raw) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_kafka_error_carries_code_and_message() -> None:
    e = KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")
    assert e.code is ErrorCode.TOPIC_ALREADY_EXISTS
    assert e.message == "Topic 't' already exists."
    assert str(e) == "TOPIC_ALREADY_EXISTS: Topic 't' already exists."
    bare = KafkaError(3)
    assert bare.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and bare.message is None
    assert str(bare) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_kafka_error_keeps_an_unknown_raw_code_in_its_text() -> None:
    e = KafkaError(999, "from a newer broker")
    assert e.code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert str(e) == "UNKNOWN_SERVER_ERROR (error code 999): from a newer broker"


def test_the_client_raises_the_same_kafka_error() -> None:
    assert client.KafkaError is KafkaError


@pytest.mark.parametrize(("make", "code"), [
    (lambda: rb.CorruptRecordError("bad crc"), ErrorCode.CORRUPT_MESSAGE),
    (lambda: rb.InvalidRecordError("no key"), ErrorCode.INVALID_RECORD),
    (lambda: rb.UnsupportedMagicError(1), ErrorCode.INVALID_RECORD),
    (lambda: rb.RecordBatchTooLargeError("big"), ErrorCode.MESSAGE_TOO_LARGE),
    (lambda: LogError("?"), ErrorCode.UNKNOWN_SERVER_ERROR),
    (lambda: KafkaStorageError("EIO"), ErrorCode.KAFKA_STORAGE_ERROR),
    (lambda: OffsetOutOfRangeError("x", log_start_offset=0, log_end_offset=1),
     ErrorCode.OFFSET_OUT_OF_RANGE),
    (lambda: NotControllerError(), ErrorCode.NOT_CONTROLLER),
    (lambda: NotControllerError("controller is 2"), ErrorCode.NOT_CONTROLLER),
    (lambda: BrokerConfigError("Cannot update these configs dynamically"),
     ErrorCode.INVALID_REQUEST),
    (lambda: SaslFailed("Authentication failed"), ErrorCode.SASL_AUTHENTICATION_FAILED),
])
def test_errors_of_one_code_are_kafka_errors(make: object, code: ErrorCode) -> None:
    e = make()  # type: ignore[operator]
    assert isinstance(e, KafkaError)
    assert e.code is code
    assert str(e).startswith(code.name)


def test_a_fixed_code_error_keeps_its_message_for_the_wire() -> None:
    e = rb.UnsupportedMagicError(1)
    assert e.message == "unsupported record batch magic 1, only magic 2 is accepted"
    with pytest.raises(KafkaError) as info:
        raise KafkaStorageError("/data: EIO")
    assert info.value.message == "/data: EIO"


# --- the lint -------------------------------------------------------------------


def _int(node: ast.AST | None) -> int | None:
    """The value of an int literal (``-1`` included), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _ints(node: ast.AST) -> bool:
    """An int literal, or a tuple/list/set of them (``code in (3, 5)``)."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(_int(e) is not None for e in node.elts)
    return _int(node) is not None


def _names_a_code(node: ast.AST) -> bool:
    """An expression that holds an error code by its name: ``x.error_code``,
    ``error_code``, ``x["error_code"]``, ``partition_error_code``, ``e.code``."""
    if isinstance(node, ast.Attribute):
        return node.attr.endswith("error_code") or node.attr == "code"
    if isinstance(node, ast.Name):
        return node.id.endswith("error_code") or node.id in ("code", "err", "error")
    if isinstance(node, ast.Subscript):
        key = node.slice
        return isinstance(key, ast.Constant) and str(key.value).endswith("error_code")
    return False


def _target_names(node: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    out = []
    for t in targets:
        if isinstance(t, ast.Name):
            out.append(t.id)
        elif isinstance(t, ast.Attribute):
            out.append(t.attr)
    return out


def offences(source: str, where: str) -> list[str]:
    """Every place in ``source`` that spells an error code as an int or converts an
    int to an `ErrorCode` other than through `ErrorCode.of`."""
    found: list[str] = []

    def say(node: ast.AST, what: str) -> None:
        found.append(f"{where}:{getattr(node, 'lineno', '?')}: {what}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign | ast.AnnAssign) and _int(node.value) is not None:
            for name in _target_names(node):
                if f"{where}: {name}" in NOT_ERROR_CODES:
                    continue
                if (name in CODE_NAMES or name.endswith(("error_code", "_ERR", "ERROR_CODE"))
                        or name == "code"):
                    say(node, f"{name} = {_int(node.value)}: use ErrorCode")
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and _names_a_code(t):
                        say(node, "an error code set to an int literal: use ErrorCode")
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if (isinstance(k, ast.Constant) and str(k.value).endswith("error_code")
                        and _int(v) is not None):
                    say(node, f"{{{k.value!r}: {_int(v)}}}: use ErrorCode")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_a_code(s) for s in sides) and any(_ints(s) for s in sides):
                say(node, "an error code compared with an int literal: use ErrorCode")
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if fname == "ErrorCode":
                say(node, "ErrorCode(x): use ErrorCode.of(x)")
            elif fname.endswith("Error") and node.args and _int(node.args[0]) is not None:
                say(node, f"{fname}({_int(node.args[0])}, ...): use ErrorCode")
            for kw in node.keywords:
                if kw.arg and kw.arg.endswith("error_code") and _int(kw.value) is not None:
                    say(node, f"{kw.arg}={_int(kw.value)}: use ErrorCode")
        elif isinstance(node, ast.Attribute) and node.attr in ("_value2member_map_",
                                                               "_missing_"):
            say(node, f"{node.attr}: convert with ErrorCode.of")
    return found


PLANTED = {
    "constant copy": "NOT_CONTROLLER = 41\n",
    "suffix constant": "FOO_ERR = 7\n",
    "class code": "class E(Exception):\n    error_code: int = 56\n",
    "dict literal": "r = {'error_code': 0}\n",
    "subscript set": "out['error_code'] = 3\n",
    "keyword": "res.update(error_code=42)\n",
    "compare attribute": "if t.error_code == 3:\n    pass\n",
    "compare in tuple": "if e.code not in (3, 5):\n    pass\n",
    "compare in lambda": "ok = lambda r: r.error_code != 41\n",
    "compare a local": "if code == 0:\n    pass\n",
    "error constructor": "raise KafkaError(58, 'bad')\n",
    "second converter": "c = ErrorCode(x)\n",
    "value map": "ok = x in ErrorCode._value2member_map_\n",
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_the_lint_catches_a_planted_offence(name: str) -> None:
    assert offences(PLANTED[name], name), f"the lint misses: {PLANTED[name]!r}"


def test_the_lint_accepts_error_code_members() -> None:
    ok = ("r = {'error_code': ErrorCode.NONE}\n"
          "if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:\n    pass\n"
          "raise KafkaError(ErrorCode.NOT_CONTROLLER, 'moved')\n"
          "code = ErrorCode.of(resp.error_code)\n"
          "throttle_time_ms = 0\n")
    assert offences(ok, "ok") == []


def test_no_bare_int_error_codes_or_second_converters_in_the_package() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100
    found: list[str] = []
    for f in files:
        rel = f.relative_to(REPO).as_posix()
        if rel in EXEMPT or rel.startswith(EXEMPT_DIRS):
            continue
        found.extend(offences(f.read_text(), rel))
    assert found == [], "\n".join(found)
