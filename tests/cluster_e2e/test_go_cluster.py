"""The Go clients franz-go, Sarama and kafka-go against a three-broker cluster.

Through the Go program of tests/clients/go (`gokafka`, built once per session):
`-mode produce -every N -pause D` streams the records (acks=all; franz-go's and Sarama's
idempotent producers, kafka-go has none) while the leader of partition 0 is killed and
restarted, `-mode consume` reads everything back with the same library; `-mode group`
keeps going when its coordinator's broker is killed (scenarios.py). One cluster for the
module.

kafka-go has no idempotent producer: a batch the killed leader had replicated without
answering is written again by its retry, so for kafka-go the leader-kill test allows
such repeats (reported) and checks that nothing acknowledged is lost and that, per
partition, the first occurrences are in the order produced.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.clients.test_go_clients import (  # noqa: F401 (gokafka: the session fixture)
    LIBS,
    Member,
    go_args,
    gokafka,
    run_go,
)
from tests.cluster_e2e.scenarios import (
    PACE_EVERY,
    PACE_PAUSE_S,
    PARTITIONS,
    coordinator_kill_scenario,
    end_offsets,
    leader_kill_scenario,
    partition_of,
)
from tests.support.cluster import Cluster
from tests.support.e2e import Rec, write_tsv
from tests.support.prereq import requires

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.clients,
    pytest.mark.timeout(300),
    requires(shutil.which("go") is not None, "no `go` on PATH: Go client tests need Go"),
]

RUN_TIMEOUT = "150s"


class GoMember(Member):
    """`gokafka -mode group`, as scenarios.Member."""

    def records(self) -> list[tuple[int, int, bytes]]:  # type: ignore[override]
        return [(r.partition, r.offset, r.value or b"") for r in super().records()]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop_cleanly(self) -> None:
        rc = self.terminate()
        assert rc == 0 and self.of_type("done"), f"exited {rc}\n{self.describe('member')}"

    def describe(self, name: str = "member") -> str:
        return super().describe(name)


class GoProducing:
    """`gokafka -mode produce -every N -pause D`: its {"type":"acked"} lines are the progress."""

    def __init__(self, gobin: Path, lib: str, bootstrap: str, topic: str, sent: list[bytes],
                 workdir: Path) -> None:
        now = int(time.time() * 1000)
        tsv = workdir / f"{topic}.tsv"
        write_tsv(tsv, topic, [Rec(partition_of(i), None, v, (), now)
                               for i, v in enumerate(sent)])
        cmd = go_args(gobin, lib, "produce", bootstrap, topic, "-in", str(tsv),
                      "-every", str(PACE_EVERY), "-pause", f"{int(PACE_PAUSE_S * 1000)}ms")
        cmd[cmd.index("-timeout") + 1] = RUN_TIMEOUT
        self.member = Member(lib, cmd, workdir / f"{topic}-producer.err")

    def progress(self) -> int:
        if self.member.proc.poll() not in (None, 0):
            raise AssertionError(f"the producer exited early\n{self.describe()}")
        return max((x["count"] for x in self.member.of_type("acked")), default=0)

    def finish(self, timeout: float) -> None:
        try:
            rc = self.member.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.member.kill()
            raise AssertionError(f"the producer did not exit in {timeout}s\n{self.describe()}") \
                from None
        self.member._reader.join(5)
        assert rc == 0, f"gokafka produce exited {rc}\n{self.describe()}"
        assert self.member.of_type("produced"), self.describe()

    def describe(self) -> str:
        return self.member.describe("producer")


def go_read(gobin: Path, lib: str, c: Cluster, topic: str) -> dict[int, list[bytes]]:
    """Every record of the topic (up to the log end offsets), read with `lib`."""
    n = sum(end_offsets(c, topic).values())
    lines = run_go(gobin, lib, "consume", c.bootstrap, topic, "-partitions", str(PARTITIONS),
                   "-n", str(n))
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for x in sorted((x for x in lines if x["type"] == "record"),
                    key=lambda x: (x["partition"], x["offset"])):
        got[x["partition"]].append(base64.b64decode(x["value"]))
    return got


@pytest.mark.parametrize("lib", LIBS)
def test_go_leader_kill(shared_cluster: Cluster, gokafka: Path, tmp_path: Path,  # noqa: F811
                        lib: str) -> None:
    c = shared_cluster
    topic = f"go-{lib}-stream"
    repeats: dict[str, int] = {}

    def read_back() -> dict[int, list[bytes]]:
        got = go_read(gokafka, lib, c, topic)
        if lib != "kafkago":
            return got
        # No idempotence: keep the first occurrence of each value, count the repeats.
        counts = Counter(v for vs in got.values() for v in vs)
        repeats["kafkago"] = sum(n - 1 for n in counts.values())
        firsts: dict[int, list[bytes]] = {}
        for p, vs in got.items():
            seen: set[bytes] = set()
            firsts[p] = []
            for v in vs:
                if v not in seen:
                    seen.add(v)
                    firsts[p].append(v)
        return firsts

    t = leader_kill_scenario(
        c, topic, lambda vals: GoProducing(gokafka, lib, c.bootstrap, topic, vals, tmp_path),
        read_back)
    print(f"{lib} leader kill: {t}, repeats {repeats}")


@pytest.mark.parametrize("lib", LIBS)
def test_go_group_member_survives_coordinator_kill(shared_cluster: Cluster,
                                                   gokafka: Path,  # noqa: F811
                                                   tmp_path: Path, lib: str) -> None:
    def start(bootstrap: str, topic: str, group: str) -> GoMember:
        cmd = go_args(gokafka, lib, "group", bootstrap, topic, "-group", group)
        cmd[cmd.index("-timeout") + 1] = RUN_TIMEOUT
        return GoMember(lib, cmd, tmp_path / f"{group}.stderr")

    t = coordinator_kill_scenario(shared_cluster, f"grp-go-{lib}", f"g-go-{lib}", start)
    print(f"{lib} coordinator kill: {t}")
