"""A TCP proxy between clients and one broker that decodes what crosses it.

The broker advertises the proxy's address (`advertised.listeners`), so a client's every
connection goes through it. Each Fetch request and response is decoded with the
project's codec (requests and responses are forwarded unchanged, byte for byte), so a
test can assert what the client put on the wire: session ids, epochs, partition counts.
The requests and responses of the API keys in `record` are kept too (`exchanges`).
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

from jocko_py.broker import api
from jocko_py.broker.handlers import load_all
from jocko_py.protocol import codec

FETCH = 1


@dataclass
class FetchExchange:
    version: int
    request: Any
    response: Any = None


@dataclass
class Exchange:
    api_key: int
    version: int
    request: Any
    response: Any = None


@dataclass
class WireTap:
    upstream: tuple[str, int]
    port: int = 0
    fetches: list[FetchExchange] = field(default_factory=list)
    # API keys whose requests and responses are kept in `exchanges`
    record: frozenset[int] = frozenset()
    exchanges: list[Exchange] = field(default_factory=list)
    _sock: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _closing: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> WireTap:
        load_all()
        self._served = api.served_versions()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        s.settimeout(0.2)
        self.port = s.getsockname()[1]
        self._sock = s
        self._spawn(self._accept_loop)
        return self

    def _spawn(self, fn: Any, *args: Any) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._closing:
            try:
                client, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:  # the broker is not listening (yet, or any more)
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            pending: dict[int, FetchExchange | Exchange] = {}
            self._spawn(self._pump, client, upstream, pending, True)
            self._spawn(self._pump, upstream, client, pending, False)

    def _pump(self, src: socket.socket, dst: socket.socket,
              pending: dict[int, FetchExchange | Exchange], requests: bool) -> None:
        buf = bytearray()
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                # a request is registered before it is forwarded: forwarded first, its
                # response could come back (on the other pump's thread) before the
                # request is known, and the exchange would be left without one
                buf += data
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    frame = bytes(buf[4:4 + size])
                    del buf[:4 + size]
                    self._observe(frame, pending, requests)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _observe(self, frame: bytes, pending: dict[int, FetchExchange | Exchange],
                 request: bool) -> None:
        if request:
            head = codec.peek_header(frame)
            if head.api_key == FETCH:
                req = codec.decode_request(frame, self._served)
                ex = FetchExchange(head.api_version, req.body)
                with self._lock:
                    pending[head.correlation_id] = ex
                    self.fetches.append(ex)
            elif head.api_key in self.record:
                req = codec.decode_request(frame, self._served)
                gx = Exchange(head.api_key, head.api_version, req.body)
                with self._lock:
                    pending[head.correlation_id] = gx
                    self.exchanges.append(gx)
            return
        (cid,) = struct.unpack_from(">i", frame, 0)
        with self._lock:
            ex = pending.pop(cid, None)
        if isinstance(ex, FetchExchange):
            _, ex.response = codec.decode_response(FETCH, ex.version, frame)
        elif ex is not None:
            _, ex.response = codec.decode_response(ex.api_key, ex.version, frame)

    def close(self) -> None:
        self._closing = True
        if self._sock is not None:
            self._sock.close()

    def snapshot(self) -> list[FetchExchange]:
        with self._lock:
            return [f for f in self.fetches if f.response is not None]

    def recorded(self, api_key: int) -> list[Exchange]:
        """The exchanges of ``api_key`` (one of `record`), in request order."""
        with self._lock:
            return [x for x in self.exchanges if x.api_key == api_key]
