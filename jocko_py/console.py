"""The built-in web console: server-rendered HTML pages on `--console-addr`.

Owns the console's pages and actions (no JavaScript; plain links and forms):

- `/` overview: cluster id, controller, brokers (address, rack, fenced, partitions
  led), topics, partitions, under-replicated partitions;
- `/cluster`: this broker's versions, uptime, log directories (state, log bytes, the
  filesystem's size/used/free), throughput (its byte counters sampled every SAMPLE_S)
  and the metadata quorum (DescribeQuorum; a single node says it has none);
- `/topics`: partitions, replication, under-replicated, size on this broker, retention;
  create and delete; `/topics/<t>`: per partition leader, ISR, replicas, log start, high
  watermark, log end and size, the topic's configs;
- `/topics/<t>/messages`: the message browser: one partition or all merged by
  timestamp, newest or oldest first, pages with per-partition offset cursors
  (`before=`/`after=`), from an offset or a time, a search of keys/values/headers that
  reads at most `scan` records per page, a live tail (the newest page reloading); keys,
  headers and values as text, JSON or hex. Bounded: at most MAX_PAGE records shown,
  MAX_SCAN read, READ_BUDGET bytes fetched per page;
- `/groups`: state, members, partitions, total lag; `/groups/<g>`: members and their
  assignment, and per partition committed or assigned (classic and KIP-848 groups, as
  `kafka-consumer-groups --describe` lists them) the committed offset, log start, log
  end, lag ("-" without a commit, as Kafka's tool) and owner; the total lag counts an
  uncommitted assigned partition's records from its log start; offset reset (earliest
  or latest) for an inactive group;
- `/produce`: one record (key, value, headers) for testing.

Every page but the produce form offers auto-refresh (`?refresh=N`, a meta refresh; off
by default). What does not exist (topic, partition, group, page) is a 404.

Cluster and topic pages read this broker's metadata image and partitions (sizes and
offsets of the replicas it hosts). Group pages, the message browser and every action go
through Kafka's own APIs with the project's blocking client (coordinators and leaders
wherever they are), run in a worker thread against this broker's inter-broker listener
with the broker's own credentials (`sasl.mechanism.inter.broker.protocol` and its JAAS
`username`/`password`, its keystore and truststore), so they behave as for any client.
`jocko.console.read.only=true` hides and refuses every action (403).

Access (broker/security/http_access.py): TLS and authentication (`jocko.console.auth`;
HTTP Basic against the broker's SCRAM and PLAIN users, or mutual TLS); once any
listener is SSL or SASL, authentication is required and the console is read-only
unless `jocko.console.read.only=false` is set. Authorization: with an authorizer
(`authorizer.class.name`), the signed-in principal's ACLs decide, as for the Kafka
request each page or action stands for: CREATE on the cluster or the topic to create
a topic, DELETE on the topic to delete it, WRITE on the topic to produce (and CREATE
if it does not exist yet), READ on the group and on its topics to reset offsets, READ
on the topic to browse messages, DESCRIBE on a topic or group to see it. Without an
authorizer every authenticated principal may do everything.

Forgery: every form carries a token (an HMAC of the signed-in principal under a key
made at start-up) and every POST must: another site's page cannot post to the console
through an operator's browser, even one holding the operator's Basic credentials.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import hashlib
import heapq
import hmac
import html
import json
import logging
import os
import platform
import re
import secrets
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from jocko_py.broker.http import HttpServer, Request, Response
from jocko_py.broker.security.authz import CLUSTER, CLUSTER_NAME, GROUP, OPERATIONS, TOPIC
from jocko_py.broker.security.http_access import HttpAccess, console_read_only
from jocko_py.broker.security.session import ANONYMOUS

if TYPE_CHECKING:
    from jocko_py.broker.config import BrokerConfig
    from jocko_py.broker.replica_manager import ReplicaManager
    from jocko_py.broker.security.session import SecurityManager
    from jocko_py.broker.stats import BrokerStats
    from jocko_py.cluster.metadata import MetadataImage
    from jocko_py.cluster.quorum import MetadataQuorum
    from jocko_py.commitlog.config import LogConfig

log = logging.getLogger("jocko_py.console")


class ConsoleHost(Protocol):
    """What the console shows and uses of its broker (it changes nothing but through
    the Kafka protocol, as a client)."""

    @property
    def broker_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def controller_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def log_config(self) -> LogConfig: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def quorum(self) -> MetadataQuorum: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def security(self) -> SecurityManager: ...

    @property
    def stats(self) -> BrokerStats: ...

_POST_FORM = re.compile(r"<form[^>]*method=['\"]post['\"][^>]*>")
# the request being served (each connection is its own task): its principal and peer
_REQUEST: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
    "console_request", default=None)


class Denied(Exception):
    """The signed-in principal may not do this (answered 403)."""


CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
header{background:#1f3a5f;color:#fff;padding:.6em 1em}
header a{color:#fff;margin-right:1.2em;text-decoration:none;font-weight:600}
main{padding:1em}
table{border-collapse:collapse;margin:.5em 0 1.2em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:.92em}
th{background:#eef2f7}
.bad{color:#b00020;font-weight:600}.ok{color:#1b7f3b}
form.inline{display:inline}
code,pre{font-family:ui-monospace,monospace;font-size:.9em}
.note{color:#555;font-size:.9em}
.msg{padding:.5em;background:#fff7d6;border:1px solid #e5c100}
header .refresh{float:right;font-size:.85em}
header .refresh a{margin:0 0 0 .5em;font-weight:400}
header .refresh b{margin-left:.5em}
.pager a{margin-right:1.2em}
"""


def esc(v: object) -> str:
    return html.escape("" if v is None else str(v))


def fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def fmt_duration(s: int) -> str:
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return " ".join(f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (s, "s"))
                    if v or u == "s")


def jocko_version() -> str:
    """The installed jocko-py's version."""
    try:
        from importlib.metadata import version

        return version("jocko-py")
    except Exception:
        return "unknown"


def table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table>{f'<tr>{head}</tr>' if any(headers) else ''}{body}</table>"


def render_value(b: bytes | None, how: str) -> str:
    if b is None:
        return "<i>null</i>"
    if how == "hex":
        return f"<code>{b.hex()}</code>"
    text = b.decode("utf-8", errors="replace")
    if how == "json":
        try:
            return f"<pre>{esc(json.dumps(json.loads(text), indent=2))}</pre>"
        except ValueError:
            pass
    return f"<code>{esc(text)}</code>"


def lag_chart(values: list[tuple[str, int]]) -> str:
    """An inline SVG bar chart of unread records per partition."""
    if not values:
        return ""
    top = max(v for _, v in values) or 1
    bar_w = max(28, 6 * max(len(label) for label, _ in values))
    gap, h = 8, 120
    bars = []
    for i, (label, v) in enumerate(values):
        bh = int(h * v / top)
        x = i * (bar_w + gap)
        bars.append(f'<rect x="{x}" y="{h - bh}" width="{bar_w}" height="{bh}" fill="#3b6ea5">'
                    f'<title>{esc(label)}: {v}</title></rect>'
                    f'<text x="{x + bar_w // 2}" y="{h + 14}" font-size="10" '
                    f'text-anchor="middle">{esc(label)}</text>'
                    f'<text x="{x + bar_w // 2}" y="{max(10, h - bh - 3)}" font-size="10" '
                    f'text-anchor="middle">{v}</text>')
    width = len(values) * (bar_w + gap)
    return (f'<svg class="lag-chart" width="{width}" height="{h + 20}" role="img" '
            f'aria-label="unread records per partition">{"".join(bars)}</svg>')


# -- reading through Kafka's APIs (in the console's worker thread) ----------------------

# the message browser's bounds: records per page, records a search reads per page,
# bytes one page may fetch in all
MAX_PAGE = 500
DEFAULT_SCAN = 10_000
MAX_SCAN = 100_000
READ_BUDGET = 32 << 20
REFRESH_CHOICES = (2, 5, 10, 30, 60)
SAMPLE_S = 5.0


class Leaders:
    """Connections to partitions' leaders (``c`` itself where it is the leader), from
    one Metadata answer for the topics asked about."""

    def __init__(self, c: Any, topics: list[str]) -> None:
        self.c = c
        self.others: dict[str, Any] = {}
        md = c.metadata(sorted(set(topics)))
        addr = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
        self.leader: dict[tuple[str, int], str] = {}
        self.partitions: dict[str, list[int]] = {}
        for t in md.topics:
            if t.error_code:
                continue
            self.partitions[t.name] = sorted(p.partition_index for p in t.partitions)
            for p in t.partitions:
                if p.leader_id in addr:
                    self.leader[(t.name, p.partition_index)] = addr[p.leader_id]

    def to(self, addr: str) -> Any:
        from jocko_py.client import Client

        peer = self.c.sock.getpeername()[:2]
        if addr in (f"{peer[0]}:{peer[1]}", self.c.bootstrap):
            return self.c
        if addr not in self.others:
            self.others[addr] = Client(addr, self.c.client_id, self.c.timeout, self.c.config,
                                       self.c.ssl_context)
        return self.others[addr]

    def close(self) -> None:
        for o in self.others.values():
            o.close()

    def list_offsets(self, tps: Any, timestamp: int | dict[tuple[str, int], int]
                     ) -> dict[tuple[str, int], int]:
        """ListOffsets, one request per leader: (topic, partition) -> offset (-1: none at
        or after the timestamp); partitions without a leader or with an error are left
        out."""
        by_leader: dict[str, dict[str, list[int]]] = {}
        for t, p in tps:
            if (t, p) in self.leader:
                by_leader.setdefault(self.leader[(t, p)], {}).setdefault(t, []).append(p)
        out: dict[tuple[str, int], int] = {}
        for addr, topics in by_leader.items():
            r = self.to(addr).request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "timestamp": (
                    timestamp if isinstance(timestamp, int) else timestamp[(t, p)])}
                    for p in ps]} for t, ps in topics.items()]})
            for t in r.topics:
                for p in t.partitions:
                    if not p.error_code:
                        out[(t.name, p.partition_index)] = p.offset
        return out

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int
              ) -> tuple[list[Any], int, int]:
        """Records of the data batches from ``offset`` (control batches skipped): the
        records, the offset after the last batch read, the bytes read."""
        from jocko_py.protocol import records as rb

        addr = self.leader.get((topic, partition))
        if addr is None:
            return [], offset, 0
        p = self.to(addr).fetch(topic, partition, offset, max_wait_ms=0, max_bytes=max_bytes)
        data = memoryview(p.records or b"")
        out: list[Any] = []
        nxt = offset
        for at, h in rb.iter_batches(data, validate_crc=True, allow_partial_tail=True):
            if not h.is_control:
                out.extend(r for r in rb.decode_records(data[at:at + h.size])
                           if r.offset >= offset)
            nxt = max(nxt, h.next_offset)
        return out, nxt, len(data)


def matcher(text: str, field: str) -> Callable[[Any], bool] | None:
    """A record filter: ``text`` (case-insensitive) in the key, the value, a header's
    name or value, or any of them."""
    if not text:
        return None
    needle = text.lower()

    def has(b: bytes | None) -> bool:
        return b is not None and needle in b.decode("utf-8", "replace").lower()

    def match(r: Any) -> bool:
        if field in ("key", "any") and has(r.key):
            return True
        if field in ("value", "any") and has(r.value):
            return True
        return field in ("headers", "any") and any(
            needle in k.lower() or has(v) for k, v in r.headers)
    return match


@dataclass
class BrowsePage:
    """One page of the message browser: (partition, record) in the order read, and the
    bounds of what was read per partition (the next and previous pages' cursors)."""

    records: list[tuple[int, Any]]
    scanned: int
    lo: dict[int, int]  # per partition: the first offset read (or the cursor)
    hi: dict[int, int]  # per partition: after the last offset read (or the cursor)
    start: dict[int, int]  # log start offsets
    end: dict[int, int]  # high watermarks
    budget_hit: bool = False
    unavailable: tuple[int, ...] = ()  # partitions without a leader to answer

    @property
    def has_older(self) -> bool:
        return any(self.lo[p] > self.start[p] for p in self.lo)

    @property
    def has_newer(self) -> bool:
        return any(self.hi[p] < self.end[p] for p in self.hi)


def browse(lead: Leaders, topic: str, parts: list[int], backward: bool,
           cursor: dict[int, int], limit: int, scan: int,
           match: Callable[[Any], bool] | None) -> BrowsePage:
    """Read ``topic``'s ``parts`` merged by timestamp: forward from ``cursor`` (offsets
    to start at; default the log start) oldest first, or backward from it (offsets to
    stop before; default the high watermark) newest first. Stops once ``limit`` records
    (those ``match`` accepts) are found, ``scan`` records were read or READ_BUDGET bytes
    fetched."""
    tps = [(topic, p) for p in parts]
    start = {p: o for (_, p), o in lead.list_offsets(tps, -2).items()}
    end = {p: o for (_, p), o in lead.list_offsets(tps, -1).items()}
    unavailable = tuple(p for p in parts if p not in start or p not in end)
    parts = [p for p in parts if p in start and p in end]
    chunk = max(limit if match is None else min(scan, 500), 1)
    per_part_bytes = max(64 << 10, min(1 << 20, READ_BUDGET // max(1, len(parts))))
    pos: dict[int, int] = {}
    for p in parts:
        c = cursor.get(p, end[p] if backward else start[p])
        pos[p] = min(max(c, start[p]), end[p])
    lo, hi = dict(pos), dict(pos)
    bufs: dict[int, deque[Any]] = {p: deque() for p in parts}
    budget = [READ_BUDGET, 0]

    def refill(p: int) -> None:
        """Fill partition ``p``'s buffer with its next records in reading order."""
        for _ in range(8):
            if budget[0] <= 0:
                return
            if backward:
                top = pos[p]
                if top <= start[p]:
                    return
                base = max(start[p], top - chunk)
                got: list[Any] = []
                at = base
                while at < top and budget[0] > 0:
                    recs, nxt, n = lead.fetch(topic, p, at, per_part_bytes)
                    budget[0] -= n
                    got.extend(r for r in recs if r.offset < top)
                    if nxt <= at:
                        break
                    at = nxt
                if at < top:  # the window was not read to its end: its newest are unknown
                    return
                pos[p] = base
                got.sort(key=lambda r: -r.offset)
                bufs[p].extend(got)
            else:
                if pos[p] >= end[p]:
                    return
                recs, nxt, n = lead.fetch(topic, p, pos[p], per_part_bytes)
                budget[0] -= n
                bufs[p].extend(r for r in recs if r.offset < end[p])
                if nxt <= pos[p]:
                    pos[p] = end[p]  # nothing more can be read (a gap the log cannot serve)
                    return
                pos[p] = min(nxt, end[p])
            if bufs[p]:
                return

    def key(p: int) -> tuple[int, int, int]:
        r = bufs[p][0]
        return (-r.timestamp, p, -r.offset) if backward else (r.timestamp, p, r.offset)

    heap: list[tuple[tuple[int, int, int], int]] = []
    for p in parts:
        refill(p)
        if bufs[p]:
            heapq.heappush(heap, (key(p), p))
    out: list[tuple[int, Any]] = []
    scanned = 0
    while heap and len(out) < limit and scanned < scan:
        _, p = heapq.heappop(heap)
        r = bufs[p].popleft()
        scanned += 1
        if backward:
            lo[p] = r.offset
        else:
            hi[p] = r.offset + 1
        if match is None or match(r):
            out.append((p, r))
        if not bufs[p]:
            refill(p)
        if bufs[p]:
            heapq.heappush(heap, (key(p), p))
    return BrowsePage(out, scanned, lo, hi, {p: start[p] for p in parts},
                      {p: end[p] for p in parts}, budget[0] <= 0, unavailable)


def parse_cursor(s: str) -> dict[int, int]:
    """``0:15,1:30`` -> {0: 15, 1: 30} (ValueError if malformed)."""
    out: dict[int, int] = {}
    for item in s.split(","):
        if item.strip():
            p, _, o = item.partition(":")
            out[int(p)] = int(o)
    return out


def format_cursor(c: dict[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(c.items()))


@dataclass
class GroupRow:
    topic: str
    partition: int
    committed: int | None  # None: assigned, nothing committed
    log_start: int | None
    log_end: int | None
    member: tuple[str, str, str] | None  # member id, client id, host

    @property
    def lag(self) -> int | None:
        """Kafka's LAG: log end minus the committed offset (None: no commit)."""
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)

    @property
    def unread(self) -> int:
        """Records the group has not read: the lag, or for a partition with no commit
        every record from the log start."""
        if self.committed is not None:
            return self.lag or 0
        if self.log_end is None or self.log_start is None:
            return 0
        return max(0, self.log_end - self.log_start)


def describe_groups(c: Any, gids: list[str] | None) -> list[dict[str, Any]]:
    """Groups as `jocko-py groups describe` (Kafka's kafka-consumer-groups --describe)
    shows them: every partition committed or assigned to a member (classic and
    consumer-protocol groups), with its committed offset, log start and log end."""
    from jocko_py.admin import GroupAdmin, parse_assignment

    adm = GroupAdmin(c)
    try:
        ids = gids if gids is not None else [g.group_id for g in adm.list_groups()]
        out: list[dict[str, Any]] = []
        for g_id in ids:
            d = adm.describe(g_id)
            streams = hasattr(d, "topology")  # a KIP-1071 streams group: tasks, no owners
            kip848 = hasattr(d, "group_epoch") and not streams
            owners: dict[tuple[str, int], tuple[str, str, str]] = {}
            members = []
            for m in d.members:
                if streams:
                    members.append((m.member_id, m.client_id, m.client_host, {
                        f"{kind} {t.subtopology_id}": sorted(t.partitions)
                        for kind, ts in (("active", m.assignment.active_tasks),
                                         ("standby", m.assignment.standby_tasks),
                                         ("warm-up", m.assignment.warmup_tasks))
                        for t in ts}))
                    continue
                if kip848:
                    assigned = {tp.topic_name: sorted(tp.partitions)
                                for tp in m.assignment.topic_partitions}
                else:
                    assigned = parse_assignment(bytes(m.member_assignment or b""))
                for t, ps in assigned.items():
                    for p in ps:
                        owners[(t, p)] = (m.member_id, m.client_id, m.client_host)
                members.append((m.member_id, m.client_id, m.client_host, assigned))
            committed = adm.committed(g_id)
            if d.group_state == "Dead" and not members and not committed:
                continue
            out.append({"id": g_id, "state": d.group_state,
                        "type": "streams" if streams else "consumer" if kip848 else "classic",
                        "assignor": "sticky" if streams else
                        (d.assignor_name if kip848 else d.protocol_data) or "-",
                        "members": members, "committed": committed, "owners": owners})
    finally:
        adm.close()
    tps = sorted({tp for g in out for tp in set(g["committed"]) | set(g["owners"])})
    lead = Leaders(c, [t for t, _ in tps]) if tps else None
    try:
        ends = lead.list_offsets(tps, -1) if lead else {}
        starts = lead.list_offsets(tps, -2) if lead else {}
    finally:
        if lead is not None:
            lead.close()
    for g in out:
        g["rows"] = [GroupRow(t, p, g["committed"].get((t, p)), starts.get((t, p)),
                              ends.get((t, p)), g["owners"].get((t, p)))
                     for t, p in sorted(set(g["committed"]) | set(g["owners"]))]
    return out


class Console:
    def __init__(self, broker: ConsoleHost, host: str, port: int,
                 read_only: bool | None = None) -> None:
        self.broker = broker
        cfg = broker.config
        self.read_only = console_read_only(cfg) if read_only is None else read_only
        self.access = HttpAccess.from_config(broker.security, "console")
        self.http = HttpServer(host, port, self.handle, "console", self.access.ssl_context,
                               self.access.authenticate)
        self.bootstrap = f"{cfg.advertised_host}:{cfg.advertised_port}"
        # the console's own Kafka connections: as the broker, on its inter-broker listener
        sec = broker.security.inter_broker_client()
        self.client_ssl = sec.ssl if sec is not None else None
        self.client_config: dict[str, str] = {}
        if sec is not None:
            listener = next(x for x in cfg.listeners if x.name == cfg.inter_broker_listener)
            self.client_config["security.protocol"] = listener.security_protocol
            if sec.sasl_mechanism:
                self.client_config.update({"sasl.mechanism": sec.sasl_mechanism,
                                           "sasl.username": sec.username,
                                           "sasl.password": sec.password})
        # every form carries a token derived from this key and the principal, and every
        # POST must: another site's page cannot post through an operator's browser (CSRF)
        self._csrf_key = secrets.token_bytes(32)
        # uptime: the console starts with the broker
        self.started_wall = time.time()
        self.started = time.monotonic()
        # throughput: the broker's byte counters sampled every SAMPLE_S (5 minutes kept)
        self.samples: deque[tuple[float, dict[str, int]]] = deque(maxlen=62)
        self.samples.append((self.started, self.counters()))
        self._sampler: asyncio.Task[None] | None = None

    def token(self, principal: str | None = None) -> str:
        """The form token of ``principal`` (by default the current request's)."""
        if principal is None:
            req = _REQUEST.get()
            principal = req.principal if req is not None and req.principal else ANONYMOUS
        mac = hmac.new(self._csrf_key, principal.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac[:18]).decode()

    def allowed(self, op: str, resource_type: int, name: str) -> bool:
        """May the current request's principal do ``op`` on the resource? (Always, without
        an authorizer.)"""
        az = self.broker.security.authorizer
        if az is None:
            return True
        req = _REQUEST.get()
        principal = req.principal if req is not None and req.principal else ANONYMOUS
        host = req.peer if req is not None else ""
        return az.authorize(principal, host, OPERATIONS[op], resource_type, name)

    def require(self, op: str, resource_type: int, name: str) -> None:
        if not self.allowed(op, resource_type, name):
            req = _REQUEST.get()
            who = req.principal if req is not None and req.principal else ANONYMOUS
            kind = {TOPIC: "topic", GROUP: "group", CLUSTER: "cluster"}[resource_type]
            raise Denied(f"{who} is not authorized to {op} {kind} {name}")

    def may_create_topic(self, name: str) -> bool:
        return self.allowed("CREATE", CLUSTER, CLUSTER_NAME) or self.allowed("CREATE", TOPIC, name)

    @property
    def port(self) -> int:
        return self.http.port

    def counters(self) -> dict[str, int]:
        """The broker's byte and record counters, summed over topics."""
        st = self.broker.stats
        return {"bytes_in": sum(st.bytes_in.values()), "bytes_out": sum(st.bytes_out.values()),
                "messages_in": sum(st.messages_in.values()),
                "replication_in": sum(st.replication_bytes_in.values()),
                "replication_out": sum(st.replication_bytes_out.values())}

    async def _sample(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_S)
            self.samples.append((time.monotonic(), self.counters()))

    def rates(self, window_s: float) -> tuple[dict[str, float], float]:
        """Per-second rates of the counters over about the last ``window_s`` seconds
        (from the oldest sample inside the window to now), and the span used."""
        now, cur = time.monotonic(), self.counters()
        t0, c0 = self.samples[0]
        for t, c in reversed(self.samples):
            if now - t >= window_s:
                t0, c0 = t, c
                break
        span = max(now - t0, 1e-3)
        return {k: (cur[k] - c0[k]) / span for k in cur}, span

    async def start(self) -> None:
        await self.http.start()
        self._sampler = asyncio.create_task(self._sample())
        log.info("web console on %s://%s:%d/ (%s%s)", self.http.scheme, self.http.host,
                 self.http.port, self.access.settings.describe(),
                 ", read-only" if self.read_only else "")

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        await self.http.stop()

    # -- plumbing -------------------------------------------------------------------

    def page(self, title: str, body: str, message: str | None = None, status: int = 200,
             refresh: bool = True) -> Response:
        """A console page; with ``refresh`` it offers auto-refresh (``?refresh=N``
        seconds, off by default) and reloads itself when asked to."""
        req = _REQUEST.get()
        query = dict(req.query) if req is not None and req.method == "GET" else {}
        every = query.get("refresh", "")
        every = every if refresh and every.isdigit() and int(every) in REFRESH_CHOICES else ""
        keep = f"?refresh={every}" if every else ""
        nav = "".join(f'<a href="{href}{keep}">{name}</a>' for href, name in (
            ("/", "Overview"), ("/cluster", "Cluster"), ("/topics", "Topics"),
            ("/groups", "Consumer groups"), ("/produce", "Produce")))
        ro = ' <span class="note">(read-only)</span>' if self.read_only else ""
        token = self.token()
        body = _POST_FORM.sub(
            lambda m: f'{m.group(0)}<input type="hidden" name="csrf" value="{token}">', body)
        msg = f'<p class="msg">{esc(message)}</p>' if message else ""
        meta = f'<meta http-equiv="refresh" content="{every}">' if every else ""
        chooser = ""
        if refresh and status == 200 and req is not None:
            def at(n: str) -> str:
                args = {k: v for k, v in query.items() if k not in ("refresh", "msg")}
                if n:
                    args["refresh"] = n
                qs = urllib.parse.urlencode(args)
                label = f"{n} s" if n else "off"
                if n == every:
                    return f'<b class="current">{label}</b>'
                return (f'<a href="{esc(urllib.parse.quote(req.path))}'
                        f'{"?" + esc(qs) if qs else ""}">{label}</a>')
            chooser = ('<span class="refresh" id="refresh">auto-refresh: '
                       + " ".join(at(str(n) if n else "") for n in (0, *REFRESH_CHOICES))
                       + "</span>")
        doc = (f"<!doctype html><html><head><meta charset='utf-8'>{meta}<title>{esc(title)} - "
               f"jocko-py</title><style>{CSS}</style></head><body><header>"
               f"<b>jocko-py</b> &nbsp; {nav}{ro}{chooser}</header><main><h1>{esc(title)}</h1>"
               f"{msg}{body}</main></body></html>")
        return Response(status, doc.encode())

    def not_found(self, what: str) -> Response:
        """A 404 page naming what does not exist."""
        return self.page("Not found", f"<p class='bad'>{esc(what)}</p>", status=404,
                         refresh=False)

    @staticmethod
    def redirect(to: str, message: str | None = None) -> Response:
        if message:
            to += ("&" if "?" in to else "?") + urllib.parse.urlencode({"msg": message})
        return Response(303, b"", headers={"Location": to})

    async def client_call(self, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(client)`` in a worker thread with a client of this broker."""
        from jocko_py.client import Client

        def run() -> Any:
            with Client(self.bootstrap, client_id="jocko-py-console", timeout=30,
                        config=self.client_config, ssl_context=self.client_ssl) as c:
                return fn(c)
        return await asyncio.to_thread(run)

    async def handle(self, req: Request) -> Response:
        _REQUEST.set(req)
        try:
            return await self._route(req)
        except Denied as e:
            log.info("[console peer=%s] refused: %s", req.peer, e)
            return self.page("Not authorized", f"<p class='bad'>{esc(e)}</p>", status=403,
                             refresh=False)

    async def _route(self, req: Request) -> Response:
        path = req.path.rstrip("/") or "/"
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/") if p]
        if req.method == "POST":
            if self.read_only:
                return Response(403, b"the console is read-only\n", "text/plain")
            if not hmac.compare_digest(req.form.get("csrf", ""), self.token()):
                return Response(403, b"missing or wrong form token: reload the page\n",
                                "text/plain")
            return await self.post(parts, req)
        msg = req.query.get("msg")
        if not parts:
            return self.overview(msg)
        if parts[0] == "topics" and len(parts) == 1:
            return self.topics(msg)
        if parts[0] == "topics" and len(parts) == 2:
            return self.topic(parts[1], msg)
        if parts[0] == "topics" and len(parts) == 3 and parts[2] == "messages":
            return await self.messages(parts[1], req)
        if parts[0] == "groups" and len(parts) == 1:
            return await self.groups(msg)
        if parts[0] == "groups" and len(parts) == 2:
            return await self.group(parts[1], msg)
        if parts[0] == "produce" and len(parts) == 1:
            return self.produce_form(req.query, msg)
        if parts == ["cluster"]:
            return await self.cluster(msg)
        return self.not_found(f"No page {req.path}")

    # -- pages ----------------------------------------------------------------------

    def overview(self, msg: str | None) -> Response:
        b = self.broker
        img = b.image
        led: dict[int, int] = {}
        under = total = offline = 0
        for t in img.topics.values():
            for p in t.partitions.values():
                total += 1
                led[p.leader] = led.get(p.leader, 0) + 1
                under += len(p.isr) < len(p.replicas)
                offline += p.leader < 0
        from jocko_py.cluster.shard_ids import host_and_shard

        # a sharded broker's shards (node n + 1000k, jocko_py/shards.py) listed together
        sharded = any(host_and_shard(x)[1] for x in img.brokers)
        rows = [[esc(x.broker_id), esc(f"{x.host}:{x.port}"), esc(x.rack or "-"),
                 '<span class="bad">fenced</span>' if x.fenced else '<span class="ok">alive</span>',
                 "yes" if x.broker_id == b.controller_id else "", esc(led.get(x.broker_id, 0))]
                + ([esc("node {}, shard {}".format(*host_and_shard(x.broker_id)))]
                   if sharded else [])
                for x in sorted(img.brokers.values(),
                                key=lambda x: host_and_shard(x.broker_id))]
        body = (f"<p>Cluster <code>{esc(b.cluster_id)}</code>, controller "
                f"<b>{esc(b.controller_id)}</b>, this broker <b>{esc(b.broker_id)}</b>.</p>"
                + table(["broker", "address", "rack", "state", "controller", "partitions led"]
                        + (["host (shard)"] if sharded else []), rows)
                + table(["topics", "partitions", "under-replicated", "offline"],
                        [[esc(len(img.topics)), esc(total),
                          f'<span class="{"bad" if under else "ok"}">{under}</span>',
                          f'<span class="{"bad" if offline else "ok"}">{offline}</span>']]))
        return self.page("Overview", body, msg)

    async def cluster(self, msg: str | None) -> Response:
        """This broker's versions, uptime, log directories (disk use), throughput, and
        the metadata quorum (as DescribeQuorum answers)."""
        from jocko_py.broker.features import METADATA_VERSION, finalized
        from jocko_py.cluster.quorum import RaftQuorum

        self.require("DESCRIBE", CLUSTER, CLUSTER_NAME)
        b = self.broker
        up = int(time.monotonic() - self.started)
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started_wall))
        mv = finalized(b.image.features).get(METADATA_VERSION, "-")
        info = table(["", ""], [
            ["broker", esc(b.broker_id)], ["cluster id", f"<code>{esc(b.cluster_id)}</code>"],
            ["jocko-py version", f"<span id='version'>{esc(jocko_version())}</span>"],
            ["Python", esc(f"{platform.python_implementation()} {platform.python_version()}")],
            ["metadata.version", esc(mv)],
            ["uptime", f"<span id='uptime'>{esc(fmt_duration(up))}</span> (since {since})"]])

        logs = b.replicas.logs
        by_dir: dict[str, int] = {}
        for (t, p), part in b.replicas.partitions.items():
            d = logs.dir_of(t, p)
            if d is not None:
                by_dir[str(d)] = by_dir.get(str(d), 0) + part.log.size_bytes
        drows = []
        for d in logs.dirs:
            reason = logs.dir_offline_reason(d)
            try:
                st = os.statvfs(d)
                size, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
                used = size - st.f_bfree * st.f_frsize
                fs = [esc(fmt_bytes(size)), esc(fmt_bytes(used)), esc(fmt_bytes(free)),
                      esc(f"{100 * used / size:.0f}%" if size else "-")]
            except OSError as e:
                fs = [f"<span class='bad'>{esc(e.strerror)}</span>", "-", "-", "-"]
            drows.append([f"<code>{esc(d)}</code>",
                          f"<span class='bad'>offline: {esc(reason)}</span>" if reason
                          else "<span class='ok'>online</span>",
                          esc(fmt_bytes(by_dir.get(str(d), 0))), *fs])
        disks = table(["log dir", "state", "logs", "filesystem size", "used", "free",
                       "use"], drows)

        trows = []
        for label, window in (("last 10 s", 10.0), ("last minute", 60.0),
                              ("last 5 minutes", 300.0)):
            r, span = self.rates(window)
            trows.append([esc(label) + f" <span class='note'>({span:.0f} s)</span>",
                          esc(fmt_bytes(int(r["bytes_in"])) + "/s"),
                          esc(fmt_bytes(int(r["bytes_out"])) + "/s"),
                          esc(f"{r['messages_in']:.1f}/s"),
                          esc(fmt_bytes(int(r["replication_in"])) + "/s"),
                          esc(fmt_bytes(int(r["replication_out"])) + "/s")])
        total = self.counters()
        trows.append(["since start", esc(fmt_bytes(total["bytes_in"])),
                      esc(fmt_bytes(total["bytes_out"])), esc(total["messages_in"]),
                      esc(fmt_bytes(total["replication_in"])),
                      esc(fmt_bytes(total["replication_out"]))])
        through = (table(["", "bytes in (produce)", "bytes out (consumers)", "records in",
                          "replication in", "replication out"], trows)
                   + f"<p class='note'>This broker's counters (as /metrics exports them), "
                   f"sampled every {SAMPLE_S:.0f} s.</p>")

        if not isinstance(b.quorum, RaftQuorum):
            quorum = ("<p id='quorum'>Single node: no raft quorum. This broker is the "
                      f"controller and keeps the metadata in its own log ("
                      f"{esc(b.image.records_applied)} records applied).</p>")
        else:
            quorum = await self._quorum()
        body = ("<h2>Broker</h2>" + info + "<h2>Disk</h2>" + disks + "<h2>Throughput</h2>"
                + through + "<h2>Metadata quorum</h2>" + quorum)
        return self.page("Cluster", body, msg)

    async def _quorum(self) -> str:
        from jocko_py.client import KafkaError

        def run(c: Any) -> Any:
            r = c.request(55, 1, {"topics": [{"topic_name": "__cluster_metadata",
                                              "partitions": [{"partition_index": 0}]}]})
            if r.error_code:
                raise KafkaError(r.error_code, r.error_message)
            p = r.topics[0].partitions[0]
            if p.error_code:
                raise KafkaError(p.error_code, p.error_message)
            return p
        try:
            q = await self.client_call(run)
        except (KafkaError, OSError) as e:
            return f"<p class='bad' id='quorum'>DescribeQuorum failed: {esc(e)}</p>"
        now = int(time.time() * 1000)

        def ago(ts: int) -> str:
            return "-" if ts < 0 else f"{max(0, now - ts)} ms"
        rows = []
        for kind, reps in (("voter", q.current_voters), ("observer", q.observers)):
            for r in reps:
                role = "leader" if r.replica_id == q.leader_id else (
                    "follower" if kind == "voter" else "observer")
                rows.append([esc(r.replica_id), esc(role), esc(r.log_end_offset),
                             esc(max(0, q.high_watermark - r.log_end_offset)),
                             esc(ago(r.last_fetch_timestamp)),
                             esc(ago(r.last_caught_up_timestamp))])
        return (f"<p id='quorum'>Raft leader <b>{esc(q.leader_id)}</b>, epoch "
                f"<b>{esc(q.leader_epoch)}</b>, high watermark <b>{esc(q.high_watermark)}"
                f"</b>, {len(q.current_voters)} voter(s), {len(q.observers)} observer(s).</p>"
                + table(["node", "role", "log end offset", "lag", "last fetch",
                         "last caught up"], rows))

    def _local_size(self, topic: str) -> int:
        return sum(p.log.size_bytes for (t, _), p in self.broker.replicas.partitions.items()
                   if t == topic)

    def topics(self, msg: str | None) -> Response:
        img = self.broker.image
        base = self.broker.log_config
        rows = []
        for name in sorted(img.topics):
            if not self.allowed("DESCRIBE", TOPIC, name):
                continue
            t = img.topics[name]
            parts = t.partitions.values()
            rf = max((len(p.replicas) for p in parts), default=0)
            under = sum(len(p.isr) < len(p.replicas) for p in parts)
            retention = img.topic_configs(name).get("retention.ms", str(base.retention_ms))
            q = urllib.parse.quote(name)
            delete = "" if self.read_only or name.startswith("__") else (
                f'<form class="inline" method="post" action="/topics/{q}/delete">'
                f'<button type="submit">delete</button></form>')
            rows.append([f'<a href="/topics/{q}">{esc(name)}</a>', esc(len(t.partitions)),
                         esc(rf), f'<span class="{"bad" if under else "ok"}">{under}</span>',
                         esc(fmt_bytes(self._local_size(name))), esc(retention), delete])
        body = table(["topic", "partitions", "replication", "under-replicated",
                      "size here", "retention.ms", ""], rows)
        if not self.read_only:
            body += ("<h2>Create a topic</h2><form method='post' action='/topics' "
                     "id='create-topic'><label>name <input name='name' required></label> "
                     "<label>partitions <input name='partitions' type='number' min='1' "
                     "placeholder='broker default'></label> <label>replication factor "
                     "<input name='replication_factor' type='number' min='1' "
                     "placeholder='broker default'></label><br><label>configs (one "
                     "key=value per line)<br><textarea name='configs' rows='3' cols='40'>"
                     "</textarea></label><br><button type='submit'>Create</button></form>")
        return self.page("Topics", body, msg)

    def topic(self, name: str, msg: str | None) -> Response:
        img = self.broker.image
        self.require("DESCRIBE", TOPIC, name)
        t = img.topics.get(name)
        if t is None:
            return self.not_found(f"Topic {name} does not exist.")
        rows = []
        q = urllib.parse.quote(name)
        for pid in sorted(t.partitions):
            p = t.partitions[pid]
            local = self.broker.replicas.partitions.get((name, pid))
            lg = local.log if local is not None else None
            rows.append([
                esc(pid), esc(p.leader), esc(list(p.isr)), esc(list(p.replicas)),
                esc(lg.log_start_offset if lg else "-"),
                esc(local.high_watermark if local else "-"),
                esc(lg.log_end_offset if lg else "-"),
                esc(fmt_bytes(lg.size_bytes) if lg else "-"),
                f'<a href="/topics/{q}/messages?partition={pid}">browse</a>'])
        configs = img.topic_configs(name)
        body = (f"<p>Topic id <code>{esc(t.topic_id)}</code> &middot; <a href='/topics/{q}/"
                "messages'>browse messages (all partitions, newest first)</a></p>"
                + table(["partition", "leader", "ISR", "replicas", "log start",
                         "high watermark", "log end", "size", ""], rows)
                + "<h2>Configs (set on the topic)</h2>"
                + (table(["name", "value"], [[esc(k), esc(v)] for k, v in sorted(configs.items())])
                   if configs else "<p class='note'>none: broker defaults</p>"))
        return self.page(f"Topic {name}", body, msg)

    async def messages(self, name: str, req: Request) -> Response:
        """The message browser: one partition or all of them merged by timestamp,
        newest or oldest first, a page of at most ``limit`` records with links to the
        next and previous pages (per-partition offset cursors), a search by key, value
        or header text reading at most ``scan`` records per page, and a live tail (the
        newest page reloading itself)."""
        from jocko_py.client import KafkaError

        self.require("READ", TOPIC, name)
        t = self.broker.image.topics.get(name)
        if t is None:
            return self.not_found(f"Topic {name} does not exist.")
        q = req.query
        part_q = q.get("partition", "").strip()
        try:
            parts = sorted(t.partitions) if part_q in ("", "all") else [int(part_q)]
            limit = max(1, min(MAX_PAGE, int(q.get("limit", "50") or 50)))
            scan = max(1, min(MAX_SCAN, int(q.get("scan", str(DEFAULT_SCAN)) or DEFAULT_SCAN)))
            before = parse_cursor(q.get("before", ""))
            after = parse_cursor(q.get("after", ""))
        except ValueError:
            return self.page("Messages", "<p class='bad'>partition, limit, scan and the page "
                             "cursors are numbers</p>", status=400, refresh=False)
        if any(p not in t.partitions for p in parts):
            return self.not_found(f"Topic {name} has no partition {part_q}.")
        how = q.get("format", "text")
        order = "oldest" if q.get("order") == "oldest" else "newest"
        offset_q, ts_q = q.get("offset", "").strip(), q.get("timestamp", "").strip()
        text, field = q.get("q", ""), q.get("in", "any")
        field = field if field in ("any", "key", "value", "headers") else "any"
        match = matcher(text, field)

        def run(c: Any) -> tuple[BrowsePage, bool]:
            lead = Leaders(c, [name])
            try:
                seek: dict[int, int] | None = None
                if ts_q:
                    from datetime import datetime
                    ts = int(ts_q) if ts_q.isdigit() else int(
                        datetime.fromisoformat(ts_q.replace("Z", "+00:00")).timestamp() * 1000)
                    found = lead.list_offsets([(name, p) for p in parts], ts)
                    ends = lead.list_offsets([(name, p) for p in parts], -1)
                    seek = {p: found[(name, p)] if found.get((name, p), -1) >= 0
                            else ends.get((name, p), 0) for p in parts}
                elif offset_q:
                    seek = {p: int(offset_q) for p in parts}
                if seek is not None:  # records at or after the offset or time
                    return browse(lead, name, parts, False, seek, limit, scan, match), False
                if before:
                    return browse(lead, name, parts, True, before, limit, scan, match), True
                if after or order == "oldest":
                    return browse(lead, name, parts, False, after, limit, scan, match), False
                return browse(lead, name, parts, True, {}, limit, scan, match), True
            finally:
                lead.close()
        try:
            pg, backward = await self.client_call(run)
        except (KafkaError, ValueError, OSError) as e:
            return self.page(f"Messages of {name}", f"<p class='bad'>{esc(e)}</p>")
        recs = list(pg.records)
        if (order == "newest") != backward:
            recs.reverse()
        rows = [[esc(p), esc(r.offset), esc(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(
                     r.timestamp / 1000))) + f".{r.timestamp % 1000:03d}Z", render_value(r.key, how),
                 "<br>".join(f"{esc(k)}: {render_value(v, how)}" for k, v in r.headers),
                 render_value(r.value, how)] for p, r in recs]

        base = {k: v for k, v in q.items() if k in (
            "partition", "limit", "format", "order", "q", "in", "scan", "refresh") and v}
        here = f"/topics/{urllib.parse.quote(name)}/messages"

        def link(label: str, **cur: str) -> str:
            args = {k: v for k, v in base.items() if k != "refresh"}
            args.update(cur)
            return f'<a href="{here}?{esc(urllib.parse.urlencode(args))}">{label}</a>'
        older = link("older &rarr;" if order == "newest" else "&larr; previous",
                     before=format_cursor(pg.lo)) if pg.has_older else ""
        newer = link("&larr; newer" if order == "newest" else "next &rarr;",
                     after=format_cursor(pg.hi)) if pg.has_newer else ""
        first = link("newest" if order == "newest" else "oldest") if (
            before or after or offset_q or ts_q) else ""
        pager = (f"<p class='pager'>{first}"
                 + (newer + older if order == "newest" else older + newer) + "</p>")
        tail_args = {k: v for k, v in base.items() if k not in ("order", "refresh")}
        tail_args.update(order="newest", refresh="2")
        tail = (f'<a href="{here}?{esc(urllib.parse.urlencode(tail_args))}" id="live-tail">'
                "live tail</a>")
        live = q.get("refresh", "") and not (before or after or offset_q or ts_q)

        def sel(v: str, cur: str) -> str:
            return " selected" if v == cur else ""
        options = "".join(f"<option{sel(str(p), part_q)}>{p}</option>" for p in sorted(t.partitions))
        form = (f"<form method='get' id='browse'><label>partition <select name='partition'>"
                f"<option value='all'{sel('all', part_q or 'all')}>all (merged by time)</option>"
                f"{options}</select></label> <label>order <select name='order'>"
                f"<option value='newest'{sel('newest', order)}>newest first</option>"
                f"<option value='oldest'{sel('oldest', order)}>oldest first</option></select>"
                f"</label> <label>from offset <input name='offset' size='8' "
                f"value='{esc(offset_q)}'></label> <label>or time <input name='timestamp' "
                f"value='{esc(ts_q)}' placeholder='2024-05-01T12:00:00Z'></label> <label>"
                f"limit <input name='limit' type='number' min='1' max='{MAX_PAGE}' "
                f"value='{limit}' size='4'></label><br><label>search <input name='q' "
                f"value='{esc(text)}' placeholder='text in key, value or headers'></label> "
                f"<select name='in'>" + "".join(
                    f"<option value='{v}'{sel(v, field)}>in {v}</option>"
                    for v in ("any", "key", "value", "headers")) + "</select> "
                f"<label>read at most <input name='scan' type='number' min='1' "
                f"max='{MAX_SCAN}' value='{scan}' size='6'> records</label> "
                f"<select name='format'><option{sel('text', how)}>text</option>"
                f"<option{sel('json', how)}>json</option><option{sel('hex', how)}>hex</option>"
                f"</select> <button type='submit'>Show</button> {tail}</form>")
        which = (f"partition {parts[0]}" if len(parts) == 1 else
                 f"{len(parts)} partitions merged by timestamp")
        summary = (f"{len(recs)} record(s), {'newest' if order == 'newest' else 'oldest'} "
                   f"first, {which}")
        if match is not None:
            summary += (f"; searched {pg.scanned} record(s) for &ldquo;{esc(text)}&rdquo; in "
                        f"{esc(field)} (at most {scan} per page, case-insensitive)")
        if pg.unavailable:
            summary += (f"; <span class='bad'>not read: partition(s) "
                        f"{esc(', '.join(map(str, pg.unavailable)))} (no leader answered)"
                        "</span>")
        if pg.budget_hit:
            summary += f"; stopped after reading {READ_BUDGET >> 20} MiB"
        if live:
            summary += f"; live tail, refreshing every {esc(q['refresh'])} s"
        body = form + f"<p id='summary'>{summary}.</p>" + pager
        body += table(["partition", "offset", "timestamp", "key", "headers", "value"], rows)
        body += pager
        title = f"Messages of {name}" + (f" / {parts[0]}" if len(parts) == 1 else "")
        return self.page(title, body)

    async def _group_view(self, gid: str | None) -> list[dict[str, Any]]:
        """Groups through the Kafka APIs (in a cluster: every coordinator, each
        partition's leader): state, members, and a row per committed or assigned
        partition."""
        result: list[dict[str, Any]] = await self.client_call(
            lambda c: describe_groups(c, None if gid is None else [gid]))
        return result

    @staticmethod
    def _lag_totals(rows: list[GroupRow]) -> tuple[int, int, int]:
        """Lag of the committed partitions, unread records of the assigned partitions
        with no commit (from the log start), how many of those."""
        committed = sum(r.lag or 0 for r in rows if r.committed is not None)
        fresh = [r for r in rows if r.committed is None]
        return committed, sum(r.unread for r in fresh), len(fresh)

    async def groups(self, msg: str | None) -> Response:
        from jocko_py.client import KafkaError

        try:
            found = await self._group_view(None)
        except (KafkaError, OSError) as e:
            return self.page("Consumer groups", f"<p class='bad'>{esc(e)}</p>", msg)
        rows = []
        for g in found:
            if not self.allowed("DESCRIBE", GROUP, g["id"]):
                continue
            lag, unread, n = self._lag_totals(g["rows"])
            q = urllib.parse.quote(g["id"])
            rows.append([f'<a href="/groups/{q}">{esc(g["id"])}</a>', esc(g["state"]),
                         esc(len(g["members"])), esc(g["assignor"]), esc(len(g["rows"])),
                         esc(lag + unread) + (f' <span class="note">({unread} on {n} '
                                              f'partition(s) with no commit)</span>'
                                              if n else "")])
        body = (table(["group", "state", "members", "assignor", "partitions", "total lag"],
                      rows)
                + "<p class='note'>Total lag counts, for an assigned partition with no "
                "committed offset, every record from the log start offset.</p>")
        return self.page("Consumer groups", body, msg)

    async def group(self, gid: str, msg: str | None) -> Response:
        from jocko_py.client import KafkaError
        from jocko_py.protocol.errors import ErrorCode

        self.require("DESCRIBE", GROUP, gid)
        try:
            found = await self._group_view(gid)
        except KafkaError as e:
            if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
                return self.page(f"Consumer group {gid}", f"<p class='bad'>{esc(e)}</p>", msg)
            found = []
        except OSError as e:
            return self.page(f"Consumer group {gid}", f"<p class='bad'>{esc(e)}</p>", msg)
        if not found:
            return self.not_found(f"Consumer group '{gid}' does not exist.")
        g = found[0]
        mrows = [[esc(mid), esc(cid), esc(host),
                  esc(", ".join(f"{t}: {sorted(ps)}" for t, ps in assigned.items()))]
                 for mid, cid, host, assigned in g["members"]]
        lrows = []
        chart = []
        for r in g["rows"]:
            lrows.append([esc(r.topic), esc(r.partition),
                          esc("-" if r.committed is None else r.committed),
                          esc("-" if r.log_start is None else r.log_start),
                          esc("-" if r.log_end is None else r.log_end),
                          f'<span class="lag">{esc("-" if r.lag is None else r.lag)}</span>',
                          esc(r.member[0] if r.member else "-"),
                          esc(r.member[2] if r.member else "-"),
                          esc(r.member[1] if r.member else "-")])
            chart.append((f"{r.topic}-{r.partition}", r.unread))
        lag, unread, n = self._lag_totals(g["rows"])
        total = (f"<p id='total-lag'>Total lag <b>{lag + unread}</b>"
                 + (f": {lag} behind committed offsets and {unread} unread record(s) on "
                    f"{n} assigned partition(s) with no committed offset (counted from the "
                    "log start offset; the table shows their lag as -, as Kafka's "
                    "kafka-consumer-groups does)" if n else "") + ".</p>")
        body = (f"<p>State <b>{esc(g['state'])}</b>, {esc(g['type'])} protocol, assignor "
                f"{esc(g['assignor'])}, {len(g['members'])} member(s)</p>"
                "<h2>Members</h2>"
                + table(["member", "client id", "host", "assignment"], mrows)
                + "<h2>Lag</h2>" + total + lag_chart(chart)
                + table(["topic", "partition", "committed", "log start", "log end", "lag",
                         "consumer id", "host", "client id"], lrows))
        if not self.read_only:
            if g["state"] in ("Empty", "Dead"):
                q = urllib.parse.quote(gid)
                body += (f"<h2>Reset offsets</h2><form method='post' action='/groups/{q}/reset'>"
                         "<select name='to'><option>earliest</option><option>latest</option>"
                         "</select> <button type='submit'>Reset every partition</button></form>")
            else:
                body += "<p class='note'>Offsets can be reset once the group has no members.</p>"
        return self.page(f"Consumer group {gid}", body, msg)

    def produce_form(self, q: dict[str, str], msg: str | None) -> Response:
        if self.read_only:
            return self.page("Produce", "<p>The console is read-only.</p>", msg, refresh=False)
        body = ("<form method='post' action='/produce' id='produce'><label>topic <input "
                f"name='topic' required value='{esc(q.get('topic', ''))}'></label> <label>"
                "partition <input name='partition' type='number' min='0' placeholder='by key'>"
                "</label><br><label>key <input name='key'></label> <label><input "
                "type='checkbox' name='null_key' value='1'> null key</label><br><label>value"
                "<br><textarea name='value' rows='4' cols='60'></textarea></label><br><label>"
                "headers (one name=value per line)<br><textarea name='headers' rows='2' "
                "cols='40'></textarea></label><br><button type='submit'>Produce</button></form>")
        return self.page("Produce a message", body, msg, refresh=False)

    # -- actions --------------------------------------------------------------------

    async def post(self, parts: list[str], req: Request) -> Response:
        from jocko_py.client import KafkaError

        f = req.form
        try:
            if parts == ["topics"]:
                return await self._create_topic(f)
            if len(parts) == 3 and parts[0] == "topics" and parts[2] == "delete":
                self.require("DELETE", TOPIC, parts[1])
                await self.client_call(lambda c: c.delete_topic(parts[1]))
                return self.redirect("/topics", f"Deleted topic {parts[1]}")
            if len(parts) == 3 and parts[0] == "groups" and parts[2] == "reset":
                return await self._reset(parts[1], f.get("to", "earliest"))
            if parts == ["produce"]:
                return await self._produce(f)
        except (KafkaError, ValueError, OSError) as e:
            back = {"topics": "/topics", "groups": f"/groups/{urllib.parse.quote(parts[-2])}"
                    if len(parts) > 2 else "/groups", "produce": "/produce"}.get(parts[0], "/")
            return self.redirect(back, f"Error: {e}")
        return Response(404, b"not found\n", "text/plain")

    async def _create_topic(self, f: dict[str, str]) -> Response:
        name = f.get("name", "").strip()
        parts = int(f["partitions"]) if f.get("partitions", "").strip() else -1
        rf = int(f["replication_factor"]) if f.get("replication_factor", "").strip() else -1
        configs = {}
        for line in f.get("configs", "").splitlines():
            if line.strip():
                k, sep, v = line.partition("=")
                if not sep:
                    raise ValueError(f"config {line.strip()!r} is not key=value")
                configs[k.strip()] = v.strip()
        if not self.may_create_topic(name):
            self.require("CREATE", TOPIC, name)
        t = await self.client_call(lambda c: c.create_topic(name, parts, rf, configs))
        return self.redirect(f"/topics/{urllib.parse.quote(name)}",
                             f"Created topic {name} with {t.num_partitions} partition(s)")

    async def _reset(self, gid: str, to: str) -> Response:
        from jocko_py.admin import GroupAdmin

        # as OffsetCommit: READ on the group and on every topic it commits
        self.require("READ", GROUP, gid)
        if self.broker.security.authorizer is not None:
            def topics(c: Any) -> set[str]:
                adm = GroupAdmin(c)
                try:
                    return {t for t, _ in adm.committed(gid)}
                finally:
                    adm.close()
            for t in sorted(await self.client_call(topics)):
                self.require("READ", TOPIC, t)

        def run(c: Any) -> dict[tuple[str, int], int]:
            adm = GroupAdmin(c)
            try:
                if adm.describe(gid).group_state not in ("Empty", "Dead"):
                    raise ValueError(f"group {gid} has members: stop them first")
                plan = {(t, p): adm.offset_for(t, p, -2 if to == "earliest" else -1)
                        for t, p in sorted(adm.committed(gid))}
                errors = {tp: e for tp, e in adm.commit(gid, plan).items() if e}
            finally:
                adm.close()
            if errors:
                raise ValueError(f"not reset: {errors}")
            return plan
        plan = await self.client_call(run)
        return self.redirect(f"/groups/{urllib.parse.quote(gid)}",
                             f"Reset {len(plan)} partition(s) to {to}")

    async def _produce(self, f: dict[str, str]) -> Response:
        from jocko_py.client import KafkaError, partition_for_key
        from jocko_py.protocol import records as rb
        from jocko_py.protocol.errors import ErrorCode

        topic = f.get("topic", "").strip()
        key = None if f.get("null_key") else f.get("key", "").encode()
        headers = []
        for line in f.get("headers", "").splitlines():
            if line.strip():
                k, _, v = line.partition("=")
                headers.append((k.strip(), v.encode()))
        value = f.get("value", "").encode()
        part_s = f.get("partition", "").strip()
        self.require("WRITE", TOPIC, topic)
        if topic not in self.broker.image.topics and not self.may_create_topic(topic):
            self.require("CREATE", TOPIC, topic)

        def run(c: Any) -> tuple[int, int]:
            md = c.metadata([topic], auto_create=True)
            n = max(1, len(md.topics[0].partitions))
            p = int(part_s) if part_s else (partition_for_key(key, n) if key else 0)
            with c.for_leader(topic, p, auto_create=True) as lc:
                for _ in range(20):
                    try:
                        off = lc.produce(topic, p, rb.build_batch(
                            [rb.NewRecord(key, value, headers)]), acks=-1)
                        return p, int(off)
                    except KafkaError as e:  # a just-created topic: leader not known yet
                        if e.code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                          ErrorCode.LEADER_NOT_AVAILABLE):
                            raise
                        time.sleep(0.1)
                raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, topic)
        p, off = await self.client_call(run)
        return self.redirect(f"/produce?topic={urllib.parse.quote(topic)}",
                             f"Produced to {topic}-{p} at offset {off}")
