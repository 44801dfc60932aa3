"""Errors raised by the commit log, each carrying the Kafka error code it maps to.

On-disk format: none.
"""

from __future__ import annotations

from jocko_py.protocol.errors import ErrorCode, KafkaError
from jocko_py.protocol.records import RecordBatchTooLargeError

__all__ = [
    "KafkaStorageError",
    "LogError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
]


class LogError(KafkaError):
    """Base of commit-log errors; ``code`` is the Kafka error code."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR
    message: str

    def __init__(self, message: str) -> None:
        super().__init__(type(self).code, message)


class OffsetOutOfRangeError(LogError):
    """The requested offset is outside [log start offset, log end offset]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, message: str, *, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class KafkaStorageError(LogError):
    """A disk operation failed (ENOSPC, EIO, ...); the log was left consistent."""

    code = ErrorCode.KAFKA_STORAGE_ERROR
