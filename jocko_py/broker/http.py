"""A small HTTP/1.1 server on the broker's event loop, for its admin endpoints.

Owns request parsing and response writing for the metrics endpoint and the web
console: one request per connection (`Connection: close`), GET/HEAD/POST, bodies up
to 1 MiB (urlencoded forms), a bounded wait for the request. Handlers are coroutines
taking a `Request` and returning a `Response`; nothing here knows Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("jocko_py.broker.http")

MAX_HEAD = 16 * 1024
MAX_BODY = 1 << 20
READ_TIMEOUT_S = 10.0
REASONS = {200: "OK", 303: "See Other", 400: "Bad Request", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large",
           500: "Internal Server Error"}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str] = field(default_factory=dict)


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]


class HttpServer:
    def __init__(self, host: str, port: int, handler: Handler, name: str) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.name = name
        self.server: asyncio.Server | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, self.host, self.port,
                                                 reuse_address=True, limit=MAX_HEAD)
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
            req = Request(method, urllib.parse.unquote(url.path),
                          dict(urllib.parse.parse_qsl(url.query)))
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
                resp = await self.handler(req)
            except Exception:
                log.exception("%s: %s %s failed", self.name, method, req.path)
                resp = Response(500, b"internal error (see the broker log)\n", "text/plain")
            await self._write(writer, resp, head_only=method == "HEAD")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError, ValueError):
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
