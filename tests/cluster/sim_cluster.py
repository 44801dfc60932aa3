"""Seeded simulation of the whole cluster brain: raft + gossip + controller.

Every simulated node is a controller voter (or observer) and a broker: it runs a raft
core, a SWIM gossip member and, while it is the raft leader, the controller. The
controller's view of live brokers is the leader's own gossip view, so failures reach
the metadata only through gossip. On top of the raft invariants (``sim_raft``) this
checks, for every record applied on every node, that no partition leader is ever
chosen outside the ISR (unless the topic allows unclean election), and at the end that
a crashed broker is fenced and loses its partition leaderships within a bound.

A share of the process stops (``clean_restart_share``, drawn from its own stream so
that schedules without them replay as before) are clean: the next process names, as
its previous broker epoch, the one its predecessor saw itself registered under (the
clean-shutdown marker), and the controller keeps its eligible leader replica places
(KIP-966). No partition data is modelled here, so a clean stop loses nothing by
construction; what loses data is ``sim_replication``'s concern.

Partition leaders are modelled too, as far as the controller sees them: a replica
catches up with a partition's leader epoch (some time after its own image shows that
epoch, while it is up), and every broker that believes (from its own, possibly stale,
image) that it leads a partition sends AlterPartition requests that shrink the ISR by
a crashed follower or expand it by a follower caught up in that leader's epoch; the
requests reach the controller after a random delay, as an RPC in flight or retried.
The consequences checked after every committed entry on every node:

- one leader per partition leader epoch (a leader change that does not bump the
  epoch gives two);
- an ISR gains only replicas that caught up with the current leader epoch, checked
  when the controller accepts a change: an ISR
  change accepted from a stale leader epoch brings back a replica that is not, which
  could then be elected without records that leader acknowledged;
- a fenced broker does not stay in an ISR next to an unfenced member beyond a bound
  (checked on the controller's image on every tick).
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from jocko_py.cluster.controller import (
    UNCLEAN_LEADER_ELECTION,
    BrokerInfo,
    Controller,
    ControllerConfig,
    check_leader_in_isr,
    committed_producer_block,
)
from jocko_py.cluster.gossip.core import GossipCore, State
from jocko_py.cluster.gossip.messages import GossipMessage, MemberMeta, Send, member_incarnation
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_TOPIC,
    MetadataImage,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
)
from jocko_py.cluster.raft.core import Role
from tests.cluster.sim_gossip import SIM_GOSSIP_CONFIG
from tests.cluster.sim_raft import RaftSim, SimNode, SimParams


@dataclass(frozen=True, slots=True)
class Datagram:
    src: int
    dest: int
    message: GossipMessage


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """An AlterPartition (API 56) in flight from a partition leader to the controller."""

    broker_id: int
    topic_id: uuid.UUID
    partition_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


PartitionKey = tuple[uuid.UUID, int, int]  # (topic id, partition, leader epoch)

# How long a fenced broker may stay in an ISR next to an unfenced member, counted while
# an active controller has applied all it proposed (so that it could have acted).
FENCED_IN_ISR_GRACE_MS = 1000


def _gid(name: str) -> int:
    return int(name[1:])


class ClusterSim(RaftSim):
    def __init__(self, seed: int, params: SimParams, clean_restart_share: float = 0.0) -> None:
        self.gossip: dict[int, GossipCore | None] = {}
        # clean stops: their own stream; the epoch each node's next process names
        self.clean_restart_share = clean_restart_share
        self.crng = random.Random(seed ^ 0xC1EA)
        self.previous_epoch: dict[int, int] = {}
        self.clean_restarts = 0
        self.controller = Controller(ControllerConfig(default_replication_factor=1))
        self._next_reconcile = 0
        self.failover_ms: list[int] = []
        self.records_checked = 0
        self.pid_blocks: dict[tuple[int, int], int] = {}  # (start, count) -> commit offset
        # Partition consequences (see the module docstring).
        self.partition_leaders: dict[PartitionKey, int] = {}
        self.caught_up: dict[PartitionKey, set[int]] = {}  # now (a crash clears it)
        self.ever_caught_up: dict[PartitionKey, set[int]] = {}  # at some time in the epoch
        self.fenced_in_isr_since: dict[tuple[uuid.UUID, int, int], int] = {}
        self.alter_requests = 0
        self.alter_accepted = 0
        super().__init__(seed, params, on_apply=self._check_record)
        self.prng = random.Random(seed ^ 0xA17E)  # the partition model's own stream

    # ------------------------------------------------------------ wiring

    def _check_record(self, n: SimNode, rec: MetadataRecord, image: MetadataImage) -> None:
        """Runs on every record applied on every node, against the image before it."""
        self.records_checked += 1
        why = check_leader_in_isr(image, rec)
        if why is not None:
            self.fail(f"node {n.node_id} applied an unsafe election: {why}")
        if isinstance(rec, RegisterBrokerRecord):
            old = image.brokers.get(rec.broker_id)
            if old is not None and rec.broker_epoch <= old.broker_epoch:
                self.fail(f"broker {rec.broker_id} re-registered without a newer epoch: {rec}")
        if isinstance(rec, ProducerIdsRecord):
            block = committed_producer_block(image, rec)
            if block is not None:
                self._check_block(n.applied, block)

    def after_apply(self, n: SimNode, records: list[MetadataRecord]) -> None:
        for r in records:
            if isinstance(r, PartitionRecord | PartitionChangeRecord):
                self._check_partition(n, r.topic_id, r.partition_id)

    def _check_partition(self, n: SimNode, topic_id: uuid.UUID, pid: int) -> None:
        t = n.image.topic_by_id(topic_id)
        p = None if t is None else t.partitions.get(pid)
        if t is None or p is None:
            return
        key = (topic_id, pid, p.leader_epoch)
        leader = self.partition_leaders.setdefault(key, p.leader)
        if leader != p.leader:
            self.fail(
                f"node {n.node_id}: {t.name}-{pid} has two leaders in leader epoch "
                f"{p.leader_epoch}: {leader} and {p.leader}"
            )

    def _partition_model(self) -> None:
        """Followers catch up; partition leaders send AlterPartition; the controller
        answers the requests that arrive now."""
        rng = self.prng
        ldr = self.live_leader()
        c = None if ldr is None else ldr.core
        if ldr is not None and c is not None and ldr.applied == c.high_watermark == c.log_end:
            self._check_fenced_in_isr(ldr.image)
        else:
            self.fenced_in_isr_since.clear()  # the controller cannot act: no clock runs
        if ldr is not None and ldr.core is not None:
            for t in ldr.image.topics.values():
                for pid, p in t.partitions.items():
                    if p.leader < 0:
                        continue
                    key = (t.topic_id, pid, p.leader_epoch)
                    for r in p.replicas:
                        if r in p.isr or not self._up(r) or rng.random() >= 0.05:
                            continue
                        # A follower catches up with the epoch it knows of (it fetches with it).
                        mine = self.nodes[r].image.partition(t.name, pid)
                        if mine is not None and mine.leader_epoch == p.leader_epoch:
                            self.caught_up.setdefault(key, set()).add(r)
                            self.ever_caught_up.setdefault(key, set()).add(r)
        if rng.random() < 0.3:  # leaders retry until the change is in their image
            self._send_alter_partition(rng)

    def _up(self, broker: int) -> bool:
        n = self.nodes.get(broker)
        return n is not None and n.core is not None

    def _send_alter_partition(self, rng: random.Random) -> None:
        up = [n for n in self.nodes.values() if n.core is not None]
        if not up:
            return
        n = rng.choice(up)
        mine = [
            (t, pid, p)
            for t in n.image.topics.values()
            for pid, p in t.partitions.items()
            if p.leader == n.node_id
        ]
        if not mine:
            return
        t, pid, p = rng.choice(mine)
        key = (t.topic_id, pid, p.leader_epoch)
        down = [r for r in p.isr if r != n.node_id and not self._up(r)]
        ready = [r for r in p.replicas if r not in p.isr and r in self.caught_up.get(key, ())]
        if down and (not ready or rng.random() < 0.5):
            isr = tuple(r for r in p.isr if r != rng.choice(down))
        elif ready:
            isr = (*p.isr, rng.choice(ready))
        else:
            return
        req = AlterPartitionRequest(
            n.node_id, t.topic_id, pid, p.leader_epoch, p.partition_epoch, isr
        )
        self.alter_requests += 1
        self._seq += 1
        heapq.heappush(self.queue, (self.now + rng.randint(1, 1000), self._seq, req))

    def _on_alter_partition(self, req: AlterPartitionRequest) -> None:
        ldr = self.live_leader()
        if ldr is None or ldr.core is None:
            return
        c = ldr.core
        if c.high_watermark != c.log_end or ldr.applied != c.high_watermark:
            return  # the leader retries; its next request carries what it knows then
        err, recs = self.controller.alter_partition(
            ldr.image,
            req.topic_id,
            req.partition_id,
            req.broker_id,
            req.leader_epoch,
            req.partition_epoch,
            req.new_isr,
        )
        if not recs:
            return
        # The ISR may gain only replicas that caught up with the current leader (else one
        # could be elected without records that leader acknowledged). One may have
        # crashed since the request left: the leader could not know.
        t = ldr.image.topic_by_id(req.topic_id)
        p = None if t is None else t.partitions.get(req.partition_id)
        assert t is not None and p is not None
        key = (req.topic_id, req.partition_id, p.leader_epoch)
        ready = self.ever_caught_up.get(key, set())
        added = set(req.new_isr) - set(p.isr) - ready
        if added:
            self.fail(
                f"the controller let ISR {p.isr} of {t.name}-{req.partition_id} (leader "
                f"{p.leader}, epoch {p.leader_epoch}) take {sorted(added)}, not caught up "
                f"with that leader, on a request {req}"
            )
        if self.propose(recs):
            self.alter_accepted += 1

    def _check_fenced_in_isr(self, img: MetadataImage) -> None:
        """A fenced broker leaves every ISR that has an unfenced member (it may stay as
        the last one: it holds the newest data), within a bound."""
        seen: set[tuple[uuid.UUID, int, int]] = set()
        for t in img.topics.values():
            for pid, p in t.partitions.items():
                fenced = [r for r in p.isr if r in img.brokers and img.brokers[r].fenced]
                if not fenced or len(fenced) == len(p.isr):
                    continue
                for r in fenced:
                    k = (t.topic_id, pid, r)
                    seen.add(k)
                    since = self.fenced_in_isr_since.setdefault(k, self.now)
                    if self.now - since > FENCED_IN_ISR_GRACE_MS:
                        self.fail(
                            f"fenced broker {r} still in ISR {p.isr} of {t.name}-{pid} "
                            f"{self.now - since}ms after it was fenced"
                        )
        for k in list(self.fenced_in_isr_since):
            if k not in seen:
                del self.fenced_in_isr_since[k]

    def _check_block(self, offset: int, block: tuple[int, int]) -> None:
        """Producer-id blocks handed out (on commit) never overlap; every node hands out
        the same block for the same committed entry."""
        start, count = block
        for (s2, c2), off2 in self.pid_blocks.items():
            if (s2, c2) == block and off2 == offset:
                return
            if start < s2 + c2 and s2 < start + count:
                self.fail(f"producer-id block {block} at {offset} overlaps {(s2, c2)} at {off2}")
        self.pid_blocks[block] = offset

    def _boot(self, n: SimNode) -> None:
        super()._boot(n)
        i = n.node_id
        # Every boot is a new process incarnation (seeded, so schedules replay).
        iid = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        meta = MemberMeta(i, f"broker-{i}:9092", f"node-{i}", f"rack{i % 2}", iid,
                          previous_broker_epoch=self.previous_epoch.pop(i, -1))
        g = GossipCore(f"n{i}", f"n{i}", meta, SIM_GOSSIP_CONFIG, seed=self.rng.randrange(2**32))
        self.gossip[i] = g
        seeds = [f"n{j}" for j in self.nodes if j != i]
        self._run_gossip(i, g.join(seeds, self.now))

    def crash(self, n: SimNode, down_ms: int) -> None:
        g = self.gossip.get(n.node_id)
        if (self.clean_restart_share and g is not None
                and self.crng.random() < self.clean_restart_share):
            reg = n.image.brokers.get(n.node_id)
            if reg is not None and reg.incarnation_id == member_incarnation(
                    g.members[g.name].meta):
                self.previous_epoch[n.node_id] = reg.broker_epoch
                self.clean_restarts += 1
        super().crash(n, down_ms)
        self.gossip[n.node_id] = None
        for ready in self.caught_up.values():
            ready.discard(n.node_id)  # it must fetch its way back in

    def _run_gossip(self, src: int, actions: Sequence[object]) -> None:
        for a in actions:
            if isinstance(a, Send):
                self._send(Datagram(src, _gid(a.addr), a.message))  # type: ignore[arg-type]

    def _deliver(self, m: object) -> None:
        if isinstance(m, AlterPartitionRequest):
            self._on_alter_partition(m)
            return
        if isinstance(m, Datagram):
            g = self.gossip.get(m.dest)
            if g is not None and self.can_talk(m.src, m.dest):
                self._run_gossip(m.dest, g.receive(m.message, self.now))
            return
        super()._deliver(m)

    def live_brokers(self, node_id: int) -> dict[int, BrokerInfo]:
        g = self.gossip.get(node_id)
        if g is None:
            return {}
        out = {}
        for m in g.members.values():
            # Suspects still count: fencing on mere suspicion would flap under loss.
            if m.state <= State.SUSPECT:
                host, port = m.meta.advertised_addr.rsplit(":", 1)
                out[m.meta.broker_id] = BrokerInfo(
                    m.meta.broker_id, host, int(port), m.meta.rack, member_incarnation(m.meta),
                    previous_broker_epoch=m.meta.previous_broker_epoch,
                )
        return out

    def after_tick(self) -> None:
        for i, g in self.gossip.items():
            if g is not None:
                self._run_gossip(i, g.tick(self.now))
        self._partition_model()
        if self.now < self._next_reconcile:
            return
        self._next_reconcile = self.now + 20
        ldr = self.live_leader()
        if ldr is None or ldr.core is None:
            return
        c = ldr.core
        # Reconcile only against a fully applied image, so that nothing is proposed
        # twice while a previous proposal is still in flight.
        if c.high_watermark != c.log_end or ldr.applied != c.high_watermark:
            return
        recs = self.controller.reconcile(ldr.image, self.live_brokers(ldr.node_id))
        if recs:
            self.propose(recs)

    def _random_record(self) -> list[MetadataRecord]:
        ldr = self.live_leader()
        if ldr is None:
            return []
        img = ldr.image
        r = self.rng.random()
        if r < 0.3:
            self._topic_n += 1
            unclean = self.rng.random() < 0.3
            _err, recs = self.controller.create_topic(
                img,
                f"topic{self._topic_n}",
                num_partitions=self.rng.randint(1, 3),
                replication_factor=self.rng.randint(1, 3),
                configs={UNCLEAN_LEADER_ELECTION: "true"} if unclean else None,
            )
            return recs
        if r < 0.4 and img.topics:
            name = self.rng.choice(sorted(img.topics))
            _err, recs = self.controller.alter_config(
                img, CONFIG_RESOURCE_TOPIC, name, {"retention.ms": str(self.rng.randint(1, 9))}
            )
            return recs
        if r < 0.5 and img.brokers:
            bid = self.rng.choice(sorted(img.brokers))
            _err, recs, _block = self.controller.allocate_producer_ids(
                img, bid, img.brokers[bid].broker_epoch
            )
            return recs
        if r < 0.55 and img.topics:
            _err, recs = self.controller.delete_topic(img, self.rng.choice(sorted(img.topics)))
            return recs
        return []

    # ------------------------------------------------------------ convergence

    def converged(self) -> bool:
        if not super().converged():
            return False
        ldr = self.live_leader()
        assert ldr is not None
        for i in self.nodes:
            g = self.gossip.get(i)
            if g is None or len(self.live_brokers(i)) != len(self.nodes):
                return False
        img = ldr.image
        if sorted(img.brokers) != sorted(self.nodes) or any(b.fenced for b in img.brokers.values()):
            return False
        # Every broker is registered as its current process incarnation (a restart
        # re-registers with a new broker epoch).
        for i in self.nodes:
            g = self.gossip.get(i)
            assert g is not None
            if img.brokers[i].incarnation_id != member_incarnation(g.members[g.name].meta):
                return False
        return all(p.leader >= 0 for t in img.topics.values() for p in t.partitions.values())

    def run(self) -> None:
        super().run()
        # Kill one broker that is not the raft leader; the controller must fence it and
        # move every partition it led to an ISR member, within a bound.
        ldr = self.live_leader()
        assert ldr is not None and ldr.core is not None
        others = [n for n in self.nodes.values() if n is not ldr]
        if not others:
            return
        victim = self.rng.choice(others)
        self.crash(victim, 10**9)
        t0 = self.now
        g = SIM_GOSSIP_CONFIG
        bound = (2 * len(self.nodes) + g.suspicion_mult + 10) * g.probe_interval_ms + 2000
        led: list[tuple[str, int]] = []
        in_isr: list[tuple[str, int]] = []
        while True:
            self.step_until(self.now + self.p.tick_ms, chaos=False, propose=False)
            ldr = self.live_leader()
            if ldr is not None and ldr.core is not None and ldr.core.role is Role.LEADER:
                img = ldr.image
                b = img.brokers.get(victim.node_id)
                led = [
                    (t.name, pid)
                    for t in img.topics.values()
                    for pid, p in t.partitions.items()
                    if p.leader == victim.node_id
                ]
                in_isr = [
                    (t.name, pid)
                    for t in img.topics.values()
                    for pid, p in t.partitions.items()
                    if victim.node_id in p.isr
                    and any(r in img.brokers and not img.brokers[r].fenced for r in p.isr)
                ]
                if b is not None and b.fenced and not led and not in_isr:
                    self.failover_ms.append(self.now - t0)
                    return
            if self.now - t0 > bound:
                self.fail(
                    f"broker {victim.node_id} not fenced/failed over within {bound}ms "
                    f"(fenced broker leads {led}, in ISR of {in_isr})"
                )


# Brokers that crash often: ISR shrinks and expands race with AlterPartition requests
# in flight, so that a stale one reaches the controller now and then.
ISR_CHURN: dict[str, Any] = dict(
    voters=3,
    observers=2,
    chaos_ms=2000,
    crash_rate=0.01,
    delay_ms=(1, 30),
    drop=0.02,
    partition_rate=0.0,
)


def run_cluster_schedule(seed: int, params: SimParams | None = None,
                         clean_restarts: bool = True) -> ClusterSim:
    """Replay schedule ``seed``; ``clean_restarts=False``: as drawn before clean restarts
    existed (the regression seeds)."""
    share = random.Random(seed ^ 0xC1EB).choice((0.0, 0.5, 0.9)) if clean_restarts else 0.0
    rng = random.Random(seed ^ 0xC1A5)
    if params is None:
        params = SimParams(
            voters=rng.choice([3, 3, 5]),
            observers=rng.choice([0, 1, 2]),
            chaos_ms=rng.choice([1000, 2000]),
            heal_ms=12000,
            drop=rng.choice([0.0, 0.02, 0.1]),
            dup=rng.choice([0.0, 0.05]),
            delay_ms=rng.choice([(1, 5), (1, 30)]),
            crash_rate=rng.choice([0.0, 0.002, 0.005]),
            partition_rate=rng.choice([0.0, 0.003]),
            snapshot_every=rng.choice([0, 16]),
            propose_every_ms=50,
        )
        if random.Random(seed ^ 0x15C).random() < 0.25:
            params = replace(params, **ISR_CHURN)
    sim = ClusterSim(seed, params, share)
    sim.run()
    return sim
