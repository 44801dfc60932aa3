"""Authenticated cluster links, in-process ClusterNodes on real loopback sockets: a
forged raft message or gossip datagram moves an open node (the attack is real) and not
one with the cluster secret; nodes with the secret (and with mutual TLS on raft) form a
quorum, a node with another secret or without a trusted certificate does not get in."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from jocko_py.broker.config import build_config
from jocko_py.broker.security.cluster_links import cluster_link_security
from jocko_py.cluster.gossip.core import GossipConfig
from jocko_py.cluster.linkauth import ClusterSecret, LinkSecurity
from jocko_py.cluster.node import ClusterNode
from jocko_py.cluster.raft.core import RaftConfig, Role
from tests.security.certs import TestPki, make_pki
from tests.support.broker import free_port
from tests.support.hostile import (
    FAKE_ID,
    SOURCE,
    forged_gossip,
    forged_raft_messages,
    send_gossip,
    send_raft,
)

pytestmark = pytest.mark.timeout(60)

SECRET = ClusterSecret.from_keys(b"s" * 40)
OTHER = ClusterSecret.from_keys(b"t" * 40)
FAST_GOSSIP = GossipConfig(probe_interval_ms=100, probe_timeout_ms=40, sync_interval_ms=1000,
                           reconnect_interval_ms=300)


def _addr(a: str) -> tuple[str, int]:
    h, p = a.rsplit(":", 1)
    return h, int(p)


@asynccontextmanager
async def nodes(tmp_path: Path, securities: list[LinkSecurity | None]
                ) -> AsyncIterator[list[ClusterNode]]:
    n = len(securities)
    raft = {i: f"127.0.0.1:{free_port()}" for i in range(1, n + 1)}
    gossip = {i: f"127.0.0.1:{free_port(socket.SOCK_DGRAM)}" for i in range(1, n + 1)}
    out = [ClusterNode(node_id=i, data_dir=tmp_path / f"node-{i}", raft_listen=raft[i],
                       voters=raft, gossip_listen=gossip[i],
                       seeds=[gossip[j] for j in gossip if j != i],
                       advertised=f"127.0.0.1:{9000 + i}",
                       raft_config=RaftConfig(election_timeout_ms=300, fetch_timeout_ms=600,
                                              request_timeout_ms=100),
                       gossip_config=FAST_GOSSIP, security=sec)
           for i, sec in enumerate(securities, 1)]
    started: list[ClusterNode] = []
    try:
        for node in out:
            await node.start()
            started.append(node)
        yield out
    finally:
        for node in started:
            await node.close()


async def until(what: str, pred: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)


def registered(node: ClusterNode) -> set[int]:
    return {b.broker_id for b in node.machine.image.brokers.values() if not b.fenced}


async def forge(node: ClusterNode, impostor: int) -> None:
    """Raft frames and gossip datagrams from a process without credentials."""
    msgs = forged_raft_messages(node.node_id, node.core.epoch, impostor,
                                node.core.cluster_id)
    await asyncio.to_thread(send_raft, _addr(node.raft.listen), msgs, 0.5)
    victims = {m.name: (m.addr, m.meta) for m in node.gossip_core.members.values()
               if m.name != node.gossip_core.name}
    dgs = forged_gossip(f"broker-{impostor}", "127.0.0.1:9", victims)
    await asyncio.to_thread(send_gossip, _addr(node.gossip_core.addr), dgs)
    await asyncio.sleep(0.3)  # let the loop handle what arrived


@pytest.mark.parametrize("secured", [False, True], ids=["open", "secret"])
async def test_forged_raft_and_gossip_move_an_open_node_not_one_with_the_secret(
        tmp_path: Path, secured: bool, caplog: pytest.LogCaptureFixture) -> None:
    async with nodes(tmp_path, [LinkSecurity(SECRET) if secured else None]) as (node,):
        await until("leader", lambda: node.core.role is Role.LEADER)
        epoch = node.core.epoch
        with caplog.at_level(logging.WARNING):
            await forge(node, impostor=2)
        fake_joined = f"broker-{FAKE_ID}" in node.gossip_core.members
        if not secured:  # the attack works on an open port
            assert node.core.epoch > epoch + 100
            assert fake_joined
            return
        assert (node.core.epoch, node.core.role, node.core.leader_id) == (epoch, Role.LEADER, 1)
        assert not fake_joined
        refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()
                   or "dropping a datagram" in r.getMessage()]
        # one raft line (the connection), one gossip line (9 datagrams, rate-limited)
        assert len(refused) == 2, refused
        assert any(f"connection from ('{SOURCE}'" in m and "not a jocko-py raft handshake" in m
                   for m in refused), refused
        assert any(f"from ('{SOURCE}'" in m and "not an authenticated datagram" in m
                   for m in refused), refused


async def test_nodes_with_the_secret_form_a_quorum_and_one_with_another_does_not(
        tmp_path: Path) -> None:
    async with nodes(tmp_path, [LinkSecurity(SECRET, gossip_encrypt=True),
                                LinkSecurity(SECRET), LinkSecurity(OTHER)]) as ns:
        good, bad = ns[:2], ns[2]
        await until("a leader among the nodes with the secret",
                    lambda: any(n.core.role is Role.LEADER for n in good))
        leader = next(n for n in good if n.core.role is Role.LEADER)
        await until("both registered", lambda: registered(leader) == {1, 2})
        assert await leader.create_topic("t", 1, 1) == 0
        await until("the topic everywhere it can be",
                    lambda: all("t" in n.machine.image.topics for n in good))
        await until("gossip between the two", lambda: all(
            len([m for m in n.gossip_core.members.values() if m.state.name == "ALIVE"]) == 2
            for n in good))
        await asyncio.sleep(0.5)
        assert bad.machine.applied == 0 and bad.core.role is not Role.LEADER
        assert "broker-3" not in good[0].gossip_core.members
        assert "broker-3" not in good[1].gossip_core.members
        assert set(bad.gossip_core.members) == {"broker-3"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _tls(pki: TestPki, keystore: Path, secret_file: Path | None = None) -> LinkSecurity:
    props = {"jocko.raft.ssl.enable": "true", "ssl.keystore.location": str(keystore),
             "ssl.truststore.location": str(pki.ca.cert)}
    if secret_file is not None:
        props["jocko.cluster.secret.file"] = str(secret_file)
    cfg = build_config(overrides=props, broker_id=1, voters="1@127.0.0.1:1")
    return cluster_link_security(cfg)


@pytest.mark.parametrize("with_secret", [False, True], ids=["tls", "tls+secret"])
async def test_mutual_tls_raft_quorum_refuses_an_untrusted_certificate_and_no_certificate(
        tmp_path: Path, pki: TestPki, caplog: pytest.LogCaptureFixture,
        with_secret: bool) -> None:
    secret = tmp_path / "secret"
    secret.write_text("k" * 64 + "\n")
    trusted = _tls(pki, pki.broker.both, secret if with_secret else None)
    assert (trusted.secret is not None) is with_secret
    assert trusted.raft_server_ssl is not None
    # the right secret (if any), a certificate from another CA
    untrusted = _tls(pki, pki.untrusted_client.both, secret if with_secret else None)
    async with nodes(tmp_path, [trusted, trusted, untrusted]) as ns:
        good, bad = ns[:2], ns[2]
        await until("a leader among the trusted nodes",
                    lambda: any(n.core.role is Role.LEADER for n in good))
        leader = next(n for n in good if n.core.role is Role.LEADER)
        # (gossip lets node 3 in: it has the secret, or there is none; raft does not)
        await until("both registered", lambda: registered(leader) >= {1, 2})
        assert await leader.create_topic("t", 1, 1) == 0
        await until("the topic on both", lambda: all("t" in n.machine.image.topics
                                                      for n in good))
        epoch = leader.core.epoch
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            # no certificate at all: plain TCP to a TLS port
            await asyncio.to_thread(send_raft, _addr(leader.raft.listen),
                                    forged_raft_messages(leader.node_id, epoch, 3), 0.5)
            await asyncio.sleep(0.5)
        assert bad.machine.applied == 0
        assert (leader.core.epoch, leader.core.role) == (epoch, Role.LEADER)
        msgs = [r.getMessage() for r in caplog.records]
        assert any(f"[raft node={leader.node_id}] TLS connection from ('{SOURCE}'" in m
                   and "WRONG_VERSION_NUMBER" in m for m in msgs), msgs


async def test_ssl_enable_without_a_truststore_is_one_clear_error(tmp_path: Path,
                                                                   pki: TestPki) -> None:
    from jocko_py.broker.config import ConfigError

    cfg = build_config(overrides={"jocko.raft.ssl.enable": "true",
                                  "ssl.keystore.location": str(pki.broker.both)},
                       broker_id=1, voters="1@127.0.0.1:1")
    with pytest.raises(ConfigError, match="needs a truststore"):
        cluster_link_security(cfg)
    cfg = build_config(overrides={"jocko.gossip.encrypt": "true"}, broker_id=1,
                       voters="1@127.0.0.1:1")
    with pytest.raises(ConfigError, match="needs jocko.cluster.secret.file"):
        cluster_link_security(cfg)


@pytest.mark.parametrize("props, warned", [
    ({}, "the raft port 127.0.0.1:1 and the gossip port 127.0.0.1:2 are not authenticated"),
    ({"jocko.raft.ssl.enable": "true"}, "the gossip port 127.0.0.1:2 is not authenticated"),
    ({"jocko.cluster.secret.file": "SECRET"}, None),
])
def test_a_cluster_broker_without_the_secret_warns_once_naming_the_setting(
        tmp_path: Path, pki: TestPki, caplog: pytest.LogCaptureFixture,
        props: dict[str, str], warned: str | None) -> None:
    (tmp_path / "s").write_text("k" * 32)
    (tmp_path / "s").chmod(0o600)
    props = {k: v.replace("SECRET", str(tmp_path / "s")) for k, v in props.items()}
    props |= {"ssl.keystore.location": str(pki.broker.both),
              "ssl.truststore.location": str(pki.ca.cert)}
    cfg = build_config(overrides=props, broker_id=1, voters="1@127.0.0.1:1",
                       gossip_addr="127.0.0.1:2")
    with caplog.at_level(logging.INFO, "jocko_py.broker.security.cluster_links"):
        sec = cluster_link_security(cfg)
    lines = [r.getMessage() for r in caplog.records if "not authenticated" in r.getMessage()]
    if warned is None:
        assert lines == []
        assert sec.secret is not None
        assert [r.getMessage() for r in caplog.records if r.name.endswith("cluster_links")] == [
            "cluster links: raft and gossip authenticated with the cluster secret (1 key(s), "
            f"signing key id {sec.secret.signing.key_id.hex()})"]
    else:
        assert len(lines) == 1 and lines[0].startswith(warned), lines
        assert "set jocko.cluster.secret.file on every broker" in lines[0]


def test_a_secret_file_others_can_read_is_warned_about(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    f = tmp_path / "s"
    f.write_text("k" * 32)
    f.chmod(0o644)
    cfg = build_config(overrides={"jocko.cluster.secret.file": str(f)}, broker_id=1,
                       voters="1@127.0.0.1:1")
    with caplog.at_level(logging.WARNING, "jocko_py.broker.security.cluster_links"):
        assert cluster_link_security(cfg).secret is not None
    assert [r.getMessage() for r in caplog.records] == [
        f"jocko.cluster.secret.file {f} can be read by other users than its owner "
        "(chmod 600 it)"]
