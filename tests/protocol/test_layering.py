"""`jocko_py.protocol` and `jocko_py.commitlog` are pure: they never import asyncio.

Checked two ways: statically (no `import asyncio` anywhere in their source,
including function-local and `from asyncio...` imports), and dynamically
(importing every module of both packages in a fresh interpreter leaves asyncio
out of `sys.modules`, so no transitive import pulls it in either).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PURE = ["protocol", "commitlog"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.add(str(node.args[0].value))
    return names


@pytest.mark.parametrize("package", PURE)
def test_source_never_imports_asyncio(package: str) -> None:
    files = sorted((REPO / "jocko_py" / package).rglob("*.py"))
    assert files
    offenders = [
        str(f.relative_to(REPO))
        for f in files
        if any(n == "asyncio" or n.startswith("asyncio.") for n in _imports(f))
    ]
    assert offenders == []


@pytest.mark.parametrize("package", PURE)
def test_importing_the_package_does_not_load_asyncio(package: str) -> None:
    script = textwrap.dedent(
        f"""
        import importlib, pkgutil, sys
        import jocko_py.{package} as pkg
        for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            importlib.import_module(m.name)
        loaded = sorted(n for n in sys.modules if n == "asyncio" or n.startswith("asyncio."))
        print(",".join(loaded))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"asyncio loaded by jocko_py.{package}: {result.stdout}"
