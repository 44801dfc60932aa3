"""The built-in web console: server-rendered HTML pages on `--console-addr`.

Owns the console's pages and actions (no JavaScript needed; plain forms):

- `/` overview: cluster id, controller, brokers (address, rack, fenced, partitions
  led), topics, partitions, under-replicated partitions;
- `/topics`: partitions, replication, under-replicated, size on this broker, retention;
  create and delete; `/topics/<t>`: per partition leader, ISR, replicas, log start, high
  watermark, log end and size, the topic's configs;
- `/topics/<t>/messages`: the message browser, by partition and offset or timestamp,
  with keys, headers and values as text, JSON or hex;
- `/groups`: state, members, lag; `/groups/<g>`: members and their assignment,
  committed offset, log end, lag per partition with a bar chart, offset reset (earliest
  or latest) for an inactive group;
- `/produce`: one record (key, value, headers) for testing.

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
import hmac
import html
import json
import logging
import re
import secrets
import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jocko_py.broker.http import HttpServer, Request, Response
from jocko_py.broker.security.authz import CLUSTER, CLUSTER_NAME, GROUP, OPERATIONS, TOPIC
from jocko_py.broker.security.http_access import HttpAccess, console_read_only
from jocko_py.broker.security.session import ANONYMOUS

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker

log = logging.getLogger("jocko_py.console")

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
"""


def esc(v: object) -> str:
    return html.escape("" if v is None else str(v))


def fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


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
    """An inline SVG bar chart of lag per partition."""
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
            f'aria-label="lag per partition">{"".join(bars)}</svg>')


class Console:
    def __init__(self, broker: Broker, host: str, port: int,
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

    async def start(self) -> None:
        await self.http.start()
        log.info("web console on %s://%s:%d/ (%s%s)", self.http.scheme, self.http.host,
                 self.http.port, self.access.settings.describe(),
                 ", read-only" if self.read_only else "")

    async def stop(self) -> None:
        await self.http.stop()

    # -- plumbing -------------------------------------------------------------------

    def page(self, title: str, body: str, message: str | None = None) -> Response:
        nav = "".join(f'<a href="{href}">{name}</a>' for href, name in (
            ("/", "Overview"), ("/topics", "Topics"), ("/groups", "Consumer groups"),
            ("/produce", "Produce")))
        ro = ' <span class="note">(read-only)</span>' if self.read_only else ""
        token = self.token()
        body = _POST_FORM.sub(
            lambda m: f'{m.group(0)}<input type="hidden" name="csrf" value="{token}">', body)
        msg = f'<p class="msg">{esc(message)}</p>' if message else ""
        doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)} - "
               f"jocko-py</title><style>{CSS}</style></head><body><header>"
               f"<b>jocko-py</b> &nbsp; {nav}{ro}</header><main><h1>{esc(title)}</h1>{msg}"
               f"{body}</main></body></html>")
        return Response(200, doc.encode())

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
            denied = self.page("Not authorized", f"<p class='bad'>{esc(e)}</p>")
            denied.status = 403
            return denied

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
        return Response(404, b"not found\n", "text/plain")

    # -- pages ----------------------------------------------------------------------

    def overview(self, msg: str | None) -> Response:
        b = self.broker
        img = b.quorum.image
        led: dict[int, int] = {}
        under = total = offline = 0
        for t in img.topics.values():
            for p in t.partitions.values():
                total += 1
                led[p.leader] = led.get(p.leader, 0) + 1
                under += len(p.isr) < len(p.replicas)
                offline += p.leader < 0
        rows = [[esc(x.broker_id), esc(f"{x.host}:{x.port}"), esc(x.rack or "-"),
                 '<span class="bad">fenced</span>' if x.fenced else '<span class="ok">alive</span>',
                 "yes" if x.broker_id == b.controller_id else "", esc(led.get(x.broker_id, 0))]
                for x in sorted(img.brokers.values(), key=lambda x: x.broker_id)]
        body = (f"<p>Cluster <code>{esc(b.cluster_id)}</code>, controller "
                f"<b>{esc(b.controller_id)}</b>, this broker <b>{esc(b.broker_id)}</b>.</p>"
                + table(["broker", "address", "rack", "state", "controller", "partitions led"],
                        rows)
                + table(["topics", "partitions", "under-replicated", "offline"],
                        [[esc(len(img.topics)), esc(total),
                          f'<span class="{"bad" if under else "ok"}">{under}</span>',
                          f'<span class="{"bad" if offline else "ok"}">{offline}</span>']]))
        return self.page("Overview", body, msg)

    def _local_size(self, topic: str) -> int:
        return sum(p.log.size_bytes for (t, _), p in self.broker.replicas.partitions.items()
                   if t == topic)

    def topics(self, msg: str | None) -> Response:
        img = self.broker.quorum.image
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
        img = self.broker.quorum.image
        self.require("DESCRIBE", TOPIC, name)
        t = img.topics.get(name)
        if t is None:
            return self.page("Topic not found", f"<p>No topic {esc(name)}.</p>", msg)
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
        body = (f"<p>Topic id <code>{esc(t.topic_id)}</code></p>"
                + table(["partition", "leader", "ISR", "replicas", "log start",
                         "high watermark", "log end", "size", ""], rows)
                + "<h2>Configs (set on the topic)</h2>"
                + (table(["name", "value"], [[esc(k), esc(v)] for k, v in sorted(configs.items())])
                   if configs else "<p class='note'>none: broker defaults</p>"))
        return self.page(f"Topic {name}", body, msg)

    async def messages(self, name: str, req: Request) -> Response:
        from jocko_py.client import KafkaError
        from jocko_py.protocol import records as rb

        self.require("READ", TOPIC, name)
        q = req.query
        try:
            partition = int(q.get("partition", "0") or 0)
            limit = max(1, min(500, int(q.get("limit", "50") or 50)))
        except ValueError:
            return self.page("Messages", "<p class='bad'>partition and limit are numbers</p>")
        how = q.get("format", "text")
        offset_q, ts_q = q.get("offset", "").strip(), q.get("timestamp", "").strip()

        def browse(c: Any) -> tuple[int, list[Any]]:
            with c.for_leader(name, partition) as lc:
                if ts_q:
                    from datetime import datetime
                    ts = int(ts_q) if ts_q.isdigit() else int(
                        datetime.fromisoformat(ts_q.replace("Z", "+00:00")).timestamp() * 1000)
                    start = lc.list_offset(name, partition, ts)[0]
                elif offset_q:
                    start = int(offset_q)
                else:
                    start = lc.list_offset(name, partition, -2)[0]
                out: list[Any] = []
                if start < 0:
                    return start, out
                pos = start
                for _ in range(10):
                    p = lc.fetch(name, partition, pos, max_wait_ms=0)
                    data = memoryview(p.records or b"")
                    got = False
                    for at, h in rb.iter_batches(data, validate_crc=True,
                                                 allow_partial_tail=True):
                        for r in rb.decode_records(data[at:at + h.size]):
                            if r.offset >= pos and len(out) < limit:
                                out.append(r)
                                got = True
                        pos = max(pos, h.next_offset)
                    if not got or len(out) >= limit:
                        break
                return start, out
        try:
            start, recs = await self.client_call(browse)
        except (KafkaError, ValueError, OSError) as e:
            return self.page(f"Messages of {name}", f"<p class='bad'>{esc(e)}</p>")
        rows = [[esc(r.offset), esc(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(
                     r.timestamp / 1000))) + f".{r.timestamp % 1000:03d}Z", render_value(r.key, how),
                 "<br>".join(f"{esc(k)}: {render_value(v, how)}" for k, v in r.headers),
                 render_value(r.value, how)] for r in recs]

        def sel(v: str) -> str:
            return " selected" if v == how else ""
        form = (f"<form method='get'><label>partition <input name='partition' type='number' "
                f"min='0' value='{partition}'></label> <label>offset <input name='offset' "
                f"value='{esc(offset_q)}' placeholder='earliest'></label> <label>or time "
                f"<input name='timestamp' value='{esc(ts_q)}' placeholder='2024-05-01T12:00:00Z'>"
                f"</label> <label>limit <input name='limit' type='number' value='{limit}'>"
                f"</label> <select name='format'><option{sel('text')}>text</option>"
                f"<option{sel('json')}>json</option><option{sel('hex')}>hex</option></select> "
                f"<button type='submit'>Show</button></form>")
        body = form + (f"<p>From offset {start}: {len(recs)} record(s).</p>"
                       if start >= 0 else "<p>No record at or after that time.</p>")
        body += table(["offset", "timestamp", "key", "headers", "value"], rows)
        return self.page(f"Messages of {name} / {partition}", body)

    async def _group_view(self, gid: str | None) -> list[dict[str, Any]]:
        """Groups through the Kafka APIs (in a cluster: every coordinator, each
        partition's leader): state, members, committed offsets and log ends."""
        from jocko_py.cli_groups import GroupAdmin, parse_assignment

        def run(c: Any) -> list[dict[str, Any]]:
            adm = GroupAdmin(c)
            try:
                ids = [gid] if gid is not None else [g.group_id for g in adm.list_groups()]
                out = []
                for g_id in ids:
                    d = adm.describe(g_id)
                    committed = adm.committed(g_id)
                    members = []
                    owners: dict[tuple[str, int], str] = {}
                    for m in d.members:
                        assigned = parse_assignment(bytes(m.member_assignment or b""))
                        for t, ps in assigned.items():
                            for p in ps:
                                owners[(t, p)] = m.member_id
                        members.append((m.member_id, m.client_id, m.client_host, assigned))
                    if d.group_state == "Dead" and not members and not committed:
                        continue
                    rows = [(t, p, committed[(t, p)], adm.offset_for(t, p, -1),
                             owners.get((t, p), "-")) for t, p in sorted(committed)]
                    out.append({"id": g_id, "state": d.group_state,
                                "assignor": d.protocol_data or "-", "members": members,
                                "rows": rows})
                return out
            finally:
                adm.close()
        result: list[dict[str, Any]] = await self.client_call(run)
        return result

    async def groups(self, msg: str | None) -> Response:
        rows = []
        for g in await self._group_view(None):
            if not self.allowed("DESCRIBE", GROUP, g["id"]):
                continue
            lag = sum(max(0, end - off) for _, _, off, end, _ in g["rows"])
            q = urllib.parse.quote(g["id"])
            rows.append([f'<a href="/groups/{q}">{esc(g["id"])}</a>', esc(g["state"]),
                         esc(len(g["members"])), esc(g["assignor"]), esc(lag)])
        body = table(["group", "state", "members", "assignor", "total lag"], rows)
        return self.page("Consumer groups", body, msg)

    async def group(self, gid: str, msg: str | None) -> Response:
        self.require("DESCRIBE", GROUP, gid)
        found = await self._group_view(gid)
        if not found:
            return self.page("Group not found", f"<p>Consumer group '{esc(gid)}' does not "
                             "exist.</p>", msg)
        g = found[0]
        mrows = [[esc(mid), esc(cid), esc(host),
                  esc(", ".join(f"{t}: {sorted(ps)}" for t, ps in assigned.items()))]
                 for mid, cid, host, assigned in g["members"]]
        lrows = []
        chart = []
        for t, p, committed, end, owner in g["rows"]:
            lag = max(0, end - committed)
            lrows.append([esc(t), esc(p), esc(committed), esc(end),
                          f'<span class="lag">{esc(lag)}</span>', esc(owner)])
            chart.append((f"{t}-{p}", lag))
        body = (f"<p>State <b>{esc(g['state'])}</b>, assignor {esc(g['assignor'])}</p>"
                "<h2>Members</h2>"
                + table(["member", "client id", "host", "assignment"], mrows)
                + "<h2>Lag</h2>" + lag_chart(chart)
                + table(["topic", "partition", "committed", "log end", "lag", "member"], lrows))
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
            return self.page("Produce", "<p>The console is read-only.</p>", msg)
        body = ("<form method='post' action='/produce' id='produce'><label>topic <input "
                f"name='topic' required value='{esc(q.get('topic', ''))}'></label> <label>"
                "partition <input name='partition' type='number' min='0' placeholder='by key'>"
                "</label><br><label>key <input name='key'></label> <label><input "
                "type='checkbox' name='null_key' value='1'> null key</label><br><label>value"
                "<br><textarea name='value' rows='4' cols='60'></textarea></label><br><label>"
                "headers (one name=value per line)<br><textarea name='headers' rows='2' "
                "cols='40'></textarea></label><br><button type='submit'>Produce</button></form>")
        return self.page("Produce a message", body, msg)

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
        from jocko_py.cli_groups import GroupAdmin

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
        if topic not in self.broker.quorum.image.topics and not self.may_create_topic(topic):
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
                        if e.code not in (3, 5):
                            raise
                        time.sleep(0.1)
                raise KafkaError(5, topic)
        p, off = await self.client_call(run)
        return self.redirect(f"/produce?topic={urllib.parse.quote(topic)}",
                             f"Produced to {topic}-{p} at offset {off}")
