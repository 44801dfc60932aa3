"""The broker's wiring: `Broker` builds each service once and hands it what it needs at
construction (no attribute assigned afterwards, no lookup by name), and lists every
periodic job in one place for `app.py` to run. In process, no socket opened."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

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


# -- the import structure (issue 23's "what must be shown"), over jocko_py/ --------------

_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _contracts() -> dict[str, dict[str, Any]]:
    with _PYPROJECT.open("rb") as f:
        cfg = tomllib.load(f)["tool"]["importlinter"]
    return {c["name"]: c for c in cfg["contracts"]}


def _graph() -> Any:
    import grimp

    return grimp.build_graph("jocko_py", cache_dir=None)


def test_no_module_import_cycle() -> None:
    """No two modules of jocko_py import each other, directly or around a loop (imports
    under TYPE_CHECKING count): stricter than the acyclic-siblings contract."""
    g = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for root in sorted(g.modules):  # Tarjan's strongly connected components, iterative
        if root in index:
            continue
        work = [(root, iter(sorted(g.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(g.find_modules_directly_imported_by(w)))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    scc = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        scc.append(w)
                        if w == v:
                            break
                    if len(scc) > 1:
                        cycles.append(sorted(scc))
    assert len(g.modules) > 300  # the whole package was read
    assert not cycles, f"import cycles: {cycles}"


def test_only_the_composition_root_and_the_request_path_import_broker() -> None:
    """`Broker` (broker/core.py) is imported by app.py, which builds and runs it, and by
    the handlers' context: api.py's RequestContext and the request path that makes it
    (server.py accepts, connection.py reads a request and builds its context). Every
    other component is handed a narrow Protocol (broker/interfaces.py)."""
    importers = set(_graph().find_modules_that_directly_import("jocko_py.broker.core"))
    allowed = {"jocko_py.app", "jocko_py.broker.api", "jocko_py.broker.server",
               "jocko_py.broker.connection"}
    assert importers <= allowed, f"Broker imported by {sorted(importers - allowed)}"
    contract = _contracts()["Broker is built by the composition root and reached through "
                            "the handlers' context"]
    assert contract["protected_modules"] == ["jocko_py.broker.core"]
    assert set(contract["allowed_importers"]) == allowed


def test_every_module_is_inside_the_layer_contracts() -> None:
    """Each top-level module of jocko_py has a layer, and each module of the CLI has a
    place in the CLI's contract: a module left out of a `layers` contract is not checked."""
    pkg = Path(__file__).resolve().parents[2] / "jocko_py"
    named: set[str] = set()
    layers = _contracts()["Layers flow downward"]["layers"]
    for layer in layers:
        named |= {m.strip() for m in layer.split("|")}
    top = {f"jocko_py.{p.stem}" for p in pkg.glob("*.py") if p.stem != "__init__"} | \
        {f"jocko_py.{p.name}" for p in pkg.iterdir() if (p / "__init__.py").exists()}
    assert top - named == set(), f"no layer for {sorted(top - named)}"
    cli = _contracts()["The CLI: one module per command family under its entry point"]
    in_cli: set[str] = set()
    for layer in cli["layers"]:
        in_cli |= {m.strip() for m in layer.split("|")}
    modules = {p.stem for p in (pkg / "cli").glob("*.py") if p.stem != "__init__"}
    assert modules - in_cli == set(), f"CLI modules outside the contract: {modules - in_cli}"


def test_the_import_contracts_hold() -> None:
    """`lint-imports` (the contracts in pyproject.toml) passes: layers flow downward, the
    CLI's modules sit under its entry point, Broker is protected, no cycle. Run in its
    own process: import-linter's CLI configures logging with `dictConfig`, which disables
    every logger already made and closes every handler (pytest's log capture of every
    later test on this worker included)."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(_PYPROJECT)!r}, no_cache=True))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=_PYPROJECT.parent)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
