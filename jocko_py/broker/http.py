"""A small HTTP/1.1 server on the broker's event loop, for its admin endpoints.

Owns request parsing and response writing for the metrics endpoint and the web
console: one request per connection (`Connection: close`), GET/HEAD/POST, bodies up
to 1 MiB (urlencoded forms), a bounded wait for the request, TLS when given a
context. Handlers are coroutines taking a `Request` and returning a `Response`; an
`authenticate` hook runs first and either names the request's principal or answers
it (401, 403). Nothing here knows Kafka (the hook is broker/security/http_access.py).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from jocko_py.cluster.addr import bind_error

log = logging.getLogger("jocko_py.broker.http")

MAX_HEAD = 16 * 1024
MAX_BODY = 1 << 20
READ_TIMEOUT_S = 10.0
REASONS = {200: "OK", 303: "See Other", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large",
           500: "Internal Server Error"}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case
    peer: str = ""  # the client's address
    ssl_object: Any = None  # the TLS connection's, for the peer certificate
    principal: str | None = None  # set by the authenticate hook (None: no authentication)


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]
# answers the request itself (a Response) or lets it through (None), having set
# `request.principal`
Authenticate = Callable[[Request], Awaitable[Response | None]]


class HttpServer:
    def __init__(self, host: str, port: int, handler: Handler, name: str,
                 ssl_context: ssl.SSLContext | None = None,
                 authenticate: Authenticate | None = None) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.name = name
        self.ssl_context = ssl_context
        self.authenticate = authenticate
        self.server: asyncio.Server | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    async def start(self) -> None:
        try:
            self.server = await asyncio.start_server(
                self._serve, self.host, self.port, reuse_address=True, limit=MAX_HEAD,
                ssl=self.ssl_context,
                ssl_handshake_timeout=READ_TIMEOUT_S if self.ssl_context is not None else None)
        except OSError as e:
            raise bind_error(self.name, self.host, self.port, e) from None
        self.port = int(self.server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split()
            if len(parts) < 2:
                await self._write(writer, Response(400, b"bad request\n", "text/plain"))
                return
            method, target = parts[0], parts[1]
            headers = {}
            for line in lines[1:]:
                k, sep, v = line.partition(":")
                if sep:
                    headers[k.strip().lower()] = v.strip()
            url = urllib.parse.urlsplit(target)
            peer = writer.get_extra_info("peername")
            req = Request(method, urllib.parse.unquote(url.path),
                          dict(urllib.parse.parse_qsl(url.query)), headers=headers,
                          peer=str(peer[0]) if peer else "",
                          ssl_object=writer.get_extra_info("ssl_object"))
            if method == "POST":
                n = int(headers.get("content-length", "0") or 0)
                if n > MAX_BODY:
                    await self._write(writer, Response(413, b"too large\n", "text/plain"))
                    return
                body = await asyncio.wait_for(reader.readexactly(n), READ_TIMEOUT_S)
                req.form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"),
                                                       keep_blank_values=True))
            elif method not in ("GET", "HEAD"):
                await self._write(writer, Response(405, b"method not allowed\n", "text/plain"))
                return
            try:
                denied = await self.authenticate(req) if self.authenticate else None
                resp = denied if denied is not None else await self.handler(req)
            except Exception:
                log.exception("%s: %s %s failed", self.name, method, req.path)
                resp = Response(500, b"internal error (see the broker log)\n", "text/plain")
            await self._write(writer, resp, head_only=method == "HEAD")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError, ValueError, ssl.SSLError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, r: Response, head_only: bool = False) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in r.headers.items())
        writer.write(
            f"HTTP/1.1 {r.status} {REASONS.get(r.status, 'OK')}\r\n"
            f"Content-Type: {r.content_type}\r\nContent-Length: {len(r.body)}\r\n{extra}"
            "Connection: close\r\n\r\n".encode())
        if not head_only:
            writer.write(r.body)
        await writer.drain()
