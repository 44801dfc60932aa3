"""Nemeses: faults injected into the lab's real processes, links and disks.

Each nemesis picks its target (the leader of a partition, the active controller, or a
random broker), injects the fault, holds it, heals it, and waits (bounded) until the
cluster is whole again: every broker registered and every partition's ISR full. It
returns a record of what it did with times on the history's clock:
``t_start`` (fault injected), ``t_heal`` (fault removed), ``t_recovered`` (ISR full
again, or None if that did not happen within the bound) and the partitions whose
leader it hit (``affected``), which the availability figures use.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jocko_py.protocol.records import iter_batches
from tests.faults.lab import FaultBroker, Lab

RECOVERY_TIMEOUT_S = 120.0
RECOVERY_POINTS = "recovery-point-offset-checkpoint"


class Context:
    def __init__(self, lab: Lab, topic: str, partitions: int, rng: random.Random,
                 now: Callable[[], float], say: Callable[[str], None]) -> None:
        self.lab, self.topic, self.partitions, self.rng = lab, topic, partitions, rng
        self.now, self.say = now, say

    # -- targets --------------------------------------------------------------------------

    def state(self) -> dict[int, tuple[int, list[int]]]:
        return self.lab.partitions(self.topic)

    def pick(self, kind: str) -> tuple[FaultBroker, list[int]]:
        """(target broker, partitions it leads) for kind leader | controller | random."""
        st = self.state()
        if kind == "leader":
            led = [p for p, (leader, _) in st.items() if leader > 0]
            bid = st[self.rng.choice(led)][0] if led else self.rng.choice(list(self.lab.brokers))
        elif kind == "controller":
            bid = self.lab.controller()
            if bid < 0:
                bid = self.rng.choice(list(self.lab.brokers))
        else:
            bid = self.rng.choice(list(self.lab.brokers))
        return self.lab.brokers[bid], sorted(p for p, (leader, _) in st.items() if leader == bid)

    def hold(self, lo: float, hi: float) -> float:
        d = self.rng.uniform(lo, hi)
        time.sleep(d)
        return d

    # -- recovery -------------------------------------------------------------------------

    def restart_dead(self) -> None:
        for b in self.lab.brokers.values():
            if b.paused:
                b.resume()
            if not b.alive():
                b.kill()  # reap
                b.start(timeout=60)

    def whole(self) -> bool:
        n = len(self.lab.brokers)
        for b in self.lab.alive():
            md = self.lab.metadata([self.topic], via=b)
            if len(md.brokers) != n or md.controller_id < 0:
                return False
            for t in md.topics:
                for p in t.partitions:
                    if sorted(p.isr_nodes) != sorted(p.replica_nodes) or p.leader_id < 0:
                        return False
        return True

    def recover(self, rec: dict[str, Any]) -> dict[str, Any]:
        self.restart_dead()
        try:
            self.lab.wait_for("cluster whole again", self.whole, RECOVERY_TIMEOUT_S)
            rec["t_recovered"] = self.now()
            rec["isr_full_after_heal_s"] = round(rec["t_recovered"] - rec["t_heal"], 3)
        except TimeoutError as e:
            rec["t_recovered"] = None
            rec["not_recovered"] = str(e).splitlines()[0]
        return rec


# -- the nemeses ------------------------------------------------------------------------------


def kill(ctx: Context, kind: str) -> dict[str, Any]:
    """SIGKILL, down for a while, start again."""
    b, led = ctx.pick(kind)
    rec = {"nemesis": f"kill-{kind}", "target": b.broker_id, "affected": led,
           "t_start": ctx.now()}
    b.kill()
    rec["held_s"] = round(ctx.hold(2, 8), 2)
    b.start(timeout=60)
    rec["t_heal"] = ctx.now()
    return ctx.recover(rec)


def bounce(ctx: Context, kind: str, clean: bool, times: int = 1,
           stay_down: bool = False) -> dict[str, Any]:
    """Kafka's replication_test failures: clean/hard shutdown (stays down until the end
    of the fault), clean/hard bounce (stop, start at once) repeated ``times``."""
    name = f"{'clean' if clean else 'hard'}-{'shutdown' if stay_down else 'bounce'}-{kind}"
    rec: dict[str, Any] = {"nemesis": name, "t_start": ctx.now(), "targets": [],
                           "affected": []}
    for _ in range(times):
        b, led = ctx.pick(kind)
        rec["targets"].append(b.broker_id)
        rec["affected"] = sorted(set(rec["affected"]) | set(led))
        if clean:
            b.stop_gracefully(timeout=30)
        else:
            b.kill()
        if stay_down:
            ctx.hold(8, 12)
        b.start(timeout=60)
        # registered again as the new incarnation: the broker's own metadata lists it
        # only once the controller unfenced it (other brokers' views may still be stale)
        ctx.lab.wait_for(f"broker {b.broker_id} registered again", lambda b=b: b.broker_id in {
            x.node_id for x in ctx.lab.metadata(via=b).brokers}, 60)
    rec["target"] = rec["targets"][0]
    rec["t_heal"] = ctx.now()
    return ctx.recover(rec)


def pause(ctx: Context, kind: str) -> dict[str, Any]:
    """SIGSTOP for longer than replica.lag.time.max.ms and the session timeout, SIGCONT."""
    b, led = ctx.pick(kind)
    lag = max(int(ctx.lab.props["replica.lag.time.max.ms"]),
              int(ctx.lab.props["broker.session.timeout.ms"])) / 1000
    rec = {"nemesis": f"pause-{kind}", "target": b.broker_id, "affected": led,
           "t_start": ctx.now()}
    b.pause()
    try:
        rec["held_s"] = round(ctx.hold(lag + 1, lag + 5), 2)
    finally:
        b.resume()
    rec["t_heal"] = ctx.now()
    return ctx.recover(rec)


def partition(ctx: Context, kind: str) -> dict[str, Any]:
    """Cut links with blackhole routes: ``kind`` isolate-<leader|controller|random> (one
    broker from every other broker; clients still reach it), isolate-leader-all (from
    the clients too) or halves (a random majority/minority split)."""
    lab = ctx.lab
    ids = list(lab.brokers)
    if kind == "halves":
        ctx.rng.shuffle(ids)
        minority = set(ids[: (len(ids) - 1) // 2 or 1])
        groups = [minority, set(ids) - minority]
        st = ctx.state()
        led = sorted(p for p, (leader, _) in st.items() if leader in minority)
        target = sorted(minority)
    else:
        b, led = ctx.pick(kind.removeprefix("isolate-").removesuffix("-all"))
        groups = [{b.broker_id}, set(ids) - {b.broker_id}]
        target = [b.broker_id]
        if kind.endswith("-all"):
            lab.cut_clients(b.broker_id)
    rec = {"nemesis": f"partition-{kind}", "target": target, "affected": led,
           "groups": [sorted(g) for g in groups], "t_start": ctx.now()}
    lab.partition(groups)
    try:
        rec["held_s"] = round(ctx.hold(5, 12), 2)
    finally:
        lab.heal()
    rec["t_heal"] = ctx.now()
    return ctx.recover(rec)


def lose_unsynced_tail(data_dir: Path) -> dict[str, int]:
    """What a power loss does to a log that was not fsynced past its recovery point: every
    partition log is cut back to the recovery point in the broker's checkpoint (records
    after it are gone; a partition created since the last checkpoint loses everything),
    and producer-state snapshots past it are gone. The metadata log (raft) is fsynced
    before it is acknowledged, so it stays. Returns bytes dropped per partition."""
    points: dict[str, int] = {}
    cp = data_dir / RECOVERY_POINTS
    if cp.exists():
        lines = cp.read_text().split("\n")
        for line in lines[2:]:
            if line.strip():
                t, p, o = line.rsplit(" ", 2)
                points[f"{t}-{p}"] = int(o)
    dropped: dict[str, int] = {}
    for d in sorted(data_dir.iterdir()):
        logs = sorted(d.glob("*.log")) if d.is_dir() else []
        if not logs or d.name.startswith("__cluster_metadata"):
            continue
        rp = points.get(d.name, 0)
        lost = 0
        for seg in logs:
            base = int(seg.stem)
            size = seg.stat().st_size
            if base >= rp and seg is not logs[0]:
                lost += size
                for f in d.glob(seg.stem + ".*"):
                    f.unlink()
                continue
            data = seg.read_bytes()
            cut = size
            for pos, h in iter_batches(data, validate_crc=False, allow_partial_tail=True):
                if h.base_offset >= rp:
                    cut = pos
                    break
            if cut < size:
                lost += size - cut
                os.truncate(seg, cut)
        for snap in d.glob("*.snapshot"):
            if snap.stem.isdigit() and int(snap.stem) > rp:
                snap.unlink()
        if lost:
            dropped[d.name] = lost
    return dropped


def power_loss(ctx: Context, kind: str, quick: bool = False) -> dict[str, Any]:
    """SIGKILL, then the unsynced tail of its logs is lost, then start again (``quick``:
    at once, before the controller can notice it was gone)."""
    b, led = ctx.pick(kind)
    rec = {"nemesis": f"power-loss-{'quick-' if quick else ''}{kind}", "target": b.broker_id,
           "affected": led, "t_start": ctx.now()}
    b.kill()
    dropped = lose_unsynced_tail(b.data_dir)
    rec["bytes_dropped"] = sum(dropped.values())
    rec["partitions_cut"] = len(dropped)
    rec["held_s"] = 0.0 if quick else round(ctx.hold(1, 4), 2)
    b.start(timeout=60)
    rec["t_heal"] = ctx.now()
    return ctx.recover(rec)


def fill(path: Path, chunk: int = 1 << 20) -> int:
    """Write a filler file until the filesystem is full; bytes written."""
    n = 0
    buf = b"\0" * chunk
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                n += f.write(buf)
            except OSError:
                if chunk <= 4096:
                    return n
                chunk //= 16
                buf = b"\0" * chunk
    return n


def disk_full(ctx: Context, kind: str) -> dict[str, Any]:
    """Fill the target's disk (its own tmpfs), hold, free it; restart it if it stopped."""
    b, led = ctx.pick(kind)
    if not ctx.lab.isolated:
        return {"nemesis": f"disk-full-{kind}", "skipped": ctx.lab.why_not_isolated,
                "t_start": ctx.now(), "t_heal": ctx.now(), "t_recovered": ctx.now(),
                "affected": []}
    rec = {"nemesis": f"disk-full-{kind}", "target": b.broker_id, "affected": led,
           "t_start": ctx.now()}
    filler = b.disk / "filler"
    try:
        rec["filled_bytes"] = fill(filler)
        # The disk stays full for the whole hold, whether the broker keeps running
        # (its partitions answer KAFKA_STORAGE_ERROR) or stopped on the log-dir failure
        # (a cluster broker does): an operator frees space before restarting it.
        rec["held_s"] = round(ctx.hold(6, 12), 2)
        rec["broker_exited"] = not b.alive()
        rec["exit_code"] = b.proc.poll() if b.proc is not None else None
    finally:
        filler.unlink(missing_ok=True)
    rec["t_heal"] = ctx.now()
    return ctx.recover(rec)


NEMESES: dict[str, Callable[[Context], dict[str, Any]]] = {
    "kill-leader": lambda c: kill(c, "leader"),
    "kill-controller": lambda c: kill(c, "controller"),
    "kill-random": lambda c: kill(c, "random"),
    "pause-leader": lambda c: pause(c, "leader"),
    "pause-controller": lambda c: pause(c, "controller"),
    "partition-isolate-leader": lambda c: partition(c, "isolate-leader"),
    "partition-isolate-controller": lambda c: partition(c, "isolate-controller"),
    "partition-isolate-leader-all": lambda c: partition(c, "isolate-leader-all"),
    "partition-halves": lambda c: partition(c, "halves"),
    "power-loss-leader": lambda c: power_loss(c, "leader"),
    "power-loss-random": lambda c: power_loss(c, "random"),
    "power-loss-quick-leader": lambda c: power_loss(c, "leader", quick=True),
    "disk-full-leader": lambda c: disk_full(c, "leader"),
}

# Kafka's tests/kafkatest replication_test matrix (failure mode x broker type).
MATRIX: dict[str, Callable[[Context], dict[str, Any]]] = {
    f"{mode}-{kind}": (lambda c, m=mode, k=kind: bounce(
        c, k, clean=m.startswith("clean"), times=5 if m.endswith("bounce") else 1,
        stay_down=m.endswith("shutdown")))
    for mode in ("clean-shutdown", "hard-shutdown", "clean-bounce", "hard-bounce")
    for kind in ("leader", "controller")
}

FAMILIES = {"kill": "kill-", "pause": "pause-", "partition": "partition-",
            "power-loss": "power-loss-", "disk-full": "disk-full-"}


def resolve(names: str) -> list[str]:
    """'all', family names (kill, pause, partition, power-loss, disk-full, matrix) or
    nemesis names, comma-separated."""
    out: list[str] = []
    for n in (x.strip() for x in names.split(",") if x.strip()):
        if n == "all":
            out += list(NEMESES)
        elif n == "matrix":
            out += list(MATRIX)
        elif n in FAMILIES:
            out += [k for k in NEMESES if k.startswith(FAMILIES[n])]
        elif n in NEMESES or n in MATRIX:
            out.append(n)
        else:
            raise ValueError(f"unknown nemesis {n!r}: choose from all, matrix, "
                             f"{', '.join(FAMILIES)}, {', '.join([*NEMESES, *MATRIX])}")
    return list(dict.fromkeys(out))


def get(name: str) -> Callable[[Context], dict[str, Any]]:
    return NEMESES.get(name) or MATRIX[name]


