"""Errors raised by the commit log, each carrying the Kafka error code it maps to.

On-disk format: none.
"""

from __future__ import annotations

from jocko_py.protocol.records import RecordBatchTooLargeError

__all__ = [
    "KafkaStorageError",
    "LogError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
]


class LogError(Exception):
    """Base of commit-log errors; ``error_code`` is the Kafka error code."""

    error_code: int = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(LogError):
    """The requested offset is outside [log start offset, log end offset]."""

    error_code = 1

    def __init__(self, message: str, *, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class KafkaStorageError(LogError):
    """A disk operation failed (ENOSPC, EIO, ...); the log was left consistent."""

    error_code = 56
