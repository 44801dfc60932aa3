"""Authenticated cluster links with real broker processes: a three-broker cluster with
a cluster secret (encrypted gossip, mutual TLS on raft) forms and serves, and a hostile
process without the secret (well-formed raft Vote/BeginQuorumEpoch/EndQuorumEpoch/append frames to
every voter, gossip datagrams declaring live brokers dead, suspect or left and a fake
member joining) changes nothing: same raft leader and epoch (DescribeQuorum), same
brokers and none fenced (DescribeCluster), same ISRs, produce and consume still work.
Raft also runs over mutual TLS: a client without a certificate is refused by TLS, one
with a trusted certificate but without the secret by the handshake. A bad secret file
is one clear line at start-up."""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jocko_py.client import Client
from jocko_py.cluster.gossip.messages import MemberMeta
from tests.security.certs import make_pki
from tests.support.broker import REPO, BrokerProcess
from tests.support.cluster import Cluster, running_cluster
from tests.support.hostile import (
    FAKE_ID,
    SOURCE,
    forged_gossip,
    forged_raft_messages,
    send_gossip,
    send_raft,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

TOPIC = "links"
UNAUTHENTICATED = "not authenticated"


def quorum(c: Cluster) -> tuple[int, int]:
    """(raft leader, epoch) as DescribeQuorum (API 55) reports them."""
    with Client(c.alive()[0].bootstrap, timeout=5) as cl:
        dq = cl.request(55, 1, {"topics": [{"topic_name": "__cluster_metadata",
                                            "partitions": [{"partition_index": 0}]}]})
    p = dq.topics[0].partitions[0]
    return p.leader_id, p.leader_epoch


def described_brokers(c: Cluster) -> dict[int, list[int]]:
    """Each broker's view of the live brokers, DescribeCluster (API 60)."""
    out = {}
    for b in c.brokers.values():
        with Client(b.bootstrap, timeout=5) as cl:
            dc = cl.request(60, 0, {"include_cluster_authorized_operations": False})
        out[b.broker_id] = sorted(x.broker_id for x in dc.brokers)
    return out


def state(c: Cluster) -> dict[str, Any]:
    return {"quorum": quorum(c), "brokers": described_brokers(c),
            "isr": {p: c.partition_state(TOPIC, p) for p in range(3)}}


def raft_addrs(c: Cluster) -> dict[int, tuple[str, int]]:
    out = {}
    for part in c.brokers[1].voters.split(","):
        vid, _, addr = part.partition("@")
        host, port = addr.rsplit(":", 1)
        out[int(vid)] = (host, int(port))
    return out


def produce_and_consume(c: Cluster, n: int, tag: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]

    prod = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", enable_idempotence=True)
    try:
        for i in range(n):
            prod.send(TOPIC, value=f"{tag}-{i}".encode(), partition=i % 3).get(30)
    finally:
        prod.close(10)
    cons = KafkaConsumer(bootstrap_servers=c.bootstrap, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    want = {f"{tag}-{i}" for i in range(n)}
    got: set[str] = set()
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(3)]
        cons.assign(tps)
        cons.seek_to_beginning(*tps)
        deadline = time.monotonic() + 30
        while not want <= got and time.monotonic() < deadline:
            for recs in cons.poll(timeout_ms=200).values():
                got |= {r.value.decode() for r in recs}
    finally:
        cons.close()
    assert want <= got, sorted(want - got)


def attack(c: Cluster, tls: ssl.SSLContext) -> None:
    """Everything a process without the cluster's secret can send, to every broker:
    raft frames over plain TCP (no certificate) and over TLS with a certificate the
    brokers trust, and gossip datagrams."""
    leader, epoch = quorum(c)
    with Client(c.brokers[1].bootstrap, timeout=5) as cl:  # the cluster id is public
        cluster_id = cl.request(60, 0, {"include_cluster_authorized_operations": False}
                                ).cluster_id
    for vid, addr in raft_addrs(c).items():
        impostor = next(i for i in c.brokers if i != vid)
        msgs = forged_raft_messages(vid, epoch, impostor, cluster_id)
        send_raft(addr, msgs, linger_s=0.3)
        assert send_raft(addr, msgs, linger_s=0.3, tls=tls) == b""  # closed, no answer
    for b in c.brokers.values():
        victims = {f"broker-{o.broker_id}": (
            f"127.0.0.1:{o.gossip_port}",
            MemberMeta(o.broker_id, f"PLAINTEXT://127.0.0.1:{o.port}", "", None, ""))
            for o in c.brokers.values() if o is not b}
        impostor = next(o for o in c.brokers.values() if o is not b)
        send_gossip(("127.0.0.1", b.gossip_port), forged_gossip(
            f"broker-{impostor.broker_id}", f"127.0.0.1:{impostor.gossip_port}", victims))


def create_topic(c: Cluster) -> None:
    with Client(c.brokers[2].bootstrap) as cl:
        cl.create_topic(TOPIC, 3, 3, {"min.insync.replicas": "2"})
    c.wait_for("full ISRs", lambda: all(len(c.partition_state(TOPIC, p, via=b)[1]) == 3
                                        for b in c.alive() for p in range(3)))


def test_secured_cluster_serves_and_a_process_without_the_secret_changes_nothing(
        tmp_path: Path) -> None:
    secret = tmp_path / "cluster.secret"
    gen = subprocess.run([sys.executable, "-m", "jocko_py.cli", "cluster", "gen-secret"],
                         capture_output=True, text=True, timeout=30, cwd=REPO)
    assert gen.returncode == 0 and len(gen.stdout.strip()) == 64, gen.stderr
    secret.write_text(gen.stdout)
    secret.chmod(0o600)
    pki = make_pki(tmp_path / "pki")
    props = {"jocko.cluster.secret.file": str(secret), "jocko.gossip.encrypt": "true",
             "jocko.raft.ssl.enable": "true", "ssl.keystore.location": str(pki.broker.both),
             "ssl.truststore.location": str(pki.ca.cert)}
    # the attacker holds a certificate the brokers trust (a client's), not the secret
    tls = ssl.create_default_context(cafile=str(pki.ca.cert))
    tls.load_cert_chain(str(pki.client.both))
    t0 = time.monotonic()
    with running_cluster(tmp_path, overrides=props) as c:
        formed = time.monotonic() - t0
        create_topic(c)
        produce_and_consume(c, 30, "before")
        before = state(c)
        assert before["quorum"][0] in (1, 2, 3)
        t1 = time.monotonic()
        attack(c, tls)
        # longer than a gossip suspicion (4 probes of 250 ms) and a raft election timeout
        time.sleep(2.0)
        after = state(c)
        assert after == before, (before, after, c.log_tails())
        assert all(ids == [1, 2, 3] for ids in after["brokers"].values())
        md = c.metadata()
        assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]  # none fenced
        assert FAKE_ID not in {b.node_id for b in md.brokers}
        produce_and_consume(c, 30, "after")
        checked = time.monotonic() - t1
        logs = {i: b.log_path.read_text(errors="replace") for i, b in c.brokers.items()}
    print(f"secured cluster formed in {formed:.1f}s; attack and checks {checked:.1f}s")
    for text in logs.values():
        assert UNAUTHENTICATED not in text, text[-3000:]
        # each broker said what it refused, once (rate-limited), naming who and why
        lines = [ln for ln in text.splitlines() if f"('{SOURCE}'" in ln]
        assert len(lines) == 3, lines
        assert "TLS connection from" in lines[0] and "refused: [SSL" in lines[0], lines
        assert "refused: hello: not a jocko-py raft handshake" in lines[1], lines
        assert "dropping a datagram" in lines[2] and "not an authenticated datagram" in \
            lines[2], lines


@pytest.mark.parametrize("content, expected", [
    (None, "no such file"),
    ("too-short\n", "the key on line 1 is 9 characters"),
])
def test_a_bad_secret_file_is_one_line_and_a_non_zero_exit(
        tmp_path: Path, content: str | None, expected: str) -> None:
    secret = tmp_path / "secret"
    if content is not None:
        secret.write_text(content)
    b = BrokerProcess(tmp_path / "data", overrides={"jocko.cluster.secret.file": str(secret)})
    cmd = b.command() + ["--controller-quorum-voters", f"0@127.0.0.1:{b.port + 1}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert err[-1].startswith("jocko-py broker: jocko.cluster.secret.file ") and \
        expected in err[-1], r.stderr
