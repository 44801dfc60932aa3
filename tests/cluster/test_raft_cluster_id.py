"""Raft core rule 9 (cluster id): requests of another cluster are answered
INCONSISTENT_CLUSTER_ID and change nothing; an unformatted quorum agrees on one random id
committed in its log; a node that cannot join because of its id stops."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pytest

from jocko_py.cluster.raft.core import DurableState, RaftConfig, RaftCore, Role
from jocko_py.cluster.raft.messages import (
    CLUSTER_ID,
    DATA,
    LEADER_CHANGE,
    AppendLog,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    Commit,
    EndQuorumEpochRequest,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    PersistQuorumState,
    PersistSnapshot,
    Send,
    Snapshot,
    TruncateLog,
    VoteRequest,
    VoteResponse,
)
from jocko_py.cluster.raft.storage import MemoryStorage
from jocko_py.protocol.errors import ErrorCode

MINE, THEIRS = "q1Sh-9_ISia_zwGINzRvyQ", "MkU3OEVBNTcwNTJENDM2Qg"
VOTERS = {1: "a", 2: "b", 3: "c"}


def _cfg(cluster_id: str) -> RaftConfig:
    return RaftConfig(cluster_id=cluster_id, election_timeout_ms=100, fetch_timeout_ms=200,
                      fetch_max_wait_ms=50)


def _state(c: RaftCore) -> tuple[Any, ...]:
    return (c.epoch, c.voted_for, c.role, c.leader_id, c.log_end, c.high_watermark,
            c.cluster_id, c.inconsistent)


def _leader_of_mine() -> RaftCore:
    """Voter 1, leader of epoch 1 of cluster MINE, with one committed data entry."""
    entries = [Entry(0, 1, b"1", LEADER_CHANGE), Entry(1, 1, MINE.encode(), CLUSTER_ID),
               Entry(2, 1, b"x", DATA)]
    core = RaftCore(1, {1: "a"}, _cfg(MINE), DurableState(epoch=1, voted_for=1, entries=entries))
    core.start(0)
    core.tick(1000)
    assert core.role is Role.LEADER
    return core


REQUESTS: dict[str, Callable[[str], Message]] = {
    "vote": lambda cid: VoteRequest(src=2, dest=1, correlation_id=5, cluster_id=cid, voter_id=1,
                                    candidate_epoch=9, candidate_id=2, last_offset_epoch=9,
                                    last_offset=99),
    "pre-vote": lambda cid: VoteRequest(src=2, dest=1, correlation_id=5, cluster_id=cid,
                                        voter_id=1, candidate_epoch=9, candidate_id=2,
                                        last_offset_epoch=9, last_offset=99, pre_vote=True),
    "begin-quorum-epoch": lambda cid: BeginQuorumEpochRequest(
        src=2, dest=1, correlation_id=5, cluster_id=cid, voter_id=1, leader_id=2,
        leader_epoch=9),
    "end-quorum-epoch": lambda cid: EndQuorumEpochRequest(
        src=2, dest=1, correlation_id=5, cluster_id=cid, leader_id=1, leader_epoch=2,
        preferred_successors=(2,)),
    "fetch": lambda cid: FetchRequest(src=2, dest=1, correlation_id=5, cluster_id=cid,
                                      replica_id=2, max_wait_ms=0, current_leader_epoch=9,
                                      fetch_offset=0, last_fetched_epoch=0, log_start_offset=0),
    "fetch-snapshot": lambda cid: FetchSnapshotRequest(
        src=2, dest=1, correlation_id=5, cluster_id=cid, replica_id=2, current_leader_epoch=2,
        snapshot_id=(1, 1), position=0, max_bytes=100),
}


@pytest.mark.parametrize("kind", sorted(REQUESTS))
def test_a_request_of_another_cluster_is_refused_and_changes_nothing(kind: str) -> None:
    """As KafkaRaftClient: INCONSISTENT_CLUSTER_ID, and not acted on (each request here
    carries a larger epoch, which would otherwise move the leader to it)."""
    core = _leader_of_mine()
    before = _state(core)
    acts = core.receive(REQUESTS[kind](THEIRS), 2000)
    assert _state(core) == before
    assert not [a for a in acts if not isinstance(a, Send)], acts  # nothing persisted
    replies = [a.message for a in acts if isinstance(a, Send)]
    if kind == "end-quorum-epoch":
        assert replies == []  # EndQuorumEpoch has no response
    else:
        assert len(replies) == 1 and replies[0].dest == 2
        assert replies[0].error_code  # type: ignore[union-attr] == INCONSISTENT_CLUSTER_ID
        assert not getattr(replies[0], "vote_granted", False)
        assert getattr(replies[0], "records", ()) == ()
    # the same request of this cluster, or of a sender without an id (as Kafka, for
    # compatibility), is taken: answered otherwise, and the larger epoch moves the leader
    for cid in (MINE, ""):
        probe = _leader_of_mine()
        acts = probe.receive(REQUESTS[kind](cid), 2000)
        assert all(getattr(a.message, "error_code", 0) != ErrorCode.INCONSISTENT_CLUSTER_ID
                   for a in acts if isinstance(a, Send)), (kind, cid, acts)
        if kind in ("vote", "begin-quorum-epoch", "fetch"):
            assert probe.epoch == 9, (kind, cid)


@pytest.mark.parametrize("response", [
    VoteResponse(src=2, dest=1, correlation_id=1, error_code=ErrorCode.INCONSISTENT_CLUSTER_ID,
                 leader_id=2, leader_epoch=9, vote_granted=True),
    BeginQuorumEpochResponse(src=2, dest=1, correlation_id=1,
                             error_code=ErrorCode.INCONSISTENT_CLUSTER_ID, leader_id=2, leader_epoch=9),
    FetchResponse(src=2, dest=1, correlation_id=1, error_code=ErrorCode.INCONSISTENT_CLUSTER_ID,
                  high_watermark=5, log_start_offset=0, leader_id=2, leader_epoch=9),
    FetchSnapshotResponse(src=2, dest=1, correlation_id=1, error_code=ErrorCode.INCONSISTENT_CLUSTER_ID,
                          leader_id=2, leader_epoch=9, snapshot_id=(1, 1), size=1, position=0),
])
def test_a_refusal_is_not_acted_on(response: Message) -> None:
    core = _leader_of_mine()
    before = _state(core)
    assert core.receive(response, 2000) == []
    assert _state(core) == before


class Net:
    """Cores exchanging messages in memory (in order, nothing lost), each persisting its
    actions into its own MemoryStorage."""

    def __init__(self, ids: dict[int, str], voters: dict[int, str] = VOTERS) -> None:
        self.stores = {i: MemoryStorage() for i in ids}
        self.cores = {i: RaftCore(i, voters, _cfg(cid), seed=i) for i, cid in ids.items()}
        self.inbox: list[Message] = []
        self.now = 0
        for i, c in self.cores.items():
            self.run(i, c.start(0))

    def run(self, i: int, acts: list[Any]) -> None:
        for a in acts:
            if isinstance(a, Send):
                if a.message.dest in self.cores:
                    self.inbox.append(a.message)
            elif isinstance(a, PersistQuorumState | AppendLog | TruncateLog | PersistSnapshot):
                self.stores[i].execute(a)

    def step(self, until: Callable[[], bool], ms: int = 5000) -> None:
        for _ in range(ms // 5):
            self.now += 5
            while self.inbox:
                m = self.inbox.pop(0)
                self.run(m.dest, self.cores[m.dest].receive(m, self.now))
            for i, c in self.cores.items():
                self.run(i, c.tick(self.now))
            if until():
                return
        raise AssertionError("not reached")

    def leader(self) -> RaftCore | None:
        return next((c for c in self.cores.values() if c.role is Role.LEADER), None)


def _entries_of_kind(core: RaftCore, kind: int) -> list[Entry]:
    return [e for e in core.entries if e.kind == kind]


def test_an_unformatted_quorum_agrees_on_one_random_id_in_its_log() -> None:
    net = Net({1: "", 2: "", 3: ""})
    net.step(lambda: all(c.cluster_id for c in net.cores.values()))
    ids = {c.cluster_id for c in net.cores.values()}
    assert len(ids) == 1 and len(next(iter(ids))) == 22
    leader = net.leader()
    assert leader is not None
    assert [e.data.decode() for e in _entries_of_kind(leader, CLUSTER_ID)] == list(ids)
    # a later leader records none again
    leader.resign(net.now)
    net.step(lambda: (ldr := net.leader()) is not None and ldr.high_watermark == ldr.log_end
             and ldr.epoch > 1)
    for c in net.cores.values():
        assert len(_entries_of_kind(c, CLUSTER_ID)) == 1


def test_a_formatted_quorum_records_its_own_id_and_an_unformatted_member_adopts_it() -> None:
    net = Net({1: MINE, 2: MINE, 3: ""})
    net.step(lambda: net.cores[3].cluster_id != "")
    assert {c.cluster_id for c in net.cores.values()} == {MINE}
    assert all(c.inconsistent is None for c in net.cores.values())


def test_a_snapshot_carries_the_id_to_a_replica_restarted_from_it() -> None:
    net = Net({1: "", 2: "", 3: ""})
    net.step(lambda: all(c.cluster_id for c in net.cores.values()))
    core = net.cores[2]
    cid = core.cluster_id
    net.run(2, core.take_snapshot(core.applied, b"image", net.now))
    snap = net.stores[2].state.snapshot
    assert snap is not None and snap.cluster_id == cid
    assert Snapshot.from_bytes(snap.to_bytes()) == snap
    assert not _entries_of_kind(core, CLUSTER_ID)  # below the snapshot now
    restarted = RaftCore(2, VOTERS, _cfg(""), net.stores[2].load(), seed=9)
    assert restarted.cluster_id == cid
    other = RaftCore(2, VOTERS, _cfg(THEIRS), net.stores[2].load(), seed=9)
    assert other.inconsistent is not None and cid in other.inconsistent


def test_a_node_of_another_cluster_is_refused_and_stops_while_the_quorum_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    """Voter 3 formatted for another cluster joins a running one: its requests are
    refused, it refuses the leader's, and once the voters of its id cannot make a
    majority it stops, saying why; the others keep their leader and commit."""
    net = Net({1: MINE, 2: MINE, 3: MINE})
    net.step(lambda: (ldr := net.leader()) is not None and ldr.high_watermark > 1)
    net.cores[3] = RaftCore(3, VOTERS, _cfg(THEIRS), seed=33)  # wiped, formatted again
    net.stores[3] = MemoryStorage()
    net.run(3, net.cores[3].start(net.now))
    with caplog.at_level(logging.WARNING):
        net.step(lambda: net.cores[3].inconsistent is not None)
    reason = net.cores[3].inconsistent
    assert reason is not None
    assert f"this node's cluster id is {THEIRS}" in reason and "voter(s) 1, 2" in reason
    assert MINE in reason  # it learned the quorum's id from the leader's requests
    assert net.cores[3].tick(net.now + 10_000) == []  # stopped: does nothing more
    assert net.stores[3].state.entries == []  # took nothing from the other cluster
    leader = net.leader()
    assert leader is not None and leader.node_id in (1, 2)
    epoch = leader.epoch
    _off, acts = leader.propose([b"after"], net.now)
    net.run(leader.node_id, acts)
    net.step(lambda: leader.high_watermark == leader.log_end)
    assert leader.role is Role.LEADER and leader.epoch == epoch
    assert all(c.inconsistent is None for i, c in net.cores.items() if i != 3)
    refusals = [r.getMessage() for r in caplog.records if "INCONSISTENT_CLUSTER_ID" in
                r.getMessage()]
    assert any(f"belongs to cluster {THEIRS}, this node to cluster {MINE}" in m
               for m in refusals), refusals
    # logged once per peer, not per request
    assert len(refusals) <= 6, refusals


def test_a_node_that_was_part_of_its_quorum_keeps_running_when_refused() -> None:
    """Two voters, the other one reformatted: the old member cannot make progress, but
    it does not stop (its data belongs to its cluster); it refuses and waits."""
    net = Net({1: MINE, 2: MINE}, voters={1: "a", 2: "b"})
    net.step(lambda: (ldr := net.leader()) is not None and ldr.high_watermark > 1)
    net.cores[2] = RaftCore(2, {1: "a", 2: "b"}, _cfg(THEIRS), seed=22)
    net.stores[2] = MemoryStorage()
    net.run(2, net.cores[2].start(net.now))
    net.step(lambda: net.cores[2].inconsistent is not None)
    net.step(lambda: False if net.now < 20_000 else True, ms=20_000)
    assert net.cores[1].inconsistent is None


def test_a_committed_id_other_than_ours_stops_the_node() -> None:
    """A follower formatted for X fetching a log whose committed CLUSTER_ID says Y (its
    leader had no id when it accepted it): it stops instead of serving Y's metadata."""
    core = RaftCore(2, VOTERS, _cfg(THEIRS), seed=2)
    core.start(0)
    acts = core.receive(BeginQuorumEpochRequest(src=1, dest=2, correlation_id=1, cluster_id="",
                                                voter_id=2, leader_id=1, leader_epoch=1), 10)
    fetch = next(m for m in (a.message for a in acts if isinstance(a, Send))
                 if isinstance(m, FetchRequest))
    assert isinstance(fetch, FetchRequest) and fetch.cluster_id == THEIRS
    entries = (Entry(0, 1, b"1", LEADER_CHANGE), Entry(1, 1, MINE.encode(), CLUSTER_ID))
    acts = core.receive(FetchResponse(src=1, dest=2, correlation_id=fetch.correlation_id,
                                      error_code=ErrorCode.NONE, high_watermark=2, log_start_offset=0,
                                      leader_id=1, leader_epoch=1, records=entries), 30)
    assert core.inconsistent is not None
    assert not [a for a in acts if isinstance(a, Commit)]  # nothing of it is applied
    assert f"holds cluster id {MINE}, but this node's cluster id is {THEIRS}" in core.inconsistent
    assert core.cluster_id == THEIRS  # a stored id never changes


def test_messages_carry_the_id_once_learned() -> None:
    net = Net({1: "", 2: "", 3: ""})
    sent: list[Message] = []
    orig = net.run

    def spy(i: int, acts: list[Any]) -> None:
        sent.extend(a.message for a in acts if isinstance(a, Send))
        orig(i, acts)
    net.run = spy  # type: ignore[method-assign]
    net.step(lambda: all(c.cluster_id for c in net.cores.values()))
    cid = net.cores[1].cluster_id
    sent.clear()
    net.step(lambda: len(sent) > 20)
    requests = [m for m in sent if type(m).__name__.endswith("Request")]
    assert requests and {dataclasses.asdict(m)["cluster_id"] for m in requests} == {cid}


def test_a_fetched_snapshot_of_another_cluster_is_not_installed() -> None:
    core = RaftCore(2, VOTERS, _cfg(THEIRS), seed=2)
    core.start(0)

    def sent(acts: list[Any]) -> Message:
        return next(a.message for a in acts if isinstance(a, Send))

    fetch = sent(core.receive(BeginQuorumEpochRequest(
        src=1, dest=2, correlation_id=1, cluster_id="", voter_id=2, leader_id=1,
        leader_epoch=1), 10))
    blob = Snapshot(5, 1, VOTERS, b"image of another cluster", MINE).to_bytes()
    req = sent(core.receive(FetchResponse(
        src=1, dest=2, correlation_id=fetch.correlation_id, error_code=ErrorCode.NONE, high_watermark=5,
        log_start_offset=5, leader_id=1, leader_epoch=1, snapshot_id=(5, 1)), 20))
    assert isinstance(req, FetchSnapshotRequest) and req.cluster_id == THEIRS
    acts = core.receive(FetchSnapshotResponse(
        src=1, dest=2, correlation_id=req.correlation_id, error_code=ErrorCode.NONE, leader_id=1,
        leader_epoch=1, snapshot_id=(5, 1), size=len(blob), position=0,
        unaligned_records=blob), 30)
    assert core.inconsistent is not None and MINE in core.inconsistent
    assert not [a for a in acts if isinstance(a, PersistSnapshot)]
    assert core.snapshot is None and core.log_start == 0
