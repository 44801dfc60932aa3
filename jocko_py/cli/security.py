"""`jocko-py acl add|list|remove`, `jocko-py user add|list|remove` (SCRAM) and
`jocko-py quota set|list` (client quotas).

ACLs go through CreateAcls / DescribeAcls / DeleteAcls, users through
AlterUserScramCredentials / DescribeUserScramCredentials, quotas through
AlterClientQuotas / DescribeClientQuotas, so they work against any
broker of a cluster (and against Kafka). Passwords are salted here, as Kafka's
tools do: the broker never sees them.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from jocko_py.client import Client, KafkaError

RESOURCE_TYPES = {"topic": 2, "group": 3, "cluster": 4, "transactional-id": 5}
RESOURCE_NAMES = {v: k.upper().replace("-", "_") for k, v in RESOURCE_TYPES.items()}
OPERATIONS = {"ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
              "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
              "IDEMPOTENT_WRITE": 12}
OP_NAMES = {v: k for k, v in OPERATIONS.items()}
PATTERNS = {"literal": 3, "prefixed": 4}
PATTERN_NAMES = {3: "LITERAL", 4: "PREFIXED"}
ANY = 1
SCRAM = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}


def _resource(args: argparse.Namespace) -> tuple[int, str | None]:
    """(resource type, name) of --topic/--group/--cluster/--transactional-id (ANY)."""
    for kind in ("topic", "group", "transactional_id"):
        v = getattr(args, kind)
        if v is not None:
            return RESOURCE_TYPES[kind.replace("_", "-")], v
    if args.cluster:
        return RESOURCE_TYPES["cluster"], "kafka-cluster"
    return ANY, None


def _operation(name: str) -> int:
    key = name.upper().replace("-", "_")
    if key not in OPERATIONS:
        raise SystemExit(f"unknown operation {name!r} (one of {', '.join(OPERATIONS)})")
    return OPERATIONS[key]


def _describe_line(rtype: int, name: str, pattern: int, a: Any) -> str:
    perm = "ALLOW" if a.permission_type == 3 else "DENY"
    return (f"{perm:<5} {a.principal:<20} {OP_NAMES.get(a.operation, a.operation):<16} "
            f"{RESOURCE_NAMES.get(rtype, rtype)}:{name} ({PATTERN_NAMES.get(pattern, pattern)})"
            f" host={a.host}")


def cmd_acl(args: argparse.Namespace) -> int:
    rtype, name = _resource(args)
    pattern = PATTERNS[args.resource_pattern_type]
    with Client(args.bootstrap_server, client_id="jocko-py-acl") as c:
        if args.action == "add":
            if rtype == ANY or not args.principal or not args.operation:
                raise SystemExit("acl add needs --principal, --operation and one of --topic, "
                                 "--group, --cluster, --transactional-id")
            creations = [{"resource_type": rtype, "resource_name": name,
                          "resource_pattern_type": pattern, "principal": p, "host": args.host,
                          "operation": _operation(op), "permission_type": 2 if args.deny else 3}
                         for p in args.principal for op in args.operation]
            r = c.request(30, 3, {"creations": creations})
            bad = [x for x in r.results if x.error_code]
            for x in bad:
                print(f"error: {KafkaError(x.error_code, x.error_message)}", file=sys.stderr)
            if not bad:
                print(f"Added {len(creations)} ACL(s)")
            return 1 if bad else 0
        flt = {"resource_type_filter": rtype, "resource_name_filter": name,
               "pattern_type_filter": pattern if name is not None else ANY,
               "principal_filter": args.principal[0] if args.principal else None,
               "host_filter": None if args.action == "list" else args.host_filter,
               "operation": _operation(args.operation[0]) if args.operation else ANY,
               "permission_type": ANY}
        if args.action == "list":
            r = c.request(29, 3, flt)
            if r.error_code:
                raise KafkaError(r.error_code, r.error_message)
            for res in r.resources:
                for a in res.acls:
                    print(_describe_line(res.resource_type, res.resource_name,
                                         res.pattern_type, a))
            return 0
        r = c.request(31, 3, {"filters": [flt]})
        fr = r.filter_results[0]
        if fr.error_code:
            raise KafkaError(fr.error_code, fr.error_message)
        for m in fr.matching_acls:
            print("Removed " + _describe_line(m.resource_type, m.resource_name,
                                              m.pattern_type, m))
        return 0


def cmd_user(args: argparse.Namespace) -> int:
    from jocko_py.broker.security.scram import salted_password

    with Client(args.bootstrap_server, client_id="jocko-py-user") as c:
        if args.action == "list":
            r = c.request(50, 0, {"users": [{"name": u} for u in args.name] or None})
            if r.error_code:
                raise KafkaError(r.error_code, r.error_message)
            status = 0
            for u in r.results:
                if u.error_code:
                    print(f"error: {u.user}: {KafkaError(u.error_code, u.error_message)}",
                          file=sys.stderr)
                    status = 1
                    continue
                creds = ", ".join(f"{n}=[iterations={i.iterations}]"
                                  for i in u.credential_infos
                                  for n, (m, _) in SCRAM.items() if m == i.mechanism)
                print(f"{u.user}: {creds}")
            return status
        mech_id, hash_name = SCRAM[args.mechanism]
        names = args.name
        if args.action == "add":
            password = args.password or os.environ.get("JOCKO_PASSWORD") or \
                getpass.getpass(f"password for {names[0]}: ")
            body: dict[str, Any] = {"deletions": [], "upsertions": []}
            for n in names:
                salt = os.urandom(32)
                body["upsertions"].append({
                    "name": n, "mechanism": mech_id, "iterations": args.iterations,
                    "salt": salt, "salted_password": salted_password(
                        hash_name, password.encode(), salt, args.iterations)})
        else:
            body = {"deletions": [{"name": n, "mechanism": mech_id} for n in names],
                    "upsertions": []}
        r = c.request(51, 0, body)
        status = 0
        for u in r.results:
            if u.error_code:
                print(f"error: {u.user}: {KafkaError(u.error_code, u.error_message)}",
                      file=sys.stderr)
                status = 1
            else:
                print(f"{'Added' if args.action == 'add' else 'Removed'} {args.mechanism} "
                      f"credential of {u.user}")
        return status


QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
              "controller_mutation_rate")
QUOTA_HELP = {
    "producer_byte_rate": "set: produce bytes per second allowed (enforced)",
    "consumer_byte_rate": "set: fetch bytes per second allowed (enforced)",
    "request_percentage": "set: share of the request thread's time, percent (enforced)",
    "controller_mutation_rate": "set: partitions created or deleted per second (enforced)",
}


def _entity_arg(value: str | None) -> str | None:
    """--user/--client-id value: a name, or `default` for the default entity."""
    return None if value == "<default>" or value == "default" else value


def cmd_quota(args: argparse.Namespace) -> int:
    parts = [(t, v) for t, v in (("user", args.user), ("client-id", args.client_id))
             if v is not None]
    with Client(args.bootstrap_server, client_id="jocko-py-quota") as c:
        if args.action == "set":
            if not parts:
                raise SystemExit("quota set needs --user and/or --client-id")
            ops = [{"key": k, "value": float(getattr(args, k)), "remove": False}
                   for k in QUOTA_KEYS if getattr(args, k) is not None]
            ops += [{"key": k.replace("-", "_"), "value": 0.0, "remove": True}
                    for k in args.remove]
            if not ops:
                raise SystemExit("quota set needs a value (--producer-byte-rate, ...) or "
                                 "--remove KEY")
            r = c.request(49, 1, {"validate_only": False, "entries": [{
                "entity": [{"entity_type": t, "entity_name": _entity_arg(v)} for t, v in parts],
                "ops": ops}]})
            e = r.entries[0]
            if e.error_code:
                raise KafkaError(e.error_code, e.error_message)
            print("Updated quotas of " + ", ".join(f"{t} {v}" for t, v in parts))
            return 0
        r = c.request(48, 1, {"strict": False, "components": [
            {"entity_type": t, "match_type": 1 if _entity_arg(v) is None else 0,
             "match": _entity_arg(v)} for t, v in parts]})
        if r.error_code:
            raise KafkaError(r.error_code, r.error_message)
        for e in r.entries or []:
            who = ", ".join(f"{x.entity_type}={x.entity_name or '<default>'}" for x in e.entity)
            vals = ", ".join(f"{v.key}={v.value:.15g}" for v in e["values"])
            print(f"{who}: {vals}")
        return 0


def add_parsers(sub: Any) -> None:
    a = sub.add_parser("acl", help="manage ACLs (CreateAcls / DescribeAcls / DeleteAcls)")
    a.add_argument("action", choices=["add", "list", "remove"])
    a.add_argument("--bootstrap-server", default="localhost:9092", metavar="HOST:PORT[,...]",
                   help="broker(s) to connect to (default: localhost:9092)")
    a.add_argument("--principal", action="append", default=[],
                   help="e.g. User:alice (repeatable; list/remove: filter)")
    a.add_argument("--operation", action="append", default=[],
                   help=f"one of {', '.join(OPERATIONS)} (repeatable)")
    res = a.add_mutually_exclusive_group()
    res.add_argument("--topic", help="the ACL's resource: a topic name (or prefix)")
    res.add_argument("--group", help="a consumer group id (or prefix)")
    res.add_argument("--transactional-id", help="a transactional id (or prefix)")
    res.add_argument("--cluster", action="store_true", help="the cluster resource")
    a.add_argument("--resource-pattern-type", choices=list(PATTERNS), default="literal",
                   help="how the resource name matches (default: literal)")
    a.add_argument("--deny", action="store_true", help="a DENY ACL (default ALLOW)")
    a.add_argument("--host", default="*", help="client host of the ACL (add; default *)")
    a.add_argument("--host-filter", default=None, help="remove: only ACLs of this host")
    a.set_defaults(func=cmd_acl)

    u = sub.add_parser("user", help="manage SCRAM users (AlterUserScramCredentials)")
    u.add_argument("action", choices=["add", "list", "remove"])
    u.add_argument("name", nargs="*")
    u.add_argument("--bootstrap-server", default="localhost:9092", metavar="HOST:PORT[,...]",
                   help="broker(s) to connect to (default: localhost:9092)")
    u.add_argument("--mechanism", choices=list(SCRAM), default="SCRAM-SHA-256",
                   help="SCRAM mechanism of the credential (default: SCRAM-SHA-256)")
    u.add_argument("--password", default=None,
                   help="add: the password (default: $JOCKO_PASSWORD, else asked)")
    u.add_argument("--iterations", type=int, default=4096,
                   help="add: PBKDF2 iteration count of the salted password (default: 4096)")
    u.set_defaults(func=cmd_user)

    q = sub.add_parser("quota", help="manage client quotas (AlterClientQuotas)")
    q.add_argument("action", choices=["set", "list"])
    q.add_argument("--bootstrap-server", default="localhost:9092", metavar="HOST:PORT[,...]",
                   help="broker(s) to connect to (default: localhost:9092)")
    q.add_argument("--user", default=None, help="a user name, or 'default'")
    q.add_argument("--client-id", default=None, help="a client id, or 'default'")
    for k in QUOTA_KEYS:
        q.add_argument("--" + k.replace("_", "-"), dest=k, type=float, default=None,
                       help=QUOTA_HELP[k])
    q.add_argument("--remove", action="append", default=[], metavar="KEY",
                   help="unset a quota key (repeatable)")
    q.set_defaults(func=cmd_quota)
