"""`jocko-py share-groups list|describe|reset-offsets|delete-offsets|delete`: share groups
(KIP-932) as Kafka 4.4's kafka-share-groups.sh administers them.

`list` asks every broker for its groups of type share (ListGroups v5's type filter);
`describe` shows per partition the share-partition start offset and the group's lag
(DescribeShareGroupOffsets v1), or with `--members` the members and their assignments
(ShareGroupDescribe), or with `--state` the group's state, epoch and coordinator;
`reset-offsets` moves the start offset of an inactive (Empty) group to the earliest or
latest offset, to the first offset at or after a timestamp, or to an explicit offset
(clamped to the log range), through AlterShareGroupOffsets, printing only the plan unless
`--execute` is given; `delete-offsets` forgets a group's state for whole topics
(DeleteShareGroupOffsets); `delete` deletes inactive groups (DeleteGroups).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from jocko_py.admin import GroupAdmin
from jocko_py.client import Client, KafkaError
from jocko_py.protocol.errors import ErrorCode


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


class _Usage(Exception):
    """A user's mistake: one line on stderr, exit status 1."""


def _describe(adm: GroupAdmin, group: str) -> Any:
    try:
        return adm.describe_share_group(group)
    except KafkaError as e:
        if e.code == ErrorCode.GROUP_ID_NOT_FOUND:  # also a group of another type
            raise _Usage(f"share group '{group}' does not exist") from None
        raise


def _assignment(m: Any) -> str:
    return ",".join(f"{tp.topic_name}:{','.join(str(p) for p in sorted(tp.partitions))}"
                    for tp in m.assignment.topic_partitions)


def cmd_list(adm: GroupAdmin, args: argparse.Namespace) -> int:
    groups = adm.list_groups(args.state, types=["share"])
    if args.format == "json":
        print(json.dumps([{"group": g.group_id, "state": g.group_state} for g in groups],
                         indent=2))
    elif args.verbose:
        _table([["GROUP", "STATE"]] + [[g.group_id, g.group_state] for g in groups])
    else:
        for g in groups:
            print(g.group_id)
    return 0


def cmd_describe(adm: GroupAdmin, args: argparse.Namespace) -> int:
    out: list[dict[str, Any]] = []
    for group in args.group:
        g = _describe(adm, group)
        entry: dict[str, Any] = {"group": group, "state": g.group_state,
                                 "group_epoch": g.group_epoch,
                                 "assignment_epoch": g.assignment_epoch,
                                 "members": len(g.members)}
        if args.members:
            entry["members"] = [{"member_id": m.member_id, "client_id": m.client_id,
                                 "host": m.client_host, "member_epoch": m.member_epoch,
                                 "assignment": _assignment(m)} for m in g.members]
        elif not args.state:
            offs = adm.share_offsets(group)
            entry["partitions"] = [{"topic": t, "partition": p, "start_offset": s, "lag": lag}
                                   for (t, p), (s, lag) in sorted(offs.items())]
        if args.format == "json":
            out.append(entry)
            continue
        if args.state:
            coord = adm.find_coordinator(group)
            _table([["GROUP", "COORDINATOR", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH",
                     "#MEMBERS"],
                    [group, coord.addr, g.group_state, str(g.group_epoch),
                     str(g.assignment_epoch), str(len(g.members))]])
        elif args.members:
            if not g.members:
                print(f"Share group '{group}' has no active members.")
            else:
                _table([["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                         "MEMBER-EPOCH", "ASSIGNMENT"]] + [[
                             group, m.member_id, m.client_host, m.client_id,
                             str(sum(len(tp.partitions)
                                     for tp in m.assignment.topic_partitions)),
                             str(m.member_epoch), _assignment(m) or "-"] for m in g.members])
        else:
            rows = [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]]
            for p in entry["partitions"]:
                rows.append([group, p["topic"], str(p["partition"]),
                             "-" if p["start_offset"] < 0 else str(p["start_offset"]),
                             "-" if p["lag"] < 0 else str(p["lag"])])
            if len(rows) == 1:
                print(f"Share group '{group}' has no offsets ({g.group_state}, "
                      f"{len(g.members)} member(s)).")
            else:
                _table(rows)
        if len(args.group) > 1:
            print()
    if args.format == "json":
        print(json.dumps(out, indent=2))
    return 0


def _inactive(adm: GroupAdmin, group: str) -> bool:
    """Refuses a group with members; -> whether the group exists."""
    try:
        g = adm.describe_share_group(group)
    except KafkaError as e:
        if e.code == ErrorCode.GROUP_ID_NOT_FOUND:
            return False  # no such group yet: AlterShareGroupOffsets creates it Empty
        raise
    if g.group_state == "Dead":
        return False
    if g.group_state not in ("Empty", "Dead"):
        raise _Usage(f"share group '{group}' is {g.group_state} with {len(g.members)} "
                     "member(s): stop its consumers first (offsets of an active group "
                     "cannot be changed)")
    return True


def cmd_reset(adm: GroupAdmin, args: argparse.Namespace) -> int:
    group = args.group
    ts: int | None = None
    if args.to_datetime is not None:
        try:
            ts = int(datetime.fromisoformat(args.to_datetime.replace("Z", "+00:00"))
                     .timestamp() * 1000)
        except ValueError:
            raise _Usage(f"--to-datetime: {args.to_datetime!r} is not an ISO-8601 date-time "
                         "(e.g. 2024-05-01T12:00:00+00:00)") from None
    exists = _inactive(adm, group)
    current = ({tp: so for tp, (so, _) in adm.share_offsets(group).items()}
               if exists else {})
    targets: list[tuple[str, int]] = []
    if args.all_topics:
        targets = sorted(current)
        if not targets:
            raise _Usage(f"share group '{group}' has no offsets: name the topics with --topic")
    for spec in args.topic or []:
        name, _, parts = spec.partition(":")
        try:
            ps = [int(x) for x in parts.split(",") if x] if parts else adm.partitions(name)
        except ValueError:
            raise _Usage(f"--topic: {spec!r} is not TOPIC or TOPIC:P,P") from None
        targets += [(name, p) for p in ps]
    plan: dict[tuple[str, int], int] = {}
    ends: dict[tuple[str, int], int] = {}
    for t, p in targets:
        start = adm.offset_for(t, p, -2)
        end = ends[(t, p)] = adm.offset_for(t, p, -1)
        if args.to_earliest:
            new = start
        elif args.to_latest:
            new = end
        elif ts is not None:
            found = adm.offset_for(t, p, ts)
            new = end if found < 0 else found
        else:
            new = min(max(args.to_offset, start), end)
        plan[(t, p)] = new
    rows = [["GROUP", "TOPIC", "PARTITION", "PREVIOUS-START-OFFSET", "NEW-START-OFFSET",
             "LOG-END-OFFSET"]]
    for (t, p), o in sorted(plan.items()):
        prev = current.get((t, p), -1)
        rows.append([group, t, str(p), "-" if prev < 0 else str(prev), str(o),
                     str(ends[(t, p)])])
    _table(rows)
    if not args.execute:
        print("(dry run: add --execute to set these start offsets)")
        return 0
    errors = {tp: e for tp, e in adm.alter_share_offsets(group, plan).items() if e[0]}
    for (t, p), (code, msg) in sorted(errors.items()):
        print(f"error: {t}-{p}: {ErrorCode.of(code).name}{': ' + msg if msg else ''}",
              file=sys.stderr)
    return 1 if errors else 0


def cmd_delete_offsets(adm: GroupAdmin, args: argparse.Namespace) -> int:
    _describe(adm, args.group)
    rc = 0
    for t, (code, msg) in sorted(adm.delete_share_offsets(args.group, args.topic).items()):
        if code:
            print(f"error: {t}: {ErrorCode.of(code).name}{': ' + msg if msg else ''}",
                  file=sys.stderr)
            rc = 1
        else:
            print(f"Deleted the offsets of share group '{args.group}' for topic {t}")
    return rc


def cmd_delete(adm: GroupAdmin, args: argparse.Namespace) -> int:
    rc = 0
    for group in args.group:
        code = adm.delete(group)
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            print(f"error: share group '{group}' does not exist", file=sys.stderr)
            rc = 1
        elif code == ErrorCode.NON_EMPTY_GROUP:
            print(f"error: share group '{group}' has active members: stop its consumers "
                  "first", file=sys.stderr)
            rc = 1
        elif code:
            print(f"error: share group '{group}' not deleted: {ErrorCode.of(code).name}",
                  file=sys.stderr)
            rc = 1
        else:
            print(f"Deleted share group '{group}'")
    return rc


def cmd_share_groups(args: argparse.Namespace) -> int:
    try:
        with Client(args.bootstrap_server, client_id="jocko-py-share-groups") as c:
            adm = GroupAdmin(c)
            fn = {"list": cmd_list, "describe": cmd_describe, "delete": cmd_delete,
                  "reset-offsets": cmd_reset, "delete-offsets": cmd_delete_offsets}[args.action]
            try:
                return fn(adm, args)
            finally:
                adm.close()
    except _Usage as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KafkaError as e:
        if e.code == ErrorCode.UNSUPPORTED_VERSION:
            print(f"error: the broker does not serve share groups ({e})", file=sys.stderr)
        else:
            print(f"error: {e}", file=sys.stderr)
        return 1


def add_parser(sub: Any) -> None:
    g = sub.add_parser("share-groups", help="manage share groups (KIP-932 queues)")
    gs = g.add_subparsers(dest="action", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bootstrap-server", default="localhost:9092",
                       metavar="HOST:PORT[,...]",
                       help="broker(s) to connect to (default: localhost:9092)")
        p.set_defaults(func=cmd_share_groups)

    p = gs.add_parser("list", help="list share groups")
    p.add_argument("--state", action="append", default=None,
                   help="only groups in this state (Empty, Stable); repeatable")
    p.add_argument("-v", "--verbose", action="store_true", help="show the state")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text (default) or JSON for scripts")
    common(p)
    p = gs.add_parser("describe", help="start offsets and lag, members or state")
    p.add_argument("group", nargs="+")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--members", action="store_true",
                      help="the members and their assignments")
    what.add_argument("--state", action="store_true",
                      help="the group's state, epochs and coordinator")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text (default) or JSON for scripts")
    common(p)
    p = gs.add_parser("delete", help="delete inactive share groups and their state")
    p.add_argument("group", nargs="+")
    common(p)
    p = gs.add_parser("delete-offsets", help="forget an inactive group's state of topics")
    p.add_argument("group")
    p.add_argument("--topic", action="append", required=True, help="TOPIC (repeatable)")
    common(p)
    p = gs.add_parser("reset-offsets",
                      help="move an inactive share group's start offsets")
    p.add_argument("group")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", help="TOPIC or TOPIC:P,P (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every topic the group has offsets for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-datetime", metavar="ISO-8601",
                    help="first offset at or after this time, e.g. 2024-05-01T12:00:00+00:00")
    to.add_argument("--to-offset", type=int, metavar="OFFSET",
                    help="this offset, clamped to the partition's range")
    p.add_argument("--execute", action="store_true",
                   help="set the offsets (default: dry run)")
    common(p)
