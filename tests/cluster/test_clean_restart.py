# mypy narrows ``k.p.elr`` after an assert, though each ``k.p`` reads the image anew
# mypy: disable-error-code="comparison-overlap"
"""Clean restarts (Kafka 4.x, KIP-966's second part): a broker that stopped cleanly
registers with its previous broker epoch and keeps its eligible leader replica (ELR)
place; any other new incarnation may have lost data and leaves every ISR and ELR. The
previous epoch travels in the gossip member metadata, old-format compatible; the
markers that carry it are in tests/commitlog/test_clean_shutdown_marker.py."""

from __future__ import annotations

import json
import uuid

import pytest

from jocko_py.cluster.controller import BrokerInfo
from jocko_py.cluster.gossip.messages import (
    GossipDecodeError,
    MemberMeta,
    Ping,
    Update,
    decode_datagram,
    encode_datagram,
)
from tests.cluster.test_controller_elr import Cluster, _leader_first


def restart_clean(k: Cluster, b: int) -> None:
    """A new process that names the epoch its predecessor was registered under."""
    epoch = k.img.brokers[b].broker_epoch
    k.live[b] = BrokerInfo(b, "127.0.0.1", 9000 + b, None, uuid.uuid4(),
                           previous_broker_epoch=epoch)
    k.reconcile()


def test_a_cleanly_restarted_eligible_replica_keeps_its_place() -> None:
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    assert set(k.p.elr) == {a, b}
    k.die(a)  # SIGTERM: controlled shutdown fences it first
    epoch = k.img.brokers[a].broker_epoch
    restart_clean(k, a)
    assert set(k.p.elr) == {a, b}
    assert k.img.brokers[a].broker_epoch > epoch  # a new incarnation, a new epoch
    k.restart(b)  # no marker (killed): it may have lost data
    assert k.p.elr == (a,)


def test_a_cleanly_restarted_last_member_leads_again_from_the_elr() -> None:
    """Every replica stopped cleanly, the last ISR member last: ISR empty, all three in
    the ELR. Each returns cleanly, still eligible; the first back leads. (Unclean, they
    would leave the ELR: test_controller_elr's last-known-leader tests.)"""
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    k.die(a)
    k.die(b)
    k.die(leader)
    assert k.p.leader == -1 and k.p.isr == () and set(k.p.elr) == {1, 2, 3}
    restart_clean(k, b)
    assert k.p.leader == b and k.p.isr == (b,)
    assert set(k.p.elr) == {leader, a}


def test_a_clean_restart_leaves_the_isr_like_a_fencing() -> None:
    """Restarted before the controller saw it go: the new process rejoins the ISR by
    catching up, as in Kafka, but as a clean one it enters the ELR when the ISR falls
    under min ISR; an unclean one does not."""
    k, leader, a, b = _leader_first()
    k.shrink_to(leader, a)
    assert k.p.elr == ()
    restart_clean(k, a)
    assert k.p.isr == (leader,) and k.p.elr == (a,)
    assert k.p.leader == leader

    k2, leader2, a2, _ = _leader_first()
    k2.shrink_to(leader2, a2)
    k2.restart(a2)
    assert k2.p.isr == (leader2,) and k2.p.elr == ()


def test_a_cleanly_restarted_leader_leads_nothing_in_its_registration_round() -> None:
    k, leader, a, b = _leader_first()
    restart_clean(k, leader)  # fast restart: still the leader in the image
    assert k.p.leader in (a, b) and leader not in k.p.isr
    assert k.p.elr == ()  # the ISR (two) is at min ISR: no ELR


@pytest.mark.parametrize("previous", [-1, 0, "older", "newer"])
def test_a_restart_naming_another_epoch_is_unclean(previous: int | str) -> None:
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    k.die(a)
    registered = k.img.brokers[a].broker_epoch
    prev = {"older": registered - 1, "newer": registered + 5}.get(str(previous), previous)
    assert isinstance(prev, int)
    k.live[a] = BrokerInfo(a, "127.0.0.1", 9000 + a, None, uuid.uuid4(),
                           previous_broker_epoch=prev)
    k.reconcile()
    assert a not in k.p.elr and k.p.elr == (b,)


def test_a_broker_only_unreachable_is_not_a_restart() -> None:
    """Same process back (same incarnation): no registration, nothing decided."""
    k, leader, a, b = _leader_first()
    k.shrink_to(leader)
    k.die(a)
    epoch = k.img.brokers[a].broker_epoch
    k.come_back(a)
    assert k.img.brokers[a].broker_epoch == epoch and set(k.p.elr) == {a, b}


# ---------------------------------------------------------------- the wire (gossip)

def test_the_previous_epoch_travels_in_the_member_metadata() -> None:
    meta = MemberMeta(1, "h:9001", "h:19001", "r", str(uuid.uuid4()), "cid",
                      previous_broker_epoch=42)
    no_id = MemberMeta(1, "h:9001", "h:19001", "r", str(uuid.uuid4()),
                       previous_broker_epoch=42)
    for m in (meta, no_id):
        msg = decode_datagram(encode_datagram(Ping("b1", "g1", 1, "b2", (
            Update("alive", "b1", "g1", 0, m),))))
        assert isinstance(msg, Ping) and msg.updates[0].meta == m
    msg = decode_datagram(encode_datagram(Ping("b1", "g1", 1, "b2", (
        Update("alive", "b1", "g1", 0, meta),))))
    assert isinstance(msg, Ping) and msg.updates[0].meta == meta


def test_without_a_previous_epoch_the_metadata_is_in_the_old_format() -> None:
    """Without a cluster id or a previous epoch the metadata has Kafka-era jocko's five
    fields; the sixth is the cluster id, the seventh the previous epoch; later fields (a
    newer version's) are ignored."""
    iid = str(uuid.uuid4())
    meta = MemberMeta(1, "h:9001", "h:19001", None, iid)
    doc = json.loads(encode_datagram(Ping("b1", "g1", 1, "b2", (
        Update("alive", "b1", "g1", 0, meta),))))
    assert doc["updates"][0][4] == [1, "h:9001", "h:19001", None, iid]
    # an old member's datagram decodes, with no previous epoch
    assert decode_datagram(json.dumps(doc).encode()) == Ping(
        "b1", "g1", 1, "b2", (Update("alive", "b1", "g1", 0, meta),))
    # a later version's extra fields are ignored
    doc["updates"][0][4] += ["", 7, "later"]
    got = decode_datagram(json.dumps(doc).encode())
    assert isinstance(got, Ping) and got.updates[0].meta.previous_broker_epoch == 7


@pytest.mark.parametrize("bad", ["7", True, 1.5, None, [1]])
def test_a_malformed_previous_epoch_drops_the_datagram(bad: object) -> None:
    doc = {"t": "ping", "src": "b1", "src_addr": "g1", "seq": 1, "target": "b2",
           "updates": [["alive", "b1", "g1", 0, [1, "h:1", "h:2", None, "x", "", bad]]]}
    with pytest.raises(GossipDecodeError):
        decode_datagram(json.dumps(doc).encode())
