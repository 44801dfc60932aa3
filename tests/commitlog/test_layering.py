"""protocol and commitlog stay free of asyncio (they are called from the loop, never await)."""

from __future__ import annotations

import subprocess
import sys


def test_commitlog_and_records_do_not_import_asyncio() -> None:
    code = (
        "import sys\n"
        "import jocko_py.commitlog, jocko_py.commitlog.manager\n"
        "import jocko_py.protocol.records, jocko_py.protocol.compression\n"
        "bad = sorted(m for m in sys.modules if m == 'asyncio' or m.startswith('asyncio.')\n"
        "             or m.startswith(('jocko_py.broker', 'jocko_py.cluster')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""
