"""`jocko-py produce` and `jocko-py consume`: records from stdin to a topic and back.

produce
    Reads stdin line by line. Input formats (`--format`):

    - `text` (default): each line is a record value; with `--key-separator SEP` the
      text before the first SEP is the key (a line without SEP has a null key).
      `--header K=V` (repeatable) adds headers to every record.
    - `json`: each line is one JSON object, every field optional:
      `{"key": "k", "value": "v", "headers": {"h": "x"}, "timestamp": 1714560000000,
      "partition": 2}`. `key`/`value` may be null; `headers` is an object or a list of
      `[name, value]` pairs; `timestamp` is epoch milliseconds or ISO-8601.

    Partitions are chosen as the Java producer does: murmur2 of the key modulo the
    partition count; records without a key stick to one partition per batch, moving
    round-robin between batches; `--partition` forces one. Records are sent in
    batches (one Produce request per leader carrying a batch per partition) when
    `--batch-size` records are buffered, after `--linger-ms` without input, and at the
    end. On a terminal, progress is shown on stderr; a summary line ends it.

consume
    Reads every partition of the topic (or `--partition`s) from `--offset`
    (earliest, latest or a number) until the end offsets the topic had when it started
    (`--follow`: forever), or with `--group` as a member of that consumer group
    (Kafka's classic protocol, range assignment; starts from the group's committed
    offsets, commits what it printed). Output (`--format`): `text` as Kafka's console
    consumer prints it (`--print-key`, `--print-offset`, `--print-partition`,
    `--print-timestamp`, `--print-headers`; a null key prints `null`), or `json`, one
    object per record.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import select
import struct
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from jocko_py.client import Client, KafkaError, partition_for_key
from jocko_py.protocol import records as rb
from jocko_py.protocol.errors import ErrorCode

MAX_BATCH_BYTES = 900 * 1024  # under the broker's default message.max.bytes (1 MB)


class UserError(Exception):
    """A mistake in the command line or its input: reported as one line."""


def parse_time_ms(text: str, what: str) -> int:
    """Epoch milliseconds from a number or an ISO-8601 date-time."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"{what}: {text!r} is not epoch milliseconds or an ISO-8601 "
                        "date-time (e.g. 2024-05-01T12:00:00+00:00)") from None
    return int(dt.timestamp() * 1000)


class Leaders:
    """The topic's partitions and a connection to each partition's leader."""

    def __init__(self, boot: Client, topic: str, auto_create: bool) -> None:
        self.boot = boot
        self.topic = topic
        self.clients: dict[tuple[str, int], Client] = {}
        self.leader_of: dict[int, tuple[str, int]] = {}
        self.refresh(auto_create)

    def refresh(self, auto_create: bool = False) -> None:
        deadline = time.monotonic() + 10
        while True:
            md = self.boot.metadata([self.topic], auto_create=auto_create)
            t = md.topics[0]
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not auto_create:
                raise UserError(f"topic {self.topic!r} does not exist")
            brokers = {b.node_id: (b.host, b.port) for b in md.brokers}
            leader_of = {p.partition_index: brokers[p.leader_id] for p in t.partitions
                         if p.leader_id in brokers}
            if not t.error_code and leader_of and len(leader_of) == len(t.partitions):
                self.leader_of = leader_of
                return
            if time.monotonic() > deadline:
                raise KafkaError(t.error_code or ErrorCode.LEADER_NOT_AVAILABLE,
                                 f"topic {self.topic}")
            time.sleep(0.1)

    @property
    def partitions(self) -> list[int]:
        return sorted(self.leader_of)

    def client(self, addr: tuple[str, int]) -> Client:
        c = self.clients.get(addr)
        if c is None:
            c = self.clients[addr] = Client(f"{addr[0]}:{addr[1]}", self.boot.client_id,
                                            self.boot.timeout)
        return c

    def by_leader(self, partitions: list[int]) -> dict[tuple[str, int], list[int]]:
        out: dict[tuple[str, int], list[int]] = {}
        for p in partitions:
            out.setdefault(self.leader_of[p], []).append(p)
        return out

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


# ------------------------------------------------------------------------ produce


def _lines(linger_s: float) -> Iterator[str | None]:
    """Lines of stdin; None when no input came for ``linger_s`` (time to send)."""
    fd = sys.stdin.fileno()
    buf = b""
    while True:
        if linger_s > 0:
            ready, _, _ = select.select([fd], [], [], linger_s)
            if not ready:
                yield None
                continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", errors="surrogateescape")
    if buf:
        yield buf.decode("utf-8", errors="surrogateescape")


def _bytes(v: Any, what: str, lineno: int) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode("utf-8", errors="surrogateescape")
    if isinstance(v, dict | list | int | float | bool):
        return json.dumps(v).encode()
    raise UserError(f"line {lineno}: {what} must be a string, JSON or null")


def parse_line(line: str, lineno: int, args: argparse.Namespace,
               headers: list[tuple[str, bytes | None]]
               ) -> tuple[int | None, rb.NewRecord]:
    """(explicit partition or None, record) from one input line."""
    if args.format == "json":
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"line {lineno}: not a JSON object: {e.msg}") from None
        if not isinstance(obj, dict):
            raise UserError(f"line {lineno}: not a JSON object")
        unknown = set(obj) - {"key", "value", "headers", "timestamp", "partition"}
        if unknown:
            raise UserError(f"line {lineno}: unknown field(s) {sorted(unknown)}; expected "
                            "key, value, headers, timestamp, partition")
        hs = obj.get("headers") or {}
        pairs = list(hs.items()) if isinstance(hs, dict) else hs
        try:
            hdrs = headers + [(str(k), _bytes(v, "a header value", lineno)) for k, v in pairs]
        except (TypeError, ValueError):
            raise UserError(f"line {lineno}: headers must be an object or a list of "
                            "[name, value] pairs") from None
        ts = obj.get("timestamp")
        stamp = None if ts is None else parse_time_ms(str(ts), f"line {lineno}: timestamp")
        part = obj.get("partition")
        if part is not None and not isinstance(part, int):
            raise UserError(f"line {lineno}: partition must be an integer")
        return part, rb.NewRecord(_bytes(obj.get("key"), "key", lineno),
                                  _bytes(obj.get("value"), "value", lineno), hdrs, stamp)
    key: bytes | None = None
    if args.key_separator and args.key_separator in line:
        k, line = line.split(args.key_separator, 1)
        key = k.encode("utf-8", errors="surrogateescape")
    return None, rb.NewRecord(key, line.encode("utf-8", errors="surrogateescape"), headers,
                              None)


class Producer:
    def __init__(self, leaders: Leaders, acks: int, batch_size: int) -> None:
        self.leaders = leaders
        self.acks = acks
        self.batch_size = batch_size
        self.buffer: dict[int, list[rb.NewRecord]] = {}
        self.buffered = 0
        self.buffered_bytes = 0
        self.sent = 0
        self.per_partition: dict[int, int] = {}
        self._sticky = itertools.cycle(leaders.partitions)
        self.sticky = next(self._sticky)

    def add(self, partition: int | None, rec: rb.NewRecord) -> None:
        n = len(self.leaders.partitions)
        if partition is None:
            partition = partition_for_key(rec.key, n) if rec.key is not None else self.sticky
        elif partition not in self.leaders.leader_of:
            raise UserError(f"partition {partition} does not exist: {self.leaders.topic} "
                            f"has partitions 0-{n - 1}")
        self.buffer.setdefault(partition, []).append(rec)
        self.buffered += 1
        self.buffered_bytes += len(rec.value or b"") + len(rec.key or b"") + 20
        if self.buffered >= self.batch_size or self.buffered_bytes >= MAX_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        buffer, self.buffer = self.buffer, {}
        self.buffered = self.buffered_bytes = 0
        self.sticky = next(self._sticky)
        for addr, parts in self.leaders.by_leader(sorted(buffer)).items():
            batches = {p: rb.build_batch(buffer[p]) for p in parts}
            results = self.leaders.client(addr).produce_batches(
                self.leaders.topic, batches, self.acks)
            for p, (err, _, msg) in results.items():
                if err:
                    raise KafkaError(err, msg or f"{self.leaders.topic}-{p}")
                self.sent += len(buffer[p])
                self.per_partition[p] = self.per_partition.get(p, 0) + len(buffer[p])


def cmd_produce(args: argparse.Namespace) -> int:
    headers: list[tuple[str, bytes | None]] = []
    for h in args.header:
        name, sep, value = h.partition("=")
        if not sep or not name:
            raise UserError(f"--header expects NAME=VALUE, got {h!r}")
        headers.append((name, value.encode()))
    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    with Client(args.bootstrap_server) as boot:
        leaders = Leaders(boot, args.topic, auto_create=True)
        try:
            if args.partition is not None and args.partition not in leaders.leader_of:
                raise UserError(f"partition {args.partition} does not exist: {args.topic} "
                                f"has partitions 0-{len(leaders.partitions) - 1}")
            prod = Producer(leaders, args.acks, args.batch_size)
            t0 = last = time.monotonic()
            shown = 0  # width of the progress line on screen
            for lineno, line in enumerate(_lines(args.linger_ms / 1000), 1):
                if line is None:
                    prod.flush()
                    continue
                part, rec = parse_line(line, lineno, args, headers)
                prod.add(args.partition if args.partition is not None else part, rec)
                if progress and time.monotonic() - last > 0.5:
                    last = time.monotonic()
                    line_ = (f"{prod.sent + prod.buffered} records "
                             f"({(prod.sent + prod.buffered) / (last - t0):.0f}/s)")
                    print(f"\r{line_}", end="", file=sys.stderr, flush=True)
                    shown = len(line_)
            prod.flush()
        finally:
            leaders.close()
    if progress and shown:
        print("\r" + " " * shown + "\r", end="", file=sys.stderr)
    parts = ",".join(str(p) for p in sorted(prod.per_partition)) or "-"
    print(f"produced {prod.sent} records to {args.topic} (partitions {parts})",
          file=sys.stderr)
    return 0


# ------------------------------------------------------------------------ consume


def _consumer_subscription(topic: str) -> bytes:
    t = topic.encode()
    return struct.pack(">hih", 0, 1, len(t)) + t + struct.pack(">i", -1)


def _assignment(assigned: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(assigned))
    for topic, parts in assigned.items():
        t = topic.encode()
        out += struct.pack(">h", len(t)) + t + struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return out + struct.pack(">i", -1)


class GroupMember:
    """A classic-protocol group member (one topic, range assignment) on a blocking client."""

    SESSION_TIMEOUT_MS = 10000
    REBALANCE_TIMEOUT_MS = 30000
    HEARTBEAT_S = 3.0

    def __init__(self, boot: Client, group: str, topic: str, partitions: list[int]) -> None:
        self.group = group
        self.topic = topic
        self.all_partitions = partitions
        deadline = time.monotonic() + 15
        while True:  # the offsets topic may still be coming up: retry as clients do
            r = boot.request(10, 3, {"key": group, "key_type": 0})
            if r.error_code not in (ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if r.error_code:
            raise KafkaError(r.error_code, r.error_message or f"coordinator of {group}")
        self.coord = Client(f"{r.host}:{r.port}", boot.client_id, boot.timeout)
        self.member_id = ""
        self.generation = -1
        self.assigned: list[int] = []
        self.last_heartbeat = 0.0

    def join(self) -> list[int]:
        while True:
            r = self.coord.request(11, 5, {
                "group_id": self.group, "session_timeout_ms": self.SESSION_TIMEOUT_MS,
                "rebalance_timeout_ms": self.REBALANCE_TIMEOUT_MS,
                "member_id": self.member_id, "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range",
                               "metadata": _consumer_subscription(self.topic)}]})
            if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = r.member_id
                continue
            if r.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if r.error_code:
                raise KafkaError(r.error_code, f"joining group {self.group}")
            self.member_id = r.member_id
            self.generation = r.generation_id
            assignments = []
            if r.leader == r.member_id:  # range assignment over the members, sorted
                members = sorted(m.member_id for m in r.members)
                n, k = len(self.all_partitions), len(members)
                start = 0
                for i, mid in enumerate(members):
                    count = n // k + (1 if i < n % k else 0)
                    assignments.append({"member_id": mid, "assignment": _assignment(
                        {self.topic: self.all_partitions[start:start + count]})})
                    start += count
            s = self.coord.request(14, 3, {
                "group_id": self.group, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": None,
                "assignments": assignments})
            if s.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if s.error_code:
                raise KafkaError(s.error_code, f"syncing group {self.group}")
            from jocko_py.admin import parse_assignment

            self.assigned = sorted(parse_assignment(bytes(s.assignment)).get(self.topic, []))
            self.last_heartbeat = time.monotonic()
            return self.assigned

    def heartbeat_due(self) -> bool:
        """Heartbeat if it is time; True when the group is rebalancing (join again)."""
        if time.monotonic() - self.last_heartbeat < self.HEARTBEAT_S:
            return False
        self.last_heartbeat = time.monotonic()
        r = self.coord.request(12, 3, {"group_id": self.group, "generation_id": self.generation,
                                       "member_id": self.member_id,
                                       "group_instance_id": None})
        if r.error_code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID,
                            ErrorCode.ILLEGAL_GENERATION):
            if r.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            return True
        if r.error_code:
            raise KafkaError(r.error_code, f"heartbeat to group {self.group}")
        return False

    def committed(self) -> dict[int, int]:
        r = self.coord.request(9, 8, {"groups": [{"group_id": self.group, "topics": None}],
                                      "require_stable": False})
        g = r.groups[0]
        if g.error_code:
            raise KafkaError(g.error_code, f"offsets of group {self.group}")
        return {p.partition_index: p.committed_offset for t in g.topics if t.name == self.topic
                for p in t.partitions if p.committed_offset >= 0}

    def commit(self, offsets: dict[int, int]) -> None:
        if not offsets:
            return
        r = self.coord.request(8, 8, {
            "group_id": self.group, "generation_id_or_member_epoch": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
            "topics": [{"name": self.topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p, o in sorted(offsets.items())]}]})
        for t in r.topics:
            for p in t.partitions:
                if p.error_code not in (0, ErrorCode.REBALANCE_IN_PROGRESS,
                                        ErrorCode.ILLEGAL_GENERATION):
                    raise KafkaError(p.error_code, f"committing {self.topic}-{p.partition_index}")

    def leave(self) -> None:
        """LeaveGroup, best effort, on a new connection: an interrupted request (Ctrl-C
        while joining) may still have its answer in flight on the old one."""
        self.coord.close()
        if not self.member_id:
            return
        try:
            with Client(self.coord.bootstrap, self.coord.client_id,
                        min(self.coord.timeout, 5.0), self.coord.config) as c:
                c.request(13, 3, {"group_id": self.group, "members": [
                    {"member_id": self.member_id, "group_instance_id": None}]})
        except (OSError, ConnectionError, KafkaError):
            pass


def _text(b: bytes | None) -> str:
    return "null" if b is None else b.decode("utf-8", errors="replace")


def format_record(args: argparse.Namespace, partition: int, rec: rb.Record) -> str:
    if args.format == "json":
        def enc(b: bytes | None) -> str | None:
            if b is None:
                return None
            if args.encoding == "base64":
                return base64.b64encode(b).decode()
            if args.encoding == "hex":
                return b.hex()
            return b.decode("utf-8", errors="replace")
        return json.dumps({"topic": args.topic, "partition": partition, "offset": rec.offset,
                           "timestamp": rec.timestamp, "key": enc(rec.key),
                           "value": enc(rec.value),
                           "headers": [[k, enc(v)] for k, v in rec.headers]},
                          ensure_ascii=False)
    sep: str = args.key_separator
    parts: list[str] = []
    if args.print_timestamp:
        parts.append(f"CreateTime:{rec.timestamp}")
    if args.print_partition:
        parts.append(f"Partition:{partition}")
    if args.print_offset:
        parts.append(f"Offset:{rec.offset}")
    if args.print_headers:
        parts.append(",".join(f"{k}:{_text(v)}" for k, v in rec.headers) or "NO_HEADERS")
    if args.print_key:
        parts.append(_text(rec.key))
    parts.append(_text(rec.value))
    return sep.join(parts)


def visible_batches(data: memoryview, aborted: list[Any] | None) -> set[int]:
    """Positions of the batches a consumer never shows: control batches (transaction
    markers) always; with ``aborted`` (read_committed: the Fetch answer's aborted
    transactions) the batches of aborted transactions, as Kafka's consumer drops them: a
    producer's transactional batches are skipped from the aborted transaction's first
    offset until its abort marker."""
    skip: set[int] = set()
    pending = sorted(((a.first_offset, a.producer_id) for a in aborted or ()), reverse=True)
    aborting: set[int] = set()
    for pos, h in rb.iter_batches(data, validate_crc=False, allow_partial_tail=True):
        while pending and pending[-1][0] <= h.base_offset + h.last_offset_delta:
            aborting.add(pending.pop()[1])
        if h.is_control:
            skip.add(pos)
            if h.producer_id in aborting:
                ctype, _ = rb.control_marker(data[pos:pos + h.size], h)
                if ctype == rb.ControlType.ABORT:
                    aborting.discard(h.producer_id)
        elif aborted is not None and h.is_transactional and h.producer_id in aborting:
            skip.add(pos)
    return skip


def _start_offsets(leaders: Leaders, partitions: list[int], spec: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for p in partitions:
        c = leaders.client(leaders.leader_of[p])
        if spec in ("earliest", "beginning", "-2"):
            out[p] = c.list_offset(leaders.topic, p, -2)[0]
        elif spec in ("latest", "end", "-1"):
            out[p] = c.list_offset(leaders.topic, p, -1)[0]
        else:
            out[p] = int(spec)
    return out


def _end_offsets(leaders: Leaders, partitions: list[int]) -> dict[int, int]:
    return {p: leaders.client(leaders.leader_of[p]).list_offset(leaders.topic, p, -1)[0]
            for p in partitions}


def cmd_consume(args: argparse.Namespace) -> int:
    spec = str(args.offset).lower()
    if spec not in ("earliest", "beginning", "latest", "end", "-1", "-2") \
            and not spec.isdigit():
        raise UserError(f"--offset: {args.offset!r} is not earliest, latest or an offset")
    with Client(args.bootstrap_server) as boot:
        leaders = Leaders(boot, args.topic, auto_create=False)
        member: GroupMember | None = None
        try:
            wanted = sorted(set(args.partition)) if args.partition else leaders.partitions
            for p in wanted:
                if p not in leaders.leader_of:
                    raise UserError(f"partition {p} does not exist: {args.topic} has "
                                    f"partitions 0-{len(leaders.partitions) - 1}")
            if args.group:
                member = GroupMember(boot, args.group, args.topic, leaders.partitions)
            return _consume_loop(args, leaders, member, wanted, spec)
        finally:
            if member is not None:
                member.leave()
            leaders.close()


def _consume_loop(args: argparse.Namespace, leaders: Leaders, member: GroupMember | None,
                  wanted: list[int], spec: str) -> int:
    def assign() -> tuple[dict[int, int], dict[int, int]]:
        parts = member.join() if member is not None else wanted
        positions = _start_offsets(leaders, parts, spec)
        if member is not None:
            positions.update({p: o for p, o in member.committed().items() if p in positions})
        return positions, _end_offsets(leaders, parts)

    read_committed = args.isolation_level == "read_committed"
    positions, ends = assign()
    uncommitted: dict[int, int] = {}
    seen = 0
    idle_deadline = time.monotonic() + args.timeout
    out = sys.stdout
    while args.max_messages < 0 or seen < args.max_messages:
        if not args.follow and all(positions[p] >= ends[p] for p in positions):
            break
        got = False
        for addr, parts in leaders.by_leader(sorted(positions)).items():
            resps = leaders.client(addr).fetch_partitions(
                args.topic, {p: positions[p] for p in parts}, max_wait_ms=500,
                isolation_level=1 if read_committed else 0)
            for pr in resps:
                p = pr.partition_index
                if pr.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    positions[p] = _start_offsets(leaders, [p], "earliest")[p]
                    continue
                if pr.error_code:
                    raise KafkaError(pr.error_code, f"{args.topic}-{p}")
                data = memoryview(pr.records or b"")
                skip = visible_batches(data, pr.aborted_transactions if read_committed else None)
                for pos, h in rb.iter_batches(data, validate_crc=True, allow_partial_tail=True):
                    if pos in skip:  # a transaction marker, or (read_committed) aborted data
                        positions[p] = max(positions[p], h.next_offset)
                        continue
                    for rec in rb.decode_records(data[pos:pos + h.size]):
                        if rec.offset < positions[p]:
                            continue
                        if 0 <= args.max_messages <= seen:
                            break
                        out.write(format_record(args, p, rec) + "\n")
                        positions[p] = rec.offset + 1
                        uncommitted[p] = rec.offset + 1
                        seen += 1
                        got = True
                    else:
                        positions[p] = max(positions[p], h.next_offset)
                        continue
                    break
        out.flush()
        if member is not None:
            member.commit(uncommitted)
            uncommitted = {}
            if member.heartbeat_due():
                positions, ends = assign()
        if got:
            idle_deadline = time.monotonic() + args.timeout
        elif not args.follow and time.monotonic() > idle_deadline:
            break
    return 0


def add_parsers(sub: Any, epilog_formatter: type[argparse.HelpFormatter]) -> None:
    p = sub.add_parser(
        "produce", help="produce lines of stdin as records",
        formatter_class=epilog_formatter,
        description="Produce each line of stdin as a record (keys, headers and timestamps "
        "from the --format json input, or a key before --key-separator).",
        epilog="""examples:
  printf 'hello\\nworld\\n' | jocko-py produce greetings
  printf 'user1:login\\nuser2:logout\\n' | jocko-py produce events --key-separator :
  echo '{"key": "u1", "value": "x", "headers": {"source": "cli"}, "timestamp": "2024-05-01T12:00:00Z"}' \\
      | jocko-py produce events --format json
  seq 1000000 | jocko-py produce numbers --acks 1 --batch-size 5000""")
    p.add_argument("topic")
    p.add_argument("--bootstrap-server", default="localhost:9092", metavar="HOST:PORT[,...]",
                   help="broker(s) to connect to (default: localhost:9092)")
    p.add_argument("--partition", type=int, default=None,
                   help="send every record to this partition (default: murmur2 of the key "
                   "as the Java producer; records without a key fill one partition per "
                   "batch, round-robin)")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="input lines: text values (default) or JSON objects with key, "
                   "value, headers, timestamp, partition")
    p.add_argument("--key-separator", default=None, metavar="SEP",
                   help="text format: the key is what precedes the first SEP "
                   "(default: no keys)")
    p.add_argument("--header", action="append", default=[], metavar="NAME=VALUE",
                   help="add this header to every record (repeatable)")
    p.add_argument("--acks", type=int, choices=[-1, 0, 1], default=-1,
                   help="-1 all in-sync replicas (default), 1 the leader, 0 none")
    p.add_argument("--batch-size", type=int, default=1000, metavar="RECORDS",
                   help="send once this many records are buffered (default: 1000; also "
                   "at 900 KiB)")
    p.add_argument("--linger-ms", type=int, default=100, metavar="MS",
                   help="send what is buffered after this many ms without input "
                   "(default: 100)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show progress on stderr (default: when stderr is a terminal)")
    p.set_defaults(func=cmd_produce)

    c = sub.add_parser(
        "consume", help="print the records of a topic",
        formatter_class=epilog_formatter,
        description="Print the records of every partition of a topic (or of the given "
        "partitions, or of the partitions a consumer group assigns), then stop at the "
        "end offsets the topic had at start (--follow: keep waiting for new records).",
        epilog="""examples:
  jocko-py consume orders                               # all partitions, from the start
  jocko-py consume orders --print-key --print-offset    # Offset:3<TAB>key<TAB>value
  jocko-py consume orders --group billing --follow      # as a group member, committing
  jocko-py consume orders --partition 2 --offset 1000 --max-messages 10
  jocko-py consume orders --format json | jq .value""")
    c.add_argument("topic")
    c.add_argument("--bootstrap-server", default="localhost:9092", metavar="HOST:PORT[,...]",
                   help="broker(s) to connect to (default: localhost:9092)")
    c.add_argument("--partition", type=int, action="append", default=None,
                   help="read only this partition (repeatable; default: all)")
    c.add_argument("--group", default=None,
                   help="consume as a member of this consumer group: partitions assigned "
                   "by the group, start from its committed offsets, commit what is printed")
    c.add_argument("--offset", default="earliest", metavar="WHERE",
                   help="where to start: earliest (default), latest, or an offset; with "
                   "--group, only where the group has no committed offset")
    c.add_argument("--from-beginning", dest="offset", action="store_const", const="earliest",
                   help="the same as --offset earliest (the name Kafka's console consumer "
                   "uses)")
    c.add_argument("--follow", "-f", action="store_true",
                   help="keep waiting for new records (stop with Ctrl-C)")
    c.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                   default="read_uncommitted",
                   help="read_committed: only committed transactional records, up to the "
                   "last stable offset (default read_uncommitted, as Kafka's console "
                   "consumer); transaction markers are never printed")
    c.add_argument("--max-messages", type=int, default=-1, metavar="N",
                   help="stop after N records (default: no limit)")
    c.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="without --follow, stop after this long without a new record even "
                   "if the end was not reached (default: 10)")
    c.add_argument("--format", choices=["text", "json"], default="text",
                   help="text as Kafka's console consumer (default), or one JSON object "
                   "per record (topic, partition, offset, timestamp, key, value, headers)")
    c.add_argument("--encoding", choices=["text", "hex", "base64"], default="text",
                   help="json format: how keys, values and headers are written "
                   "(default: text, UTF-8)")
    for what in ("key", "offset", "partition", "timestamp", "headers"):
        c.add_argument(f"--print-{what}", action="store_true",
                       help=f"text format: print the {what} before the value"
                       + (" (null for a null key)" if what == "key" else ""))
    c.add_argument("--key-separator", default="\t", metavar="SEP",
                   help="text format: between the printed fields (default: a tab)")
    c.set_defaults(func=cmd_consume)


