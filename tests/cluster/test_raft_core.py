"""Focused checks of the raft core, its messages and its file storage."""

from __future__ import annotations

from pathlib import Path

import pytest

from jocko_py.cluster.raft.core import (
    DurableState,
    NotLeaderError,
    RaftConfig,
    RaftCore,
    Role,
    encode_voters,
)
from jocko_py.cluster.raft.messages import (
    DATA,
    LEADER_CHANGE,
    VOTERS,
    AppendLog,
    BeginQuorumEpochRequest,
    Commit,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    PersistQuorumState,
    PersistSnapshot,
    Send,
    Snapshot,
    TruncateLog,
    VoteRequest,
    VoteResponse,
    decode_message,
    encode_message,
)
from jocko_py.cluster.raft.storage import FileStorage, MemoryStorage
from jocko_py.protocol.errors import ErrorCode

CFG = RaftConfig(cluster_id="jocko", election_timeout_ms=100, fetch_timeout_ms=200,
                 fetch_max_wait_ms=50)


def _single_leader(storage: MemoryStorage) -> RaftCore:
    core = RaftCore(1, {1: "a"}, CFG, storage.load())
    for a in core.start(0) + core.tick(1000):
        if not isinstance(a, Send | Commit):
            storage.execute(a)
    assert core.role is Role.LEADER
    return core


def test_single_voter_elects_itself_and_commits_after_persisting() -> None:
    st = MemoryStorage()
    core = _single_leader(st)
    off, actions = core.propose([b"x"], 1001)
    kinds = [type(a) for a in actions]
    # The append is persisted before the commit is reported.
    assert kinds.index(AppendLog) < kinds.index(Commit)
    commit = next(a for a in actions if isinstance(a, Commit))
    assert commit.entries[-1] == Entry(off, core.epoch, b"x", DATA)
    with pytest.raises(NotLeaderError):
        RaftCore(2, {1: "a", 2: "b"}, CFG).propose([b"y"], 0)


def test_vote_is_persisted_before_the_response_and_granted_once_per_epoch() -> None:
    core = RaftCore(2, {1: "a", 2: "b", 3: "c"}, CFG)
    core.start(0)

    def vote(cand: int, corr: int) -> list[object]:
        return list(
            core.receive(
                VoteRequest(
                    src=cand,
                    dest=2,
                    correlation_id=corr,
                    cluster_id="jocko",
                    voter_id=2,
                    candidate_epoch=1,
                    candidate_id=cand,
                    last_offset_epoch=0,
                    last_offset=0,
                ),
                10,
            )
        )

    acts = vote(1, 1)
    assert isinstance(acts[-1], Send) and isinstance(acts[-1].message, VoteResponse)
    assert acts[-1].message.vote_granted
    persist = [i for i, a in enumerate(acts) if isinstance(a, PersistQuorumState)]
    assert persist and persist[-1] < len(acts) - 1
    assert core.voted_for == 1
    again = vote(3, 2)
    resp = again[-1]
    assert isinstance(resp, Send) and isinstance(resp.message, VoteResponse)
    assert not resp.message.vote_granted


def test_a_voter_with_a_stale_voter_set_votes_for_a_newly_added_candidate() -> None:
    """Voter 3 has not fetched the VOTERS entry that added 4; 4's quorum {1, 3, 4} may
    need 3's vote, so 3 must not refuse 4 for being unknown (seed 264 of the raft
    simulation hung without a leader that way)."""
    core = RaftCore(3, {1: "a", 2: "b", 3: "c"}, CFG)
    core.start(0)
    for pre_vote in (True, False):
        acts = core.receive(
            VoteRequest(
                src=4,
                dest=3,
                correlation_id=1,
                cluster_id="jocko",
                voter_id=3,
                candidate_epoch=1,
                candidate_id=4,
                last_offset_epoch=0,
                last_offset=0,
                pre_vote=pre_vote,
            ),
            10_000,
        )
        resp = acts[-1]
        assert isinstance(resp, Send) and isinstance(resp.message, VoteResponse)
        assert resp.message.vote_granted, (pre_vote, resp.message)
    assert core.voted_for == 4


def test_leader_reports_divergence_and_snapshot_to_fetchers() -> None:
    st = MemoryStorage()
    core = _single_leader(st)
    core.propose([b"a", b"b"], 1001)
    end = core.log_end  # LEADER_CHANGE, CLUSTER_ID, a, b
    # A follower claiming an epoch the leader never had at the log end diverges.
    acts = core.receive(
        FetchRequest(
            src=9,
            dest=1,
            correlation_id=5,
            cluster_id="jocko",
            replica_id=9,
            max_wait_ms=0,
            current_leader_epoch=core.epoch,
            fetch_offset=end,
            last_fetched_epoch=core.epoch + 5,
            log_start_offset=0,
        ),
        1002,
    )
    resp = next(a.message for a in acts if isinstance(a, Send))
    assert isinstance(resp, FetchResponse) and resp.diverging_epoch == (core.epoch, end)
    acts = core.take_snapshot(2, b"image", 1003)
    assert isinstance(acts[0], PersistSnapshot) and core.log_start == 2
    acts = core.receive(
        FetchRequest(
            src=9,
            dest=1,
            correlation_id=6,
            cluster_id="jocko",
            replica_id=9,
            max_wait_ms=0,
            current_leader_epoch=core.epoch,
            fetch_offset=0,
            last_fetched_epoch=0,
            log_start_offset=0,
        ),
        1004,
    )
    resp = next(a.message for a in acts if isinstance(a, Send))
    assert isinstance(resp, FetchResponse) and resp.snapshot_id == (2, core.epoch)
    acts = core.receive(
        FetchRequest(
            src=9,
            dest=1,
            correlation_id=7,
            cluster_id="jocko",
            replica_id=9,
            max_wait_ms=0,
            current_leader_epoch=core.epoch,
            fetch_offset=2,
            last_fetched_epoch=core.epoch,
            log_start_offset=2,
        ),
        1005,
    )
    resp = next(a.message for a in acts if isinstance(a, Send))
    assert isinstance(resp, FetchResponse) and [e.offset for e in resp.records] == [2, 3]
    dq = core.describe_quorum(1005)
    assert dq.error_code == ErrorCode.NONE and dq.leader_id == 1
    assert [o.replica_id for o in dq.observers] == [9]


def test_messages_round_trip() -> None:
    m = FetchResponse(
        src=1,
        dest=2,
        correlation_id=3,
        error_code=0,
        high_watermark=4,
        log_start_offset=0,
        leader_id=1,
        leader_epoch=2,
        diverging_epoch=(1, 3),
        records=(Entry(3, 2, b"\x00\xff", DATA), Entry(4, 2, b"{}", VOTERS)),
    )
    assert decode_message(encode_message(m)) == m
    snap = Snapshot(10, 3, {1: "a:1", 2: "b:2"}, b"data")
    assert Snapshot.from_bytes(snap.to_bytes()) == snap


def test_file_storage_reloads_and_drops_a_torn_tail(tmp_path: Path) -> None:
    fs = FileStorage(tmp_path)
    fs.execute(PersistQuorumState(3, 2))
    fs.execute(AppendLog(tuple(Entry(i, 1, b"e%d" % i) for i in range(5))))
    fs.execute(TruncateLog(3))
    fs.execute(AppendLog((Entry(3, 3, b"new"),)))
    fs.close()
    st = FileStorage(tmp_path).load()
    assert (st.epoch, st.voted_for) == (3, 2)
    assert [e.data for e in st.entries] == [b"e0", b"e1", b"e2", b"new"]
    with open(tmp_path / "log", "ab") as f:
        f.write(b"\x00\x00\x00\x30torn")
    fs = FileStorage(tmp_path)
    assert len(fs.load().entries) == 4
    fs.execute(PersistSnapshot(Snapshot(2, 1, {1: "a"}, b"img")))
    fs.close()
    st = FileStorage(tmp_path).load()
    assert st.snapshot == Snapshot(2, 1, {1: "a"}, b"img")
    assert [e.offset for e in st.entries] == [2, 3]
    core = RaftCore(1, {1: "a"}, CFG, DurableState(st.epoch, st.voted_for, st.snapshot, st.entries))
    assert core.log_start == 2 and core.log_end == 4


def test_follower_acknowledges_an_append_only_after_persisting_it() -> None:
    """A follower's next Fetch (whose fetch_offset acknowledges the entries) leaves only
    after the AppendLog of those entries: executed in order, the durable log end is never
    below an offset the follower has sent."""
    voters = {1: "a", 2: "b", 3: "c"}
    stores = {i: MemoryStorage() for i in voters}
    cores = {i: RaftCore(i, voters, CFG, stores[i].load(), seed=i) for i in voters}
    inbox: list[object] = []
    checked = 0

    def run(i: int, acts: list[object]) -> None:
        nonlocal checked
        for a in acts:
            if isinstance(a, Send):
                m = a.message
                if isinstance(m, FetchRequest):
                    d = stores[i].state
                    durable_end = d.entries[-1].offset + 1 if d.entries else 0
                    assert m.fetch_offset <= durable_end, (i, m.fetch_offset, durable_end)
                    checked += m.fetch_offset > 0
                inbox.append(m)
            elif isinstance(a, PersistQuorumState | AppendLog | TruncateLog | PersistSnapshot):
                stores[i].execute(a)

    for i, c in cores.items():
        run(i, list(c.start(0)))
    proposed = False
    for now in range(1, 3000, 5):
        while inbox:
            m = inbox.pop(0)
            run(m.dest, list(cores[m.dest].receive(m, now)))  # type: ignore[attr-defined]
        for i, c in cores.items():
            run(i, list(c.tick(now)))
        leader = next((c for c in cores.values() if c.role is Role.LEADER), None)
        if leader is not None and not proposed and leader.high_watermark > 0:
            _off, acts = leader.propose([b"x", b"y"], now)
            run(leader.node_id, list(acts))
            proposed = True
    assert proposed and checked > 0
    assert all(c.high_watermark >= 3 for c in cores.values())


def _removed_voter() -> RaftCore:
    """Replica 2 of the committed set {1, 2} holds, above its high watermark, a VOTERS
    entry removing itself (its leader resigned before the removal committed)."""
    entries = [
        Entry(0, 1, b"1", LEADER_CHANGE),
        Entry(1, 1, encode_voters({1: "a", 2: "b"}), VOTERS),
        Entry(2, 1, b"x", DATA),
        Entry(3, 1, encode_voters({1: "a"}), VOTERS),
    ]
    durable = DurableState(epoch=1, voted_for=2, entries=entries)
    core = RaftCore(2, {1: "a", 2: "b", 3: "c"}, CFG, durable)
    core.start(0)
    return core


def _vote_request(src: int, epoch: int, pre_vote: bool, end: int = 4) -> VoteRequest:
    return VoteRequest(
        src=src,
        dest=2,
        correlation_id=7,
        cluster_id="jocko",
        voter_id=2,
        candidate_epoch=epoch,
        candidate_id=src,
        last_offset_epoch=1,
        last_offset=end,
        pre_vote=pre_vote,
    )


def test_a_voter_removed_by_an_uncommitted_entry_still_votes_and_runs() -> None:
    """Seeds 600465 and 601545 of the raft simulation hung without a leader: the
    replica removed by an uncommitted VOTERS entry had the longest log, so the remaining
    voter could not get its vote, and it refused to run. As the Raft thesis (4.2.2) and
    KIP-853 say, it answers votes whatever the voter sets say, and runs (without
    counting its own vote) until the removal commits."""
    core = _removed_voter()
    assert not core.is_voter() and core.may_run()
    acts = core.tick(10_000)
    assert core.role is Role.PROSPECTIVE
    reqs = [a.message for a in acts if isinstance(a, Send) and isinstance(a.message, VoteRequest)]
    assert [r.dest for r in reqs] == [1] and all(r.pre_vote for r in reqs)
    grant = VoteResponse(
        src=1,
        dest=2,
        correlation_id=reqs[0].correlation_id,
        error_code=ErrorCode.NONE,
        leader_id=-1,
        leader_epoch=1,
        vote_granted=True,
    )
    core.receive(grant, 10_001)
    assert core.role is Role.CANDIDATE and core.epoch == 2  # 1's vote made the majority
    # A candidate gets its vote, though neither of them is in 2's latest voter set.
    voter = _removed_voter()
    for pre_vote in (True, False):
        resp = voter.receive(_vote_request(3, 2, pre_vote), 10_000)[-1]
        assert isinstance(resp, Send) and isinstance(resp.message, VoteResponse)
        assert resp.message.vote_granted, pre_vote
    assert voter.voted_for == 3


def test_a_removed_voter_does_not_count_its_own_vote() -> None:
    core = _removed_voter()
    core.tick(10_000)
    assert core.role is Role.PROSPECTIVE  # its own pre-vote is no majority of {1}


def test_a_committed_removal_makes_an_observer_that_never_runs() -> None:
    core = _removed_voter()
    core.high_watermark = core.log_end
    assert not core.may_run()
    core.tick(10_000)
    assert core.role is Role.UNATTACHED


def _leader_of_three() -> RaftCore:
    core = RaftCore(1, {1: "a", 2: "b", 3: "c"}, CFG)
    core.start(0)
    now = 1000
    for _ in range(2):  # the pre-vote round, then the vote round
        acts = core.tick(now) if core.role is not Role.CANDIDATE else []
        reqs = [a.message for a in acts if isinstance(a, Send)]
        corr = reqs[0].correlation_id if reqs else core._vote_corr
        core.receive(
            VoteResponse(
                src=2,
                dest=1,
                correlation_id=corr,
                error_code=ErrorCode.NONE,
                leader_id=-1,
                leader_epoch=core.epoch,
                vote_granted=True,
            ),
            now,
        )
    assert core.role is Role.LEADER
    return core


def test_a_follower_fetching_a_snapshot_counts_for_check_quorum() -> None:
    """Seed 8882 of the raft simulation hung: the leader's quorum needed a follower
    that was fetching a snapshot, FetchSnapshot did not count as contact, so every
    leader resigned (check quorum) before the transfer could end, and each new epoch
    started it over."""
    core = _leader_of_three()
    t0 = 1000
    for now in range(t0, t0 + 5 * CFG.fetch_timeout_ms, 50):
        core.receive(
            FetchSnapshotRequest(
                src=3,
                dest=1,
                correlation_id=now,
                cluster_id="jocko",
                replica_id=3,
                current_leader_epoch=core.epoch,
                snapshot_id=(1, 1),
                position=0,
                max_bytes=64,
            ),
            now,
        )
        core.tick(now)
        assert core.role is Role.LEADER, now


def _follower_incarnation(seed: int | None) -> tuple[RaftCore, FetchRequest]:
    """Replica 2 (re)started in epoch 1, told by leader 1 that it leads, fetching."""
    core = RaftCore(2, {1: "a", 2: "b", 3: "c"}, CFG, DurableState(epoch=1), seed=seed)
    core.start(0)
    begin = BeginQuorumEpochRequest(
        src=1, dest=2, correlation_id=1, cluster_id="jocko", voter_id=2, leader_id=1, leader_epoch=1
    )
    acts = core.receive(begin, 10)
    fetch = next(
        a.message for a in acts if isinstance(a, Send) and isinstance(a.message, FetchRequest)
    )
    assert core.role is Role.FOLLOWER and fetch.dest == 1
    return core, fetch


def test_a_stale_answer_to_an_earlier_process_is_not_taken_for_a_new_fetch() -> None:
    """Correlation ids restarted at the same value in every process: after a fast
    restart, a NOT_LEADER_OR_FOLLOWER answered (in the same epoch, before it won) to the
    previous process's fetch matched the new process's fetch, and the follower held the
    sitting leader resigned for the rest of the epoch. Each incarnation now starts its
    ids at a random point (as ClusterNode seeds each process's core at random)."""
    for seed in (None, 7):
        _old, old_fetch = _follower_incarnation(seed)
        new, new_fetch = _follower_incarnation(None if seed is None else seed + 1)
        assert new_fetch.correlation_id != old_fetch.correlation_id
        stale = FetchResponse(
            src=1,
            dest=2,
            correlation_id=old_fetch.correlation_id,
            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            high_watermark=-1,
            log_start_offset=0,
            leader_id=-1,
            leader_epoch=1,
        )
        new.receive(stale, 20)
        assert new.role is Role.FOLLOWER and new.leader_id == 1
