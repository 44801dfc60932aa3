"""A small tmpfs of its own for a test that must fill a disk (mounting needs root;
elsewhere the test is skipped with the reason)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.prereq import missing


@contextmanager
def small_tmpfs(mnt: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of `size` (mount's syntax: 3m, 16m) on `mnt`; unmount on exit."""
    if os.geteuid() != 0:
        missing("mounting a tmpfs to fill a disk needs root")
    mnt.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                       capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        missing(f"cannot mount tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], timeout=10, check=False)
