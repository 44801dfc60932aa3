"""Command line: `jocko-py broker|topic|produce|consume|groups|transactions`."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from jocko_py.protocol import records as rb


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--override expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def cmd_broker(args: argparse.Namespace) -> int:
    from jocko_py.app import run
    from jocko_py.broker.config import ConfigError, build_config

    if args.config and not Path(args.config).is_file():
        raise SystemExit(f"jocko-py broker: config file {args.config} not found")
    try:
        config = build_config(
            config_file=Path(args.config) if args.config else None,
            overrides=_overrides(args.override),
            broker_id=args.broker_id,
            broker_addr=args.broker_addr,
            advertised_addr=args.advertised_addr,
            data_dir=args.data_dir,
            raft_addr=args.raft_addr,
            gossip_addr=args.gossip_addr,
            join=args.join,
            voters=args.controller_quorum_voters,
        )
    except (ConfigError, ValueError) as e:
        raise SystemExit(f"jocko-py broker: {e}") from None
    try:
        return run(config)
    except OSError as e:  # a port in use, an unwritable data directory
        raise SystemExit(f"jocko-py broker: cannot run: {e}") from None


def cmd_topic(args: argparse.Namespace) -> int:
    from jocko_py.client import Client

    with Client(args.bootstrap_server) as c:
        if args.action == "create":
            t = c.create_topic(args.topic, args.partitions, args.replication_factor,
                               _overrides(args.config))
            print(f"Created topic {args.topic} ({t.topic_id}) with {args.partitions} partitions")
        elif args.action == "delete":
            c.delete_topic(args.topic)
            print(f"Deleted topic {args.topic}")
        elif args.action == "list":
            for t in sorted(c.metadata().topics, key=lambda t: t.name):
                print(t.name)
        elif args.action == "describe":
            md = c.metadata([args.topic] if args.topic else None)
            for t in sorted(md.topics, key=lambda t: t.name):
                if t.error_code:
                    print(f"{t.name}: error {t.error_code}", file=sys.stderr)
                    return 1
                parts = sorted(t.partitions, key=lambda p: p.partition_index)
                if args.under_replicated:
                    parts = [p for p in parts if len(p.isr_nodes) < len(p.replica_nodes)]
                    if not parts:
                        continue
                print(f"Topic: {t.name}\tTopicId: {t.topic_id}\tPartitionCount: "
                      f"{len(t.partitions)}\tReplicationFactor: "
                      f"{len(t.partitions[0].replica_nodes) if t.partitions else 0}")
                if args.topic and not args.under_replicated:
                    for cfg in c.describe_configs(t.name):
                        if cfg.config_source == 1:
                            print(f"\tConfig: {cfg.name}={cfg.value}")
                for p in parts:
                    print(f"\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                          f"LeaderEpoch: {p.leader_epoch}\t"
                          f"Replicas: {list(p.replica_nodes)}\tIsr: {list(p.isr_nodes)}")
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    """Brokers, the active controller and the metadata quorum (kafka-metadata-quorum)."""
    from jocko_py.client import Client, KafkaError

    with Client(args.bootstrap_server) as c:
        md = c.metadata([])
        dc = c.request(60, 0, {"include_cluster_authorized_operations": False})
        dq = c.request(55, 1, {"topics": [{"topic_name": "__cluster_metadata",
                                            "partitions": [{"partition_index": 0}]}]})
    if dq.error_code:
        raise KafkaError(dq.error_code, dq.error_message)
    q = dq.topics[0].partitions[0]
    live = {b.node_id: b for b in md.brokers}
    print(f"ClusterId:      {dc.cluster_id}")
    print(f"Controller:     {md.controller_id}")
    print("Brokers:")
    known = sorted(set(live) | {r.replica_id for r in list(q.current_voters) + list(q.observers)})
    voters = {r.replica_id for r in q.current_voters}
    for bid in known:
        b = live.get(bid)
        state = "alive" if b is not None else "fenced/offline"
        addr = f"{b.host}:{b.port}" if b is not None else "-"
        role = "voter" if bid in voters else "observer"
        print(f"  {bid:>4}  {state:<15} {addr:<22} rack={b.rack if b else None}  {role}")
    print(f"Quorum:         leader {q.leader_id}, epoch {q.leader_epoch}, "
          f"high watermark {q.high_watermark}")
    now = int(time.time() * 1000)
    print("  NodeId  LogEndOffset  Lag   LastFetchMsAgo  LastCaughtUpMsAgo  Status")
    for kind, reps in (("Leader/Follower", q.current_voters), ("Observer", q.observers)):
        for r in reps:
            status = "Leader" if r.replica_id == q.leader_id else kind.split("/")[-1]
            fetch = now - r.last_fetch_timestamp if r.last_fetch_timestamp >= 0 else -1
            caught = now - r.last_caught_up_timestamp if r.last_caught_up_timestamp >= 0 else -1
            print(f"  {r.replica_id:>6}  {r.log_end_offset:>12}  "
                  f"{max(0, q.high_watermark - r.log_end_offset):>4}  {fetch:>14}  "
                  f"{caught:>17}  {status}")
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    from jocko_py.client import Client

    with Client(args.bootstrap_server) as boot, \
            boot.for_leader(args.topic, args.partition, auto_create=True) as c:
        n = 0
        for line in sys.stdin:
            line = line.rstrip("\n")
            key: bytes | None = None
            if args.key_separator and args.key_separator in line:
                k, line = line.split(args.key_separator, 1)
                key = k.encode()
            batch = rb.build_batch([rb.NewRecord(key, line.encode(), (),
                                                 int(time.time() * 1000))])
            c.produce(args.topic, args.partition, batch, acks=-1)
            n += 1
        print(f"produced {n} records to {args.topic}-{args.partition}", file=sys.stderr)
    return 0


def cmd_consume(args: argparse.Namespace) -> int:
    from jocko_py.client import Client

    with Client(args.bootstrap_server) as boot, boot.for_leader(args.topic, args.partition) as c:
        offset = args.offset
        if offset < 0:
            offset = c.list_offset(args.topic, args.partition, -2 if offset == -2 else -1)[0]
        seen = 0
        idle_deadline = time.monotonic() + args.timeout
        while args.max_messages < 0 or seen < args.max_messages:
            p = c.fetch(args.topic, args.partition, offset)
            data = p.records or b""
            got = False
            for pos, h in rb.iter_batches(memoryview(data), validate_crc=True,
                                          allow_partial_tail=True):
                for rec in rb.decode_records(memoryview(data)[pos:pos + h.size]):
                    if rec.offset < offset:
                        continue
                    key = rec.key.decode(errors="replace") if rec.key is not None else None
                    val = rec.value.decode(errors="replace") if rec.value is not None else ""
                    print(f"{key}{args.key_separator}{val}" if args.print_key and key
                          else val, flush=True)
                    offset = rec.offset + 1
                    seen += 1
                    got = True
                offset = max(offset, h.next_offset)
            if got:
                idle_deadline = time.monotonic() + args.timeout
            elif time.monotonic() > idle_deadline:
                break
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="jocko-py", description="A Kafka-compatible broker")
    ap.add_argument("--log-level", default="INFO")
    sub = ap.add_subparsers(dest="command", required=True)

    b = sub.add_parser("broker", help="run a broker")
    b.add_argument("--broker-id", type=int, default=None)
    b.add_argument("--broker-addr", default=None, help="listen address host:port "
                   "(default localhost:9092)")
    b.add_argument("--advertised-addr", default=None, help="address given to clients")
    b.add_argument("--data-dir", default=None, help="log directory (default ./data)")
    b.add_argument("--raft-addr", default=None,
                   help="this broker's raft listener host:port (cluster mode; default: its "
                   "entry in --controller-quorum-voters, else broker port + 1)")
    b.add_argument("--gossip-addr", default=None,
                   help="gossip (UDP) host:port (cluster mode; default raft port + 1)")
    b.add_argument("--join", default=None, metavar="H:P[,H:P]",
                   help="gossip addresses of brokers to join (cluster mode)")
    b.add_argument("--controller-quorum-voters", default=None, metavar="ID@H:P,...",
                   help="raft voters (Kafka's controller.quorum.voters); setting it runs "
                   "the broker as a cluster member")
    b.add_argument("--config", default=None, help="server.properties file")
    b.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set a Kafka broker property")
    b.set_defaults(func=cmd_broker)

    t = sub.add_parser("topic", help="manage topics")
    t.add_argument("action", choices=["create", "list", "describe", "delete"])
    t.add_argument("topic", nargs="?")
    t.add_argument("--bootstrap-server", default="localhost:9092")
    t.add_argument("--partitions", type=int, default=1)
    t.add_argument("--replication-factor", type=int, default=1)
    t.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    t.add_argument("--under-replicated", action="store_true",
                   help="describe: only partitions whose ISR is smaller than the replicas")
    t.set_defaults(func=cmd_topic)

    cl = sub.add_parser("cluster", help="cluster state")
    cl.add_argument("action", choices=["status"])
    cl.add_argument("--bootstrap-server", default="localhost:9092")
    cl.set_defaults(func=cmd_cluster)

    p = sub.add_parser("produce", help="produce lines of stdin as records")
    p.add_argument("topic")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--key-separator", default=None)
    p.set_defaults(func=cmd_produce)

    c = sub.add_parser("consume", help="print records of a partition")
    c.add_argument("topic")
    c.add_argument("--bootstrap-server", default="localhost:9092")
    c.add_argument("--partition", type=int, default=0)
    c.add_argument("--offset", type=int, default=-2, help="-2 earliest, -1 latest")
    c.add_argument("--max-messages", type=int, default=-1)
    c.add_argument("--timeout", type=float, default=2.0, help="stop after this idle time")
    c.add_argument("--print-key", action="store_true")
    c.add_argument("--key-separator", default="\t")
    c.set_defaults(func=cmd_consume)

    from jocko_py.cli_groups import add_parser as add_groups_parser
    from jocko_py.cli_transactions import add_parser as add_transactions_parser

    add_groups_parser(sub)
    add_transactions_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    if args.command == "topic" and args.action != "list" and not args.topic \
            and args.action != "describe":
        raise SystemExit("topic name required")
    if args.command == "broker":
        return int(args.func(args))
    from jocko_py.client import KafkaError

    try:
        return int(args.func(args))
    except KafkaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (ConnectionError, TimeoutError, OSError) as e:
        print(f"error: cannot reach {args.bootstrap_server}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
