"""Controller decisions on hand-built images, and gossip core edge cases."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from jocko_py.cluster.controller import (
    UNCLEAN_LEADER_ELECTION,
    BrokerInfo,
    Controller,
    ControllerConfig,
    check_leader_in_isr,
    committed_producer_block,
    unclean_election_enabled,
)
from jocko_py.cluster.gossip.core import GossipConfig, GossipCore, State
from jocko_py.cluster.gossip.messages import (
    GossipDecodeError,
    MemberMeta,
    Ping,
    Send,
    Sync,
    Update,
    decode_datagram,
    encode_datagram,
    member_incarnation,
)
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    MetadataImage,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
)
from jocko_py.protocol.errors import ErrorCode


def _info(bid: int, rack: str) -> BrokerInfo:
    return BrokerInfo(bid, "h", 9000 + bid, rack, uuid.UUID(int=bid))


def _cluster(racks: dict[int, str]) -> tuple[Controller, MetadataImage, dict[int, BrokerInfo]]:
    ctl = Controller(ControllerConfig(producer_id_block_size=100))
    img = MetadataImage()
    live = {b: _info(b, r) for b, r in racks.items()}
    for r in ctl.reconcile(img, live):
        img.apply(r)
    return ctl, img, live


def _apply_checked(img: MetadataImage, recs: Sequence[MetadataRecord]) -> None:
    for r in recs:
        assert check_leader_in_isr(img, r) is None
        img.apply(r)


def test_registration_and_rack_aware_placement() -> None:
    ctl, img, _ = _cluster({1: "a", 2: "a", 3: "b", 4: "b"})
    assert sorted(img.brokers) == [1, 2, 3, 4]
    assert not any(b.fenced for b in img.brokers.values())
    err, recs = ctl.create_topic(img, "t", 8, 2)
    assert err == ErrorCode.NONE
    _apply_checked(img, recs)
    for p in img.topics["t"].partitions.values():
        assert len(set(p.replicas)) == 2 and p.leader == p.replicas[0]
        assert {img.brokers[r].rack for r in p.replicas} == {"a", "b"}
    leaders = [p.leader for p in img.topics["t"].partitions.values()]
    assert len(set(leaders)) == 4  # leadership spread over all brokers
    assert ctl.create_topic(img, "t", 1, 1)[0] == ErrorCode.TOPIC_ALREADY_EXISTS


def test_failed_leader_is_replaced_from_isr_and_never_from_outside() -> None:
    ctl, img, live = _cluster({1: "a", 2: "b", 3: "a"})
    _apply_checked(img, ctl.create_topic(img, "t", 1, 3)[1])
    tid = img.topics["t"].topic_id
    # Shrink the ISR to {leader} first (follower fell behind).
    p = img.topics["t"].partitions[0]
    err, recs = ctl.alter_partition(
        img, tid, 0, p.leader, p.leader_epoch, p.partition_epoch, [p.leader]
    )
    assert err == ErrorCode.NONE
    _apply_checked(img, recs)
    old = img.topics["t"].partitions[0]
    del live[old.leader]
    _apply_checked(img, ctl.reconcile(img, live))
    p = img.topics["t"].partitions[0]
    # The only ISR member is gone: no clean candidate, so the partition is leaderless;
    # its last ISR member stays electable (KIP-966: in the ELR, the last known leader).
    assert p.leader == -1 and p.isr == () and p.elr == old.isr
    assert p.last_known_elr == (old.leader,)
    assert img.brokers[old.leader].fenced
    # Unclean election allowed: a live replica outside the ISR takes over.
    _apply_checked(img, [ConfigRecord(CONFIG_RESOURCE_TOPIC, "t", UNCLEAN_LEADER_ELECTION, "true")])
    _apply_checked(img, ctl.reconcile(img, live))
    p2 = img.topics["t"].partitions[0]
    assert p2.leader in live and p2.isr == (p2.leader,)
    assert p2.leader_epoch > p.leader_epoch


def test_leader_in_isr_predicate_catches_bad_records() -> None:
    ctl, img, _ = _cluster({1: "a", 2: "b"})
    _apply_checked(img, ctl.create_topic(img, "t", 1, 2)[1])
    tid = img.topics["t"].topic_id
    # Leadership moves to 1 and the ISR shrinks to it (2 fell behind).
    _apply_checked(img, [PartitionChangeRecord(0, tid, isr=(1,), leader=1)])
    assert check_leader_in_isr(img, PartitionChangeRecord(0, tid, leader=2)) is not None
    assert check_leader_in_isr(img, PartitionChangeRecord(0, tid, leader=2, isr=(2,))) is not None
    assert check_leader_in_isr(img, PartitionRecord(1, tid, (1, 2), (1,), leader=2)) is not None


def test_leader_in_isr_predicate_catches_isr_only_changes_dropping_the_leader() -> None:
    """An ISR-only change (no new leader) that drops or replaces the sitting leader
    leaves the leader outside the ISR: unsafe, unless the topic allows unclean election."""
    ctl, img, _ = _cluster({1: "a", 2: "b", 3: "a"})
    _apply_checked(img, ctl.create_topic(img, "t", 1, 3)[1])
    tid = img.topics["t"].topic_id
    p = img.topics["t"].partitions[0]
    others = tuple(r for r in p.replicas if r != p.leader)
    drop = PartitionChangeRecord(0, tid, isr=others)  # drops the leader
    replace = PartitionChangeRecord(0, tid, isr=others[:1])  # replaces the whole ISR
    assert check_leader_in_isr(img, drop) is not None
    assert check_leader_in_isr(img, replace) is not None
    # Shrinking to a set that keeps the leader, or dropping the leader together with
    # leadership (leader -1), is fine.
    assert check_leader_in_isr(img, PartitionChangeRecord(0, tid, isr=(p.leader,))) is None
    assert check_leader_in_isr(img, PartitionChangeRecord(0, tid, isr=others, leader=-1)) is None
    _apply_checked(img, [ConfigRecord(CONFIG_RESOURCE_TOPIC, "t", UNCLEAN_LEADER_ELECTION, "true")])
    assert check_leader_in_isr(img, drop) is None


def test_unclean_election_falls_back_to_the_cluster_wide_default() -> None:
    """Kafka resolves unclean.leader.election.enable from the topic, else the
    cluster-wide broker default (broker config with an empty name), else false."""
    ctl, img, _ = _cluster({1: "a", 2: "b"})
    _apply_checked(img, ctl.create_topic(img, "t", 1, 2)[1])
    assert not unclean_election_enabled(img, "t")
    img.apply(ConfigRecord(CONFIG_RESOURCE_BROKER, "", UNCLEAN_LEADER_ELECTION, "true"))
    assert unclean_election_enabled(img, "t")
    img.apply(ConfigRecord(CONFIG_RESOURCE_TOPIC, "t", UNCLEAN_LEADER_ELECTION, "false"))
    assert not unclean_election_enabled(img, "t"), "the topic's own config wins"
    # a leader outside the ISR is allowed exactly when unclean election is on
    tid = img.topics["t"].topic_id
    p = img.topics["t"].partitions[0]
    other = next(r for r in p.replicas if r != p.leader)
    _apply_checked(img, [PartitionChangeRecord(0, tid, isr=(p.leader,))])
    outside = PartitionChangeRecord(0, tid, leader=other, isr=(other,))
    assert check_leader_in_isr(img, outside) is not None
    img.apply(ConfigRecord(CONFIG_RESOURCE_TOPIC, "t", UNCLEAN_LEADER_ELECTION, None))
    assert check_leader_in_isr(img, outside) is None  # cluster default (true) applies


def test_cluster_simulation_catches_an_isr_change_that_drops_the_sitting_leader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A controller whose ISR shrink (a follower fenced) also drops the sitting leader,
    without electing a new one, is caught by the cluster simulation's per-record check.
    The partition keeps a live leader, so the end-of-run failover check alone passes."""
    from tests.cluster.sim_cluster import run_cluster_schedule
    from tests.cluster.sim_raft import InvariantViolation

    orig = Controller._repair_partitions

    def buggy(self: Controller, image: MetadataImage, usable: set[int],
              restarted: set[int]) -> list[MetadataRecord]:
        out: list[MetadataRecord] = []
        for r in orig(self, image, usable, restarted):
            if isinstance(r, PartitionChangeRecord) and r.leader == -2 and r.isr is not None:
                t = image.topic_by_id(r.topic_id)
                assert t is not None
                sitting = t.partitions[r.partition_id].leader
                isr = tuple(x for x in r.isr if x != sitting)
                r = PartitionChangeRecord(r.partition_id, r.topic_id, isr=isr or r.isr)
            out.append(r)
        return out

    monkeypatch.setattr(Controller, "_repair_partitions", buggy)
    caught = ""
    for seed in range(60):
        try:
            run_cluster_schedule(seed)
        except InvariantViolation as e:
            caught = str(e)
            break
    assert "drops the sitting leader" in caught, caught or "no schedule failed"


def test_producer_id_blocks_do_not_overlap() -> None:
    ctl, img, _ = _cluster({1: "a"})
    epoch = img.brokers[1].broker_epoch
    blocks = []
    for _ in range(3):
        err, recs, block = ctl.allocate_producer_ids(img, 1, epoch)
        assert err == ErrorCode.NONE
        _apply_checked(img, recs)
        blocks.append(block)
    assert blocks == [(0, 100), (100, 100), (200, 100)]
    assert ctl.allocate_producer_ids(img, 1, epoch + 1)[0] == ErrorCode.STALE_BROKER_EPOCH


META = MemberMeta(1, "127.0.0.1:9092", "127.0.0.1:19092", "a")


def test_member_refutes_suspicion_with_a_higher_incarnation() -> None:
    g = GossipCore("a", "a:1", META, GossipConfig(), seed=1)
    g.join([], 0)
    g.receive(Ping("b", "b:1", 1, "a", (Update("suspect", "a", "a:1", 0, META),)), 10)
    assert g.incarnation == 1 and g.members["a"].state is State.ALIVE
    # A peer we think is dead talks to us: we tell it, so it can refute.
    g.receive(Sync("c", "c:1", False, (Update("alive", "c", "c:1", 0, META),)), 20)
    g.receive(Sync("d", "d:1", False, (Update("dead", "c", "c:1", 0, META),)), 30)
    assert g.state_of("c") is State.DEAD
    acts = g.receive(Ping("c", "c:1", 2, "a"), 40)
    assert any(
        isinstance(a, Send) and a.addr == "c:1" and isinstance(a.message, Sync) for a in acts
    )
    # Alive with a higher incarnation revives it.
    g.receive(Sync("c", "c:1", False, (Update("alive", "c", "c:1", 1, META),)), 50)
    assert g.state_of("c") is State.ALIVE


def test_datagrams_round_trip_and_garbage_is_rejected() -> None:
    m = Ping("a", "a:1", 7, "b", (Update("suspect", "b", "b:1", 3, META),))
    assert decode_datagram(encode_datagram(m)) == m
    for junk in [
        b"",
        b"\xff\x00",
        b'{"t":"nope"}',
        b'{"t":"ping","src":1}',
        b'{"t":"sync","src":"a","src_addr":"a","reply":false,"updates":[["zombie"]]}',
    ]:
        with pytest.raises(GossipDecodeError):
            decode_datagram(junk)


def test_member_reaches_out_to_seeds_it_does_not_see_alive() -> None:
    """Two members that restarted while cut off form an island; reconnecting to the
    seeds they do not see alive merges it back."""
    cfg = GossipConfig(reconnect_interval_ms=100)
    g = GossipCore("a", "a:1", META, cfg, seed=3)
    g.join(["b:1", "c:1"], 0)
    g.receive(Sync("b", "b:1", False, (Update("alive", "b", "b:1", 0, META),)), 1)
    targets = set()
    for t in range(100, 2000, 100):
        for a in g.tick(t):
            if isinstance(a, Send) and isinstance(a.message, Sync):
                targets.add(a.addr)
    assert targets == {"c:1"}


@pytest.mark.parametrize(
    "racks",
    [
        {1: "a", 2: "a", 3: "a", 4: "b"},
        {1: "a", 2: "b", 3: "b", 4: "b", 5: "b"},
        {1: "a", 2: "a", 3: "b", 4: "c", 5: "c", 6: "c"},
        {1: "x", 2: "y", 3: "y", 4: "z", 5: "z", 6: "z", 7: "z"},
    ],
)
@pytest.mark.parametrize("rf", [2, 3])
def test_placement_spans_racks_however_uneven(racks: dict[int, str], rf: int) -> None:
    ctl, img, _ = _cluster(racks)
    n_racks = len(set(racks.values()))
    for t in range(5):
        err, recs = ctl.create_topic(img, f"t{t}", 12, rf)
        assert err == ErrorCode.NONE
        _apply_checked(img, recs)
        for p in img.topics[f"t{t}"].partitions.values():
            assert len(set(p.replicas)) == rf and p.leader == p.replicas[0]
            assert len({racks[r] for r in p.replicas}) == min(rf, n_racks), p.replicas


def test_concurrent_producer_id_allocations_never_share_a_block() -> None:
    """Two allocations from the same image (before either commits) get different
    blocks; a record that does not advance the counter is rejected, and the block a
    committed record hands out is what ``committed_producer_block`` reports."""
    ctl, img, _ = _cluster({1: "a", 2: "b"})
    e1, e2 = img.brokers[1].broker_epoch, img.brokers[2].broker_epoch
    _, recs1, b1 = ctl.allocate_producer_ids(img, 1, e1)
    _, recs2, b2 = ctl.allocate_producer_ids(img, 2, e2)
    assert b1 != b2 and (b1[0] + b1[1] <= b2[0] or b2[0] + b2[1] <= b1[0])
    got = []
    for r in recs1 + recs2:
        assert isinstance(r, ProducerIdsRecord)
        got.append(committed_producer_block(img, r))
        img.apply(r)
    assert got == [b1, b2]
    # A second allocation computed from an image that had not seen recs2 yet (another
    # controller's) names the same counter: it is rejected and hands out nothing.
    before = img.next_producer_id
    r3 = ProducerIdsRecord(1, e1, before)
    assert committed_producer_block(img, r3) is None
    img.apply(r3)
    assert img.next_producer_id == before


def test_a_restarted_broker_re_registers_with_a_new_epoch() -> None:
    """Gossip carries a per-process incarnation id; a restart is a new incarnation and
    the controller registers it with a newer broker epoch."""
    first = MemberMeta(1, "h:9001", "h:19001", "a", str(uuid.uuid4()))
    second = MemberMeta(1, "h:9001", "h:19001", "a", str(uuid.uuid4()))
    # The incarnation survives the wire.
    u = Update("alive", "b1", "g1", 0, second)
    msg = decode_datagram(encode_datagram(Ping("b1", "g1", 1, "b2", (u,))))
    assert isinstance(msg, Ping) and msg.updates[0].meta == second
    ctl, img = Controller(), MetadataImage()

    def live(meta: MemberMeta) -> dict[int, BrokerInfo]:
        return {1: BrokerInfo(1, "h", 9001, "a", member_incarnation(meta))}

    for r in ctl.reconcile(img, live(first)):
        img.apply(r)
    epoch1 = img.brokers[1].broker_epoch
    assert ctl.reconcile(img, live(first)) == []  # same process: nothing to do
    for r in ctl.reconcile(img, live(second)):
        img.apply(r)
    assert img.brokers[1].broker_epoch > epoch1
    assert img.brokers[1].incarnation_id == member_incarnation(second)
    assert not img.brokers[1].fenced
