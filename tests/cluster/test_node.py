"""ClusterNode in-process on loopback: per-process raft jitter, and fail-stop supervision
of its tick loops (an exception is logged with a traceback and stops the node loudly)."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest

from jocko_py.cluster.node import EXIT_FATAL, ClusterNode, run_until_stopped
from jocko_py.cluster.raft.core import RaftConfig
from tests.support.broker import free_port


def _node(tmp_path: Path, node_id: int = 1) -> ClusterNode:
    raft = f"127.0.0.1:{free_port()}"
    return ClusterNode(
        node_id=node_id,
        data_dir=tmp_path / f"node-{node_id}",
        raft_listen=raft,
        voters={node_id: raft},
        gossip_listen=f"127.0.0.1:{free_port(socket.SOCK_DGRAM)}",
        seeds=[],
        advertised="127.0.0.1:9001",
        raft_config=RaftConfig(election_timeout_ms=100),
    )


def _timeouts(node: ClusterNode) -> list[int]:
    """The next election-timeout jitters this node's raft core would draw."""
    rng = node.core._rng
    return [rng.randrange(node.core.config.election_timeout_ms) for _ in range(8)]


def test_raft_jitter_is_seeded_per_process_not_by_node_id(tmp_path: Path) -> None:
    a = _node(tmp_path / "a")
    b = _node(tmp_path / "b")  # same node id: a restart of the same node
    try:
        assert _timeouts(a) != _timeouts(b)
    finally:
        a.storage.close()
        b.storage.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("loop", ["raft", "gossip"])
async def test_a_tick_exception_is_logged_and_stops_the_node_loudly(
    tmp_path: Path, loop: str, caplog: pytest.LogCaptureFixture
) -> None:
    node = _node(tmp_path)
    core = node.core if loop == "raft" else node.gossip_core

    def boom(now: int) -> list[object]:
        raise RuntimeError(f"{loop} tick boom")

    await node.start()
    stop = asyncio.Event()
    with caplog.at_level(logging.INFO):
        core.tick = boom  # type: ignore[method-assign,assignment]
        code = await asyncio.wait_for(run_until_stopped(node, stop), timeout=10)
    assert code == EXIT_FATAL
    assert isinstance(node.fatal, RuntimeError) and f"{loop} tick boom" in str(node.fatal)
    # Logged with its traceback, naming the loop.
    tb = [
        r
        for r in caplog.records
        if r.exc_info is not None and r.levelno >= logging.ERROR and "boom" in str(r.exc_info[1])
    ]
    assert tb, [r.getMessage() for r in caplog.records]
    assert any(f"{loop} tick loop failed" in r.getMessage() for r in tb)


@pytest.mark.timeout(30)
async def test_a_stop_request_is_a_clean_exit(tmp_path: Path) -> None:
    node = _node(tmp_path)
    await node.start()
    stop = asyncio.Event()
    stop.set()
    assert await asyncio.wait_for(run_until_stopped(node, stop), timeout=10) == 0
    assert node.fatal is None
