"""Partition logs on disk: Log -> LogSegment -> OffsetIndex/TimeIndex, plus LogManager.

Synchronous file I/O only (no asyncio).  Depends on ``jocko_py.protocol`` for the
record batch layout and nothing above it.
"""

from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.errors import KafkaStorageError, LogError, OffsetOutOfRangeError
from jocko_py.commitlog.log import AppendInfo, Log, ReadInfo
from jocko_py.commitlog.manager import LogManager

__all__ = [
    "AppendInfo",
    "KafkaStorageError",
    "Log",
    "LogConfig",
    "LogError",
    "LogManager",
    "OffsetOutOfRangeError",
    "ReadInfo",
]
