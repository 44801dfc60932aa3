"""`jocko-py groups list|describe|delete|reset-offsets`: consumer group administration.

Like Kafka's kafka-consumer-groups.sh: `describe` shows per partition the
committed offset, the log end offset, the lag and the owning member;
`reset-offsets` moves a group's committed offsets to the earliest or latest
offset, to the first offset at or after a timestamp, or to an explicit offset
(clamped to the log range). Resetting needs an inactive (Empty) group and only
prints the plan unless `--execute` is given. The plan shows per partition the
previously committed offset, the new offset, the log end offset and the lag
the group will have once the new offset is committed (Kafka's tool prints only
the new offset).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from jocko_py.admin import GroupAdmin, parse_assignment
from jocko_py.client import Client, KafkaError
from jocko_py.protocol.errors import ErrorCode


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _tasks(items: Any) -> str:
    """Streams tasks as Kafka's tool shows them: ``0:[0,1] 1:[2]``."""
    return " ".join(f"{t.subtopology_id}:[{','.join(str(p) for p in t.partitions)}]"
                    for t in items)


def _not_found(group: str) -> None:
    print(f"error: consumer group '{group}' does not exist", file=sys.stderr)


def cmd_list(adm: GroupAdmin, args: argparse.Namespace) -> int:
    # share groups are `jocko-py share-groups list`'s (kafka-consumer-groups does not list them)
    groups = [g for g in adm.list_groups(args.state) if g.group_type != "share"]
    if args.format == "json":
        print(json.dumps([{"group": g.group_id, "state": g.group_state,
                           "protocol_type": g.protocol_type, "type": g.group_type}
                          for g in groups], indent=2))
    elif args.verbose:
        _table([["GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"]] +
               [[g.group_id, g.group_state, g.protocol_type, g.group_type]
                for g in groups])
    else:
        for g in groups:
            print(g.group_id)
    return 0


def cmd_describe(adm: GroupAdmin, args: argparse.Namespace) -> int:
    as_json: list[dict[str, Any]] = []
    rc = 0
    for group in args.group:
        g = adm.describe(group)
        owners: dict[tuple[str, int], Any] = {}
        streams = hasattr(g, "topology")
        kip848 = hasattr(g, "group_epoch") and not streams
        for m in g.members:
            if streams:
                continue
            if kip848:
                for tp in m.assignment.topic_partitions:
                    for p in tp.partitions:
                        owners[(tp.topic_name, p)] = m
                continue
            for t, ps in parse_assignment(bytes(m.member_assignment)).items():
                for p in ps:
                    owners[(t, p)] = m
        committed = adm.committed(group)
        if g.group_state == "Dead" and not g.members and not committed:
            _not_found(group)
            rc = 1
            continue
        keys = sorted(set(committed) | set(owners))
        if args.format == "json":
            parts = []
            for t, p in keys:
                leo = adm.offset_for(t, p, -1)
                cur = committed.get((t, p))
                m = owners.get((t, p))
                parts.append({"topic": t, "partition": p, "current_offset": cur,
                              "log_end_offset": leo,
                              "lag": None if cur is None else max(leo - cur, 0),
                              "consumer_id": m.member_id if m else None,
                              "host": m.client_host if m else None,
                              "client_id": m.client_id if m else None})
            entry: dict[str, Any] = {
                "group": group, "state": g.group_state,
                "type": "streams" if streams else "consumer" if kip848 else "classic",
                "protocol": None if kip848 or streams else (g.protocol_data or None),
                "members": len(g.members), "partitions": parts}
            if streams:
                entry["member_tasks"] = [{
                    "member_id": m.member_id, "process_id": m.process_id,
                    "client_id": m.client_id, "host": m.client_host,
                    "member_epoch": m.member_epoch,
                    "active": _tasks(m.assignment.active_tasks),
                    "standby": _tasks(m.assignment.standby_tasks),
                    "warmup": _tasks(m.assignment.warmup_tasks)} for m in g.members]
            as_json.append(entry)
            continue
        if streams:
            print(f"Group {group}: streams protocol, state {g.group_state}, group epoch "
                  f"{g.group_epoch}, topology epoch "
                  f"{g.topology.epoch if g.topology is not None else '-'}, "
                  f"{len(g.members)} member(s)")
            if g.members:
                _table([["MEMBER-ID", "PROCESS", "CLIENT-ID", "HOST", "EPOCH", "ACTIVE",
                         "STANDBY", "WARMUP"]] + [[
                             m.member_id, m.process_id, m.client_id, m.client_host,
                             str(m.member_epoch), _tasks(m.assignment.active_tasks) or "-",
                             _tasks(m.assignment.standby_tasks) or "-",
                             _tasks(m.assignment.warmup_tasks) or "-"] for m in g.members])
        elif kip848:
            print(f"Group {group}: consumer protocol, state {g.group_state}, group epoch "
                  f"{g.group_epoch}, assignor {g.assignor_name}, {len(g.members)} member(s)")
        else:
            print(f"Group {group}: state {g.group_state}, protocol "
                  f"{g.protocol_data or '-'}, {len(g.members)} member(s)")
        rows = [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                 "CONSUMER-ID", "HOST", "CLIENT-ID"]]
        for t, p in keys:
            leo = adm.offset_for(t, p, -1)
            cur = committed.get((t, p))
            m = owners.get((t, p))
            rows.append([group, t, str(p), "-" if cur is None else str(cur), str(leo),
                         "-" if cur is None else str(max(leo - cur, 0)),
                         m.member_id if m else "-", m.client_host if m else "-",
                         m.client_id if m else "-"])
        _table(rows)
        if len(args.group) > 1:
            print()
    if args.format == "json":
        print(json.dumps(as_json, indent=2))
    return rc


def cmd_delete(adm: GroupAdmin, args: argparse.Namespace) -> int:
    rc = 0
    for group in args.group:
        code = adm.delete(group)
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            _not_found(group)
            rc = 1
        elif code:
            print(f"Group {group} not deleted: {ErrorCode.of(code).name}", file=sys.stderr)
            rc = 1
        else:
            print(f"Deleted group {group}")
    return rc


def _targets(adm: GroupAdmin, args: argparse.Namespace,
             committed: dict[tuple[str, int], int]) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(committed)
    out: list[tuple[str, int]] = []
    for spec in args.topic or []:
        name, _, parts = spec.partition(":")
        ps = [int(x) for x in parts.split(",") if x] if parts else adm.partitions(name)
        out += [(name, p) for p in ps]
    return out


def cmd_reset(adm: GroupAdmin, args: argparse.Namespace) -> int:
    group = args.group
    g = adm.describe(group)
    if args.to_datetime is not None:
        try:
            datetime.fromisoformat(args.to_datetime.replace("Z", "+00:00"))
        except ValueError:
            print(f"error: --to-datetime: {args.to_datetime!r} is not an ISO-8601 date-time "
                  "(e.g. 2024-05-01T12:00:00+00:00)", file=sys.stderr)
            return 1
    if g.group_state not in ("Empty", "Dead"):
        print(f"error: assignments can only be reset if the group '{group}' is inactive, "
              f"but the current state is {g.group_state}.", file=sys.stderr)
        return 1
    committed = adm.committed(group)
    targets = _targets(adm, args, committed)
    if not targets:
        print("error: give --topic TOPIC[:P,P] or --all-topics", file=sys.stderr)
        return 2
    plan: dict[tuple[str, int], int] = {}
    ends: dict[tuple[str, int], int] = {}
    for t, p in targets:
        start = adm.offset_for(t, p, -2)
        end = ends[(t, p)] = adm.offset_for(t, p, -1)
        if args.to_earliest:
            new = start
        elif args.to_latest:
            new = end
        elif args.to_datetime is not None:
            ts = int(datetime.fromisoformat(args.to_datetime.replace("Z", "+00:00"))
                     .timestamp() * 1000)
            found = adm.offset_for(t, p, ts)
            new = end if found < 0 else found
        else:
            new = min(max(args.to_offset, start), end)
        plan[(t, p)] = new
    rows = [["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET",
             "LOG-END-OFFSET", "LAG"]]
    for (t, p), o in sorted(plan.items()):
        prev = committed.get((t, p))
        end = ends[(t, p)]
        rows.append([group, t, str(p), "-" if prev is None else str(prev), str(o), str(end),
                     str(max(end - o, 0))])
    _table(rows)
    if not args.execute:
        print("(dry run: add --execute to commit these offsets)")
        return 0
    errors = {tp: e for tp, e in adm.commit(group, plan).items() if e}
    for (t, p), e in sorted(errors.items()):
        print(f"error: {t}-{p}: {ErrorCode.of(e).name}", file=sys.stderr)
    return 1 if errors else 0


def cmd_groups(args: argparse.Namespace) -> int:
    try:
        with Client(args.bootstrap_server, client_id="jocko-py-groups") as c:
            adm = GroupAdmin(c)
            fn = {"list": cmd_list, "describe": cmd_describe, "delete": cmd_delete,
                  "reset-offsets": cmd_reset}[args.action]
            try:
                return fn(adm, args)
            finally:
                adm.close()
    except KafkaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def add_parser(sub: Any) -> None:
    g = sub.add_parser("groups", help="manage consumer groups")
    gs = g.add_subparsers(dest="action", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bootstrap-server", default="localhost:9092",
                       metavar="HOST:PORT[,...]",
                       help="broker(s) to connect to (default: localhost:9092)")
        p.set_defaults(func=cmd_groups)

    p = gs.add_parser("list", help="list groups")
    p.add_argument("--state", action="append", default=None,
                   help="only groups in this state (Empty, Stable, ...); repeatable")
    p.add_argument("-v", "--verbose", action="store_true", help="show state and type")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text (default) or JSON for scripts")
    common(p)
    p = gs.add_parser("describe", help="offsets, log end offsets, lag and members")
    p.add_argument("group", nargs="+")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text (default) or JSON for scripts")
    common(p)
    p = gs.add_parser("delete", help="delete inactive groups and their offsets")
    p.add_argument("group", nargs="+")
    common(p)
    p = gs.add_parser("reset-offsets", help="move an inactive group's committed offsets")
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
    p.add_argument("--execute", action="store_true", help="commit (default: dry run)")
    common(p)
