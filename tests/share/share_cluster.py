"""The share-group workload on three brokers with failovers (issue 24, "What must be shown"):
`make share-cluster`, or `python -m tests.share.share_cluster [--broker jocko|kafka44]`.

Three brokers (jocko-py: tests/support/cluster.py; or three Apache Kafka 4.4.0 nodes, to
check the workload itself), one topic of one partition with replication factor 3 and
min.insync.replicas 2, 3,000 records, three Java `KafkaShareConsumer`s in one share group
(tests/java/share/ShareClient.java, every record accepted, commitSync after each poll).
The consumers are slowed (share.acquire.mode=record_limit, 10 records a poll, 100 ms
after each commit). When a third of
the records are accepted the share partition's leader is SIGKILLed; when the consumers
have accepted 300 more it is restarted, and then the broker of the group's share
coordinator for that partition (key "group:topicId:partition": FindCoordinator key type 2
on Kafka, checked against the leader of the key's `__share_group_state` partition
computed as Kafka hashes it; on jocko-py, which refuses that lookup to clients, that
computed leader) is SIGKILLed, and restarted once 300 more are accepted.

Pass: no record whose accept a commitSync confirmed is delivered again afterwards (a later
delivery of it with a higher delivery count), none is confirmed twice, and in the end
every record is accepted: confirmed by a commitSync, or, where the commitSync of its
accept failed during a failover (an ambiguous outcome: Kafka 4.4.0 answers
UNKNOWN_SERVER_ERROR while its share coordinator is down, yet keeps the accept), not
delivered again and counted done by the broker: the group's lag
(DescribeShareGroupOffsets) is 0 and nothing comes back after the lock duration. Prints PASS or FAIL with the details;
exit status 0 / 1, 2 on a missing prerequisite.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jocko_py.broker.share.coordinator import STATE_TOPIC, partition_for
from jocko_py.broker.share.persister import kafka_uuid_str
from jocko_py.client import Client, KafkaError
from tests.share.harness import (
    BROKER_CONFIG,
    Delivery,
    ShareWorker,
    java_missing,
    jocko_missing,
    produce_values,
    set_group_config,
)
from tests.support import kafka44
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster

N = 3000
LOCK_MS = 3000


@contextmanager
def brokers(kind: str, root: Path) -> Iterator[dict[int, BrokerProcess]]:
    if kind == "kafka44":
        nodes = [kafka44.ApacheKafka44(root / f"kafka-{i}" / "data", node_id=i,
                                       extra=BROKER_CONFIG) for i in (1, 2, 3)]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes)
        for n in nodes:
            n.voters, n.cluster_id = voters, nodes[0].cluster_id
        try:
            for n in nodes:
                n.start_unwaited()
            for n in nodes:
                n.wait_ready(180, brokers=3)
            yield {n.node_id: n for n in nodes}
        finally:
            for n in nodes:
                n.stop()
    else:
        c = Cluster(root, 3, overrides=BROKER_CONFIG)
        try:
            c.start()
            yield dict(c.brokers)
        finally:
            c.stop()


def restart(b: BrokerProcess) -> None:
    if isinstance(b, kafka44.ApacheKafka44):
        b.start_unwaited()
    else:
        b.start(timeout=60)


def alive(bs: dict[int, BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in bs.values() if b.proc is not None
                    and b.proc.poll() is None)


def leader_of(bs: dict[int, BrokerProcess], topic: str) -> tuple[int, Any]:
    with Client(alive(bs), timeout=10) as c:
        md = c.metadata([topic])
        return md.topics[0].partitions[0].leader_id, md.topics[0].topic_id


def share_coordinator(bs: dict[int, BrokerProcess], group: str, topic_id: Any,
                      kind: str) -> int:
    """The broker of the share coordinator of partition 0's state; the key is Kafka's
    "group:topicId:partition" with the topic id as Kafka prints a Uuid (base64url).
    Kafka 4.4.0 (no authorizer) answers a client's FindCoordinator key type 2; jocko-py
    refuses it (CLUSTER_ACTION is for the cluster's brokers), so there the coordinator
    is the leader of the key's `__share_group_state` partition, Kafka's
    ``Utils.abs(key.hashCode()) % partitions``, read from Metadata."""
    key = f"{group}:{kafka_uuid_str(topic_id)}:0"
    with Client(alive(bs), timeout=10) as c:
        md = c.metadata([STATE_TOPIC])
        t = md.topics[0]
        if t.error_code or not t.partitions:
            raise RuntimeError(f"Metadata {STATE_TOPIC}: error {t.error_code}")
        idx = partition_for(key, len(t.partitions))
        leader = next(p.leader_id for p in t.partitions if p.partition_index == idx)
        if leader < 0:
            raise RuntimeError(f"{STATE_TOPIC}-{idx} (key {key}) has no leader")
        if kind == "kafka44":
            # Kafka answers it: the computed partition's leader must be its answer
            r = c.request(10, 6, {"key_type": 2, "coordinator_keys": [key]})
            co = r.coordinators[0]
            if co.error_code:
                raise RuntimeError(f"FindCoordinator (share) {key}: error "
                                   f"{co.error_code} {co.error_message}")
            if co.node_id != leader:
                raise RuntimeError(f"FindCoordinator (share) {key}: node {co.node_id}, "
                                   f"but {STATE_TOPIC}-{idx}'s leader is {leader}")
        return int(leader)


def accepted(ws: list[ShareWorker]) -> set[int]:
    return {d.offset for w in ws for d in w.deliveries() if d.committed and d.action == "accept"}


def wait_progress(ws: list[ShareWorker], target: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while len(accepted(ws)) < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {len(accepted(ws))} of {target} accepted after "
                               f"{timeout}s")
        time.sleep(0.3)


def group_lag(bs: dict[int, BrokerProcess], group: str) -> int:
    from jocko_py.admin import GroupAdmin

    try:
        with Client(alive(bs), timeout=10) as c:
            adm = GroupAdmin(c)
            try:
                return sum(max(v[1], 0) for v in adm.share_offsets(group).values())
            finally:
                adm.close()
    except (OSError, KafkaError):
        return -1


def delivered(ws: list[ShareWorker]) -> set[int]:
    return {d.offset for w in ws for d in w.deliveries()}


def check(ds: list[Delivery], lag_zero: bool) -> tuple[list[str], int]:
    """The issue's properties over every delivery the consumers saw: (problems, records
    whose only accept had an ambiguous outcome, counted done because the broker says
    `lag_zero`)."""
    by: dict[int, list[Delivery]] = defaultdict(list)
    for d in ds:
        by[d.offset].append(d)
    problems = []
    ambiguous = 0
    for off in range(N):
        got = by.get(off, [])
        acc = [d for d in got if d.action == "accept" and d.committed]
        if not acc and got and lag_zero and got[-1].action == "accept" and len(got) == 1:
            ambiguous += 1  # its accept's commit failed; the broker kept it
            continue
        if len(acc) != 1:
            problems.append(f"offset {off}: accepted {len(acc)} times ({got})")
            continue
        later = [d for d in got if d.count > acc[0].count]
        if later:
            problems.append(f"offset {off}: delivered again after its accept was "
                            f"confirmed ({acc[0]} then {later})")
    return problems, ambiguous


def run(kind: str, root: Path) -> int:
    topic, group = "share-failover", "share-failover-group"
    with brokers(kind, root) as bs:
        boot = alive(bs)
        if kind == "jocko" and (why := jocko_missing(boot)):
            print(f"SKIP: {why}")
            return 2
        with Client(boot, timeout=30) as c:
            t = c.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
            if t.error_code:
                raise RuntimeError(f"CreateTopics: {t.error_code}")
        time.sleep(1.0)
        set_group_config(boot, group, {"share.auto.offset.reset": "earliest",
                                       "share.record.lock.duration.ms": str(LOCK_MS)})
        produce_values(boot, topic, [f"a-{i}" for i in range(N)])
        # slow consumers (at most ~300 records/s between them), so both failovers land
        # mid-stream
        ws = [ShareWorker(f"c{i}", boot, topic, group, root, max_poll=10, pause_ms=100,
                          acquire_mode="record_limit") for i in range(3)]
        t0 = time.monotonic()
        try:
            wait_progress(ws, N // 3, 180, "before the leader kill")
            lead, topic_id = leader_of(bs, topic)
            print(f"{time.monotonic() - t0:5.1f}s {len(accepted(ws))} accepted; SIGKILL "
                  f"broker {lead} (the share partition's leader)", flush=True)
            bs[lead].kill()
            wait_progress(ws, len(accepted(ws)) + 300, 180, "after the leader kill")
            restart(bs[lead])
            coord = share_coordinator(bs, group, topic_id, kind)
            print(f"{time.monotonic() - t0:5.1f}s {len(accepted(ws))} accepted; broker "
                  f"{lead} restarted; SIGKILL broker {coord} (the share coordinator)",
                  flush=True)
            bs[coord].kill()
            at_kill = len(accepted(ws))
            if at_kill >= N - 300:
                print(f"FAIL: the workload was nearly done ({at_kill}) at the coordinator kill")
                return 1
            wait_progress(ws, at_kill + 300, 180, "after the coordinator kill")
            restart(bs[coord])
            # to the end: every record confirmed, or every record delivered and the
            # group's lag 0 (the accepts whose commit failed kept by the broker)
            deadline = time.monotonic() + 240
            while len(accepted(ws)) < N and not (
                    len(delivered(ws)) == N and group_lag(bs, group) == 0):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"to the end: {len(accepted(ws))} confirmed, "
                                       f"{len(delivered(ws))} delivered, lag "
                                       f"{group_lag(bs, group)} after 240s")
                time.sleep(0.5)
            print(f"{time.monotonic() - t0:5.1f}s {len(accepted(ws))} confirmed, "
                  f"{len(delivered(ws))} delivered", flush=True)
            time.sleep(LOCK_MS / 1000 + 2)  # a lost accept would be redelivered by now
            lag_zero = group_lag(bs, group) == 0
        except (TimeoutError, RuntimeError) as e:
            print(f"FAIL: {e}")
            for w in ws:
                print(f"--- {w.name}: {w.lines()[-3:]}\n{w.log_tail(8)}")
            return 1
        finally:
            for w in ws:
                w.stop()
        ds = [d for w in ws for d in w.deliveries()]
        problems, ambiguous = check(ds, lag_zero)
        redelivered = sum(1 for d in ds if d.count > 1)
        if problems:
            print(f"FAIL: {len(problems)} problem(s) (group lag 0: {lag_zero}):\n"
                  + "\n".join(problems[:20]))
            return 1
        print(f"PASS ({kind}): {N} records accepted once ({ambiguous} of them by an accept "
              f"whose commitSync failed in a failover and that the broker kept: lag 0, "
              f"never delivered again), none delivered again after a confirmed accept; "
              f"{redelivered} deliveries after a failover or lock expiry")
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=("jocko", "kafka44"), default="jocko")
    args = ap.parse_args(argv)
    if why := java_missing():
        print(f"share-cluster: {why}", file=sys.stderr)
        return 2
    if args.broker == "jocko" and (why := jocko_missing()):
        print(f"share-cluster: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="share-cluster-") as tmp:
        return run(args.broker, Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
