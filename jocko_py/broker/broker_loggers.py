"""Broker loggers as Kafka's BROKER_LOGGER config resource (`kafka-configs
--entity-type broker-loggers`): every logger of this process with its effective level,
changed at run time with IncrementalAlterConfigs (SET a level, DELETE to inherit from
the root logger again). Levels use Kafka's (log4j) names; Python has no TRACE or FATAL,
so TRACE is level 5 and FATAL is CRITICAL. Changes are local to this broker and do not
survive a restart, as in Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

from jocko_py.protocol.errors import ErrorCode, KafkaError

ROOT = "root"
DYNAMIC_BROKER_LOGGER_CONFIG = 6
STRING_TYPE = 2
LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


def level_name(level: int) -> str:
    best = "TRACE"
    for name, value in LEVELS.items():
        if value <= level:
            best = name
    return best


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


def logger_names() -> list[str]:
    names = [n for n, lg in logging.root.manager.loggerDict.items()
             if isinstance(lg, logging.Logger)]
    return [ROOT, *sorted(names)]


def describe(keys: list[str] | None) -> list[dict[str, Any]]:
    out = []
    for name in logger_names():
        if keys is not None and name not in keys:
            continue
        out.append({"name": name, "value": level_name(_logger(name).getEffectiveLevel()),
                    "read_only": False, "is_default": False,
                    "config_source": DYNAMIC_BROKER_LOGGER_CONFIG, "is_sensitive": False,
                    "synonyms": [], "config_type": STRING_TYPE, "documentation": None})
    return out


def check(changes: list[tuple[str, int, str | None]]) -> None:
    """(logger, operation, value) with IncrementalAlterConfigs operations (0 SET,
    1 DELETE, 2 APPEND, 3 SUBTRACT); raises KafkaError as Kafka refuses them."""
    known = set(logger_names())
    for name, op, value in changes:
        if name not in known:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist")
        if op == 0:
            if (value or "").upper() not in LEVELS:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Cannot set the log level of {name} to "
                                 f"{value} as it is not a supported log level. "
                                 f"Valid log levels are {', '.join(LEVELS)}")
        elif op == 1:
            if name == ROOT:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Removing the log level of the root logger is not allowed")
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Operation {op} is not allowed for broker loggers")


def apply(changes: list[tuple[str, int, str | None]]) -> None:
    for name, op, value in changes:
        lg = _logger(name)
        if op == 0:
            lg.setLevel(LEVELS[(value or "").upper()])
        else:
            lg.setLevel(logging.NOTSET)
        logging.getLogger("jocko_py.broker.loggers").info(
            "log level of %s set to %s", name, level_name(lg.getEffectiveLevel()))
