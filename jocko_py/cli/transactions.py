"""`jocko-py transactions list|describe|abort`: transaction administration.

Like Kafka's kafka-transactions.sh: `list` asks every broker for the transactions it
coordinates (ListTransactions) and prints transactional id, coordinator, producer id
and state; `describe` asks the coordinator of one transactional id
(FindCoordinator, DescribeTransactions) and prints its producer id and epoch, state,
timeout, start time and partitions; `abort` ends a hanging transaction on one
partition: it finds the producer whose open transaction starts at `--start-offset`
(DescribeProducers on the leader) and writes an ABORT marker for it there
(WriteTxnMarkers with the producer's epoch and the last coordinator epoch it saw), as
Kafka's `abort` does. Only for transactions no coordinator will ever end: aborting a
live transaction behind its coordinator's back breaks it. As in Kafka, the abort needs
CLUSTER_ACTION on the cluster: the broker serves WriteTxnMarkers only to brokers and,
with an authorizer, to principals allowed it (never to everyone by default).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from jocko_py.client import Client, KafkaError
from jocko_py.protocol.errors import ErrorCode


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def cmd_list(c: Client, args: argparse.Namespace) -> int:
    md = c.metadata([])
    rows = [["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"]]
    failed = False
    for b in sorted(md.brokers, key=lambda x: x.node_id):
        try:
            with Client(f"{b.host}:{b.port}", c.client_id, c.timeout) as bc:
                r = bc.request(66, 1, {"state_filters": args.state or [],
                                       "producer_id_filters": args.producer_id or [],
                                       "duration_filter": -1})
        except OSError as e:
            print(f"error: broker {b.node_id}: {e}", file=sys.stderr)
            failed = True
            continue
        if r.error_code:
            print(f"error: broker {b.node_id}: {ErrorCode.of(r.error_code).name}", file=sys.stderr)
            failed = True
            continue
        for s in r.unknown_state_filters:
            print(f"Warning: unknown state {s}", file=sys.stderr)
        for t in r.transaction_states:
            rows.append([t.transactional_id, str(b.node_id), str(t.producer_id),
                         t.transaction_state])
    rows[1:] = sorted(rows[1:])
    _table(rows)
    return 1 if failed else 0


def _coordinator(c: Client, tid: str) -> Client:
    r = c.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
    co = r.coordinators[0]
    if co.error_code:
        raise KafkaError(co.error_code, co.error_message or f"FindCoordinator {tid}")
    return Client(f"{co.host}:{co.port}", c.client_id, c.timeout)


def cmd_describe(c: Client, args: argparse.Namespace) -> int:
    with _coordinator(c, args.transactional_id) as cc:
        r = cc.request(65, 0, {"transactional_ids": [args.transactional_id]})
    s = r.transaction_states[0]
    if s.error_code:
        raise KafkaError(s.error_code, args.transactional_id)
    now = int(time.time() * 1000)
    start = s.transaction_start_time_ms
    parts = ",".join(f"{t.topic}-{p}" for t in s.topics for p in t.partitions)
    _table([["TRANSACTIONAL-ID", "PRODUCER-ID", "EPOCH", "STATE", "TIMEOUT-MS", "START-MS",
             "DURATION-MS", "PARTITIONS"],
            [s.transactional_id, str(s.producer_id), str(s.producer_epoch),
             s.transaction_state, str(s.transaction_timeout_ms), str(start),
             str(now - start) if start >= 0 else "-", parts or "-"]])
    return 0


def cmd_abort(c: Client, args: argparse.Namespace) -> int:
    leader = c.for_leader(args.topic, args.partition)
    try:
        r = leader.request(61, 0, {"topics": [{"name": args.topic,
                                               "partition_indexes": [args.partition]}]})
        p = r.topics[0].partitions[0]
        if p.error_code:
            raise KafkaError(p.error_code, f"{args.topic}-{args.partition}")
        match: Any = next((x for x in p.active_producers
                           if x.current_txn_start_offset == args.start_offset), None)
        if match is None:
            print(f"error: no open transaction starts at offset {args.start_offset} of "
                  f"{args.topic}-{args.partition}", file=sys.stderr)
            return 1
        w = leader.request(27, 1, {"markers": [{
            "producer_id": match.producer_id, "producer_epoch": match.producer_epoch,
            "transaction_result": False,
            "topics": [{"name": args.topic, "partition_indexes": [args.partition]}],
            "coordinator_epoch": max(match.coordinator_epoch, 0)}]})
        err = w.markers[0].topics[0].partitions[0].error_code
        if err == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
            raise KafkaError(err, "WriteTxnMarkers: aborting a transaction needs "
                             "CLUSTER_ACTION on the cluster (an authorizer with this "
                             "principal in super.users, or an ACL)")
        if err:
            raise KafkaError(err, "WriteTxnMarkers")
    finally:
        if leader is not c:
            leader.close()
    print(f"Aborted the transaction of producer {match.producer_id} (epoch "
          f"{match.producer_epoch}) starting at offset {args.start_offset} of "
          f"{args.topic}-{args.partition}")
    return 0


def cmd_transactions(args: argparse.Namespace) -> int:
    try:
        with Client(args.bootstrap_server, client_id="jocko-py-transactions") as c:
            fn = {"list": cmd_list, "describe": cmd_describe, "abort": cmd_abort}[args.action]
            return fn(c, args)
    except KafkaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def add_parser(sub: Any) -> None:
    g = sub.add_parser("transactions", help="list, describe and abort transactions")
    gs = g.add_subparsers(dest="action", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bootstrap-server", default="localhost:9092", metavar="HOST:PORT[,...]",
                       help="broker(s) to connect to (default: localhost:9092)")
        p.set_defaults(func=cmd_transactions)

    p = gs.add_parser("list", help="transactions of every coordinator")
    p.add_argument("--state", action="append", default=None,
                   help="only this state (Ongoing, CompleteCommit, ...); repeatable")
    p.add_argument("--producer-id", action="append", type=int, default=None,
                   help="only this producer id; repeatable")
    common(p)
    p = gs.add_parser("describe", help="one transactional id, as its coordinator sees it")
    p.add_argument("transactional_id")
    common(p)
    p = gs.add_parser("abort", help="abort a hanging transaction on one partition")
    p.add_argument("--topic", required=True, help="topic of the hanging transaction")
    p.add_argument("--partition", type=int, required=True,
                   help="partition of the hanging transaction")
    p.add_argument("--start-offset", type=int, required=True,
                   help="first offset of the open transaction (see DescribeProducers)")
    common(p)
