"""KIP-101 / KIP-279 truncation scenarios, deterministic, on real partitions.

Each replica is a real `Partition` over a real `Log` in its own directory; leaders are
elected by the real `Controller` over a `MetadataImage`, and each replica is told its
role exactly as `ReplicaManager.apply_delta` would; a fetch is the exchange the replica
fetcher and the leader's `fetch_messages` perform (diverging epoch, follower position,
append as follower, HW). A crash closes the log; a power loss first drops what was not
flushed (the log is cut to its recovery point) and the replica comes back by reopening
its directory. After every scenario: each acknowledged (below the HW) record is still
there, and the logs of the ISR are identical up to the HW.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from jocko_py.broker.partition import Partition, Role
from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.metadata import MetadataImage, PartitionImage
from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.log import Log
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

TOPIC = "t"


class Replicas:
    def __init__(self, root: Path, ids: tuple[int, ...] = (1, 2, 3)) -> None:
        self.root = root
        self.cfg = LogConfig(min_insync_replicas=1)
        self.ctl = Controller(ControllerConfig())
        self.image = MetadataImage()
        self.live = {b: BrokerInfo(b, "h", b, None, uuid.UUID(int=b)) for b in ids}
        self.image.apply_batch(self.ctl.reconcile(self.image, self.live))
        _, recs = self.ctl.create_topic(self.image, TOPIC, 1, len(ids))
        self.image.apply_batch(recs)
        self.topic_id = self.image.topics[TOPIC].topic_id
        self.parts: dict[int, Partition] = {}
        for b in ids:
            self._open(b)
        self.publish()
        self.acked: list[bytes] = []

    def _open(self, b: int) -> None:
        lg = Log.open(self.root / f"broker-{b}" / f"{TOPIC}-0", self.cfg)
        self.parts[b] = Partition(TOPIC, 0, self.topic_id, lg, b)

    def state(self) -> PartitionImage:
        p = self.image.partition(TOPIC, 0)
        assert p is not None
        return p

    def publish(self) -> None:
        """Hand every live replica its role from the image."""
        img = self.state()
        for b, p in self.parts.items():
            if b not in self.live:
                continue
            if img.leader == b:
                p.make_leader(img, now=0)
            else:
                p.make_follower(img)

    def reconcile(self) -> None:
        while recs := self.ctl.reconcile(self.image, self.live):
            self.image.apply_batch(recs)
        self.publish()

    def leader(self) -> Partition:
        return self.parts[self.state().leader]

    def produce(self, value: bytes) -> int:
        p = self.leader()
        batch = rb.build_batch([rb.NewRecord(None, value, (), 1000)])
        r = p.append_as_leader(batch, -1, 1 << 20, now=0)
        assert r.error == ErrorCode.NONE, r
        return r.last_offset

    def fetch(self, follower: int) -> None:
        """One fetch round of ``follower`` from the current leader."""
        f = self.parts[follower]
        leader = self.leader()
        assert f.role is Role.FOLLOWER and f.leader_id == leader.broker_id
        offset = f.log.log_end_offset
        div = leader.diverging_epoch(f.log.leader_epochs.latest_epoch(), offset)
        if div is not None:
            f.truncate_on_divergence(*div)
            return
        eff = leader.update_follower_fetch(follower, offset, now=0)
        if eff.isr_change is not None:  # AlterPartition to the controller
            c = eff.isr_change
            code, recs = self.ctl.alter_partition(
                self.image, c.topic_id, c.partition, leader.broker_id, c.leader_epoch,
                c.partition_epoch, c.new_isr)
            if code == 0:
                self.image.apply_batch(recs)
                self.publish()
            else:
                leader.isr_change_failed(c, code)
        r = leader.read(offset, 1 << 20, upper=leader.log.log_end_offset, min_one=True)
        assert r.error == ErrorCode.NONE, r
        f.append_as_follower(r.records or b"", leader.high_watermark,
                             leader.log.log_start_offset)

    def sync(self, *followers: int, rounds: int = 4) -> None:
        for _ in range(rounds):
            for b in followers:
                self.fetch(b)

    def ack_if_committed(self, value: bytes, offset: int) -> None:
        if self.leader().high_watermark > offset:
            self.acked.append(value)

    def crash(self, b: int, *, power_loss: bool = False) -> None:
        p = self.parts[b]
        if power_loss:
            p.log.truncate_to(p.log.recovery_point)
        p.log.close()
        del self.live[b]
        self.reconcile()  # fenced: leaves the ISR, a new leader if it led

    def restart(self, b: int) -> None:
        self._open(b)
        self.live[b] = BrokerInfo(b, "h", b, None, uuid.uuid4())
        self.reconcile()

    def values(self, b: int, upto: int | None = None) -> list[bytes]:
        lg = self.parts[b].log
        end = lg.log_end_offset if upto is None else upto
        data = lg.read(0, 1 << 24, max_offset=end).records
        out: list[bytes] = []
        for pos, h in rb.iter_batches(memoryview(bytes(data)), validate_crc=True):
            out += [r.value or b"" for r in rb.decode_records(memoryview(bytes(data))[pos:pos + h.size])
                    if r.offset < end]
        return out

    def check(self) -> None:
        img = self.state()
        leader = self.parts[img.leader]
        hw = leader.high_watermark
        committed = self.values(img.leader, hw)
        for v in self.acked:
            assert v in committed, f"acknowledged {v!r} lost: {committed}"
        for b in img.isr:
            assert self.values(b, hw) == committed, (b, self.values(b), committed)


def test_hw_truncation_then_immediate_reelection(tmp_path: Path) -> None:
    """KIP-101 scenario 1: the follower has m1 but not the HW that covers it when it
    restarts; the leader dies at once. Truncating to the HW would lose m1; with leader
    epochs the follower keeps it and leads with it."""
    r = Replicas(tmp_path, (1, 2))
    a = r.state().leader
    b = next(x for x in (1, 2) if x != a)
    o = r.produce(b"m0")
    r.sync(b)
    r.ack_if_committed(b"m0", o)
    o = r.produce(b"m1")
    r.fetch(b)  # b has m1; a's HW moves only at b's next fetch
    r.fetch(b)
    r.ack_if_committed(b"m1", o)  # acknowledged: a's HW covers it
    assert r.acked == [b"m0", b"m1"]
    r.crash(b)
    r.restart(b)  # comes back: no truncation to its own HW
    r.sync(b)  # catches up and rejoins the ISR
    assert b in r.state().isr
    r.crash(a)  # and the leader dies right away
    assert r.state().leader == b
    r.check()
    assert r.values(b) == [b"m0", b"m1"]


def test_two_replicas_crash_with_divergent_tails(tmp_path: Path) -> None:
    """KIP-101 scenario 2: the leader wrote m1 that no follower has, both lose power; the
    other comes back first, leads and writes m2 at the same offset; the old leader comes
    back, finds its tail diverges (epoch) and takes the new leader's log."""
    r = Replicas(tmp_path, (1, 2))
    a = r.state().leader
    b = next(x for x in (1, 2) if x != a)
    o = r.produce(b"m0")
    r.sync(b)
    r.ack_if_committed(b"m0", o)
    r.leader().log.flush()  # m0 is on a's disk
    r.parts[b].log.flush()
    r.produce(b"m1-unreplicated")
    r.leader().log.flush()  # survives a's power loss, yet never acknowledged
    r.crash(a)  # b leads (epoch 1)
    r.crash(b, power_loss=True)
    r.restart(b)
    assert r.state().leader == b
    o = r.produce(b"m2")
    r.restart(a)  # a's offset 1 holds m1 of epoch 0
    r.sync(a)
    r.ack_if_committed(b"m2", o)
    assert a in r.state().isr or r.parts[a].log.log_end_offset == 2
    assert r.values(a) == r.values(b) == [b"m0", b"m2"]
    r.check()


def test_fast_double_failover(tmp_path: Path) -> None:
    """The leader dies; the next leader writes and dies before anyone fetched all of it;
    the third replica leads; both old leaders come back and converge on its log."""
    r = Replicas(tmp_path, (1, 2, 3))
    first = r.state().leader
    others = [x for x in (1, 2, 3) if x != first]
    for i in range(3):
        o = r.produce(b"a%d" % i)
        r.sync(*others)
        r.ack_if_committed(b"a%d" % i, o)
    r.produce(b"a3-unreplicated")
    r.crash(first)
    second = r.state().leader
    third = next(x for x in others if x != second)
    o = r.produce(b"b0")
    r.fetch(third)  # third sees nothing new yet (it fetches at its end)
    r.produce(b"b1-unreplicated")
    r.crash(second)
    assert r.state().leader == third
    o = r.produce(b"c0")
    r.restart(first)
    r.restart(second)
    r.sync(first, second, rounds=6)
    r.ack_if_committed(b"c0", o)
    r.check()
    final = r.values(third)
    assert final[:3] == [b"a0", b"a1", b"a2"] and final[-1] == b"c0"
    assert r.values(first) == r.values(second) == final
    assert b"a3-unreplicated" not in final and b"b1-unreplicated" not in final


def test_a_former_leader_that_wrote_nothing_in_its_epoch_catches_up(tmp_path: Path) -> None:
    """A replica that led an epoch without writing in it has that epoch in its cache at
    its log end; the next leader never had that epoch. The diverging-epoch answer must
    clear it (Kafka truncates the epoch cache at the log end even when the log is not
    cut), or every fetch reports the same divergence and the follower never catches up.
    Found by the replication simulation (seeds 127, 133)."""
    r = Replicas(tmp_path, (1, 2, 3))
    first = r.state().leader
    o = r.produce(b"m0")
    r.sync(*[x for x in (1, 2, 3) if x != first])
    r.ack_if_committed(b"m0", o)
    r.crash(first)  # the second leader takes epoch 1 and writes nothing in it
    r.restart(first)
    second = r.state().leader
    assert r.parts[second].log.leader_epochs.latest_epoch() == 1
    info = r.live.pop(second)  # fenced while alive (its session lapsed): epoch 2 elsewhere
    r.reconcile()
    assert r.state().leader != second and r.state().leader_epoch == 2
    r.live[second] = info  # back, same process: it follows, its log never cut
    r.reconcile()
    followers = [x for x in (1, 2, 3) if x != r.state().leader]
    r.sync(*followers, rounds=6)
    o = r.produce(b"m1")
    r.sync(*followers, rounds=6)
    r.ack_if_committed(b"m1", o)
    assert r.acked == [b"m0", b"m1"]
    assert r.values(second) == [b"m0", b"m1"]
    assert set(r.state().isr) == {1, 2, 3}
    r.check()
