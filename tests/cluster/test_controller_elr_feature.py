"""ELR follows the finalized ``eligible.leader.replicas.version`` (Kafka 4.4): off, the
controller tracks no ELR and keeps the ISR's last member; becoming enabled (bootstrap
or upgrade) writes the cluster-level ``min.insync.replicas`` and removes broker-level
ones; a change of ``min.insync.replicas`` clears the ELR it governs."""

from __future__ import annotations

from jocko_py.cluster.controller import (
    ELR_FEATURE,
    MIN_INSYNC_REPLICAS,
    Controller,
    ControllerConfig,
    elr_enabled,
)
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataImage,
    PartitionChangeRecord,
)
from jocko_py.protocol.errors import ErrorCode
from tests.cluster.test_controller_elr import Cluster


def _at(elr: int, min_isr: int = 2) -> Cluster:
    """The three-broker cluster of test_controller_elr at metadata.version 4.4-IV2 with
    ELR finalized at ``elr``."""
    k = Cluster(min_isr)
    k.img.apply_batch([FeatureLevelRecord("metadata.version", 33),
                       FeatureLevelRecord(ELR_FEATURE, elr)])
    return k


def test_elr_is_on_from_level_one_and_on_a_log_without_feature_levels() -> None:
    assert elr_enabled(MetadataImage())  # an older jocko-py's log: it always tracked ELR
    assert elr_enabled(_at(1).img)
    assert not elr_enabled(_at(0).img)


def test_without_elr_no_replica_is_eligible_and_the_isr_keeps_its_last_member() -> None:
    k = _at(0)
    leader = k.p.leader
    a, b = [r for r in k.p.replicas if r != leader]
    k.shrink_to(leader)  # under min ISR: with ELR a and b would become eligible
    assert k.p.isr == (leader,) and k.p.elr == ()
    k.die(leader)  # the last ISR member: the ISR keeps it, nobody leads
    assert k.p.leader == -1 and k.p.isr == (leader,) and k.p.elr == ()
    assert k.p.last_known_elr == ()
    k.come_back(leader)  # it returns and leads again (Kafka without ELR)
    assert k.p.leader == leader and k.p.isr == (leader,)


def test_with_elr_the_same_history_elects_an_eligible_replica() -> None:
    k = _at(1)
    leader = k.p.leader
    a, b = [r for r in k.p.replicas if r != leader]
    k.shrink_to(leader)
    assert set(k.p.elr) == {a, b}
    k.die(leader)
    assert k.p.leader in (a, b) and leader in k.p.elr


def test_a_downgrade_clears_the_elr_with_the_next_change() -> None:
    k = _at(1)
    leader = k.p.leader
    k.shrink_to(leader)
    assert k.p.elr
    k.img.apply_batch([FeatureLevelRecord(ELR_FEATURE, 0)])
    k.die(leader)
    assert k.p.elr == () and k.p.isr == (leader,) and k.p.leader == -1


def test_enabling_elr_writes_the_cluster_min_isr_and_removes_broker_level_ones() -> None:
    c = Controller(ControllerConfig(min_insync_replicas=2))
    img = MetadataImage()
    img.apply_batch([FeatureLevelRecord("metadata.version", 33),
                     ConfigRecord(CONFIG_RESOURCE_BROKER, "1", MIN_INSYNC_REPLICAS, "3"),
                     ConfigRecord(CONFIG_RESOURCE_BROKER, "2", "log.retention.ms", "5")])
    err, recs = c.update_features(img, {ELR_FEATURE: 1})
    assert err == ErrorCode.NONE
    assert recs == [FeatureLevelRecord(ELR_FEATURE, 1),
                    ConfigRecord(CONFIG_RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS, "2"),
                    ConfigRecord(CONFIG_RESOURCE_BROKER, "1", MIN_INSYNC_REPLICAS, None)]
    img.apply_batch(recs)
    assert img.configs(CONFIG_RESOURCE_BROKER, "") == {MIN_INSYNC_REPLICAS: "2"}
    assert img.broker_configs(1) == {} and img.broker_configs(2) == {"log.retention.ms": "5"}
    # a cluster-level value already set is kept; an update at the same level writes nothing
    img.apply_batch([FeatureLevelRecord(ELR_FEATURE, 0),
                     ConfigRecord(CONFIG_RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS, "1")])
    assert c.update_features(img, {ELR_FEATURE: 1})[1] == [FeatureLevelRecord(ELR_FEATURE, 1)]
    assert c.update_features(img, {"transaction.version": 2})[1] == [
        FeatureLevelRecord("transaction.version", 2)]


def test_a_new_cluster_at_elr_one_bootstraps_the_cluster_min_isr() -> None:
    feats = (("eligible.leader.replicas.version", 1), ("metadata.version", 33))
    c = Controller(ControllerConfig(min_insync_replicas=1, bootstrap_features=feats))
    recs = c.bootstrap_records(MetadataImage())
    assert ConfigRecord(CONFIG_RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS, "1") in recs
    off = Controller(ControllerConfig(bootstrap_features=(("metadata.version", 33),)))
    assert not [r for r in off.bootstrap_records(MetadataImage())
                if isinstance(r, ConfigRecord)]


def test_a_min_isr_change_clears_the_elr_it_governs() -> None:
    k = _at(1)
    leader = k.p.leader
    k.shrink_to(leader)
    assert k.p.elr
    t = k.img.topics["t"]
    err, recs = k.c.alter_config(k.img, CONFIG_RESOURCE_TOPIC, "t", {MIN_INSYNC_REPLICAS: "1"})
    assert err == ErrorCode.NONE
    assert recs[1:] == [PartitionChangeRecord(0, t.topic_id, elr=(), last_known_elr=None)]
    k.img.apply_batch(recs)
    assert k.p.elr == ()
    # the cluster-level one clears every partition's, even set to the value it has
    k.shrink_to(leader, *[r for r in k.p.replicas if r != leader])
    k.img.apply_batch(k.c.alter_config(k.img, CONFIG_RESOURCE_TOPIC, "t",
                                       {MIN_INSYNC_REPLICAS: None})[1])
    k.shrink_to(leader)
    assert k.p.elr
    err, recs = k.c.alter_config(k.img, CONFIG_RESOURCE_BROKER, "", {MIN_INSYNC_REPLICAS: "2"})
    k.img.apply_batch(recs)
    assert k.p.elr == ()
    # without ELR a change of min.insync.replicas writes only the config
    k2 = _at(0)
    assert len(k2.c.alter_config(k2.img, CONFIG_RESOURCE_TOPIC, "t",
                                 {MIN_INSYNC_REPLICAS: "1"})[1]) == 1
