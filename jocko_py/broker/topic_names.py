"""Topic names: Kafka's rules (`org.apache.kafka.common.internals.Topic`).

A name is 1 to 249 characters of ASCII alphanumerics, '.', '_' and '-', and not "."
or ".."; anything else is INVALID_TOPIC_EXCEPTION, with Kafka's message. The internal
topics are the group and transaction coordinators' logs.
"""

from __future__ import annotations

import re

from jocko_py.protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is longer than {MAX_TOPIC_NAME} characters",
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal: it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )
