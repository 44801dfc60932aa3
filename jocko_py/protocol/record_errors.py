"""The errors of a record batch, each carrying its Kafka error code.

Raised by `records.py` (the batch layout) and `compression.py` (the codecs), and
re-exported by `records.py`, where callers name them.
"""

from __future__ import annotations

from jocko_py.protocol.errors import ErrorCode, KafkaError


class RecordError(KafkaError):
    """Base of every record-level problem; ``code`` is the Kafka error code."""

    code = ErrorCode.CORRUPT_MESSAGE
    message: str

    def __init__(self, message: str) -> None:
        super().__init__(type(self).code, message)


class CorruptRecordError(RecordError):
    """Lengths, CRC or varints do not add up (Kafka CORRUPT_MESSAGE)."""

    code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(RecordError):
    """Well-formed bytes that break a rule of the protocol (Kafka INVALID_RECORD)."""

    code = ErrorCode.INVALID_RECORD


class UnsupportedMagicError(InvalidRecordError):
    """A batch whose magic is not 2 (legacy message sets are not accepted)."""

    def __init__(self, magic: int) -> None:
        super().__init__(f"unsupported record batch magic {magic}, only magic 2 is accepted")
        self.magic = magic


class RecordBatchTooLargeError(RecordError):
    """A batch (or its decompressed records) exceeds a size limit (MESSAGE_TOO_LARGE)."""

    code = ErrorCode.MESSAGE_TOO_LARGE
