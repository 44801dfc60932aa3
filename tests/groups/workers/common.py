"""Shared bits of the group consumer workers (run as subprocesses by the tests).

Every worker consumes one topic in a group and writes to its output file,
flushed line by line:

    A <p,p,...>              its whole assignment, after every change
    R <partition> <offset> <value>   a processed record (written before the commit)
    C                        offsets of everything processed so far were committed
    READY                    the consumer object exists (before the first poll)

SIGTERM asks for a clean stop: commit, close (which leaves the group), exit 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import IO, Any


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--instance-id", default=None)
    ap.add_argument("--assignor", default="range", choices=["range", "cooperative"])
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--protocol", default="classic", choices=["classic", "consumer"],
                    help="group.protocol (consumer: KIP-848, where the client supports it)")
    ap.add_argument("--remote-assignor", default=None)
    return ap.parse_args()


class Output:
    def __init__(self, path: str) -> None:
        self.f: IO[str] = open(path, "a", buffering=1)  # noqa: SIM115

    def assignment(self, parts: Any) -> None:
        self.f.write("A " + ",".join(str(p) for p in sorted(parts)) + "\n")

    def record(self, partition: int, offset: int, value: bytes | None) -> None:
        v = value.decode() if value is not None else "-"
        self.f.write(f"R {partition} {offset} {v}\n")

    def line(self, s: str) -> None:
        self.f.write(s + "\n")


class StopFlag:
    def __init__(self) -> None:
        self.stop = False
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, *_: object) -> None:
        self.stop = True


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
