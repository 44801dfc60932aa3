"""Command line: `jocko-py broker|storage|topic|cluster|produce|consume|groups|share-groups|transactions|acl|user|quota`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


class UserError(Exception):
    """A mistake on the command line: reported as one line, exit status 1."""


def _overrides(items: list[str], flag: str = "--config") -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise UserError(f"{flag} expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def cmd_broker(args: argparse.Namespace) -> int:
    from jocko_py.app import run
    from jocko_py.broker.config import ConfigError, build_config
    from jocko_py.commitlog.dirs import DirectoryError

    if args.config and not Path(args.config).exists():
        raise SystemExit(f"jocko-py broker: config file {args.config} not found")
    try:
        config = build_config(
            config_file=Path(args.config) if args.config else None,
            overrides=_overrides(args.override, "--override"),
            broker_id=args.broker_id,
            broker_addr=args.broker_addr,
            advertised_addr=args.advertised_addr,
            data_dir=args.data_dir,
            raft_addr=args.raft_addr,
            gossip_addr=args.gossip_addr,
            join=args.join,
            voters=args.controller_quorum_voters,
            metrics_addr=args.metrics_addr,
            console_addr=args.console_addr,
        )
    except (ConfigError, ValueError, UserError) as e:
        raise SystemExit(f"jocko-py broker: {e}") from None
    from jocko_py.logfmt import set_static_fields

    set_static_fields(broker=config.broker_id)
    try:
        shards = _shards(args, config)
        if shards > 1:
            return _run_sharded(args, config, shards)
        return run(config)
    except (ConfigError, DirectoryError) as e:  # a TLS key that does not load, a data
        raise SystemExit(f"jocko-py broker: {e}") from None  # dir in use or of another cluster
    except OSError as e:  # a port in use, an unwritable data directory
        what = e.strerror or str(e)
        if e.filename:
            what = f"{what}: {e.filename}"
        raise SystemExit(f"jocko-py broker: {what}") from None


def _shards(args: argparse.Namespace, config: Any) -> int:
    """`--shards` / `num.shards` (jocko_py/shards.py); an unsharded broker refuses a
    sharded broker's directories."""
    from jocko_py.shards import check_unsharded_dirs, parse_shards

    n = parse_shards(args.shards, "--shards") if args.shards is not None else parse_shards(
        config.properties.get("num.shards", "1"))
    if n == 1:
        check_unsharded_dirs(config)
    return n


def _run_sharded(args: argparse.Namespace, config: Any, n: int) -> int:
    from jocko_py import shards

    shards.check_sharded_dirs(config, n)
    plans = shards.plan_shards(
        config, n,
        raft_explicit=bool(args.raft_addr or "jocko.raft.addr" in config.explicit
                           or config.broker_id in config.voters),
        gossip_explicit=bool(args.gossip_addr or "jocko.gossip.addr" in config.explicit),
        cluster_id=config.cluster_id if config.voters else shards.single_host_cluster_id(
            config),
        extra_properties={} if config.voters else shards.single_host_secret(config))
    return shards.run_sharded(config, plans, ["--log-level", str(args.log_level),
                                              "--log-format", args.log_format])


def _emit_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


def cmd_topic(args: argparse.Namespace) -> int:
    from jocko_py.client import Client, KafkaError
    from jocko_py.protocol.errors import ErrorCode

    if args.action != "list" and not args.topic and not (
            args.action == "describe"):
        raise UserError(f"topic {args.action}: a topic name is required")
    with Client(args.bootstrap_server) as c:
        if args.action == "create":
            t = c.create_topic(args.topic,
                               -1 if args.partitions is None else args.partitions,
                               -1 if args.replication_factor is None else args.replication_factor,
                               _overrides(args.config))
            print(f"Created topic {args.topic} ({t.topic_id}) with {t.num_partitions} "
                  f"partition{'s' if t.num_partitions != 1 else ''}, replication factor "
                  f"{t.replication_factor}")
        elif args.action == "delete":
            c.delete_topic(args.topic)
            print(f"Deleted topic {args.topic}")
        elif args.action == "alter":
            return _topic_alter(c, args)
        elif args.action == "list":
            names = sorted(t.name for t in c.metadata().topics)
            if args.format == "json":
                _emit_json(names)
            else:
                for name in names:
                    print(name)
        elif args.action == "describe":
            md = c.metadata([args.topic] if args.topic else None)
            out = []
            for t in sorted(md.topics, key=lambda t: t.name):
                if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise UserError(f"topic {t.name!r} does not exist")
                if t.error_code:
                    raise KafkaError(t.error_code, f"topic {t.name}")
                parts = sorted(t.partitions, key=lambda p: p.partition_index)
                if args.under_replicated:
                    parts = [p for p in parts if len(p.isr_nodes) < len(p.replica_nodes)]
                    if not parts:
                        continue
                configs = {}
                if args.topic and not args.under_replicated:
                    configs = {cfg.name: cfg.value for cfg in c.describe_configs(t.name)
                               if cfg.config_source == 1}
                rf = len(t.partitions[0].replica_nodes) if t.partitions else 0
                if args.format == "json":
                    out.append({"name": t.name, "topic_id": str(t.topic_id),
                                "partition_count": len(t.partitions), "replication_factor": rf,
                                "configs": configs, "partitions": [
                                    {"partition": p.partition_index, "leader": p.leader_id,
                                     "leader_epoch": p.leader_epoch,
                                     "replicas": list(p.replica_nodes),
                                     "isr": list(p.isr_nodes)} for p in parts]})
                    continue
                print(f"Topic: {t.name}\tTopicId: {t.topic_id}\tPartitionCount: "
                      f"{len(t.partitions)}\tReplicationFactor: {rf}")
                for name, value in configs.items():
                    print(f"\tConfig: {name}={value}")
                for p in parts:
                    print(f"\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                          f"LeaderEpoch: {p.leader_epoch}\t"
                          f"Replicas: {list(p.replica_nodes)}\tIsr: {list(p.isr_nodes)}")
            if args.format == "json":
                _emit_json(out)
    return 0


def _topic_alter(c: Any, args: argparse.Namespace) -> int:
    from jocko_py.client import KafkaError
    from jocko_py.protocol.errors import ErrorCode

    sets = _overrides(args.config)
    if args.partitions is None and not sets and not args.delete_config:
        raise UserError("topic alter: give --partitions, --config or --delete-config")
    md = c.metadata([args.topic])
    t = md.topics[0]
    if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise UserError(f"topic {args.topic!r} does not exist")
    if args.partitions is not None:
        before = len(t.partitions)
        r = c.request(37, 3, {"topics": [{"name": args.topic, "count": args.partitions,
                                           "assignments": None}],
                              "timeout_ms": 30000, "validate_only": False})
        res = r.results[0]
        if res.error_code:
            raise KafkaError(res.error_code, res.error_message)
        print(f"Topic {args.topic}: partitions {before} -> {args.partitions}")
    if sets or args.delete_config:
        configs = [{"name": k, "config_operation": 0, "value": v} for k, v in sets.items()]
        configs += [{"name": k, "config_operation": 1, "value": None}
                    for k in args.delete_config]
        r = c.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": args.topic,
                                             "configs": configs}], "validate_only": False})
        res = r.responses[0]
        if res.error_code:
            raise KafkaError(res.error_code, res.error_message)
        for k, v in sets.items():
            print(f"Topic {args.topic}: set {k}={v}")
        for k in args.delete_config:
            print(f"Topic {args.topic}: {k} back to its default")
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    """Brokers, the active controller and the metadata quorum (kafka-metadata-quorum);
    or `gen-secret`: a new key for jocko.cluster.secret.file on stdout."""
    if args.action == "gen-secret":
        from jocko_py.cluster.linkauth import generate_key

        print(generate_key())
        return 0
    from jocko_py.client import Client, KafkaError
    from jocko_py.cluster.shard_ids import host_and_shard

    with Client(args.bootstrap_server) as c:
        md = c.metadata([])
        dc = c.request(60, 0, {"include_cluster_authorized_operations": False})
        dq = c.request(55, 1, {"topics": [{"topic_name": "__cluster_metadata",
                                            "partitions": [{"partition_index": 0}]}]})
    if dq.error_code:
        raise KafkaError(dq.error_code, dq.error_message)
    q = dq.topics[0].partitions[0]
    live = {b.node_id: b for b in md.brokers}
    if args.format == "json":
        voters_ = {r.replica_id for r in q.current_voters}
        _emit_json({
            "cluster_id": dc.cluster_id, "controller": md.controller_id,
            "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                         "voter": b.node_id in voters_,
                         "host_node": host_and_shard(b.node_id)[0],
                         "shard": host_and_shard(b.node_id)[1]}
                        for b in sorted(md.brokers, key=lambda b: host_and_shard(b.node_id))],
            "quorum": {"leader": q.leader_id, "epoch": q.leader_epoch,
                       "high_watermark": q.high_watermark,
                       "replicas": [{"id": r.replica_id, "log_end_offset": r.log_end_offset,
                                     "voter": r.replica_id in voters_}
                                    for r in list(q.current_voters) + list(q.observers)]}})
        return 0
    print(f"ClusterId:      {dc.cluster_id}")
    print(f"Controller:     {md.controller_id}")
    print("Brokers:")
    # a sharded broker's shards (node n + 1000k, jocko_py/shards.py) listed together
    known = sorted(set(live) | {r.replica_id for r in list(q.current_voters) + list(q.observers)},
                   key=host_and_shard)
    sharded = any(host_and_shard(b)[1] for b in known)
    voters = {r.replica_id for r in q.current_voters}
    for bid in known:
        b = live.get(bid)
        state = "alive" if b is not None else "fenced/offline"
        addr = f"{b.host}:{b.port}" if b is not None else "-"
        role = "voter" if bid in voters else "observer"
        shard = "  node {}, shard {}".format(*host_and_shard(bid)) if sharded else ""
        print(f"  {bid:>4}  {state:<15} {addr:<22} rack={b.rack if b else None}  {role}{shard}")
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


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's examples as written."""


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("jocko-py")
    except Exception:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="jocko-py", formatter_class=_Formatter,
        description="A Kafka-compatible broker, and tools to use it.",
        epilog="""examples:
  jocko-py broker --data-dir /var/lib/jocko --metrics-addr 0.0.0.0:9308
  jocko-py topic create orders --partitions 6 --config retention.ms=86400000
  printf 'k1:hello\\nk2:world\\n' | jocko-py produce orders --key-separator :
  jocko-py consume orders --print-key --group billing --follow
  jocko-py groups describe billing

Every command takes --help. Exit status: 0 ok, 1 an error (one line on stderr),
2 a usage error, 130 interrupted.""")
    ap.add_argument("--version", action="version", version=f"jocko-py {_version()}")
    ap.add_argument("--log-level", default="INFO", type=_log_level, metavar="LEVEL",
                    help="DEBUG, INFO (default), WARNING or ERROR")
    ap.add_argument("--log-format", choices=["text", "json"], default="text",
                    help="text (default) or JSON lines with context fields, for log shippers")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = sub.add_parser(
        "broker", help="run a broker", formatter_class=_Formatter,
        description="Run a broker. Flags win over --override, which wins over --config.",
        epilog="""examples:
  jocko-py broker                                   # localhost:9092, data in ./data
  jocko-py broker --config server.properties --override log.retention.hours=24
  jocko-py broker --broker-id 1 --broker-addr 10.0.0.1:9092 --data-dir /var/lib/jocko \\
      --controller-quorum-voters 1@10.0.0.1:9093,2@10.0.0.2:9093,3@10.0.0.3:9093 \\
      --join 10.0.0.2:9094,10.0.0.3:9094""")
    b.add_argument("--broker-id", type=int, default=None,
                   help="Kafka's broker.id / node.id (default: 0)")
    b.add_argument("--broker-addr", default=None, metavar="HOST:PORT",
                   help="listen address (default: the PLAINTEXT entry of listeners, else "
                   "localhost:9092)")
    b.add_argument("--advertised-addr", default=None, metavar="HOST:PORT",
                   help="address given to clients in Metadata (default: "
                   "advertised.listeners, else the listen address)")
    b.add_argument("--data-dir", default=None, metavar="DIR",
                   help="log directory, Kafka's log.dirs (default: ./data)")
    b.add_argument("--raft-addr", default=None, metavar="HOST:PORT",
                   help="this broker's raft listener (cluster mode; default: its "
                   "entry in --controller-quorum-voters, else broker port + 1)")
    b.add_argument("--gossip-addr", default=None, metavar="HOST:PORT",
                   help="gossip address, UDP (cluster mode; default: raft port + 1)")
    b.add_argument("--join", default=None, metavar="HOST:PORT[,...]",
                   help="gossip addresses of brokers to join (cluster mode)")
    b.add_argument("--controller-quorum-voters", default=None, metavar="ID@HOST:PORT,...",
                   help="raft voters (Kafka's controller.quorum.voters); setting it runs "
                   "the broker as a cluster member (default: single node)")
    b.add_argument("--metrics-addr", default=None, metavar="HOST:PORT",
                   help="serve Prometheus metrics on http://HOST:PORT/metrics "
                   "(property jocko.metrics.addr; default: off)")
    b.add_argument("--console-addr", default=None, metavar="HOST:PORT",
                   help="serve the web console on http://HOST:PORT/ (property "
                   "jocko.console.addr; jocko.console.read.only=true hides every action; "
                   "default: off)")
    b.add_argument("--shards", default=None, metavar="N",
                   help="run as N shard processes, each a broker of its own (node ids "
                   "n, n+1000, ...; Kafka ports port, port+1, ...), N=auto for one per "
                   "core (property num.shards; default: 1; docs/shards.md)")
    b.add_argument("--config", default=None, metavar="FILE",
                   help="a server.properties file with Kafka property names")
    b.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set a Kafka broker property (repeatable)")
    b.set_defaults(func=cmd_broker)
    from jocko_py.cli.storage import add_parser as add_storage_parser

    add_storage_parser(sub, _Formatter)

    boot = {"default": "localhost:9092", "metavar": "HOST:PORT[,...]",
            "help": "broker(s) to connect to (default: localhost:9092)"}
    t = sub.add_parser(
        "topic", help="create, list, describe, alter and delete topics",
        formatter_class=_Formatter,
        epilog="""examples:
  jocko-py topic create orders                  # the broker's num.partitions, default.replication.factor
  jocko-py topic create orders --partitions 6 --replication-factor 3 --config min.insync.replicas=2
  jocko-py topic list --format json
  jocko-py topic describe orders
  jocko-py topic describe --under-replicated
  jocko-py topic alter orders --partitions 12 --config retention.ms=3600000 --delete-config cleanup.policy
  jocko-py topic delete orders""")
    t.add_argument("action", choices=["create", "list", "describe", "alter", "delete"])
    t.add_argument("topic", nargs="?", help="topic name (describe: all topics if omitted)")
    t.add_argument("--bootstrap-server", **boot)  # type: ignore[arg-type]
    t.add_argument("--partitions", type=int, default=None, metavar="N",
                   help="create: partition count (default: the broker's num.partitions); "
                   "alter: the new, larger count")
    t.add_argument("--replication-factor", type=int, default=None, metavar="N",
                   help="create: replicas per partition (default: the broker's "
                   "default.replication.factor)")
    t.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="create/alter: a topic config, e.g. retention.ms=86400000 "
                   "(repeatable)")
    t.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="alter: return a topic config to the broker's default (repeatable)")
    t.add_argument("--under-replicated", action="store_true",
                   help="describe: only partitions whose ISR is smaller than the replicas")
    t.add_argument("--format", choices=["text", "json"], default="text",
                   help="list/describe: text (default) or JSON for scripts")
    t.set_defaults(func=cmd_topic)

    cl = sub.add_parser("cluster", help="cluster state (brokers, controller, quorum)",
                        formatter_class=_Formatter,
                        epilog="example:\n  jocko-py cluster status --bootstrap-server "
                        "127.0.0.1:9092 --format json\n"
                        "  jocko-py cluster gen-secret > cluster.secret   # a key for "
                        "jocko.cluster.secret.file")
    cl.add_argument("action", choices=["status", "gen-secret"])
    cl.add_argument("--bootstrap-server", **boot)  # type: ignore[arg-type]
    cl.add_argument("--format", choices=["text", "json"], default="text",
                    help="text (default) or JSON for scripts")
    cl.set_defaults(func=cmd_cluster)

    from jocko_py.cli.completion import add_parser as add_completion_parser
    from jocko_py.cli.data import add_parsers as add_data_parsers
    from jocko_py.cli.groups import add_parser as add_groups_parser
    from jocko_py.cli.share_groups import add_parser as add_share_groups_parser
    from jocko_py.cli.transactions import add_parser as add_transactions_parser

    add_data_parsers(sub, _Formatter)
    add_groups_parser(sub)
    add_share_groups_parser(sub)
    add_transactions_parser(sub)
    from jocko_py.cli.security import add_parsers as add_security_parsers

    add_security_parsers(sub)
    # every client command takes Kafka's --command-config (client security settings)
    for name, sp in sub.choices.items():
        if name == "broker":
            continue
        for p in [sp, *(a for act in sp._actions
                        if isinstance(act, argparse._SubParsersAction)
                        for a in act.choices.values())]:
            if any(a.dest == "bootstrap_server" for a in p._actions):
                p.add_argument("--command-config", default=None, metavar="FILE",
                               help="client properties: security.protocol, ssl.*, sasl.*")
    add_completion_parser(sub, ap)
    _global_options_everywhere(ap, top=True)
    return ap


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _log_level(text: str) -> str:
    """A log level in any case; anything else is a usage error (not silently INFO)."""
    level = text.strip().upper()
    if level == "WARN":
        level = "WARNING"
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"invalid level {text!r} (choose from {', '.join(LOG_LEVELS)})")
    return level


def _global_options_everywhere(p: argparse.ArgumentParser, top: bool = False) -> None:
    """--log-level/--log-format are also accepted after the command (`jocko-py broker
    --log-format json`); there they only override what was given before it."""
    if not top:
        p.add_argument("--log-level", default=argparse.SUPPRESS, type=_log_level,
                       metavar="LEVEL", help="DEBUG, INFO (default), WARNING or ERROR")
        p.add_argument("--log-format", choices=["text", "json"], default=argparse.SUPPRESS,
                       help="text (default) or JSON lines with context fields")
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _global_options_everywhere(child)


def main(argv: list[str] | None = None) -> int:
    try:  # a Ctrl-C while the parser and logging are set up is a Ctrl-C too
        args = build_parser().parse_args(argv)
        from jocko_py.logfmt import setup_logging

        setup_logging(str(args.log_level), args.log_format)
        if args.command in ("broker", "completion", "storage"):
            return int(args.func(args))
        return _run_tool(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (| head): no traceback, and no second error at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def _run_tool(args: argparse.Namespace) -> int:
    from jocko_py.cli.data import UserError as DataUserError
    from jocko_py.client import KafkaError, load_command_config, set_default_config

    if getattr(args, "command_config", None):
        try:
            set_default_config(load_command_config(args.command_config))
        except ValueError as e:
            print(f"error: jocko-py {args.command}: {e}", file=sys.stderr)
            return 1

    try:
        return int(args.func(args))
    except KafkaError as e:
        print(f"error: {e}", file=sys.stderr)
    except (UserError, DataUserError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
    except BrokenPipeError:
        raise
    except (ConnectionError, TimeoutError, OSError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
        if reason.split(" ", 1)[0] in args.bootstrap_server.split(","):
            print(f"error: {reason}", file=sys.stderr)  # it names the broker already
        else:
            print(f"error: cannot reach {args.bootstrap_server}: {reason}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
