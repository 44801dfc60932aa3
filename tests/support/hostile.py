"""A process without the cluster's credentials talking to a broker's raft and gossip
ports: well-formed raft requests (a Vote for a higher epoch, a BeginQuorumEpoch naming
another leader, an EndQuorumEpoch, a Fetch response that appends) and gossip datagrams
(a live broker declared dead or suspect, a member that does not exist joining), in the
formats the transports spoke before the links were authenticated."""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid

from jocko_py.cluster.gossip.messages import MemberMeta, Sync, Update, encode_datagram
from jocko_py.cluster.metadata import BrokerEndpoint, RegisterBrokerRecord, encode_records
from jocko_py.cluster.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Entry,
    FetchResponse,
    Message,
    VoteRequest,
    encode_message,
)

FAKE_ID = 99
# the hostile process's own loopback address, so the brokers' logs name it apart from
# their peers (127.0.0.1)
SOURCE = "127.0.0.2"


def forged_raft_messages(target: int, epoch: int, impostor: int,
                         cluster_id: str = "jocko") -> list[Message]:
    """What an impostor claiming to be node ``impostor`` sends node ``target`` whose raft
    epoch is ``epoch`` (in the cluster ``cluster_id``, which is no secret): each message,
    if believed, moves the target to a later epoch."""
    e = epoch + 100
    data = encode_records([RegisterBrokerRecord(
        FAKE_ID, uuid.UUID(int=FAKE_ID), 1,
        (BrokerEndpoint("PLAINTEXT", "10.255.255.1", 9092),), fenced=False)])
    return [
        VoteRequest(src=impostor, dest=target, correlation_id=7001, cluster_id=cluster_id,
                    voter_id=target, candidate_epoch=e, candidate_id=impostor,
                    last_offset_epoch=e, last_offset=10**6),
        BeginQuorumEpochRequest(src=impostor, dest=target, correlation_id=7002,
                                cluster_id=cluster_id, voter_id=target, leader_id=impostor,
                                leader_epoch=e + 1),
        EndQuorumEpochRequest(src=impostor, dest=target, correlation_id=7003,
                              cluster_id=cluster_id, leader_id=impostor, leader_epoch=e + 2,
                              preferred_successors=(impostor,)),
        FetchResponse(src=impostor, dest=target, correlation_id=7004, error_code=0,
                      high_watermark=10**6, log_start_offset=0, leader_id=impostor,
                      leader_epoch=e + 3, records=(Entry(0, e + 3, data),)),
    ]


def raft_frames(msgs: list[Message]) -> bytes:
    out = b""
    for m in msgs:
        body = encode_message(m)
        out += struct.pack(">I", len(body)) + body
    return out


def send_raft(addr: tuple[str, int], msgs: list[Message], linger_s: float = 1.0,
              tls: ssl.SSLContext | None = None) -> bytes:
    """Connect (over TLS with ``tls``), send ``msgs`` as plain frames, and read what
    comes back for up to ``linger_s`` (b"" when the broker closes the connection)."""
    got = b""
    with socket.create_connection(addr, timeout=2.0, source_address=(SOURCE, 0)) as raw:
        s = raw
        try:
            if tls is not None:
                s = tls.wrap_socket(raw, server_hostname=addr[0])
            s.sendall(raft_frames(msgs))
        except OSError:
            return got  # closed on us mid-send: refused
        deadline = time.monotonic() + linger_s
        s.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            got += chunk
    return got


def forged_gossip(impostor: str, impostor_addr: str,
                  victims: dict[str, tuple[str, MemberMeta]]) -> list[bytes]:
    """Datagrams from ``impostor``: each victim (name -> (gossip addr, meta)) dead, then
    suspect, and a member ``broker-99`` joining."""
    big = 10**6
    fake = MemberMeta(FAKE_ID, "PLAINTEXT://10.255.255.1:9092", "10.255.255.1:9093", None,
                      "00000000-0000-4000-8000-000000000099")
    out = []
    for state in ("dead", "suspect", "left"):
        ups = tuple(Update(state, n, a, big, m) for n, (a, m) in victims.items())
        ups += (Update("alive", f"broker-{FAKE_ID}", "10.255.255.1:9094", big, fake),)
        out.append(encode_datagram(Sync(impostor, impostor_addr, False, ups)))
    return out


def send_gossip(addr: tuple[str, int], datagrams: list[bytes], repeat: int = 3) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((SOURCE, 0))
        for _ in range(repeat):
            for d in datagrams:
                s.sendto(d, addr)
            time.sleep(0.05)
