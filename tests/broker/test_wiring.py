"""The broker's wiring: `Broker` builds each service once and hands it what it needs at
construction (no attribute assigned afterwards, no lookup by name), and lists every
periodic job in one place for `app.py` to run. In process, no socket opened."""

from __future__ import annotations

import asyncio
from pathlib import Path

from jocko_py.app import build_quorum
from jocko_py.broker.config import build_config
from jocko_py.broker.core import Broker
from jocko_py.broker.group.coordinator import GroupCoordinator
from jocko_py.broker.txn.coordinator import TransactionCoordinator


def _broker(tmp_path: Path, **overrides: str) -> Broker:
    cfg = build_config(broker_addr="127.0.0.1:0", data_dir=str(tmp_path / "data"),
                       overrides=overrides)
    return Broker(cfg, "wiring", build_quorum(cfg))


def _close(b: Broker) -> None:
    asyncio.run(b.quorum.close())
    b.close()


def test_services_are_typed_attributes_wired_at_construction(tmp_path: Path) -> None:
    b = _broker(tmp_path)
    try:
        assert isinstance(b.groups, GroupCoordinator)
        assert isinstance(b.transactions, TransactionCoordinator)
        assert not hasattr(b, "services")
        rm = b.replicas
        # role changes of __consumer_offsets / __transaction_state reach the coordinators
        assert b.groups.on_partition_role in rm.role_listeners
        assert b.transactions.on_partition_role in rm.role_listeners
        assert rm.txn_verifier == b.transactions.verify
        # the replica manager and the controller channel share the inter-broker security
        # and ISR changes go to the controller, as given to their constructors
        assert rm.channel_security is b.controller_channel.channel_security
        assert rm.channel_security is not None
        assert rm.alter_partition == b.controller_channel.alter_partition
        assert rm.incarnation == str(b.quorum.incarnation)
        assert rm.logs.offline_on_failure is False  # a single node keeps its dir online
        assert b.image is b.quorum.image
    finally:
        _close(b)


def test_every_periodic_job_is_listed_once(tmp_path: Path) -> None:
    b = _broker(tmp_path)
    try:
        names = [name for name, _ in b.background_jobs()]
        assert len(names) == len(set(names)), names
        # (the coordinators' timers may be jobs here or run on their runtime)
        assert {"flush", "retention", "retention by share of disk", "checkpoint",
                "ISR expiration", "log cleaner"} <= set(names), names
        assert "certificate reload" not in names  # no TLS listener
    finally:
        _close(b)
    off = _broker(tmp_path / "off", **{"log.cleaner.enable": "false"})
    try:
        assert "log cleaner" not in [name for name, _ in off.background_jobs()]
    finally:
        _close(off)


def test_the_image_has_one_accessor() -> None:
    """Everything above the controller channel and the publisher reads the metadata
    image as `broker.image` (or through the image getter it was given), never through
    `.controller_channel.image` or `.quorum.image`: one way to reach it, found by one search."""
    import ast

    root = Path(__file__).resolve().parents[2] / "jocko_py"
    # the quorum's own users: the broker (which defines the accessor), the process
    # around it, the controller channel and the publisher (which apply the quorum)
    owners = {"broker/core.py", "app.py", "broker/controller_channel.py",
              "broker/metadata_publisher.py"}
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in owners or rel.startswith(("cluster/", "protocol/messages/_generated/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if (isinstance(node, ast.Attribute) and node.attr == "image"
                    and isinstance(node.value, ast.Attribute)
                    and node.value.attr in ("controller_channel", "quorum")):
                found.append(f"{rel}:{node.lineno}: .{node.value.attr}.image")
    assert not found, "read the image as broker.image:\n" + "\n".join(found)
