"""The active controller: turns membership and admin requests into metadata records.

The controller is pure: every method takes the current ``MetadataImage`` (as applied
from the committed log, plus any records the caller has proposed but not yet seen
committed, which the caller must avoid by only reconciling when its proposals are
committed) and returns the records to propose through raft. It never mutates the image.
Only the raft leader runs it.

Rules
-----
- Registration. A broker seen alive by gossip with an unknown id, or a new incarnation,
  or changed endpoints/rack, is (re-)registered with a new broker epoch, fenced, and
  then unfenced. A registered broker that membership reports alive is unfenced.
- Fencing. A registered, unfenced broker that membership no longer reports alive is
  fenced, and removed from the ISR of every partition (the ISR may become empty); a
  partition it led gets a new leader chosen from the remaining ISR members that are
  unfenced (first in replica order). Only when the topic has
  ``unclean.leader.election.enable=true`` may a live replica outside the ISR and ELR be
  elected (its ISR then becomes just that replica).
- Eligible leader replicas (KIP-966, as Kafka 4.x's ``PartitionChangeBuilder``). The
  leader does not advance the HW while the ISR is smaller than the effective
  ``min.insync.replicas`` (min of it and the replica count), so a replica that leaves the
  ISR then still holds everything committed. Every ISR change computes the ELR: empty
  when the new ISR has at least min ISR members; else (old ELR + old ISR) - new ISR -
  replicas that restarted uncleanly. A leader is elected from the ISR, or from the ELR
  when the ISR is empty (its ISR becomes that replica alone). When the ISR becomes
  empty, the last leader is kept as ``last_known_elr``; with ISR and ELR both empty it
  may be elected again when it returns (Kafka's balanced recovery: with nothing better,
  the last leader's log).
- Restarts (KIP-966, as Kafka 4.x's ``ClusterControlManager.registerBroker`` and
  ``ReplicationControlManager.handleBrokerShutdown``). A broker registering with a new
  incarnation restarted. It restarted cleanly when it names, as its previous broker
  epoch (from the clean-shutdown markers its last process wrote after flushing every
  log), the epoch it is registered under: it lost nothing, so it is handled as a fenced
  broker is, leaving the ISR of every partition but keeping (or, when the ISR falls
  under min ISR, taking) its ELR place. Otherwise (no marker: killed, power lost; or
  another epoch) it may have lost what it had not flushed: it leaves the ISR and the ELR
  of every partition, even as their last member. Either way it leads nothing in that
  round and rejoins the ISR by catching up, as any follower; the last known leader is
  left as it is.
- ELR is on only while ``eligible.leader.replicas.version`` is finalized at 1 or more
  (``elr_enabled``; a metadata log that records no feature level is an older jocko-py's,
  which tracked the ELR, and keeps doing so). Off, as Kafka's PartitionChangeBuilder
  without ELR: no ELR is computed (an existing one is cleared with the next change),
  the ISR never becomes empty (its last member stays, leaderless, and leads again
  when it returns), and there is no last-known-leader recovery.
- ELR and ``min.insync.replicas`` (Kafka 4.x's ConfigurationControlManager and
  ReplicationControlManager): when ELR becomes enabled (a new cluster bootstrapping at
  ELR 1, or an upgrade) the cluster-level ``min.insync.replicas`` is written with this
  controller's static value if none is set, and every broker-level one is removed
  (``elr_safety_records``). A change of a topic's ``min.insync.replicas`` clears that
  topic's ELR and last known ELR; a change of the cluster-level one (even to the same
  value) clears them in every partition. (The broker refuses, while ELR is enabled, a
  broker-level ``min.insync.replicas`` and the removal of the cluster-level one.)
- A leaderless partition whose ISR (or, when empty, ELR) holds an unfenced broker gets
  that broker as leader.
- Every leader change bumps the leader epoch (``PartitionChangeRecord`` with a leader).
- Placement. New partitions get ``replication_factor`` distinct unfenced brokers. The
  first is taken round-robin from a list of brokers interleaved by rack, starting at a
  position derived from the topic name and partition index, and leads; each further
  replica is the next broker in that rotation on a rack the partition does not use yet
  (so a partition spans min(rf, racks) racks, however uneven the racks are), then,
  once every rack is used, the next broker on a host (advertised host) the partition
  does not use yet, then the next unused broker: a host's shards (several brokers of
  one host, jocko_py/shards.py) are one failure domain even in one rack.
- Producer ids are handed out in blocks of ``producer_id_block_size``. The controller
  reserves each block it proposes (the next proposal starts after it, even before the
  first commits), and a block is valid only once its ``ProducerIdsRecord`` commits:
  ``committed_producer_block(image, record)`` gives the ids the committed record hands
  out (from the image's counter before it up to the record's), or None when the image
  rejects the record (it must strictly advance the counter), so no two committed blocks
  can overlap.
- ISR changes requested by a partition leader (``alter_partition``, Kafka's
  AlterPartition) are accepted only with the current leader epoch and partition epoch,
  an ISR within the replicas, containing the leader, of unfenced brokers. A member sent
  with a broker epoch (AlterPartition v3, KIP-903) must still be registered at that
  epoch: a follower that restarted after the leader saw it catch up is refused
  (INELIGIBLE_REPLICA), since the new process may have lost what the old one had.
- Preferred leaders (``elect_leaders`` with the preferred type, ElectLeaders; and
  ``rebalance_leaders`` for ``auto.leader.rebalance.enable``): the first replica becomes
  leader when it is unfenced, in the ISR and not already leading. An unclean election
  (ElectLeaders type 1) only applies to a leaderless partition: the first live replica
  leads with an ISR of itself.
- Cluster secret (``cluster_secret_records``): while the image has none, the controller
  proposes a ``ClusterSecretRecord`` of 32 random bytes (once: a new cluster, or a data
  directory from before it existed); brokers authenticate each other with it.
- Reassignment (``reassign``, AlterPartitionReassignments, as KRaft does it): the
  replicas become target + current (target first), ``adding`` = target - current,
  ``removing`` = current - target. Once every adding replica is in the ISR,
  ``reconcile`` completes it: replicas = target, ISR = ISR & target, removing/adding
  cleared, and a new leader from target & ISR if the leader is being removed.
  Cancelling (target None) goes back to the replicas before the reassignment.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from jocko_py.cluster.acl_control import AclControlManager
from jocko_py.cluster.client_quota_control import ClientQuotaControlManager
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerEndpoint,
    ClusterSecretRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataImage,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicImage,
    TopicRecord,
    UnfenceBrokerRecord,
)
from jocko_py.cluster.scram_control import ScramControlManager
from jocko_py.commitlog.config import effective_min_isr
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.cluster.controller")

UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
# broker/features.py names the features; the cluster layer reads only these two
ELR_FEATURE = "eligible.leader.replicas.version"
METADATA_VERSION_FEATURE = "metadata.version"


def elr_enabled(image: MetadataImage) -> bool:
    """KIP-966's ELR is tracked: ``eligible.leader.replicas.version`` >= 1, or a log that
    records no metadata.version (an older jocko-py's, which always tracked it)."""
    if METADATA_VERSION_FEATURE not in image.features:
        return True
    return image.features.get(ELR_FEATURE, 0) >= 1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker as membership (gossip) reports it."""

    broker_id: int
    host: str
    port: int
    rack: str | None
    incarnation: uuid.UUID
    # every listener's advertised endpoint, the inter-broker one first (default: one
    # PLAINTEXT endpoint at host:port)
    endpoints: tuple[BrokerEndpoint, ...] = ()
    # the broker epoch its previous process was registered under, as its clean-shutdown
    # markers name it (BrokerRegistration's PreviousBrokerEpoch); -1: not a clean stop
    previous_broker_epoch: int = -1

    def all_endpoints(self) -> tuple[BrokerEndpoint, ...]:
        return self.endpoints or (BrokerEndpoint("PLAINTEXT", self.host, self.port),)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    default_replication_factor: int = 1
    default_partitions: int = 1
    producer_id_block_size: int = 1000
    # the broker's static min.insync.replicas: the default when neither the topic nor
    # the cluster-wide dynamic config sets one
    min_insync_replicas: int = 1
    # the finalized feature levels a new cluster starts with (broker/features.py)
    bootstrap_features: tuple[tuple[str, int], ...] = ()


class Controller:
    def __init__(self, config: ControllerConfig | None = None,
                 random_bytes: Callable[[int], bytes] = os.urandom) -> None:
        self.config = config or ControllerConfig()
        self._pid_reserved = 0  # producer ids below this were proposed by this controller
        self._random_bytes = random_bytes
        # the decisions on security metadata (Kafka's *ControlManagers)
        self.acls = AclControlManager()
        self.quotas = ClientQuotaControlManager()
        self.scram = ScramControlManager()

    def bootstrap_records(self, image: MetadataImage) -> list[MetadataRecord]:
        """A new cluster's first records (nothing applied yet): its feature levels, as
        `kafka-storage format` bootstraps them; then the cluster secret."""
        first: list[MetadataRecord] = []
        if image.records_applied == 0:
            first = [FeatureLevelRecord(k, v) for k, v in self.config.bootstrap_features]
            if dict(self.config.bootstrap_features).get(ELR_FEATURE, 0) >= 1:
                first += self.elr_safety_records(image)
        return first + self.cluster_secret_records(image)

    def elr_safety_records(self, image: MetadataImage) -> list[MetadataRecord]:
        """Kafka's maybeGenerateElrSafetyRecords, as ELR becomes enabled: the
        cluster-level ``min.insync.replicas`` (this controller's static value) unless one
        is set, and the removal of every broker-level one."""
        out: list[MetadataRecord] = []
        if MIN_INSYNC_REPLICAS not in image.configs(CONFIG_RESOURCE_BROKER, ""):
            out.append(ConfigRecord(CONFIG_RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS,
                                    str(self.config.min_insync_replicas)))
        for name in image.config_resources(CONFIG_RESOURCE_BROKER):
            if name and MIN_INSYNC_REPLICAS in image.configs(CONFIG_RESOURCE_BROKER, name):
                out.append(ConfigRecord(CONFIG_RESOURCE_BROKER, name, MIN_INSYNC_REPLICAS,
                                        None))
        return out

    def clear_elr_records(self, image: MetadataImage,
                          topics: Iterable[str]) -> list[MetadataRecord]:
        """PartitionChangeRecords clearing the ELR and last known ELR of every partition
        of ``topics`` that has either (min.insync.replicas changed under them)."""
        out: list[MetadataRecord] = []
        for name in topics:
            t = image.topics.get(name)
            if t is None:
                continue
            for pid in sorted(t.partitions):
                p = t.partitions[pid]
                if p.elr or p.last_known_elr:
                    out.append(PartitionChangeRecord(
                        partition_id=pid, topic_id=t.topic_id,
                        elr=() if p.elr else None,
                        last_known_elr=() if p.last_known_elr else None))
        return out

    def cluster_secret_records(self, image: MetadataImage) -> list[MetadataRecord]:
        """A new cluster secret while the image has none (see the module rules)."""
        if image.cluster_secret is not None:
            return []
        return [ClusterSecretRecord(self._random_bytes(32))]

    # ------------------------------------------------------------------ membership

    def reconcile(self, image: MetadataImage, live: dict[int, BrokerInfo],
                  fence_restarted: bool = True,
                  caught_up: set[int] | None = None) -> list[MetadataRecord]:
        """Records that bring the image in line with the live broker set. A broker that
        comes back with a new incarnation (``fence_restarted``) leaves the ISR of every
        partition and leads nothing in this round; it rejoins the ISR by catching up, as
        any follower. Unless it restarted cleanly (its previous broker epoch is the one
        it is registered under) it may have lost what it had not flushed, so it leaves
        the ELR of every partition too (even as the last member). With ``caught_up``
        given (broker heartbeats), a fenced broker is unfenced only once it is in that
        set (its heartbeat showed it caught up with the metadata log)."""
        out: list[MetadataRecord] = []
        restarted: set[int] = set()  # unclean: out of every ISR and ELR
        clean_restarted: set[int] = set()  # clean: out of every ISR, as if fenced
        usable: set[int] = set()  # live and unfenced once these records apply
        next_epoch = max([b.broker_epoch for b in image.brokers.values()] + [0]) + 1
        for bid in sorted(live):
            info = live[bid]
            b = image.brokers.get(bid)
            changed = (
                b is None
                or b.incarnation_id != info.incarnation
                or (b.endpoints, b.rack) != (info.all_endpoints(), info.rack)
            )
            if changed:
                if b is not None and b.incarnation_id != info.incarnation and fence_restarted:
                    if info.previous_broker_epoch == b.broker_epoch:
                        clean_restarted.add(bid)
                        log.info("[controller] broker %d restarted cleanly (previous broker "
                                 "epoch %d): it keeps its eligible leader replica places",
                                 bid, b.broker_epoch)
                    else:
                        restarted.add(bid)
                        log.info("[controller] broker %d restarted uncleanly (previous "
                                 "broker epoch %d, registered under %d): out of every ISR "
                                 "and ELR", bid, info.previous_broker_epoch, b.broker_epoch)
                epoch, next_epoch = next_epoch, next_epoch + 1
                out.append(
                    RegisterBrokerRecord(
                        broker_id=bid,
                        incarnation_id=info.incarnation,
                        broker_epoch=epoch,
                        endpoints=info.all_endpoints(),
                        rack=info.rack,
                        fenced=True,
                    )
                )
                if caught_up is None:
                    out.append(UnfenceBrokerRecord(bid, epoch))
                    usable.add(bid)
            elif b is not None and b.fenced and (caught_up is None or bid in caught_up):
                out.append(UnfenceBrokerRecord(bid, b.broker_epoch))
                usable.add(bid)
            elif b is not None and not b.fenced:
                usable.add(bid)
        for bid in sorted(image.brokers):
            b = image.brokers[bid]
            if bid not in live and not b.fenced:
                out.append(FenceBrokerRecord(bid, b.broker_epoch))
        out.extend(self._repair_partitions(image, usable - clean_restarted, restarted))
        if not out:
            out.extend(self._complete_reassignments(image, usable))
        return out

    def _repair_partitions(self, image: MetadataImage, usable: set[int],
                           restarted: set[int]) -> list[MetadataRecord]:
        """Drop fenced and restarted brokers (not in ``usable``) from every ISR, those
        restarted uncleanly (``restarted``) from every ELR too, and elect where the leader
        is gone."""
        out: list[MetadataRecord] = []
        eligible = usable - restarted
        for name in sorted(image.topics):
            t = image.topics[name]
            unclean = unclean_election_enabled(image, name)
            for pid in sorted(t.partitions):
                p = t.partitions[pid]
                rec = self.partition_change(
                    image, t, pid, isr=tuple(r for r in p.isr if r in eligible),
                    eligible=eligible, unclean_shutdown=restarted, unclean=unclean)
                if rec is not None:
                    out.append(rec)
        return out

    def min_insync_replicas(self, image: MetadataImage, topic: str, replicas: int) -> int:
        """The effective min ISR of a partition: the topic's ``min.insync.replicas``, else
        the cluster-wide dynamic default, else this controller's static one; at most the
        replica count (Kafka's getTopicEffectiveMinIsr)."""
        value = image.topic_configs(topic).get(MIN_INSYNC_REPLICAS)
        if value is None:
            value = image.configs(CONFIG_RESOURCE_BROKER, "").get(MIN_INSYNC_REPLICAS)
        try:
            n = int(value) if value is not None else self.config.min_insync_replicas
        except ValueError:
            n = self.config.min_insync_replicas
        return effective_min_isr(n, replicas)

    def partition_change(
        self,
        image: MetadataImage,
        t: TopicImage,
        pid: int,
        *,
        isr: tuple[int, ...] | None = None,
        eligible: set[int],
        unclean_shutdown: set[int] | frozenset[int] = frozenset(),
        unclean: bool = False,
        replicas: tuple[int, ...] | None = None,
        adding_replicas: tuple[int, ...] | None = None,
        removing_replicas: tuple[int, ...] | None = None,
    ) -> PartitionChangeRecord | None:
        """The one place a partition's ISR, ELR and leader change together (KIP-966 rules
        in the module docstring): ``isr`` is the target ISR (default: unchanged),
        ``eligible`` the brokers that may lead, ``unclean_shutdown`` the brokers that
        restarted uncleanly (out of the ISR and ELR), ``unclean`` allows a leader from outside the
        ISR and ELR. None when nothing changes."""
        p = t.partitions[pid]
        reps = p.replicas if replicas is None else replicas
        new_isr = tuple(r for r in (p.isr if isr is None else isr)
                        if r in reps and r not in unclean_shutdown)
        min_isr = self.min_insync_replicas(image, t.name, len(reps))
        elr_on = elr_enabled(image)
        if not elr_on or len(new_isr) >= min_isr:
            elr: tuple[int, ...] = ()
        else:
            was = set(p.elr) | set(p.isr)
            elr = tuple(r for r in reps
                        if r in was and r not in new_isr and r not in unclean_shutdown)

        def valid(r: int) -> bool:
            return (r in new_isr or (not new_isr and r in elr)) and r in eligible

        leader = p.leader
        if leader < 0 or not valid(leader):
            leader = next((r for r in reps if valid(r)), NO_LEADER)
            lke = p.last_known_elr
            if leader != NO_LEADER and leader in elr:  # from the ELR: it alone is in sync
                new_isr, elr = (leader,), tuple(r for r in elr if r != leader)
            elif (elr_on and leader == NO_LEADER and not new_isr and not elr and len(lke) == 1
                  and lke[0] in reps and lke[0] in eligible):
                leader, new_isr = lke[0], (lke[0],)  # balanced recovery: the last leader
                log.warning("[controller] %s-%d: ISR and ELR empty; electing the last "
                            "known leader %d", t.name, pid, leader)
            elif leader == NO_LEADER and unclean:
                leader = next((r for r in reps if r in eligible), NO_LEADER)
                if leader != NO_LEADER:
                    new_isr, elr = (leader,), ()
                    log.warning("[controller] %s-%d: unclean election of %d (outside the "
                                "ISR and ELR): records may be lost", t.name, pid, leader)
        last_known = p.last_known_elr
        if not elr_on:
            if not new_isr:
                new_isr = p.isr  # without ELR the ISR keeps its last member (Kafka)
        elif not new_isr and p.isr:
            if p.leader >= 0:
                last_known = (p.leader,)
            elif len(p.isr) == 1:
                last_known = p.isr
        elif leader >= 0:
            last_known = ()
        rec = PartitionChangeRecord(
            partition_id=pid,
            topic_id=t.topic_id,
            isr=new_isr if new_isr != p.isr else None,
            leader=leader if leader != p.leader else NO_LEADER_CHANGE,
            replicas=reps if reps != p.replicas else None,
            adding_replicas=(adding_replicas if adding_replicas is not None
                             and adding_replicas != p.adding_replicas else None),
            removing_replicas=(removing_replicas if removing_replicas is not None
                               and removing_replicas != p.removing_replicas else None),
            elr=elr if elr != p.elr else None,
            last_known_elr=last_known if last_known != p.last_known_elr else None,
        )
        if rec == PartitionChangeRecord(pid, t.topic_id):
            return None
        return rec

    # ------------------------------------------------------------------ admin

    def create_topic(
        self,
        image: MetadataImage,
        name: str,
        num_partitions: int | None = None,
        replication_factor: int | None = None,
        configs: dict[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
        assignments: list[tuple[int, ...]] | None = None,
    ) -> tuple[int, list[MetadataRecord]]:
        """A new topic's records; `assignments` (manual replica assignment, one replica
        list per partition from 0) replaces the partition count, the replication factor
        and the placement."""
        if assignments:
            if name in image.topics:
                return ErrorCode.TOPIC_ALREADY_EXISTS, []
            code = check_manual_assignments(image, assignments, None)
            if code:
                return code, []
            num_partitions, replication_factor = len(assignments), len(assignments[0])
        n = self.config.default_partitions if num_partitions in (None, -1) else num_partitions
        rf = (
            self.config.default_replication_factor
            if replication_factor in (None, -1)
            else replication_factor
        )
        assert n is not None and rf is not None
        if name in image.topics:
            return ErrorCode.TOPIC_ALREADY_EXISTS, []
        if n <= 0:
            return ErrorCode.INVALID_PARTITIONS, []
        brokers = self._placement_order(image)
        if not assignments and (rf <= 0 or rf > len(brokers)):
            return ErrorCode.INVALID_REPLICATION_FACTOR, []
        tid = topic_id or uuid.UUID(
            bytes=hashlib.sha256(f"{name}/{image.records_applied}".encode()).digest()[:16]
        )
        out: list[MetadataRecord] = [TopicRecord(name, tid)]
        if assignments:
            out.extend(manual_partitions(image, tid, 0, assignments))
        else:
            out.extend(self._place(image, tid, name, range(n), rf, brokers))
        for k in sorted(configs or {}):
            out.append(ConfigRecord(CONFIG_RESOURCE_TOPIC, name, k, (configs or {})[k]))
        return ErrorCode.NONE, out

    def create_partitions(
        self, image: MetadataImage, name: str, total: int,
        assignments: list[tuple[int, ...]] | None = None,
    ) -> tuple[int, list[MetadataRecord]]:
        """New partitions up to `total`; `assignments` (manual replica assignment) gives
        the replicas of each new partition, as many as there are new partitions, each
        as long as the topic's replication factor."""
        t = image.topics.get(name)
        if t is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
        if total <= len(t.partitions):
            return ErrorCode.INVALID_PARTITIONS, []
        rf = len(next(iter(t.partitions.values())).replicas) if t.partitions else 1
        if assignments:
            if len(assignments) != total - len(t.partitions):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, []
            code = check_manual_assignments(image, assignments, rf)
            if code:
                return code, []
            return ErrorCode.NONE, manual_partitions(image, t.topic_id, len(t.partitions), assignments)
        brokers = self._placement_order(image)
        if rf > len(brokers):
            return ErrorCode.INVALID_REPLICATION_FACTOR, []
        return ErrorCode.NONE, self._place(
            image, t.topic_id, name, range(len(t.partitions), total), rf, brokers
        )

    def delete_topic(self, image: MetadataImage, name: str) -> tuple[int, list[MetadataRecord]]:
        t = image.topics.get(name)
        if t is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
        return ErrorCode.NONE, [RemoveTopicRecord(t.topic_id)]

    def alter_config(
        self,
        image: MetadataImage,
        resource_type: int,
        resource_name: str,
        changes: dict[str, str | None],
    ) -> tuple[int, list[MetadataRecord]]:
        if resource_type == CONFIG_RESOURCE_TOPIC and resource_name not in image.topics:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
        out: list[MetadataRecord] = [
            ConfigRecord(resource_type, resource_name, k, changes[k]) for k in sorted(changes)
        ]
        if MIN_INSYNC_REPLICAS in changes and elr_enabled(image):
            if resource_type == CONFIG_RESOURCE_TOPIC:
                out += self.clear_elr_records(image, [resource_name])
            elif resource_type == CONFIG_RESOURCE_BROKER and resource_name == "":
                out += self.clear_elr_records(image, sorted(image.topics))
        return ErrorCode.NONE, out

    def update_features(
        self, image: MetadataImage, levels: dict[str, int]
    ) -> tuple[int, list[MetadataRecord]]:
        """FeatureLevelRecords for the features whose finalized level changes (the
        broker checked the levels against what it supports)."""
        out: list[MetadataRecord] = [FeatureLevelRecord(k, v) for k, v in sorted(levels.items())
                                     if image.features.get(k) != v]
        if levels.get(ELR_FEATURE, 0) >= 1 and image.features.get(ELR_FEATURE, 0) < 1:
            out += self.elr_safety_records(image)
        return ErrorCode.NONE, out

    def allocate_producer_ids(
        self, image: MetadataImage, broker_id: int, broker_epoch: int
    ) -> tuple[int, list[MetadataRecord], tuple[int, int]]:
        """Returns (error, records, (first id, count)) of a new producer-id block. The block
        is only a reservation: hand it out once the record commits, as
        ``committed_producer_block`` reports it."""
        b = image.brokers.get(broker_id)
        if b is None or b.broker_epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, [], (-1, 0)
        start = max(image.next_producer_id, self._pid_reserved)
        size = self.config.producer_id_block_size
        self._pid_reserved = start + size
        return ErrorCode.NONE, [ProducerIdsRecord(broker_id, broker_epoch, start + size)], (start, size)

    def alter_partition(
        self,
        image: MetadataImage,
        topic_id: uuid.UUID,
        partition_id: int,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: Iterable[int],
        member_epochs: Iterable[int] = (),
    ) -> tuple[int, list[MetadataRecord]]:
        t = image.topic_by_id(topic_id)
        p = None if t is None else t.partitions.get(partition_id)
        if t is None or p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
        if p.leader != leader_id or p.leader_epoch != leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, []
        if p.partition_epoch != partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION, []
        isr = tuple(new_isr)
        if leader_id not in isr or not set(isr) <= set(p.replicas) or len(set(isr)) != len(isr):
            return ErrorCode.INVALID_REQUEST, []
        for r in isr:
            b = image.brokers.get(r)
            if r not in p.isr and (b is None or b.fenced):
                return ErrorCode.INELIGIBLE_REPLICA, []
        for r, epoch in zip(isr, member_epochs, strict=False):  # v2: no epochs
            b = image.brokers.get(r)
            if epoch >= 0 and (b is None or b.fenced or b.broker_epoch != epoch):
                return ErrorCode.INELIGIBLE_REPLICA, []
        if isr == p.isr:
            return ErrorCode.NONE, []
        usable = {b for b, bi in image.brokers.items() if not bi.fenced} | {leader_id}
        rec = self.partition_change(image, t, partition_id, isr=isr, eligible=usable)
        return ErrorCode.NONE, [] if rec is None else [rec]

    # ------------------------------------------------------------------ leaders

    def elect_leaders(
        self, image: MetadataImage, wanted: list[tuple[str, int]], unclean: bool = False,
    ) -> tuple[dict[tuple[str, int], int], list[MetadataRecord]]:
        """ElectLeaders: per partition an error code (NONE when a record moves it)."""
        usable = {b for b, bi in image.brokers.items() if not bi.fenced}
        results: dict[tuple[str, int], int] = {}
        out: list[MetadataRecord] = []
        for topic, pid in wanted:
            t = image.topics.get(topic)
            p = None if t is None else t.partitions.get(pid)
            if t is None or p is None:
                results[(topic, pid)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if unclean:
                if p.leader != NO_LEADER and p.leader in usable:
                    results[(topic, pid)] = ErrorCode.ELECTION_NOT_NEEDED
                    continue
                rec = self.partition_change(image, t, pid, eligible=usable, unclean=True)
                if rec is None or rec.leader < 0:
                    results[(topic, pid)] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                    continue
                out.append(rec)
                results[(topic, pid)] = ErrorCode.NONE
                continue
            preferred = p.replicas[0] if p.replicas else NO_LEADER
            if p.leader == preferred:
                results[(topic, pid)] = ErrorCode.ELECTION_NOT_NEEDED
            elif preferred not in usable or preferred not in p.isr:
                results[(topic, pid)] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            else:
                out.append(PartitionChangeRecord(pid, t.topic_id, leader=preferred))
                results[(topic, pid)] = ErrorCode.NONE
        return results, out

    def rebalance_leaders(self, image: MetadataImage) -> list[MetadataRecord]:
        """auto.leader.rebalance.enable: every partition whose preferred replica can lead."""
        wanted = [(name, pid) for name, t in image.topics.items() for pid in t.partitions]
        _, recs = self.elect_leaders(image, wanted)
        return recs

    # ------------------------------------------------------------------ reassignment

    def reassign(
        self, image: MetadataImage, topic: str, pid: int, target: tuple[int, ...] | None,
    ) -> tuple[int, list[MetadataRecord]]:
        t = image.topics.get(topic)
        p = None if t is None else t.partitions.get(pid)
        if t is None or p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
        if target is None:
            if not p.adding_replicas and not p.removing_replicas:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, []
            original = tuple(r for r in p.replicas if r not in p.adding_replicas)
            isr = tuple(r for r in p.isr if r in original)
            unclean = unclean_election_enabled(image, topic)
            if not isr and not unclean:
                # Kafka: reverting would need an unclean election
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, []
            usable = {b for b, bi in image.brokers.items() if not bi.fenced}
            rec = self.partition_change(
                image, t, pid, isr=isr, eligible=usable, unclean=unclean, replicas=original,
                adding_replicas=(), removing_replicas=())
            return ErrorCode.NONE, [] if rec is None else [rec]
        if not target or len(set(target)) != len(target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, []
        for r in target:
            if r not in image.brokers:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, []
        base = tuple(r for r in p.replicas if r not in p.adding_replicas) \
            if p.adding_replicas else p.replicas
        if tuple(target) == base and not p.adding_replicas:
            return ErrorCode.NONE, []
        replicas = tuple(target) + tuple(r for r in base if r not in target)
        adding = tuple(r for r in target if r not in base)
        removing = tuple(r for r in base if r not in target)
        return ErrorCode.NONE, [PartitionChangeRecord(
            pid, t.topic_id, replicas=replicas, adding_replicas=adding,
            removing_replicas=removing)]

    def _complete_reassignments(self, image: MetadataImage, usable: set[int]
                                ) -> list[MetadataRecord]:
        out: list[MetadataRecord] = []
        for name in sorted(image.topics):
            t = image.topics[name]
            for pid in sorted(t.partitions):
                p = t.partitions[pid]
                if not p.adding_replicas and not p.removing_replicas:
                    continue
                if not set(p.adding_replicas) <= set(p.isr):
                    continue
                target = tuple(r for r in p.replicas if r not in p.removing_replicas)
                isr = tuple(r for r in p.isr if r in target)
                if not isr:
                    continue
                if p.leader not in target and not any(r in usable for r in isr):
                    continue
                rec = self.partition_change(
                    image, t, pid, isr=isr, eligible=usable | ({p.leader} & set(isr)),
                    replicas=target, adding_replicas=(), removing_replicas=())
                if rec is not None:
                    out.append(rec)
        return out

    # ------------------------------------------------------------------ placement

    def _placement_order(self, image: MetadataImage) -> list[int]:
        """Unfenced brokers interleaved by rack: r1b1, r2b1, r1b2, r2b2, ..."""
        by_rack: dict[str, list[int]] = {}
        for bid in sorted(image.brokers):
            b = image.brokers[bid]
            if not b.fenced:
                by_rack.setdefault(b.rack or "", []).append(bid)
        racks = [by_rack[r] for r in sorted(by_rack)]
        out: list[int] = []
        i = 0
        while any(i < len(r) for r in racks):
            for r in racks:
                if i < len(r):
                    out.append(r[i])
            i += 1
        return out

    def _place(
        self,
        image: MetadataImage,
        tid: uuid.UUID,
        name: str,
        pids: Iterable[int],
        rf: int,
        brokers: list[int],
    ) -> list[MetadataRecord]:
        n = len(brokers)
        start = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % n
        out: list[MetadataRecord] = []
        rack = {b: image.brokers[b].rack or "" for b in brokers}
        n_racks = len(set(rack.values()))
        host = {b: image.brokers[b].host for b in brokers}
        n_hosts = len(set(host.values()))
        for pid in pids:
            first = (start + pid) % n
            rotation = [brokers[(first + k) % n] for k in range(n)]
            chosen = [rotation[0]]
            # Kafka's rack-aware assignment: each next replica is the next broker in the
            # rotation on a rack this partition does not use yet, until every rack is
            # used; then the next unused broker.
            for b in rotation[1:]:
                if len(chosen) == rf or len({rack[c] for c in chosen}) == n_racks:
                    break
                if rack[b] not in {rack[c] for c in chosen}:
                    chosen.append(b)
            # then on a host it does not use yet (a sharded broker's shards share one:
            # jocko_py/shards.py), then the next unused broker
            for b in rotation[1:]:
                if len(chosen) == rf or len({host[c] for c in chosen}) == n_hosts:
                    break
                if b not in chosen and host[b] not in {host[c] for c in chosen}:
                    chosen.append(b)
            for b in rotation[1:]:
                if len(chosen) == rf:
                    break
                if b not in chosen:
                    chosen.append(b)
            replicas = tuple(chosen)
            out.append(
                PartitionRecord(
                    partition_id=pid,
                    topic_id=tid,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        return out


def check_manual_assignments(image: MetadataImage, assignments: list[tuple[int, ...]],
                             rf: int | None) -> int:
    """Kafka's checks of a manual replica assignment: every replica list non-empty, without
    repeats, all of one length (`rf` if given), of registered brokers, each with an
    unfenced broker to lead it; else INVALID_REPLICA_ASSIGNMENT."""
    want = rf if rf is not None else len(assignments[0])
    for replicas in assignments:
        if not replicas or len(set(replicas)) != len(replicas) or len(replicas) != want:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT
        if any(b not in image.brokers for b in replicas):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT
        if all(image.brokers[b].fenced for b in replicas):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT
    return ErrorCode.NONE


def manual_partitions(image: MetadataImage, tid: uuid.UUID, first: int,
                      assignments: list[tuple[int, ...]]) -> list[MetadataRecord]:
    """PartitionRecords for manually assigned replicas: the ISR is the unfenced replicas,
    the leader the first of them (checked by `check_manual_assignments`)."""
    out: list[MetadataRecord] = []
    for i, replicas in enumerate(assignments):
        isr = tuple(b for b in replicas if not image.brokers[b].fenced)
        out.append(PartitionRecord(partition_id=first + i, topic_id=tid,
                                   replicas=tuple(replicas), isr=isr, leader=isr[0],
                                   leader_epoch=0, partition_epoch=0))
    return out


def committed_producer_block(
    image: MetadataImage, rec: ProducerIdsRecord
) -> tuple[int, int] | None:
    """The producer-id block ``(first id, count)`` that ``rec`` hands out when applied to
    ``image`` (the image just before it), or None if the image rejects it."""
    start = image.next_producer_id
    if rec.next_producer_id <= start:
        return None
    return start, rec.next_producer_id - start


def unclean_election_enabled(image: MetadataImage, topic: str) -> bool:
    """`unclean.leader.election.enable` for a topic, resolved as Kafka does: the topic's
    own config, else the cluster-wide default (a broker config with an empty resource
    name), else false."""
    value = image.topic_configs(topic).get(UNCLEAN_LEADER_ELECTION)
    if value is None:
        value = image.configs(CONFIG_RESOURCE_BROKER, "").get(UNCLEAN_LEADER_ELECTION)
    return (value or "false").strip().lower() == "true"


def check_leader_in_isr(image: MetadataImage, rec: MetadataRecord) -> str | None:
    """The controller's safety rule as a predicate over one record about to be applied:
    a new leader must be in the resulting ISR and, unless unclean election is enabled
    for the topic, in the ISR or the ELR before the change (or, with the ISR empty and
    the ELR empty after it, be the last known leader); and an ISR-only change (no new leader)
    must keep the sitting leader in the ISR, unless unclean election is enabled for the
    topic. So, for a clean topic, a partition's leader is in its ISR after every record.
    Returns a description when violated."""
    if isinstance(rec, PartitionRecord):
        if rec.leader != NO_LEADER and rec.leader not in rec.isr:
            return f"partition created with leader {rec.leader} outside ISR {rec.isr}"
        return None
    if not isinstance(rec, PartitionChangeRecord):
        return None
    t: TopicImage | None = image.topic_by_id(rec.topic_id)
    p = None if t is None else t.partitions.get(rec.partition_id)
    if t is None or p is None:
        return None
    new_isr = p.isr if rec.isr is None else rec.isr
    unclean = unclean_election_enabled(image, t.name)
    if rec.leader == NO_LEADER_CHANGE:
        if p.leader != NO_LEADER and p.leader not in new_isr and not unclean:
            return (
                f"{t.name}-{rec.partition_id}: ISR change to {new_isr} drops "
                f"the sitting leader {p.leader}"
            )
        return None
    if rec.leader < 0:
        return None
    if rec.leader not in new_isr:
        return f"{t.name}-{rec.partition_id}: leader {rec.leader} not in new ISR {new_isr}"
    if rec.leader not in p.isr and not unclean:
        # KIP-966: an eligible leader replica (once the ISR is emptied), or with ISR
        # and ELR empty the last known leader (balanced recovery), may lead
        new_elr = p.elr if rec.elr is None else rec.elr
        if rec.leader in p.elr or (not p.isr and not new_elr
                                   and p.last_known_elr == (rec.leader,)):
            return None
        return f"{t.name}-{rec.partition_id}: leader {rec.leader} outside ISR {p.isr}"
    return None
