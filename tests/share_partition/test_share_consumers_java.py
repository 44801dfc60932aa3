"""Three Java `KafkaShareConsumer`s (kafka-clients 4.4.0, tests/java/share/ShareWorker.java)
in one share group on a one-partition topic of one broker process, 3,000 records: every
record meant to be accepted is accepted exactly once between them; a record released at
its first delivery comes back with delivery count 2; a rejected record is never delivered
again; a record released at every delivery is archived after
`group.share.delivery.count.limit` (5) deliveries.

Needs `make -C tests/java share-44` (kafka-clients 4.4.0 and the compiled worker)."""

from __future__ import annotations

import collections
import shutil
import subprocess
import time
from pathlib import Path

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from tests.support.broker import BrokerProcess, terminate
from tests.support.prereq import requires

REPO = Path(__file__).resolve().parents[2]
JARS = REPO / ".cache-extra" / "kafka-44-jars"
CLASSES = REPO / ".cache-extra" / "share-44-classes"
N = 3000
LIMIT = 5
REL1 = {17, 400, 1234, 2001, 2999}
REJ = {3, 901, 1500, 2500, 2998}
RELALL = {50, 2222}

pytestmark = requires(
    shutil.which("java") is not None and (CLASSES / ".done").exists()
    and any(JARS.glob("kafka-clients-4.4.0.jar")),
    "Java share consumer not built (make -C tests/java share-44)")


def value(i: int) -> bytes:
    kind = "rel1" if i in REL1 else "rej" if i in REJ else "relall" if i in RELALL else "v"
    return f"{kind}-{i}".encode()


class ShareWorker:
    def __init__(self, bootstrap: str, group: str, topic: str, out: Path) -> None:
        self.out = out
        self.err = out.with_suffix(".err")
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp",
                 f"{CLASSES}:{JARS}/*", "ShareWorker", bootstrap, group, topic, str(out)],
                stdout=err, stderr=subprocess.STDOUT, cwd=REPO)

    def lines(self) -> list[str]:
        try:
            return self.out.read_text().splitlines()
        except FileNotFoundError:
            return []

    def stop(self) -> None:
        terminate(self.proc, 15)


def test_three_share_consumers(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data")
    b.start()
    workers: list[ShareWorker] = []
    try:
        with Client(b.bootstrap) as c:
            c.create_topic("jq", 1, 1)
            r = c.request(44, 1, {"resources": [{
                "resource_type": 32, "resource_name": "jsg", "configs": [{
                    "name": "share.auto.offset.reset", "config_operation": 0,
                    "value": "earliest"}]}], "validate_only": False})
            assert [x.error_code for x in r.responses] == [0], r
            for start in range(0, N, 100):
                c.produce("jq", 0, rb.build_batch([rb.NewRecord(None, value(i))
                                                   for i in range(start, start + 100)]))
        workers = [ShareWorker(b.bootstrap, "jsg", "jq", tmp_path / f"w{i}.out")
                   for i in range(3)]
        want = {i for i in range(N) if i not in REJ and i not in RELALL}
        t0 = time.monotonic()
        deadline = t0 + 50
        accepted: collections.Counter[int] = collections.Counter()
        while time.monotonic() < deadline:
            accepted = collections.Counter(
                int(line.split()[1]) for w in workers for line in w.lines()
                if line.startswith("A "))
            relall = [line for w in workers for line in w.lines()
                      if line.startswith("D ") and line.split()[3].startswith("relall-")]
            if set(accepted) >= want and len(relall) >= LIMIT * len(RELALL):
                print(f"all accepted after {time.monotonic() - t0:.1f}s")
                break
            time.sleep(0.5)
        time.sleep(1.0)  # anything delivered once more would show now
        for w in workers:
            w.stop()
        lines = [line for w in workers for line in w.lines()]
        diag = "\n".join(w.err.read_text()[-2000:] for w in workers if w.err.exists())
        assert set(accepted) == want, (sorted(want - set(accepted))[:20], diag)
        dup = {o: n for o, n in accepted.items() if n > 1}
        assert not dup, f"accepted more than once: {dup}"
        assert not [x for x in lines if x.startswith("X ")]
        deliveries: dict[int, list[int]] = collections.defaultdict(list)
        for x in lines:
            if x.startswith("D "):
                _, off, dc, _v = x.split(" ", 3)
                deliveries[int(off)].append(int(dc))
        for o in REL1:
            assert sorted(deliveries[o]) == [1, 2], (o, deliveries[o])
        for o in REJ:
            assert deliveries[o] == [1], (o, deliveries[o])
        for o in RELALL:
            assert sorted(deliveries[o]) == list(range(1, LIMIT + 1)), (o, deliveries[o])
    finally:
        for w in workers:
            w.stop()
        b.stop()
