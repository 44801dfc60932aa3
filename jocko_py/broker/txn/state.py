"""Transaction metadata and its records in `__transaction_state`.

This module owns one transactional id's metadata (`TxnMetadata`), the states it
moves through (`TxnState`, Kafka's numbering) and the byte layout of the
records that persist it. No I/O.

Record layout (Kafka's, `coordinator-records/TransactionLog*.json`): every key
and value starts with an int16 version, then the versioned struct.

* key, version 0 = TransactionLogKey(transactional_id: string)
* value, version 0 = TransactionLogValue(producer_id int64, producer_epoch int16,
  transaction_timeout_ms int32, transaction_status int8, transaction_partitions
  [topic string, partition_ids [int32]] (nullable), last_update_timestamp_ms int64,
  start_timestamp_ms int64). Version 1 (flexible; written while `transaction.version`
  >= 1 is finalized, as Kafka does) adds tagged fields: PreviousProducerId (tag 0),
  NextProducerId (tag 1: the producer id the transaction's completion switches to
  once the epoch is exhausted, KIP-890 part 2), ClientTransactionVersion (tag 2: 2
  when the transaction is a KIP-890 part 2 one), NextProducerEpoch (tag 3, unused).
* a null value is a tombstone (the transactional id expired).

Status bytes: Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3,
CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7 (never written:
a fence is persisted as PrepareAbort with the bumped epoch, as Kafka does).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Any

from jocko_py.protocol import messages

TXN_TOPIC = "__transaction_state"
_I16 = struct.Struct(">h")


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))


# Kafka's TransactionState.validPreviousStates: the coordinator refuses (and logs) any
# other transition
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                               TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    # (Empty / Complete*: an EndTxn v5 abort of an empty transaction, KIP-890 part 2)
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE,
                                       TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                       TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                              TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}

COMPLETED = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
PREPARED = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    # the previous producer id / epoch, so a retried InitProducerId or EndTxn whose
    # answer was lost is recognised (KIP-360)
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    # a transition being written to the log: no other may start meanwhile
    pending: TxnState | None = None
    # EndTxn v5 with the epoch exhausted: the producer id the transaction's completion
    # switches to (the record's NextProducerId)
    next_producer_id: int = -1
    # the client's transaction version (2: KIP-890 part 2, the epoch is bumped at its
    # end and its markers say so; the record's ClientTransactionVersion)
    client_tv: int = 0

    def copy(self) -> TxnMetadata:
        return TxnMetadata(self.transactional_id, self.producer_id, self.producer_epoch,
                           self.timeout_ms, self.state, set(self.partitions), self.start_ms,
                           self.last_update_ms, self.last_producer_id,
                           self.last_producer_epoch, None, self.next_producer_id,
                           self.client_tv)


def _encode(name: str, version: int, obj: dict[str, Any]) -> bytes:
    return _I16.pack(version) + bytes(messages.data_schema(name, version).build(obj))


def txn_key(transactional_id: str) -> bytes:
    return _encode("TransactionLogKey", 0, {"transactional_id": transactional_id})


def txn_value(m: TxnMetadata, flexible: bool = False) -> bytes:
    """The record of ``m``; ``flexible``: version 1 with its tagged fields."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    parts = [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()]
    tagged: dict[str, Any] = {}
    if flexible:
        tagged = {"previous_producer_id": m.last_producer_id,
                  "next_producer_id": m.next_producer_id,
                  "client_transaction_version": m.client_tv}
    return _encode("TransactionLogValue", 1 if flexible else 0, {**tagged,
        "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
        "transaction_timeout_ms": m.timeout_ms, "transaction_status": int(m.state),
        # Kafka writes null partitions for Empty and Complete* states
        "transaction_partitions": parts if m.state not in COMPLETED | {TxnState.EMPTY}
        else None,
        "transaction_last_update_timestamp_ms": m.last_update_ms,
        "transaction_start_timestamp_ms": m.start_ms,
    })


def decode_key(data: bytes) -> str | None:
    if len(data) < 2:
        return None
    (version,) = _I16.unpack_from(data)
    if version != 0:
        return None
    k = messages.data_schema("TransactionLogKey", 0).parse_bytes(data[2:])
    return str(k.transactional_id)


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    (version,) = _I16.unpack_from(data)
    v = messages.data_schema("TransactionLogValue", version).parse_bytes(data[2:])
    parts = {(t.topic, p) for t in (v.transaction_partitions or []) for p in t.partition_ids}
    m = TxnMetadata(
        transactional_id, v.producer_id, v.producer_epoch, v.transaction_timeout_ms,
        TxnState(v.transaction_status), parts, v.transaction_start_timestamp_ms,
        v.transaction_last_update_timestamp_ms)
    if version >= 1:
        m.last_producer_id = v.previous_producer_id
        m.next_producer_id = v.next_producer_id
        m.client_tv = v.client_transaction_version
    return m
