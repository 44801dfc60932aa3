"""`jocko-py storage format|info|random-uuid`: the log directories' identity, as Kafka's
`kafka-storage` tool.

- `random-uuid` prints a new cluster id (base64url uuid4, 22 characters).
- `format -t ID` writes meta.properties (cluster.id, node.id, a directory.id of its
  own, version=1) into every log directory of `--config` (`log.dirs`, `node.id` or
  `broker.id`) or of `--data-dir`/`--broker-id`. A directory already formatted is an
  error unless `--ignore-formatted`, which skips it (it must still agree). A directory a
  running broker holds (its `.lock`) is refused.
- `info` prints each directory's meta.properties and the problems found (not a
  directory, not formatted, directories that disagree); exit status 1 on a problem.

Formatting is optional: a broker started on unformatted directories makes its id (a
single node) or learns its cluster's (a cluster member), and stores it the same way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


class UserError(Exception):
    """A mistake on the command line: reported as one line, exit status 1."""


def _dirs_and_node(args: argparse.Namespace) -> tuple[list[Path], int, str]:
    """(log directories, node id, configured cluster.id) from --config / --data-dir."""
    from jocko_py.broker.config import build_config

    if not args.config and not args.data_dir:
        raise UserError(f"storage {args.action}: give --config FILE or --data-dir DIR")
    if args.config and not Path(args.config).exists():
        raise UserError(f"config file {args.config} not found")
    config = build_config(config_file=Path(args.config) if args.config else None,
                          broker_id=args.broker_id, data_dir=args.data_dir)
    return [config.data_dir, *config.extra_log_dirs], config.broker_id, config.cluster_id


def _java_map(d: dict[str, str]) -> str:
    """As Java prints a TreeMap: {a=1, b=2}."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(d.items())) + "}"


def cmd_format(args: argparse.Namespace) -> int:
    from jocko_py.commitlog.dirs import (
        MetaProperties,
        check_cluster_id,
        lock_dirs,
        random_uuid,
        read_meta,
        verify_meta,
        write_meta,
    )

    try:
        check_cluster_id(args.cluster_id)
    except ValueError as e:
        raise UserError(str(e)) from None
    dirs, node_id, configured = _dirs_and_node(args)
    if configured and configured != args.cluster_id:
        raise UserError(f"--cluster-id {args.cluster_id} differs from cluster.id={configured} "
                        "in the configuration")
    with lock_dirs(dirs):  # no broker may run on them meanwhile
        formatted = [d for d in dirs if read_meta(d) is not None]
        if formatted and not args.ignore_formatted:
            raise UserError(f"Log directory {formatted[0]} is already formatted. Use "
                            "--ignore-formatted to ignore this directory and format the others.")
        # the directories left as they are must belong to this cluster and node
        verify_meta(formatted, node_id, args.cluster_id)
        todo = [d for d in dirs if d not in formatted]
        if not todo:
            print("All of the log directories are already formatted.")
            return 0
        for d in todo:
            write_meta(d, MetaProperties(args.cluster_id, node_id, random_uuid()))
            print(f"Formatting {d} with cluster.id {args.cluster_id} and node.id {node_id}.")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from jocko_py.commitlog.dirs import DirectoryError, MetaProperties, read_meta

    dirs, _, _ = _dirs_and_node(args)
    problems: list[str] = []
    found: list[Path] = []
    metas: dict[Path, MetaProperties] = {}
    for d in dirs:
        if not d.exists():
            problems.append(f"{d} does not exist")
            continue
        if not d.is_dir():
            problems.append(f"{d} is not a directory")
            continue
        found.append(d)
        try:
            meta = read_meta(d)
        except DirectoryError as e:
            problems.append(str(e))
            continue
        if meta is None:
            problems.append(f"{d} is not formatted.")
        else:
            metas[d] = meta
    if found:
        print("Found log directory:" if len(found) == 1 else "Found log directories:")
        for d in found:
            print(f"  {d}")
        print()
    for d, meta in metas.items():
        where = "" if len(dirs) == 1 else f" in {d}"
        print(f"Found metadata{where}: {_java_map(meta.as_dict())}")
    if metas:
        print()
    first = next(iter(metas.values()), None)
    for d, meta in metas.items():
        assert first is not None
        if meta.cluster_id != first.cluster_id:
            problems.append(f"{d} has cluster.id {meta.cluster_id}, other directories "
                            f"{first.cluster_id}")
        if meta.node_id != first.node_id:
            problems.append(f"{d} has node.id {meta.node_id}, other directories "
                            f"{first.node_id}")
    if problems:
        print("Found problem:" if len(problems) == 1 else "Found problems:")
        for p in problems:
            print(f"  {p}")
        print()
        return 1
    return 0


def cmd_random_uuid(args: argparse.Namespace) -> int:
    from jocko_py.commitlog.dirs import random_uuid

    print(random_uuid())
    return 0


def cmd_storage(args: argparse.Namespace) -> int:
    """Runs the action; a user's mistake or a directory problem is one line, exit 1."""
    from jocko_py.broker.config import ConfigError
    from jocko_py.commitlog.dirs import DirectoryError

    try:
        return int(args.storage_func(args))
    except (UserError, DirectoryError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
    except OSError as e:
        print(f"error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
    return 1


def add_parser(sub: Any, formatter: type[argparse.HelpFormatter]) -> None:
    s = sub.add_parser(
        "storage", help="format log directories, show their meta.properties (kafka-storage)",
        formatter_class=formatter,
        description="The log directories' identity: cluster.id, node.id and directory.id "
        "in each directory's meta.properties, as Kafka's kafka-storage tool. Formatting is "
        "optional: an unformatted single node makes its cluster id, an unformatted cluster "
        "member learns its cluster's.",
        epilog="""examples:
  jocko-py storage random-uuid
  jocko-py storage format --cluster-id "$(jocko-py storage random-uuid)" --config server.properties
  jocko-py storage format -t q1Sh-9_ISia_zwGINzRvyQ --data-dir /var/lib/jocko --broker-id 1
  jocko-py storage info --data-dir /var/lib/jocko""")
    actions = s.add_subparsers(dest="action", required=True, metavar="ACTION")

    def where(p: argparse.ArgumentParser) -> None:
        p.add_argument("-c", "--config", default=None, metavar="FILE",
                       help="the broker's server.properties (log.dirs, node.id)")
        p.add_argument("--data-dir", default=None, metavar="DIR[,DIR...]",
                       help="the log directories (instead of, or over, log.dirs)")
        p.add_argument("--broker-id", "--node-id", type=int, default=None, metavar="ID",
                       help="the node id (instead of, or over, node.id/broker.id; default 0)")

    f = actions.add_parser("format", help="write meta.properties into every log directory",
                           formatter_class=formatter)
    f.add_argument("-t", "--cluster-id", required=True, metavar="ID",
                   help="the cluster id (from `jocko-py storage random-uuid`)")
    where(f)
    f.add_argument("-g", "--ignore-formatted", action="store_true",
                   help="skip directories already formatted (instead of failing)")
    f.set_defaults(storage_func=cmd_format)

    i = actions.add_parser("info", help="print each log directory's meta.properties",
                           formatter_class=formatter)
    where(i)
    i.set_defaults(storage_func=cmd_info)

    r = actions.add_parser("random-uuid", help="print a new random cluster id",
                           formatter_class=formatter)
    r.set_defaults(storage_func=cmd_random_uuid)
    s.set_defaults(func=cmd_storage)
