"""The cores are sans-IO: no sockets, threads, asyncio or clocks in their imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import jocko_py.cluster as cluster

PKG = Path(cluster.__file__).parent
CORES = [
    "raft/core.py",
    "raft/messages.py",
    "gossip/core.py",
    "gossip/messages.py",
    "metadata.py",
    "controller.py",
]
FORBIDDEN = {"asyncio", "socket", "threading", "time", "selectors", "subprocess", "pysyncobj"}


@pytest.mark.parametrize("rel", CORES)
def test_core_module_does_no_io(rel: str) -> None:
    tree = ast.parse((PKG / rel).read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN, imported & FORBIDDEN
    assert "open(" not in (PKG / rel).read_text()
