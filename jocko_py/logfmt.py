"""Log output for the command line: plain text or JSON lines, with context fields.

Owns the process's logging set-up (`setup_logging`). Library code logs through stdlib
`logging` with its context in the message, `[broker=1 partition=orders-3] ...`, as the
project's convention says; the JSON format lifts those bracketed `key=value` pairs into
fields, adds the fields of the request being served (`peer`, `client_id`, from
`broker/log_context.py`) and process-wide ones (`broker`), and keeps the message
without the prefix. One object per line:

    {"ts": "2024-05-01T12:00:00.123Z", "level": "INFO", "logger": "jocko_py.app",
     "message": "...", "broker": 1, "topic_partition": "orders-3", "peer": "...",
     "client_id": "...", "exception": "Traceback ..."}

Field names: `broker`, `topic_partition` (from `partition=`), `peer`, `client_id`
(from `client=` or the request), and any other bracketed key as given.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

from jocko_py.broker.log_context import LOG_CONTEXT

_PREFIX = re.compile(r"^\[((?:[A-Za-z_][\w.-]*=[^\s\]]*\s*)+)\]\s*")
_RENAME = {"partition": "topic_partition", "client": "client_id", "tp": "topic_partition"}
_STATIC: dict[str, Any] = {}
_STD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime"}


def set_static_fields(**fields: Any) -> None:
    """Fields added to every JSON log line of this process (e.g. broker=1)."""
    _STATIC.update(fields)


def split_context(message: str) -> tuple[dict[str, Any], str]:
    """The `[key=value ...]` prefix of a message as fields, and the rest."""
    m = _PREFIX.match(message)
    if not m:
        return {}, message
    fields: dict[str, Any] = {}
    for pair in m.group(1).split():
        k, _, v = pair.partition("=")
        k = _RENAME.get(k, k)
        fields[k] = int(v) if v.isdigit() and k == "broker" else v
    return fields, message[m.end():]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        fields, text = split_context(message)
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": text,
        }
        out.update(_STATIC)
        ctx = LOG_CONTEXT.get()
        if ctx:
            out.update(ctx)
        out.update(fields)
        for k, v in vars(record).items():  # extra={...} given to the log call
            if k not in _STD_ATTRS and not k.startswith("_"):
                out[k] = v
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def setup_logging(level: str, fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
