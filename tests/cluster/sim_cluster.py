"""Seeded simulation of the whole cluster brain: raft + gossip + controller.

Every simulated node is a controller voter (or observer) and a broker: it runs a raft
core, a SWIM gossip member and, while it is the raft leader, the controller. The
controller's view of live brokers is the leader's own gossip view, so failures reach
the metadata only through gossip. On top of the raft invariants (``sim_raft``) this
checks, for every record applied on every node, that no partition leader is ever
chosen outside the ISR (unless the topic allows unclean election), and at the end that
a crashed broker is fenced and loses its partition leaderships within a bound.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

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


def _gid(name: str) -> int:
    return int(name[1:])


class ClusterSim(RaftSim):
    def __init__(self, seed: int, params: SimParams) -> None:
        self.gossip: dict[int, GossipCore | None] = {}
        self.controller = Controller(ControllerConfig(default_replication_factor=1))
        self._next_reconcile = 0
        self.failover_ms: list[int] = []
        self.records_checked = 0
        self.pid_blocks: dict[tuple[int, int], int] = {}  # (start, count) -> commit offset
        super().__init__(seed, params, on_apply=self._check_record)

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
        meta = MemberMeta(i, f"broker-{i}:9092", f"node-{i}", f"rack{i % 2}", iid)
        g = GossipCore(f"n{i}", f"n{i}", meta, SIM_GOSSIP_CONFIG, seed=self.rng.randrange(2**32))
        self.gossip[i] = g
        seeds = [f"n{j}" for j in self.nodes if j != i]
        self._run_gossip(i, g.join(seeds, self.now))

    def crash(self, n: SimNode, down_ms: int) -> None:
        super().crash(n, down_ms)
        self.gossip[n.node_id] = None

    def _run_gossip(self, src: int, actions: Sequence[object]) -> None:
        for a in actions:
            if isinstance(a, Send):
                self._send(Datagram(src, _gid(a.addr), a.message))  # type: ignore[arg-type]

    def _deliver(self, m: object) -> None:
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
                    m.meta.broker_id, host, int(port), m.meta.rack, member_incarnation(m.meta)
                )
        return out

    def after_tick(self) -> None:
        for i, g in self.gossip.items():
            if g is not None:
                self._run_gossip(i, g.tick(self.now))
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
                if b is not None and b.fenced and not led:
                    self.failover_ms.append(self.now - t0)
                    return
            if self.now - t0 > bound:
                self.fail(f"broker {victim.node_id} not fenced/failed over within {bound}ms")


def run_cluster_schedule(seed: int, params: SimParams | None = None) -> ClusterSim:
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
    sim = ClusterSim(seed, params)
    sim.run()
    return sim
