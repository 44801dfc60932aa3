"""Sans-IO raft core for the metadata quorum, shaped like KRaft.

The core owns one replica's quorum state, its in-memory copy of the log, and the
protocol. It performs no I/O: every entry point takes the current time ``now`` (ms,
from an injectable clock) and returns a list of actions that the driver MUST execute
in order (persist before send: a ``PersistQuorumState``/``AppendLog`` that precedes a
``Send`` must be durable before that message leaves).

Entry points: ``start(now)``, ``tick(now)``, ``receive(msg, now)``,
``propose(datas, now)``, ``take_snapshot(end_offset, data, now)``,
``add_voter(id, address, now)``, ``remove_voter(id, now)``, ``resign(now)``,
``describe_quorum(now)``.

Rules
-----
Terms are KRaft *epochs*; epochs start at 1, an empty log has last epoch 0.

1. Quorum state. ``(epoch, voted_for)`` is persisted before a vote is answered or a
   candidacy announced. A replica grants at most one (non-pre-)vote per epoch. Seeing
   a larger epoch in any message moves a replica to that epoch (unattached, or
   following the named leader) before anything else is done with the message.
2. Election. A voter that has not fetched successfully from a leader for
   ``fetch_timeout_ms`` (plus jitter) becomes *prospective* and sends pre-votes
   (``pre_vote=True``) without changing its epoch. Voters grant a pre-vote iff the
   candidate's log is at least as up to date as theirs and they have no live leader.
   A majority of pre-votes makes it a *candidate*: epoch + 1, vote for itself, persist,
   then ask for votes. A vote is granted iff the epoch matches, the voter has not voted
   for another candidate in it, and its log is at least as up to date (greater last
   epoch, or equal epoch and offset >= ours). A candidate that neither wins nor loses within a randomized election timeout
   (``[T, 2T)``) goes back to prospective. Followers with a live leader reject votes
   (leader stickiness); pre-vote keeps partitioned replicas from inflating epochs.
3. Leadership. A winner appends a LEADER_CHANGE entry in its epoch and sends
   BeginQuorumEpoch to the voters until they fetch. Followers and observers *pull*:
   Fetch(fetch_offset = their log end, last_fetched_epoch). The leader checks the pair
   against its log: if the follower's epoch ends earlier on the leader, or the offset
   is beyond the leader's end of that epoch, the response carries ``diverging_epoch``
   and the follower truncates to it (log matching); if it is below the leader's log
   start, the response carries ``snapshot_id`` and the follower uses FetchSnapshot.
   Otherwise the fetch offset is the follower's acknowledged end offset. Empty fetches
   park at the leader until new data or a new high watermark, or ``max_wait_ms``.
4. Commit. The leader's high watermark is the largest offset that a majority of the
   current voters have reached, provided the entry below it belongs to the leader's own
   epoch (leader completeness: older entries commit only indirectly). It never goes
   down. Followers take ``min(leader hw, own end offset)`` after a validated fetch.
   Entries below the high watermark are delivered once, in order, as ``Commit``.
5. Check quorum. A leader that has not heard fetches from a majority for
   1.5 x ``fetch_timeout_ms`` resigns (stays in its epoch, unattached).
6. Snapshots. ``take_snapshot`` accepts an image at an offset at or below the applied
   offset; entries below it are dropped. A snapshot records the voter set at its end.
7. Membership. The voter set is the one in the latest VOTERS entry of the log, even
   uncommitted (truncation reverts it), else the snapshot's, else the bootstrap set.
   Only the leader changes it, one voter at a time, only after it has committed an
   entry of its epoch and when no VOTERS entry is uncommitted; a new voter must have
   caught up as an observer. A leader removed from the set resigns once the change is
   committed. Replicas outside the set are observers: they fetch and never run, except
   one removed by a VOTERS entry above its high watermark, which runs (without counting
   its own vote) until the removal commits: the old set may still need it. Vote requests
   are answered whatever the voter sets say; a candidate counts only votes from its own
   latest set.
9. Cluster id. Every request carries this replica's cluster id ("" while unknown). A
   request whose non-empty id differs from ours (when ours is known) is answered
   INCONSISTENT_CLUSTER_ID and not acted on, as KafkaRaftClient does; a response with
   that error is not acted on either. The id is configured (a formatted directory) or
   learned from the log: a leader whose log carries no CLUSTER_ID entry appends one
   after its LEADER_CHANGE (with its own id, or a new random one when it has none), and
   a replica without an id takes the one it finds committed (in an entry or a
   snapshot); a known id never changes. A replica that has not yet reached a leader,
   and whose voters of the same id (itself and those not seen with another one) can no
   longer make a majority, cannot join this quorum: it stops (``inconsistent`` is set
   and the core does nothing more), as does one whose log commits another id.
8. Discovery. A replica without a known leader sends Fetch to a random voter every
   ``request_timeout_ms``; non-leaders answer NOT_LEADER_OR_FOLLOWER with the leader
   they know. Such hearsay never counts as contact with the leader, and hearsay naming
   the leader this replica just timed out on is ignored for ``fetch_timeout_ms`` (else
   replicas that have not noticed the loss yet keep pulling it back). A leader that
   answers NOT_LEADER_OR_FOLLOWER (or sends EndQuorumEpoch) for its own epoch has
   resigned and is never followed again in that epoch.
"""

from __future__ import annotations

import base64
import enum
import json
import logging
import random
import uuid
from dataclasses import dataclass, field

from jocko_py.cluster.raft.messages import (
    CLUSTER_ID,
    DATA,
    LEADER_CHANGE,
    VOTERS,
    Action,
    AppendLog,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    Commit,
    DescribeQuorumResult,
    EndQuorumEpochRequest,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LoadSnapshot,
    Message,
    PersistQuorumState,
    PersistSnapshot,
    ReplicaState,
    RoleChanged,
    Send,
    Snapshot,
    TruncateLog,
    VoteRequest,
    VoteResponse,
)
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.cluster.raft")


class Role(enum.Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"


class NotLeaderError(Exception):
    def __init__(self, leader_id: int, epoch: int) -> None:
        super().__init__(f"not the leader (leader={leader_id} epoch={epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


@dataclass(frozen=True, slots=True)
class RaftConfig:
    # this replica's cluster id; "" when unknown (learned from the log, rule 9)
    cluster_id: str = ""
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500
    request_timeout_ms: int = 300
    max_fetch_entries: int = 512
    snapshot_chunk_bytes: int = 64 * 1024
    # KRaft always runs a pre-vote round (KIP-996); the simulation turns it off in some
    # schedules, where it would otherwise mask a broken vote rule.
    pre_vote: bool = True


@dataclass(slots=True)
class DurableState:
    """What a replica reloads after a restart (all of it was persisted by actions)."""

    epoch: int = 0
    voted_for: int | None = None
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)


@dataclass(slots=True)
class _Progress:
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    sent_hw: int = -1


def encode_voters(voters: dict[int, str]) -> bytes:
    return json.dumps({str(k): v for k, v in sorted(voters.items())}).encode()


def decode_voters(data: bytes) -> dict[int, str]:
    return {int(k): str(v) for k, v in json.loads(data).items()}


class RaftCore:
    def __init__(
        self,
        node_id: int,
        bootstrap_voters: dict[int, str],
        config: RaftConfig | None = None,
        durable: DurableState | None = None,
        seed: int | None = None,
    ) -> None:
        self.node_id = node_id
        self.config = config or RaftConfig()
        self._rng = random.Random(seed if seed is not None else node_id)
        d = durable or DurableState()
        self.epoch = d.epoch
        self.voted_for = d.voted_for
        self.snapshot = d.snapshot
        self.log_start = d.snapshot.end_offset if d.snapshot else 0
        self.entries: list[Entry] = [e for e in d.entries if e.offset >= self.log_start]
        self._bootstrap_voters = dict(bootstrap_voters)
        self.high_watermark = self.log_start
        self.applied = self.log_start
        self.role = Role.UNATTACHED
        self.leader_id = -1
        self._out: list[Action] = []
        # Correlation ids start at a random point, so that each process incarnation
        # uses its own: an answer to a request of the previous process (a fast restart
        # with messages in flight) must not be taken for the answer to a new one (a
        # stale NOT_LEADER_OR_FOLLOWER would make the sitting leader look resigned).
        # Seeded from its own stream, so a seeded core stays deterministic.
        corr_rng = random.SystemRandom() if seed is None else random.Random(f"corr/{seed}")
        self._corr = corr_rng.randrange(1 << 31)
        # timers (absolute ms)
        self._election_deadline = 0
        self._last_leader_contact = -(10**12)
        # follower fetch state
        self._fetch_corr: int | None = None
        self._inflight: dict[int, tuple[int, int, int]] = {}  # corr -> (dest, offset, epoch)
        self._fetch_sent_ms = 0
        self._fetch_dest = -1
        # A snapshot being fetched survives role flaps: (end offset, epoch) names its
        # contents, so any leader holding the same snapshot can complete the transfer.
        self._snap_fetch: tuple[int, int] | None = None
        self._snap_buf = bytearray()
        self._snap_inflight: dict[int, tuple[int, tuple[int, int], int]] = {}
        self._fetch_backoff = 0  # consecutive fetch timeouts; doubles the resend timeout
        self._blobs: dict[tuple[int, int], bytes] = {}  # snapshots served, by id
        # election state
        self._vote_corr = -1
        self._votes: set[int] = set()
        self._rejects: set[int] = set()
        # leader state
        self._progress: dict[int, _Progress] = {}
        self._parked: dict[int, tuple[FetchRequest, int]] = {}
        self._epoch_start = 0
        self._begin_sent: dict[int, int] = {}
        self._became_leader_ms = 0
        # (epoch, id) of a leader known to have resigned: others may still name it as
        # the leader of that epoch, but it must not be followed again.
        self._gone_leader: tuple[int, int] | None = None
        self._timed_out: tuple[int, int, int] | None = None  # (epoch, leader, when)
        self._voters_cache: tuple[tuple[int, int, int], dict[int, str]] | None = None
        # rule 9: our cluster id ("" while unknown), the voters seen with another one (their
        # id, "" when they only refused ours), and why this replica cannot join, if so
        self.cluster_id = self.config.cluster_id
        self._foreign: dict[int, str] = {}
        self._joined = False
        self.inconsistent: str | None = None
        id_rng = random.SystemRandom() if seed is None else random.Random(f"cluster-id/{seed}")
        self._id_rng: random.Random = id_rng
        if self.snapshot is not None:
            self._learn_cluster_id(self.snapshot.cluster_id)

    # ------------------------------------------------------------------ log helpers

    @property
    def log_end(self) -> int:
        return self.log_start + len(self.entries)

    def last_epoch(self) -> int:
        if self.entries:
            return self.entries[-1].epoch
        return self.snapshot.epoch if self.snapshot else 0

    def entry(self, offset: int) -> Entry:
        return self.entries[offset - self.log_start]

    def epoch_at(self, end_offset: int) -> int:
        """Epoch of the entry at ``end_offset - 1``."""
        if end_offset == self.log_start:
            return self.snapshot.epoch if self.snapshot else 0
        return self.entry(end_offset - 1).epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        """(largest epoch <= ``epoch`` in the log, the end offset of that epoch).
        None when the answer lies below the log start (a snapshot is needed)."""
        for e in reversed(self.entries):
            if e.epoch <= epoch:
                return e.epoch, e.offset + 1
        if self.snapshot is not None:
            if self.snapshot.epoch <= epoch:
                return self.snapshot.epoch, self.log_start
            return None
        return 0, 0

    def voters_at(self, end_offset: int) -> dict[int, str]:
        if end_offset == self.log_end:
            # By log matching, (start, end, last epoch) identifies the log's contents.
            key = (self.log_start, end_offset, self.last_epoch())
            if self._voters_cache is not None and self._voters_cache[0] == key:
                return self._voters_cache[1]
            v = self._voters_scan(end_offset)
            self._voters_cache = (key, v)
            return v
        return self._voters_scan(end_offset)

    def _voters_scan(self, end_offset: int) -> dict[int, str]:
        for e in reversed(self.entries):
            if e.offset < end_offset and e.kind == VOTERS:
                return decode_voters(e.data)
        if self.snapshot is not None:
            return dict(self.snapshot.voters)
        return dict(self._bootstrap_voters)

    @property
    def voters(self) -> dict[int, str]:
        return self.voters_at(self.log_end)

    def is_voter(self) -> bool:
        return self.node_id in self.voters

    def may_run(self) -> bool:
        """A voter runs elections; so does a replica that a VOTERS entry not yet committed
        (as far as it knows) removed: until that entry commits, the old set may still be
        the quorum, and it may need this replica, which can hold the most up-to-date log.
        Such a replica does not count its own vote (Raft thesis 4.2.2)."""
        return self.is_voter() or self.node_id in self.voters_at(
            max(self.high_watermark, self.log_start)
        )

    def _majority(self, voters: dict[int, str]) -> int:
        return len(voters) // 2 + 1

    # ------------------------------------------------------------------ plumbing

    def _drain(self) -> list[Action]:
        out, self._out = self._out, []
        return out

    def _next_corr(self) -> int:
        self._corr = (self._corr + 1) & 0x7FFFFFFF  # an int32 on the wire
        return self._corr

    def _send(self, m: Message) -> None:
        self._out.append(Send(m))

    def _persist_state(self, epoch: int, voted_for: int | None) -> None:
        if (epoch, voted_for) != (self.epoch, self.voted_for):
            self.epoch, self.voted_for = epoch, voted_for
            self._out.append(PersistQuorumState(epoch, voted_for))

    def _set_role(self, role: Role, leader_id: int, now: int) -> None:
        changed = (role, leader_id) != (self.role, self.leader_id)
        if self.role is Role.LEADER and role is not Role.LEADER:
            self._parked.clear()
            self._progress.clear()
        self.role, self.leader_id = role, leader_id
        self._fetch_corr = None
        self._inflight.clear()
        if role is not Role.LEADER:
            self._reset_election_timer(now, follower=role is Role.FOLLOWER)
        if changed:
            log.info(
                "[raft node=%d] %s epoch=%d leader=%d",
                self.node_id,
                role.value,
                self.epoch,
                leader_id,
            )
            self._out.append(RoleChanged(role.value, self.epoch, leader_id))

    def _reset_election_timer(self, now: int, follower: bool = False) -> None:
        c = self.config
        if follower:
            base = c.fetch_timeout_ms
        else:
            base = c.election_timeout_ms
        self._election_deadline = now + base + self._rng.randrange(c.election_timeout_ms)

    def _transition_epoch(self, epoch: int, leader_id: int, now: int, direct: bool = False) -> None:
        """Move to a larger epoch (or adopt a leader in the current one). ``direct``:
        the news comes from the leader itself, not from a third replica."""
        if epoch > self.epoch:
            self._persist_state(epoch, None)
            self._set_role(Role.UNATTACHED, -1, now)
        if (
            leader_id < 0
            or leader_id == self.node_id
            or epoch != self.epoch
            or (epoch, leader_id) == self._gone_leader
        ):
            return
        if not direct and self._timed_out is not None:
            # Hearsay about the leader we just gave up on (others have not noticed yet)
            # must not pull us back and restart our timer: that stalls elections.
            t_epoch, t_leader, t_when = self._timed_out
            if (t_epoch, t_leader) == (epoch, leader_id) and (
                now - t_when < self.config.fetch_timeout_ms
            ):
                return
        if self.role is not Role.FOLLOWER or self.leader_id != leader_id:
            self._set_role(Role.FOLLOWER, leader_id, now)
        if direct:
            self._last_leader_contact = now

    # ------------------------------------------------------------------ entry points

    def start(self, now: int) -> list[Action]:
        if self.snapshot is not None:
            self._out.append(LoadSnapshot(self.snapshot))
        self._reset_election_timer(now)
        return self._drain()

    def tick(self, now: int) -> list[Action]:
        c = self.config
        if self.inconsistent is not None:
            return []
        if self.role is Role.LEADER:
            self._leader_tick(now)
        else:
            if now >= self._election_deadline:
                self._on_election_timeout(now)
            if self.role is Role.FOLLOWER:
                timeout = (c.fetch_max_wait_ms + 2 * c.request_timeout_ms) << self._fetch_backoff
                if self._fetch_corr is None:
                    self._send_fetch(self.leader_id, now)
                elif now - self._fetch_sent_ms >= timeout:
                    # Slow network: wait longer before re-asking, so that answers can
                    # arrive before they are superseded.
                    self._fetch_backoff = min(self._fetch_backoff + 1, 3)
                    self._send_fetch(self.leader_id, now)
            elif self.role is Role.UNATTACHED or self.role is Role.PROSPECTIVE:
                if self._fetch_corr is None or now - self._fetch_sent_ms >= c.request_timeout_ms:
                    others = sorted(v for v in self.voters if v != self.node_id)
                    if others:
                        self._send_fetch(self._rng.choice(others), now, max_wait=0)
        return self._drain()

    def receive(self, msg: Message, now: int) -> list[Action]:
        if msg.dest != self.node_id or self.inconsistent is not None:
            return []
        if not self._cluster_id_ok(msg, now):
            return self._drain()
        if isinstance(msg, VoteRequest):
            self._on_vote_request(msg, now)
        elif isinstance(msg, VoteResponse):
            self._on_vote_response(msg, now)
        elif isinstance(msg, BeginQuorumEpochRequest):
            self._on_begin_quorum(msg, now)
        elif isinstance(msg, BeginQuorumEpochResponse):
            if msg.leader_epoch > self.epoch:
                self._transition_epoch(msg.leader_epoch, msg.leader_id, now)
        elif isinstance(msg, EndQuorumEpochRequest):
            self._on_end_quorum(msg, now)
        elif isinstance(msg, FetchRequest):
            self._on_fetch_request(msg, now)
        elif isinstance(msg, FetchResponse):
            self._on_fetch_response(msg, now)
        elif isinstance(msg, FetchSnapshotRequest):
            self._on_fetch_snapshot_request(msg, now)
        elif isinstance(msg, FetchSnapshotResponse):
            self._on_fetch_snapshot_response(msg, now)
        return self._drain()

    def propose(self, datas: list[bytes], now: int) -> tuple[int, list[Action]]:
        """Append data entries as leader; returns the offset of the first one."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader_id, self.epoch)
        first = self.log_end
        self._leader_append([(d, DATA) for d in datas], now)
        return first, self._drain()

    def take_snapshot(self, end_offset: int, data: bytes, now: int) -> list[Action]:
        if end_offset > self.applied or end_offset <= self.log_start:
            return []
        snap = Snapshot(end_offset, self.epoch_at(end_offset), self.voters_at(end_offset), data,
                        self.log_cluster_id(end_offset))
        self.entries = self.entries[end_offset - self.log_start :]
        self.snapshot = snap
        self.log_start = end_offset
        self._out.append(PersistSnapshot(snap))
        return self._drain()

    def add_voter(self, voter_id: int, address: str, now: int) -> tuple[int, list[Action]]:
        err = self._check_reconfig()
        if err == ErrorCode.NONE and voter_id in self.voters:
            err = ErrorCode.DUPLICATE_VOTER
        if err == ErrorCode.NONE:
            p = self._progress.get(voter_id)
            if p is None or p.end_offset < self.high_watermark:
                err = ErrorCode.REQUEST_TIMED_OUT  # not caught up yet; the caller retries
        if err == ErrorCode.NONE:
            new = dict(self.voters)
            new[voter_id] = address
            self._leader_append([(encode_voters(new), VOTERS)], now)
        return err, self._drain()

    def remove_voter(self, voter_id: int, now: int) -> tuple[int, list[Action]]:
        err = self._check_reconfig()
        if err == ErrorCode.NONE and voter_id not in self.voters:
            err = ErrorCode.VOTER_NOT_FOUND
        if err == ErrorCode.NONE and len(self.voters) == 1:
            err = ErrorCode.INVALID_REQUEST
        if err == ErrorCode.NONE:
            new = dict(self.voters)
            del new[voter_id]
            self._leader_append([(encode_voters(new), VOTERS)], now)
        return err, self._drain()

    def resign(self, now: int) -> list[Action]:
        """Graceful leader hand-off: EndQuorumEpoch to the voters, most caught up first."""
        self._resign(now)
        return self._drain()

    def _resign(self, now: int) -> None:
        if self.role is Role.LEADER:
            succ = sorted(
                (v for v in self.voters if v != self.node_id),
                key=lambda v: (-self._progress.get(v, _Progress()).end_offset, v),
            )
            for v in succ:
                self._send(
                    EndQuorumEpochRequest(
                        src=self.node_id,
                        dest=v,
                        correlation_id=self._next_corr(),
                        cluster_id=self.cluster_id,
                        leader_id=self.node_id,
                        leader_epoch=self.epoch,
                        preferred_successors=tuple(succ),
                    )
                )
            self._gone_leader = (self.epoch, self.node_id)
            self._set_role(Role.UNATTACHED, -1, now)

    def describe_quorum(self, now: int) -> DescribeQuorumResult:
        if self.role is not Role.LEADER:
            return DescribeQuorumResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch, -1)
        voters = self.voters

        def state(rid: int) -> ReplicaState:
            if rid == self.node_id:
                return ReplicaState(rid, self.log_end, now, now)
            p = self._progress.get(rid, _Progress())
            return ReplicaState(rid, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)

        return DescribeQuorumResult(
            ErrorCode.NONE,
            self.node_id,
            self.epoch,
            self.high_watermark,
            tuple(state(v) for v in sorted(voters)),
            tuple(state(o) for o in sorted(self._progress) if o not in voters),
        )

    # ------------------------------------------------------------------ cluster id

    def log_cluster_id(self, end_offset: int) -> str:
        """The cluster id recorded in the log below ``end_offset`` ("" if none)."""
        for e in self.entries:
            if e.offset >= end_offset:
                break
            if e.kind == CLUSTER_ID:
                return e.data.decode("utf-8", "replace")
        return self.snapshot.cluster_id if self.snapshot is not None else ""

    def _new_cluster_id(self) -> str:
        """A random id as `kafka-storage random-uuid` makes (base64url uuid4, no '-' first)."""
        while True:
            u = uuid.UUID(int=self._id_rng.getrandbits(128), version=4)
            text = base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")
            if not text.startswith("-"):
                return text

    def _learn_cluster_id(self, cluster_id: str) -> None:
        """``cluster_id`` is committed in the log: adopt it, or stop if ours differs."""
        if not cluster_id or cluster_id == self.cluster_id:
            return
        if not self.cluster_id:
            self.cluster_id = cluster_id
            log.info("[raft node=%d] cluster id %s (learned from the metadata log)",
                     self.node_id, cluster_id)
            return
        self._fail(f"the metadata log holds cluster id {cluster_id}, but this node's "
                   f"cluster id is {self.cluster_id}")

    def _fail(self, reason: str) -> None:
        if self.inconsistent is None:
            self.inconsistent = reason
            log.error("[raft node=%d] %s", self.node_id, reason)

    def _cluster_id_ok(self, msg: Message, now: int) -> bool:
        """Rule 9: False (after answering INCONSISTENT_CLUSTER_ID) for a request of
        another cluster, and for a refusal of ours."""
        if isinstance(msg, VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest
                      | FetchRequest | FetchSnapshotRequest):
            if not (msg.cluster_id and self.cluster_id and msg.cluster_id != self.cluster_id):
                self._foreign.pop(msg.src, None)
                return True
            self._refuse(msg)
            self._note_foreign(msg.src, msg.cluster_id, type(msg).__name__.removesuffix(
                "Request"))
            return False
        if msg.error_code != ErrorCode.INCONSISTENT_CLUSTER_ID:
            self._foreign.pop(msg.src, None)
            return True
        self._note_foreign(msg.src, "" if msg.cluster_id == self.cluster_id else msg.cluster_id,
                           "")
        return False

    def _refuse(self, m: VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest
                | FetchRequest | FetchSnapshotRequest) -> None:
        err, me, to, corr = ErrorCode.INCONSISTENT_CLUSTER_ID, self.node_id, m.src, m.correlation_id
        ours = self.cluster_id
        if isinstance(m, VoteRequest):
            self._send(VoteResponse(src=me, dest=to, correlation_id=corr, error_code=err,
                                    leader_id=-1, leader_epoch=-1, vote_granted=False,
                                    cluster_id=ours))
        elif isinstance(m, BeginQuorumEpochRequest):
            self._send(BeginQuorumEpochResponse(src=me, dest=to, correlation_id=corr,
                                                error_code=err, leader_id=-1, leader_epoch=-1,
                                                cluster_id=ours))
        elif isinstance(m, FetchRequest):
            self._send(FetchResponse(src=me, dest=to, correlation_id=corr, error_code=err,
                                     high_watermark=-1, log_start_offset=-1, leader_id=-1,
                                     leader_epoch=-1, cluster_id=ours))
        elif isinstance(m, FetchSnapshotRequest):
            self._send(FetchSnapshotResponse(src=me, dest=to, correlation_id=corr,
                                             error_code=err, leader_id=-1, leader_epoch=-1,
                                             snapshot_id=m.snapshot_id, size=-1,
                                             position=m.position, cluster_id=ours))
        # EndQuorumEpoch has no response here

    def _note_foreign(self, peer: int, their_id: str, what: str) -> None:
        known = self._foreign.get(peer)
        if known is None or (their_id and known != their_id):
            if what:
                log.warning("[raft node=%d] refused %s from node %d: it belongs to cluster %s, "
                            "this node to cluster %s (INCONSISTENT_CLUSTER_ID)", self.node_id,
                            what, peer, their_id, self.cluster_id)
            else:
                log.warning("[raft node=%d] node %d refused this node: it belongs to cluster "
                            "%s, this node to cluster %s (INCONSISTENT_CLUSTER_ID)", self.node_id,
                            peer, their_id or "(not said)", self.cluster_id or "(none yet)")
        self._foreign[peer] = their_id or known or ""
        self._check_joinable()

    def _check_joinable(self) -> None:
        """A replica that never reached a leader stops once the voters that may share its
        cluster id cannot make a majority (rule 9); one that did keeps refusing."""
        if self._joined:
            return
        voters = self.voters
        same = [v for v in voters if v == self.node_id or v not in self._foreign]
        if not voters or len(same) >= self._majority(voters):
            return
        foreign = sorted(v for v in voters if v in self._foreign)
        theirs = sorted({self._foreign[v] for v in foreign if self._foreign[v]})
        self._fail(
            f"cannot join the metadata quorum: this node's cluster id is "
            f"{self.cluster_id or '(none)'}, but voter(s) {', '.join(map(str, foreign))} "
            + (f"belong to cluster {', '.join(theirs)}" if theirs else "refused it")
            + " (INCONSISTENT_CLUSTER_ID); was its data directory formatted for another "
            "cluster?")

    # ------------------------------------------------------------------ elections

    def _on_election_timeout(self, now: int) -> None:
        if self.role is Role.FOLLOWER:
            self._timed_out = (self.epoch, self.leader_id, now)
        if not self.may_run():
            # Observers never run; forget a silent leader and rediscover one.
            if self.role is Role.FOLLOWER:
                self._set_role(Role.UNATTACHED, -1, now)
            else:
                self._reset_election_timer(now)
            return
        self._start_prevote(now)

    def _start_prevote(self, now: int) -> None:
        if not self.config.pre_vote:
            self._become_candidate(now)
            return
        self._set_role(Role.PROSPECTIVE, -1, now)
        self._vote_corr = self._next_corr()
        self._votes = {self.node_id}
        self._rejects = set()
        self._request_votes(pre_vote=True)
        self._maybe_win(now)

    def _request_votes(self, pre_vote: bool) -> None:
        epoch = self.epoch + 1 if pre_vote else self.epoch
        for v in sorted(self.voters):
            if v == self.node_id:
                continue
            self._send(
                VoteRequest(
                    src=self.node_id,
                    dest=v,
                    correlation_id=self._vote_corr,
                    cluster_id=self.cluster_id,
                    voter_id=v,
                    candidate_epoch=epoch,
                    candidate_id=self.node_id,
                    last_offset_epoch=self.last_epoch(),
                    last_offset=self.log_end,
                    pre_vote=pre_vote,
                )
            )

    def _maybe_win(self, now: int) -> None:
        voters = self.voters
        granted = len(self._votes & voters.keys())
        if granted < self._majority(voters):
            return
        if self.role is Role.PROSPECTIVE:
            self._become_candidate(now)
        elif self.role is Role.CANDIDATE:
            self._become_leader(now)

    def _become_candidate(self, now: int) -> None:
        self._persist_state(self.epoch + 1, self.node_id)
        self._set_role(Role.CANDIDATE, -1, now)
        self._vote_corr = self._next_corr()
        self._votes = {self.node_id}
        self._rejects = set()
        self._request_votes(pre_vote=False)
        self._maybe_win(now)

    def _log_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        mine = self.last_epoch()
        return last_epoch > mine or (last_epoch == mine and last_offset >= self.log_end)

    def _has_live_leader(self, now: int) -> bool:
        if self.role is Role.LEADER:
            return True
        return (
            self.role is Role.FOLLOWER
            and now - self._last_leader_contact < self.config.fetch_timeout_ms
        )

    def _on_vote_request(self, m: VoteRequest, now: int) -> None:
        def reply(granted: bool, err: int = ErrorCode.NONE) -> None:
            self._send(
                VoteResponse(
                    src=self.node_id,
                    dest=m.src,
                    correlation_id=m.correlation_id,
                    error_code=err,
                    leader_id=self.leader_id,
                    leader_epoch=self.epoch,
                    vote_granted=granted,
                )
            )

        # Votes are answered without consulting the voter sets (KIP-853; Raft thesis
        # 4.1): the candidate counts only votes from its own voter set, and the
        # receiver's may differ from it in either direction. A replica removed by an
        # uncommitted VOTERS entry (or not yet seeing the one that adds the candidate)
        # that refused could leave a quorum that needs its vote unable to elect anyone.
        if m.pre_vote:
            # No state change: a pre-vote only asks "would you vote for me?".
            ok = (
                m.candidate_epoch > self.epoch
                and not self._has_live_leader(now)
                and self._log_up_to_date(m.last_offset_epoch, m.last_offset)
            )
            reply(ok)
            return
        if m.candidate_epoch < self.epoch:
            reply(False, ErrorCode.FENCED_LEADER_EPOCH)
            return
        if m.candidate_epoch > self.epoch:
            if self._has_live_leader(now) and self.role is not Role.LEADER:
                reply(False)  # leader stickiness
                return
            self._transition_epoch(m.candidate_epoch, -1, now)
        granted = (
            self.voted_for in (None, m.candidate_id)
            and self.role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE)
            and self.leader_id < 0
            and self._log_up_to_date(m.last_offset_epoch, m.last_offset)
        )
        if granted:
            self._persist_state(self.epoch, m.candidate_id)
            self._reset_election_timer(now)
        reply(granted)

    def _on_vote_response(self, m: VoteResponse, now: int) -> None:
        if m.leader_epoch > self.epoch:
            self._transition_epoch(m.leader_epoch, m.leader_id, now)
            return
        if m.correlation_id != self._vote_corr:
            return
        if self.role not in (Role.PROSPECTIVE, Role.CANDIDATE):
            return
        if m.vote_granted:
            self._votes.add(m.src)
            self._maybe_win(now)
        else:
            self._rejects.add(m.src)
            if m.leader_id >= 0 and m.leader_epoch == self.epoch:
                self._transition_epoch(m.leader_epoch, m.leader_id, now)

    def _become_leader(self, now: int) -> None:
        self._set_role(Role.LEADER, self.node_id, now)
        self._progress = {}
        self._parked = {}
        self._begin_sent = {}
        self._became_leader_ms = now
        self._epoch_start = self.log_end
        self._joined = True
        items = [(b"%d" % self.node_id, LEADER_CHANGE)]
        if not self.log_cluster_id(self.log_end):
            # rule 9: the first leader records the cluster id (its own, or a new one)
            cid = self.cluster_id or self._new_cluster_id()
            items.append((cid.encode(), CLUSTER_ID))
        self._leader_append(items, now)
        self._send_begin_quorum(now)

    def _send_begin_quorum(self, now: int) -> None:
        for v in sorted(self.voters):
            if v == self.node_id:
                continue
            p = self._progress.get(v)
            if p is not None and p.last_fetch_ms >= self._became_leader_ms:
                continue
            if now - self._begin_sent.get(v, -(10**12)) < self.config.request_timeout_ms:
                continue
            self._begin_sent[v] = now
            self._send(
                BeginQuorumEpochRequest(
                    src=self.node_id,
                    dest=v,
                    correlation_id=self._next_corr(),
                    cluster_id=self.cluster_id,
                    voter_id=v,
                    leader_id=self.node_id,
                    leader_epoch=self.epoch,
                )
            )

    def _on_begin_quorum(self, m: BeginQuorumEpochRequest, now: int) -> None:
        if m.leader_epoch >= self.epoch and m.leader_id != self.node_id:
            if m.leader_epoch == self.epoch and self.role is Role.LEADER:
                log.error("[raft node=%d] two leaders in epoch %d", self.node_id, self.epoch)
                return
            self._transition_epoch(m.leader_epoch, m.leader_id, now, direct=True)
            if self.role is Role.FOLLOWER and self._fetch_corr is None:
                self._send_fetch(self.leader_id, now)
        self._send(
            BeginQuorumEpochResponse(
                src=self.node_id,
                dest=m.src,
                correlation_id=m.correlation_id,
                error_code=ErrorCode.NONE if m.leader_epoch >= self.epoch else ErrorCode.FENCED_LEADER_EPOCH,
                leader_id=self.leader_id,
                leader_epoch=self.epoch,
            )
        )

    def _on_end_quorum(self, m: EndQuorumEpochRequest, now: int) -> None:
        if m.leader_epoch > self.epoch:
            self._transition_epoch(m.leader_epoch, -1, now)
        if m.leader_epoch == self.epoch and self.leader_id == m.leader_id:
            self._gone_leader = (self.epoch, m.leader_id)
            self._set_role(Role.UNATTACHED, -1, now)
            # The most caught-up successor tries first; others back off by rank.
            rank = (
                m.preferred_successors.index(self.node_id)
                if self.node_id in m.preferred_successors
                else len(m.preferred_successors)
            )
            self._election_deadline = now + rank * self.config.election_timeout_ms // 2
            self._last_leader_contact = -(10**12)

    # ------------------------------------------------------------------ leader side

    def _leader_append(self, items: list[tuple[bytes, int]], now: int) -> None:
        base = self.log_end
        new = tuple(Entry(base + i, self.epoch, d, k) for i, (d, k) in enumerate(items))
        self.entries.extend(new)
        self._out.append(AppendLog(new))
        self._update_hw(now)
        self._complete_parked(now)

    def _update_hw(self, now: int) -> None:
        voters = self.voters
        ends = []
        for v in voters:
            if v == self.node_id:
                ends.append(self.log_end)
            else:
                p = self._progress.get(v)
                ends.append(p.end_offset if p else -1)
        ends.sort(reverse=True)
        candidate = ends[self._majority(voters) - 1]
        if candidate > self.high_watermark and candidate > self._epoch_start:
            self._advance_hw(candidate)
            self._complete_parked(now)
        # A leader outside the committed voter set steps down once that is committed.
        if self.node_id not in self.voters_at(self.high_watermark) and self.role is Role.LEADER:
            if self.node_id not in voters:
                log.info("[raft node=%d] removed from voters; resigning", self.node_id)
                self._resign(now)

    def _advance_hw(self, hw: int) -> None:
        hw = min(hw, self.log_end)
        if hw <= self.high_watermark:
            return
        self.high_watermark = hw
        if hw > self.applied:
            start = max(self.applied, self.log_start)
            batch = tuple(self.entries[start - self.log_start : hw - self.log_start])
            self.applied = hw
            if batch:
                for e in batch:
                    if e.kind == CLUSTER_ID:
                        self._learn_cluster_id(e.data.decode("utf-8", "replace"))
                if self.inconsistent is None:  # another cluster's log is not applied
                    self._out.append(Commit(batch))

    def _check_reconfig(self) -> int:
        if self.role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark <= self._epoch_start:
            return ErrorCode.REQUEST_TIMED_OUT
        for e in self.entries:
            if e.kind == VOTERS and e.offset >= self.high_watermark:
                return ErrorCode.REQUEST_TIMED_OUT
        return ErrorCode.NONE

    def _leader_tick(self, now: int) -> None:
        c = self.config
        # Check quorum: resign if a majority has not fetched recently.
        voters = self.voters
        if now - self._became_leader_ms > c.fetch_timeout_ms * 3 // 2:
            live = 1 if self.node_id in voters else 0
            for v in voters:
                if v == self.node_id:
                    continue
                p = self._progress.get(v)
                if p is not None and now - p.last_fetch_ms <= c.fetch_timeout_ms * 3 // 2:
                    live += 1
            if live < self._majority(voters):
                log.info(
                    "[raft node=%d] lost quorum in epoch %d; resigning", self.node_id, self.epoch
                )
                self._gone_leader = (self.epoch, self.node_id)
                self._set_role(Role.UNATTACHED, -1, now)
                return
        self._send_begin_quorum(now)
        for rid, (_req, deadline) in list(self._parked.items()):
            if now >= deadline:
                self._answer_parked(rid, now)

    def _fetch_error(self, m: FetchRequest, err: int) -> None:
        self._send(
            FetchResponse(
                src=self.node_id,
                dest=m.src,
                correlation_id=m.correlation_id,
                error_code=err,
                high_watermark=-1,
                log_start_offset=self.log_start,
                leader_id=self.leader_id,
                leader_epoch=self.epoch,
            )
        )

    def _on_fetch_request(self, m: FetchRequest, now: int) -> None:
        if m.current_leader_epoch > self.epoch:
            # Someone knows a newer epoch than we do: we cannot be its leader.
            self._transition_epoch(m.current_leader_epoch, -1, now)
            self._fetch_error(m, ErrorCode.UNKNOWN_LEADER_EPOCH)
            return
        if self.role is not Role.LEADER:
            self._fetch_error(m, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        if m.current_leader_epoch < self.epoch:
            self._fetch_error(m, ErrorCode.FENCED_LEADER_EPOCH)
            return
        # Validate the follower's (offset, epoch) against our log.
        if m.fetch_offset < self.log_start:
            self._respond_snapshot(m)
            return
        found = self.end_offset_for_epoch(m.last_fetched_epoch)
        if found is None:
            self._respond_snapshot(m)
            return
        epoch, end = found
        if epoch != m.last_fetched_epoch or end < m.fetch_offset:
            if end < self.log_start:
                self._respond_snapshot(m)
                return
            self._send(
                FetchResponse(
                    src=self.node_id,
                    dest=m.src,
                    correlation_id=m.correlation_id,
                    error_code=ErrorCode.NONE,
                    high_watermark=self.high_watermark,
                    log_start_offset=self.log_start,
                    leader_id=self.node_id,
                    leader_epoch=self.epoch,
                    diverging_epoch=(epoch, end),
                )
            )
            return
        p = self._progress.setdefault(m.replica_id, _Progress())
        p.end_offset = m.fetch_offset
        p.last_fetch_ms = now
        if m.fetch_offset >= self.high_watermark:
            p.last_caught_up_ms = now
        self._update_hw(now)
        if self.role is not Role.LEADER:
            self._fetch_error(m, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        if (
            m.fetch_offset >= self.log_end
            and m.max_wait_ms > 0
            and p.sent_hw == self.high_watermark
        ):
            self._parked[m.replica_id] = (m, now + m.max_wait_ms)
            return
        self._parked.pop(m.replica_id, None)
        self._answer_fetch(m)

    def _answer_fetch(self, m: FetchRequest) -> None:
        lo = m.fetch_offset - self.log_start
        recs = tuple(self.entries[lo : lo + self.config.max_fetch_entries])
        p = self._progress.get(m.replica_id)
        if p is not None:
            p.sent_hw = self.high_watermark
        self._send(
            FetchResponse(
                src=self.node_id,
                dest=m.src,
                correlation_id=m.correlation_id,
                error_code=ErrorCode.NONE,
                high_watermark=self.high_watermark,
                log_start_offset=self.log_start,
                leader_id=self.node_id,
                leader_epoch=self.epoch,
                records=recs,
            )
        )

    def _answer_parked(self, rid: int, now: int) -> None:
        req, _ = self._parked.pop(rid)
        if req.fetch_offset < self.log_start:
            self._respond_snapshot(req)
        else:
            self._answer_fetch(req)

    def _complete_parked(self, now: int) -> None:
        for rid in list(self._parked):
            self._answer_parked(rid, now)

    def _respond_snapshot(self, m: FetchRequest) -> None:
        snap = self.snapshot
        self._send(
            FetchResponse(
                src=self.node_id,
                dest=m.src,
                correlation_id=m.correlation_id,
                error_code=ErrorCode.NONE if snap else ErrorCode.OFFSET_OUT_OF_RANGE,
                high_watermark=self.high_watermark,
                log_start_offset=self.log_start,
                leader_id=self.node_id,
                leader_epoch=self.epoch,
                snapshot_id=(snap.end_offset, snap.epoch) if snap else None,
            )
        )

    def _snapshot_blob(self, snapshot_id: tuple[int, int]) -> bytes | None:
        """Serialized snapshot by id: the current one or the one before it, so that a
        transfer in progress survives the leader taking a newer snapshot."""
        snap = self.snapshot
        if snap is not None and (snap.end_offset, snap.epoch) not in self._blobs:
            self._blobs[(snap.end_offset, snap.epoch)] = snap.to_bytes()
            while len(self._blobs) > 2:
                del self._blobs[min(self._blobs)]
        return self._blobs.get(snapshot_id)

    def _on_fetch_snapshot_request(self, m: FetchSnapshotRequest, now: int) -> None:
        err = ErrorCode.NONE
        blob = b""
        if self.role is not Role.LEADER:
            err = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif m.current_leader_epoch != self.epoch:
            err = ErrorCode.FENCED_LEADER_EPOCH
        else:
            # A follower fetching a snapshot is in contact (check quorum counts it, as
            # KRaft does): else a leader whose quorum needs that follower resigns before
            # a large snapshot can arrive, and every new epoch starts the transfer over.
            p = self._progress.setdefault(m.replica_id, _Progress())
            p.last_fetch_ms = now
            found = self._snapshot_blob(m.snapshot_id)
            if found is None:
                err = ErrorCode.SNAPSHOT_NOT_FOUND
            else:
                blob = found
        if err == ErrorCode.NONE and not 0 <= m.position <= len(blob):
            err = ErrorCode.POSITION_OUT_OF_RANGE
        chunk = blob[m.position : m.position + m.max_bytes] if err == ErrorCode.NONE else b""
        self._send(
            FetchSnapshotResponse(
                src=self.node_id,
                dest=m.src,
                correlation_id=m.correlation_id,
                error_code=err,
                leader_id=self.leader_id,
                leader_epoch=self.epoch,
                snapshot_id=m.snapshot_id,
                size=len(blob),
                position=m.position,
                unaligned_records=chunk,
            )
        )

    # ------------------------------------------------------------------ follower side

    def _send_fetch(self, dest: int, now: int, max_wait: int | None = None) -> None:
        if dest < 0 or dest == self.node_id:
            return
        self._fetch_corr = self._next_corr()
        self._fetch_sent_ms = now
        self._fetch_dest = dest
        if self._snap_fetch is not None and self.role is Role.FOLLOWER and dest == self.leader_id:
            end, epoch = self._snap_fetch
            self._snap_inflight[self._fetch_corr] = (dest, self._snap_fetch, len(self._snap_buf))
            if len(self._snap_inflight) > 8:
                del self._snap_inflight[min(self._snap_inflight)]
            self._send(
                FetchSnapshotRequest(
                    src=self.node_id,
                    dest=dest,
                    correlation_id=self._fetch_corr,
                    cluster_id=self.cluster_id,
                    replica_id=self.node_id,
                    current_leader_epoch=self.epoch,
                    snapshot_id=(end, epoch),
                    position=len(self._snap_buf),
                    max_bytes=self.config.snapshot_chunk_bytes,
                )
            )
            return
        self._inflight[self._fetch_corr] = (dest, self.log_end, self.last_epoch())
        if len(self._inflight) > 8:
            del self._inflight[min(self._inflight)]
        self._send(
            FetchRequest(
                src=self.node_id,
                dest=dest,
                correlation_id=self._fetch_corr,
                cluster_id=self.cluster_id,
                replica_id=self.node_id,
                max_wait_ms=self.config.fetch_max_wait_ms if max_wait is None else max_wait,
                current_leader_epoch=self.epoch,
                fetch_offset=self.log_end,
                last_fetched_epoch=self.last_epoch(),
                log_start_offset=self.log_start,
            )
        )

    def _on_fetch_response(self, m: FetchResponse, now: int) -> None:
        if m.leader_epoch > self.epoch or (
            m.leader_epoch == self.epoch and m.leader_id >= 0 and self.leader_id < 0
        ):
            self._transition_epoch(m.leader_epoch, m.leader_id, now, direct=m.src == m.leader_id)
            if self.role is Role.FOLLOWER and self._fetch_corr is None:
                self._send_fetch(self.leader_id, now)
            if m.correlation_id != self._fetch_corr:
                return
        if m.correlation_id != self._fetch_corr or m.src != self._fetch_dest:
            # An answer to an earlier fetch (ours timed out first) is still good if our
            # log has not moved since we sent it.
            req = self._inflight.get(m.correlation_id)
            if req is None or req != (m.src, self.log_end, self.last_epoch()):
                return
            if self._snap_fetch is not None:
                return
        self._inflight.pop(m.correlation_id, None)
        if (
            self.role is Role.FOLLOWER
            and m.src == self.leader_id
            and m.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            and m.leader_epoch == self.epoch
        ):
            # Our leader says it no longer leads this epoch: it resigned.
            self._gone_leader = (self.epoch, self.leader_id)
            self._set_role(Role.UNATTACHED, -1, now)
            return
        if self.role is not Role.FOLLOWER or m.src != self.leader_id or m.error_code != ErrorCode.NONE:
            self._fetch_corr = -1  # retry after the request timeout, not at once
            return
        self._fetch_corr = None
        self._fetch_backoff = 0
        self._last_leader_contact = now
        self._joined = True
        self._reset_election_timer(now, follower=True)
        if m.diverging_epoch is not None:
            epoch, end = m.diverging_epoch
            # Cut at the end of the last epoch both logs share (KRaft's truncation rule).
            mine = self.end_offset_for_epoch(epoch)
            if mine is not None and mine[1] < end:
                end = mine[1]
            if end < self.log_end:
                self._truncate(end)
            self._send_fetch(self.leader_id, now)
            return
        if m.snapshot_id is not None:
            if self._snap_fetch != m.snapshot_id:
                self._snap_fetch = m.snapshot_id
                self._snap_buf = bytearray()
            self._send_fetch(self.leader_id, now)
            return
        if m.records:
            if m.records[0].offset != self.log_end:
                self._send_fetch(self.leader_id, now)
                return
            for e in m.records:
                if e.epoch > self.epoch:
                    log.error("[raft node=%d] entry from future epoch %r", self.node_id, e)
                    return
            self.entries.extend(m.records)
            self._out.append(AppendLog(m.records))
        self._advance_hw(min(m.high_watermark, self.log_end))
        self._send_fetch(self.leader_id, now)

    def _truncate(self, offset: int) -> None:
        if offset < self.high_watermark:
            log.error(
                "[raft node=%d] refusing to truncate committed offsets (%d < hw %d)",
                self.node_id,
                offset,
                self.high_watermark,
            )
            return
        offset = max(offset, self.log_start)
        del self.entries[offset - self.log_start :]
        self._out.append(TruncateLog(offset))

    def _on_fetch_snapshot_response(self, m: FetchSnapshotResponse, now: int) -> None:
        if m.leader_epoch > self.epoch:
            self._transition_epoch(m.leader_epoch, m.leader_id, now)
        current = m.correlation_id == self._fetch_corr  # sent in our present role
        if not current:
            # A late answer is still good if it continues the transfer where it stands.
            req = self._snap_inflight.get(m.correlation_id)
            if self._snap_fetch is None or req != (m.src, self._snap_fetch, len(self._snap_buf)):
                return
        self._snap_inflight.pop(m.correlation_id, None)
        if (
            current
            and self.role is Role.FOLLOWER
            and m.src == self.leader_id
            and m.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            and m.leader_epoch == self.epoch
        ):
            # Our leader resigned (as for Fetch). Only an answer to a request sent while
            # following it counts: a late one may come from before it won this epoch
            # (a candidate answers NOT_LEADER_OR_FOLLOWER in the epoch it runs for).
            # The transfer resumes with the next leader holding the same snapshot.
            self._gone_leader = (self.epoch, self.leader_id)
            self._set_role(Role.UNATTACHED, -1, now)
            return
        if self.role is not Role.FOLLOWER or m.src != self.leader_id:
            self._fetch_corr = -1
            return
        self._fetch_corr = None
        self._fetch_backoff = 0
        if m.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH):
            self._fetch_corr = -1  # epochs are moving: retry later, keeping what we have
            return
        if m.error_code != ErrorCode.NONE or self._snap_fetch != m.snapshot_id:
            self._snap_fetch = None
            self._snap_buf = bytearray()
            return
        self._last_leader_contact = now
        self._reset_election_timer(now, follower=True)
        if m.position != len(self._snap_buf):
            self._send_fetch(self.leader_id, now)
            return
        self._snap_buf += m.unaligned_records
        if len(self._snap_buf) < m.size:
            self._send_fetch(self.leader_id, now)
            return
        snap = Snapshot.from_bytes(bytes(self._snap_buf))
        self._snap_fetch = None
        self._snap_buf = bytearray()
        if snap.end_offset <= self.high_watermark:
            self._send_fetch(self.leader_id, now)
            return
        self._learn_cluster_id(snap.cluster_id)  # committed; another cluster's: stop here
        if self.inconsistent is not None:
            return
        self.snapshot = snap
        self.entries = []
        self.log_start = snap.end_offset
        self.high_watermark = snap.end_offset
        self.applied = snap.end_offset
        self._out.append(PersistSnapshot(snap, replace_log=True))
        self._out.append(LoadSnapshot(snap))
        self._send_fetch(self.leader_id, now)
