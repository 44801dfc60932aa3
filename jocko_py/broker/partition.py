"""One partition replica on this broker: the sole owner of its replication state.

Owns the role (leader / follower / none), leader id and leader epoch, partition
epoch, replicas, the committed ISR and a pending ISR change (an AlterPartition in
flight), the followers' state as the leader sees it (log end offset, last fetch
and last caught-up time) and the high watermark. Decisions take `now` (ms) and
return what the caller must do (an ISR change to send, whether the HW moved), so
the simulation can drive a partition without sockets.

Rules (Kafka's `Partition.scala`, followed here)
------------------------------------------------
- Role and epochs come only from the metadata image (`make_leader` /
  `make_follower`); a partition never promotes itself.
- A leader appends with its leader epoch stamped in every batch; the epoch's
  start offset goes into the log's leader-epoch cache.
- `acks=all` needs |ISR| >= `min.insync.replicas` before the append
  (NOT_ENOUGH_REPLICAS); the write is acknowledged once the HW passes it.
- The HW is the minimum log end offset over the maximal ISR (committed ISR plus
  a pending expansion; a pending shrink keeps the larger, committed set). It
  never goes back while leading, and does not advance while the committed ISR is
  smaller than the effective min ISR (min of `min.insync.replicas` and the replica
  count; Kafka 4.x, KIP-966): a replica that left the ISR then, an eligible leader
  replica, still holds everything committed.
- A follower's LEO is the offset it fetches from. It is caught up when it
  fetches at or past the leader's LEO (or past the LEO the leader had at its
  previous fetch, at that fetch's time). A follower outside the ISR that reaches
  the HW, and the start of the current leader epoch, is added (expand); an ISR
  member not caught up for `replica.lag.time.max.ms` is removed (shrink). At most
  one ISR change is in flight; it ends when the metadata shows a newer partition
  epoch or the controller refuses it. An unanswered change may have been applied, so it
  stays pending (and is sent again) rather than being dropped.
- Consumers read up to the HW (read_committed: the last stable offset, which the
  log's producer state keeps below any transaction not yet complete and replicated,
  with the aborted transactions in range); followers up to the LEO. A follower whose last
  fetched epoch ends before its fetch offset in our epoch cache is told the
  diverging epoch and truncates (KIP-279).
- A follower appends the leader's batches as they are (offsets and epochs kept)
  and takes HW = min(leader HW, own LEO).
"""

from __future__ import annotations

import enum
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from jocko_py.cluster.metadata import PartitionImage
from jocko_py.commitlog.config import effective_min_isr
from jocko_py.commitlog.errors import KafkaStorageError, OffsetOutOfRangeError
from jocko_py.commitlog.leader_epoch import LeaderEpochCache
from jocko_py.commitlog.log import Log
from jocko_py.commitlog.segment import REGION_MIN_BYTES, FileRegion
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.broker.partition")


class Role(enum.Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class AppendResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: list[tuple[int, str]] | None = None
    last_offset: int = -1


@dataclass(slots=True)
class ReadResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview | FileRegion | None = None
    diverging_epoch: tuple[int, int] | None = None
    # read_committed: (producer id, first offset) of the aborted transactions in range
    aborted_transactions: list[tuple[int, int]] | None = None


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = -1
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_caught_up_ms: int = 0
    # the broker epoch of the follower's registration its fetches came from (KIP-903;
    # -1: unknown), sent with an ISR change so the controller refuses a stale one
    broker_epoch: int = -1


@dataclass(slots=True)
class IsrChange:
    """An AlterPartition the leader must send."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    # broker epoch of each new ISR member as this leader knew it (KIP-903), -1 unknown
    member_epochs: tuple[int, ...] = ()


# AlterPartition answers by which the controller refused a change, judged at the leader
# and partition epoch it carried: it was not applied.
_ISR_CHANGE_REFUSED = frozenset({
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_REQUEST, ErrorCode.INELIGIBLE_REPLICA,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
})


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class FetchEffect:
    hw_advanced: bool = False
    isr_change: IsrChange | None = None
    result: ReadResult | None = None
    extra: dict[str, int] = field(default_factory=dict)


class Partition:
    def __init__(
        self, topic: str, partition: int, topic_id: uuid.UUID, log_: Log, broker_id: int
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log_
        self.broker_id = broker_id
        # told about a failed disk operation (the log dir goes offline); set by the
        # replica manager to LogManager.mark_offline
        self.on_storage_error: Callable[[str], None] = lambda _reason: None
        self.role = Role.NONE
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.pending_isr: tuple[int, ...] | None = None
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = 0
        self.high_watermark = min(self._checkpointed_hw(), log_.log_end_offset)

    def _checkpointed_hw(self) -> int:
        # No HW checkpoint file yet: after a restart the HW is re-learnt from the
        # leader (follower) or from the ISR's fetches (leader). Starting from the
        # log start is safe: it only delays what consumers see.
        return self.log.log_start_offset

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending_isr))

    # ------------------------------------------------------------------ role changes

    def make_leader(self, img: PartitionImage, now: int, *, quiet: bool = False,
                    epoch_writes: list[LeaderEpochCache] | None = None) -> bool:
        """Become (or stay) leader as ``img`` says; True if the leader epoch is new.
        ``quiet``: the new epoch is logged at DEBUG (the caller logs a summary).
        ``epoch_writes``: the leader-epoch checkpoint is not written here but added to
        the list, for the caller to write before it answers anything."""
        new_epoch = self.role is not Role.LEADER or img.leader_epoch != self.leader_epoch
        self.replicas = img.replicas
        self.isr = img.isr
        if self.pending_isr is not None and img.partition_epoch > self.partition_epoch:
            self.pending_isr = None
        self.partition_epoch = img.partition_epoch
        if new_epoch:
            self.role = Role.LEADER
            self.leader_id = self.broker_id
            self.leader_epoch = img.leader_epoch
            self.pending_isr = None
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.log.leader_epochs.assign(img.leader_epoch, self.log.log_end_offset,
                                          defer=epoch_writes)
            # Followers' positions are unknown until they fetch; ISR members count as
            # caught up now so they are not dropped before their first fetch.
            self.followers = {
                r: FollowerState(last_caught_up_ms=now if r in img.isr else 0)
                for r in img.replicas if r != self.broker_id
            }
            log.log(logging.DEBUG if quiet else logging.INFO,
                    "[partition=%s] leader at epoch %d, ISR %s, LEO %d, HW %d", self.name,
                    img.leader_epoch, list(img.isr), self.log.log_end_offset,
                    self.high_watermark)
        else:
            for r in img.replicas:
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = FollowerState()
            for r in list(self.followers):
                if r not in img.replicas:
                    del self.followers[r]
        self.maybe_advance_high_watermark()
        return new_epoch

    def make_follower(self, img: PartitionImage) -> bool:
        """Follow ``img.leader`` (or no one while leaderless); True if anything changed."""
        changed = (self.role is not Role.FOLLOWER or img.leader != self.leader_id
                   or img.leader_epoch != self.leader_epoch)
        if self.role is Role.LEADER:
            log.info("[partition=%s] resigning leadership at epoch %d (new leader %d, "
                     "epoch %d)", self.name, self.leader_epoch, img.leader, img.leader_epoch)
        self.role = Role.FOLLOWER
        self.leader_id = img.leader
        self.leader_epoch = img.leader_epoch
        self.partition_epoch = img.partition_epoch
        self.replicas = img.replicas
        self.isr = img.isr
        self.pending_isr = None
        self.followers = {}
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        return changed

    def stop(self) -> None:
        self.role = Role.NONE
        self.leader_id = -1
        self.followers = {}

    # ------------------------------------------------------------------ leader path

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """A client's view of the leader epoch (-1: not given) against ours (KIP-320)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def append_as_leader(self, data: memoryview | bytes, acks: int,
                         max_message_bytes: int, now: int) -> AppendResult:
        """Validate and append a producer's records blob (one partition's data)."""
        if self.role is not Role.LEADER:
            return AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                message=f"broker {self.broker_id} is not the leader")
        if acks == -1 and len(self.isr) < self.min_isr():
            return AppendResult(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                message=f"ISR {list(self.isr)} is smaller than min.insync.replicas="
                        f"{self.min_isr()}")
        try:
            batches = rb.split_batches(data, validate_crc=True)
            if not batches:
                return AppendResult(ErrorCode.INVALID_RECORD, message="empty record set")
            if len(batches) != 1:
                return AppendResult(
                    ErrorCode.INVALID_RECORD,
                    message="Produce requests v3+ must contain exactly one record batch "
                    "per partition",
                )
            compacted = self.log.config.compact
            for h, view in batches:
                rb.check_produce_batch(h)
                rb.validate_record_structure(view, h, require_keys=compacted)
        except rb.UnsupportedMagicError as e:
            # Kafka: legacy magic 0/1 is an invalid record for v3+ produce; any
            # other magic means the bytes are not a record batch at all
            code = ErrorCode.INVALID_RECORD if e.magic in (0, 1) else ErrorCode.CORRUPT_MESSAGE
            return AppendResult(code, message=e.message)
        except rb.InvalidRecordError as e:
            return AppendResult(ErrorCode.INVALID_RECORD, message=e.message)
        except rb.RecordError as e:
            return AppendResult(e.code, message=e.message)
        h, view = batches[0]
        if h.size > max_message_bytes:
            return AppendResult(
                ErrorCode.MESSAGE_TOO_LARGE,
                message=f"batch of {h.size} bytes exceeds max.message.bytes={max_message_bytes}",
            )
        if h.is_transactional and h.producer_id < 0:
            return AppendResult(ErrorCode.INVALID_RECORD,
                                message="a transactional batch needs a producer id")
        producers = self.log.producer_state
        check = producers.check(h)
        if check.error != ErrorCode.NONE:
            return AppendResult(check.error, log_start_offset=self.log.log_start_offset)
        if check.duplicate is not None:
            d = check.duplicate
            return AppendResult(
                base_offset=d.first_offset, last_offset=d.last_offset,
                log_start_offset=self.log.log_start_offset,
            )
        return self._append(view, now)

    def append_internal(self, batch: bytes, now: int) -> AppendResult:
        """Append a batch the broker built itself (group metadata, offsets)."""
        if self.role is not Role.LEADER:
            return AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self._append(memoryview(bytearray(batch)), now)

    def _append(self, view: memoryview, now: int) -> AppendResult:
        append_time = now if self.log.config.log_append_time else None
        try:
            info = self.log.append(view, self.leader_epoch, log_append_time=append_time)
        except KafkaStorageError as e:
            log.error("[partition=%s] append failed: %s", self.name, e)
            self.on_storage_error(e.message)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=e.message)
        except rb.RecordError as e:  # e.g. a batch larger than segment.bytes
            return AppendResult(e.code, message=e.message)
        self.maybe_advance_high_watermark()
        return AppendResult(
            base_offset=info.first_offset,
            last_offset=info.last_offset,
            log_append_time=append_time if append_time is not None else -1,
            log_start_offset=self.log.log_start_offset,
        )

    def min_isr(self) -> int:
        """The effective min ISR: `min.insync.replicas` capped by the replica count."""
        return effective_min_isr(self.log.config.min_insync_replicas, len(self.replicas))

    def under_min_isr(self) -> bool:
        """The committed ISR is smaller than the effective min ISR."""
        return len(self.isr) < self.min_isr()

    def maybe_advance_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR (leader); True if it moved."""
        if self.role is not Role.LEADER:
            return False
        if self.under_min_isr():
            return False  # KIP-966: the replicas that left the ISR must hold the HW
        hw = self.log.log_end_offset
        for r in self.maximal_isr():
            if r == self.broker_id:
                continue
            f = self.followers.get(r)
            hw = min(hw, f.log_end_offset if f is not None else -1)
        if hw > self.high_watermark:
            self.high_watermark = hw
            self.log.producer_state.on_high_watermark(hw)
            return True
        return False

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now: int,
                              broker_epoch: int = -1) -> FetchEffect:
        """A follower fetched from ``fetch_offset``: record its position; maybe move the
        HW; maybe ask to add it to the ISR. ``broker_epoch`` is the registration the fetch
        came from; an ISR change carries it, and the controller refuses the change if the
        follower has registered anew since (KIP-903)."""
        eff = FetchEffect()
        f = self.followers.get(replica_id)
        if f is None:
            return eff
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            f.last_caught_up_ms = now
        elif f.last_fetch_leader_leo >= 0 and fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.log_end_offset = fetch_offset
        f.last_fetch_ms = now
        f.broker_epoch = broker_epoch
        f.last_fetch_leader_leo = leo
        eff.hw_advanced = self.maybe_advance_high_watermark()
        if (self.pending_isr is None and replica_id not in self.isr
                and fetch_offset >= self.high_watermark
                and fetch_offset >= self.leader_epoch_start_offset):
            eff.isr_change = self._propose_isr(self.isr + (replica_id,))
            log.info("[partition=%s] follower %d caught up at %d: expanding ISR to %s",
                     self.name, replica_id, fetch_offset, list(eff.isr_change.new_isr))
        return eff

    def maybe_shrink_isr(self, now: int, lag_max_ms: int) -> IsrChange | None:
        if self.role is not Role.LEADER or self.pending_isr is not None:
            return None
        out_of_sync = [
            r for r in self.isr
            if r != self.broker_id
            and now - self.followers.get(r, FollowerState()).last_caught_up_ms > lag_max_ms
        ]
        if not out_of_sync:
            return None
        new_isr = tuple(r for r in self.isr if r not in out_of_sync)
        log.info("[partition=%s] shrinking ISR from %s to %s: %s not caught up for %d ms",
                 self.name, list(self.isr), list(new_isr), out_of_sync, lag_max_ms)
        return self._propose_isr(new_isr)

    def _propose_isr(self, new_isr: tuple[int, ...]) -> IsrChange:
        self.pending_isr = new_isr
        epochs = tuple(-1 if r == self.broker_id
                       else self.followers.get(r, FollowerState()).broker_epoch
                       for r in new_isr)
        return IsrChange(self.topic_id, self.partition, self.leader_epoch,
                         self.partition_epoch, new_isr, epochs)

    def isr_change_failed(self, change: IsrChange, error: int) -> bool:
        """The controller did not confirm ``change``: ``error`` is its answer, or
        REQUEST_TIMED_OUT when none came. Only a refusal proves the change was not
        applied, and clears it. Any other outcome may have applied it (an answer lost on
        the way back, or INVALID_UPDATE_VERSION to a retry of a change that did apply):
        the change stays pending, so an expansion keeps counting the new member in the
        HW, until the metadata shows a newer partition epoch. Returns True when the
        request should be sent again (no answer)."""
        if (self.role is not Role.LEADER or self.pending_isr != change.new_isr
                or self.partition_epoch != change.partition_epoch
                or self.leader_epoch != change.leader_epoch):
            return False
        if error in _ISR_CHANGE_REFUSED:
            self.pending_isr = None
            return False
        return error != ErrorCode.INVALID_UPDATE_VERSION

    # ------------------------------------------------------------------ reads

    @property
    def last_stable_offset(self) -> int:
        """The LSO: below the first offset of any transaction not yet complete (and
        replicated), never past the HW."""
        return self.log.last_stable_offset(self.high_watermark)

    def read(self, offset: int, max_bytes: int, *, upper: int, min_one: bool,
             zero_copy: bool = False) -> ReadResult:
        """``zero_copy``: a big read is a FileRegion (sent from the file, see segment.py)."""
        hw = self.high_watermark
        lso = self.last_stable_offset
        try:
            info = self.log.read(offset, max_bytes, max_offset=upper, min_one_batch=min_one,
                                 region_min=REGION_MIN_BYTES if zero_copy else None)
        except OffsetOutOfRangeError:
            return ReadResult(
                ErrorCode.OFFSET_OUT_OF_RANGE, hw, lso, self.log.log_start_offset, None
            )
        except KafkaStorageError as e:
            self.on_storage_error(e.message)
            return ReadResult(ErrorCode.KAFKA_STORAGE_ERROR, hw, lso, self.log.log_start_offset)
        return ReadResult(ErrorCode.NONE, hw, lso, self.log.log_start_offset, info.records)

    def read_committed(self, offset: int, max_bytes: int, *, min_one: bool,
                       zero_copy: bool = False) -> ReadResult:
        """A read_committed consumer's read: up to the LSO, with the aborted
        transactions that overlap it (the consumer drops their records)."""
        lso = self.last_stable_offset
        r = self.read(offset, max_bytes, upper=lso, min_one=min_one, zero_copy=zero_copy)
        if r.error == ErrorCode.NONE:
            r.aborted_transactions = [] if not r.records else [
                (a.producer_id, a.first_offset) for a in self.log.collect_aborted(offset, lso)]
        return r

    def read_for_follower(self, replica_id: int, fetch_offset: int, current_leader_epoch: int,
                          last_fetched_epoch: int, max_bytes: int, now: int, *,
                          record_fetch: bool = True, min_one: bool = True,
                          broker_epoch: int = -1, zero_copy: bool = False) -> FetchEffect:
        """The leader's side of one partition of a follower's Fetch: leadership and epoch
        checks, the diverging epoch (KIP-279) or the follower's position (HW, ISR
        expansion; skipped with ``record_fetch=False``, a re-read after a wait), and the
        records up to our log end. ``eff.result`` is the answer to send."""
        eff = FetchEffect()
        if self.role is not Role.LEADER or replica_id not in self.replicas:
            eff.result = ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return eff
        epoch_error = self.check_leader_epoch(current_leader_epoch)
        if epoch_error:
            eff.result = ReadResult(epoch_error)
            return eff
        div = self.diverging_epoch(last_fetched_epoch, fetch_offset)
        if div is not None:
            hw = self.high_watermark
            eff.result = ReadResult(ErrorCode.NONE, hw, hw, self.log.log_start_offset, b"",
                                    diverging_epoch=div)
            return eff
        if record_fetch and fetch_offset <= self.log.log_end_offset:
            upd = self.update_follower_fetch(replica_id, fetch_offset, now, broker_epoch)
            eff.hw_advanced, eff.isr_change = upd.hw_advanced, upd.isr_change
        leo = self.log.log_end_offset
        if fetch_offset == leo:
            # caught up (most partitions of a follower's fetch): nothing to read
            hw = self.high_watermark
            eff.result = ReadResult(ErrorCode.NONE, hw, hw, self.log.log_start_offset, b"")
            return eff
        eff.result = self.read(fetch_offset, max_bytes, upper=leo, min_one=min_one,
                               zero_copy=zero_copy)
        return eff

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """KIP-279 on the leader: (epoch, end offset) if the follower's log diverges."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.log.leader_epochs.end_offset_for(
            last_fetched_epoch, self.log.log_end_offset)
        if epoch < 0:
            return None  # nothing to compare with: an out-of-range fetch sorts it out
        if epoch != last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    # ------------------------------------------------------------------ follower path

    def append_as_follower(self, records: memoryview | bytes, leader_hw: int,
                           leader_log_start: int) -> int:
        """Append the leader's batches as they are; returns the number of bytes taken."""
        n = 0
        if records:
            batches = rb.split_batches(records, validate_crc=True)
            if batches:
                # a batch cut at the end of the response is fetched again next time
                whole = sum(h.size for h, _ in batches)
                view = memoryview(bytes(records[:whole]))
                first = batches[0][0].base_offset
                if first < self.log.log_end_offset:
                    # already have these (a response to a fetch we retried)
                    skip = 0
                    for h, _ in batches:
                        if h.next_offset <= self.log.log_end_offset:
                            skip += h.size
                    view = view[skip:]
                if len(view):
                    self.log.append(view, -1, assign_offsets=False)
                n = whole
        if leader_log_start > self.log.log_start_offset:
            self.log.delete_records_before(min(leader_log_start, self.log.log_end_offset))
        self.high_watermark = max(self.high_watermark,
                                  min(leader_hw, self.log.log_end_offset))
        self.log.producer_state.on_high_watermark(self.high_watermark)
        return n

    def truncate_on_divergence(self, epoch: int, end_offset: int) -> int:
        """The leader said our log diverges after ``end_offset`` of ``epoch`` (KIP-279):
        keep min(its end offset, ours for that epoch); the next fetch (with our new last
        epoch) checks again, so repeated answers walk back to the common prefix."""
        own_epoch, own_end = self.log.leader_epochs.end_offset_for(
            epoch, self.log.log_end_offset)
        target = end_offset if own_epoch < 0 else min(end_offset, own_end)
        self.truncate_to(max(0, target))
        return self.log.log_end_offset

    def truncate_to(self, offset: int) -> None:
        before = self.log.log_end_offset
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        log.info("[partition=%s] truncated from %d to %d (leader %d epoch %d)", self.name,
                 before, self.log.log_end_offset, self.leader_id, self.leader_epoch)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset
        log.info("[partition=%s] log reset to start at %d", self.name, offset)
