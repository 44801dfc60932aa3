"""One client connection: frames in, responses out, in request order.

Like Kafka, a connection processes one request at a time: the next frame is not
handled until the previous response is queued, so responses leave in request
order. The responses to the frames of one read leave in one write, except that
a handler about to park (long-poll fetch, acks=all, rebalance) first sends the
ones already queued (`purgatory.before_park`), so no reply waits behind a later
request. Bytes that do not parse close this connection only (logged once);
handler failures are logged with the request and also close the connection,
so a client reconnects and retries instead of waiting for a reply that will not
come.

Security: the connection's `Session` (see `security/session.py`) carries its
listener and principal. On a SASL listener only ApiVersions and the SASL exchange
are served before authentication (anything else closes the connection), frames
are capped at `sasl.server.max.receive.size` until then, a connection that has not
authenticated within `connections.max.idle.ms` is closed, and a failed
authentication is answered after a delay and the connection closed. A controller
API (`broker_only` in the registry) from a connection that is not a broker's
(`SecurityManager.is_cluster_peer`) closes the connection, as Kafka does for an API
its listener does not enable.

Zero-copy (a connection without TLS, `jocko.zero.copy.enable`): a Fetch response's
big record sets are regions of segment files (`FileRegion`), sent with `sendfile`
straight from the page cache once the bytes before them have left, so serving big
fetches neither copies the records through Python nor holds them in memory; responses
still leave in request order and each frame is exactly the one encoded. A region's last
byte goes out with what follows it only after checking that the file still holds the
bytes read: a segment truncated meanwhile (a leader change) closes the connection, as
Kafka's `FileRecords.writeTo` does, with the frame incomplete rather than complete
with other bytes. A segment deleted meanwhile is no harm (the region sends from a
descriptor of its own, so the old bytes stay readable) unless it was deleted before
its send began (the connection is closed: the client fetches again). A TLS connection,
and a park hook's flush (`flush`, synchronous), read regions into memory.

Idle connections: `idle_since` is the time the connection started waiting for the
client's next bytes (None while a request is being handled, parked included); the
server closes a connection idle for longer than `connections.max.idle.ms` (Kafka's
default 10 minutes), as Kafka's Selector does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, cast

from jocko_py.broker import api as api_mod
from jocko_py.broker.api import NO_RESPONSE, RequestContext
from jocko_py.broker.config import Listener
from jocko_py.broker.log_context import LOG_CONTEXT
from jocko_py.broker.purgatory import PARK_HOOK, PARK_TIME
from jocko_py.broker.security.sasl import SaslFailed
from jocko_py.broker.security.session import AuthenticationError, Session
from jocko_py.commitlog.errors import KafkaStorageError
from jocko_py.commitlog.segment import FileRegion, RegionChanged
from jocko_py.protocol import codec, messages
from jocko_py.protocol.errors import ErrorCode, ProtocolError
from jocko_py.protocol.framing import FrameDecoder
from jocko_py.protocol.wire import OutOfLine, Part

if TYPE_CHECKING:
    from jocko_py.broker.core import Broker

log = logging.getLogger("jocko_py.broker.connection")

API_VERSIONS = 18
# never counted against a request_percentage quota (Kafka: connection set-up and the
# cluster actions brokers and controllers send each other)
# (and nothing a broker of the cluster sends: its session has cluster_broker_id)
QUOTA_EXEMPT = frozenset({17, 18, 36,  # SaslHandshake, ApiVersions, SaslAuthenticate
                          4, 5, 6, 7, 27, 52, 53, 54, 56, 58, 62, 63, 67})
READ_CHUNK = 256 * 1024
FETCH = 1

# (client id, api key, version) already logged for trailing bytes; bounded
_TRAILING_LOGGED: set[tuple[str | None, int, int]] = set()
_TRAILING_LOGGED_MAX = 1024


def note_trailing_bytes(peer: str, header: codec.RequestHeader, n: int) -> None:
    """Log at debug, once per client id, API and version, that a body had extra bytes."""
    key = (header.client_id, header.api_key, header.api_version)
    if key in _TRAILING_LOGGED or len(_TRAILING_LOGGED) >= _TRAILING_LOGGED_MAX:
        return
    _TRAILING_LOGGED.add(key)
    log.debug(
        "[peer=%s] %s v%d (client %s): %d bytes after the request body, ignored as Kafka does",
        peer, messages.api_name(header.api_key), header.api_version, header.client_id, n,
    )


def api_versions_fallback(header: codec.RequestHeader) -> bytes:
    """v0 ApiVersions reply with UNSUPPORTED_VERSION and the ranges we serve."""
    body = {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, lo, hi in api_mod.advertised_versions()  # a client's view
        ],
    }
    return bytes(codec.encode_response(API_VERSIONS, 0, header.correlation_id, body))


class Connection:
    def __init__(
        self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        listener: Listener | None = None,
    ) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if listener is None:
            listener = broker.config.listeners[0] if broker.config.listeners else \
                Listener("PLAINTEXT", "PLAINTEXT", broker.config.host, broker.config.port)
        self.listener = listener
        self.session: Session | None = None
        self.decoder = FrameDecoder(broker.config.socket_request_max_bytes)
        self.served = api_mod.served_versions()
        self.entries = api_mod.registry()
        # the fields every log line of this connection's task carries (logfmt.py)
        self.log_context: dict[str, str] = {"peer": self.peer}
        # responses handled but not yet written (see `flush`)
        self.outs: list[Part] = []
        self.has_regions = False  # some of `outs` are FileRegions (see `send`)
        self.zero_copy = writer.get_extra_info("ssl_object") is None and \
            writer.get_extra_info("socket") is not None and \
            broker.config.bool("jocko.zero.copy.enable")
        # monotonic time since which the connection waits for the client (idle)
        self.idle_since: float | None = time.monotonic()

    def flush(self) -> None:
        """Write the queued responses now (synchronous: file regions are read)."""
        if self.outs:
            outs, self.outs = self.outs, []
            if self.writer.is_closing():
                self.has_regions = False
                return  # the peer went away: nobody to answer (not a handler failure)
            if not self.has_regions:
                self.writer.writelines(cast("list[bytes]", outs))
                return
            self.has_regions = False
            try:
                data = [p.read() if isinstance(p, OutOfLine) else p for p in outs]
            except (RegionChanged, KafkaStorageError) as e:
                log.warning("[peer=%s] closing connection: %s", self.peer, e)
                self.writer.close()
                return
            self.writer.writelines(data)

    async def send(self) -> None:
        """Write the queued responses, in order, the file regions among them with
        sendfile (see the module docstring). RegionChanged: the caller closes."""
        if not self.has_regions:
            self.flush()
            return
        self.has_regions = False
        outs, self.outs = self.outs, []
        if self.writer.is_closing():
            return
        pending: list[bytes | bytearray | memoryview] = []
        for p in outs:
            if isinstance(p, FileRegion):
                if pending:
                    self.writer.writelines(pending)
                    pending = []
                pending.append(await self._send_region(p))
            else:
                pending.append(p.read() if isinstance(p, OutOfLine) else p)
        if pending:
            self.writer.writelines(pending)

    async def _send_region(self, region: FileRegion) -> bytes:
        """Send all of ``region`` but its last byte from the file, after what the
        transport holds; return that byte, read once the bytes sent are known to be
        the ones read (RegionChanged otherwise). Out of descriptors for the two dups
        (file, socket): the region is read instead."""
        stats = self.broker.stats
        try:
            src = region.open()
        except OSError:
            stats.zero_copy_fallback_bytes += region.size
            return region.read()
        try:
            sock = self.writer.get_extra_info("socket")
            try:
                # a descriptor of our own to wait on: the loop refuses to watch the
                # transport's, and the transport is idle (empty) meanwhile
                dst = os.dup(sock.fileno())
            except OSError:
                stats.zero_copy_fallback_bytes += region.size
                return region.read()
            try:
                await self._drain_all()
                pos, left = region.position, region.size - 1
                while left > 0:
                    try:
                        n = os.sendfile(dst, src, pos, left)
                    except BlockingIOError:
                        await _writable(dst)
                        continue
                    if n == 0:  # end of file: it was cut
                        region.check(opened=True)
                        raise RegionChanged(f"{region!r}: the file ends at {pos}")
                    pos += n
                    left -= n
                region.check(opened=True)
                last = os.pread(src, 1, pos)
                if len(last) != 1:
                    raise RegionChanged(f"{region!r}: the file ends at {pos}")
                stats.zero_copy_bytes += region.size
                return last
            finally:
                os.close(dst)
        finally:
            region.close(src)

    async def _drain_all(self) -> None:
        """Until the transport has written everything it holds."""
        transport = self.writer.transport
        if transport.get_write_buffer_size() == 0:
            return
        low, high = transport.get_write_buffer_limits()
        transport.set_write_buffer_limits(high=0, low=0)
        try:
            while transport.get_write_buffer_size() > 0:
                await self.writer.drain()
                if transport.is_closing():
                    raise ConnectionResetError("connection closed while writing")
        finally:
            if not transport.is_closing():
                transport.set_write_buffer_limits(high=high, low=low)

    async def run(self) -> None:
        PARK_HOOK.set(self.flush)  # this task's own context: only this connection's handlers
        LOG_CONTEXT.set(self.log_context)  # log lines of this task carry the peer
        try:
            host = self.peer.rpartition(":")[0] or self.peer
            try:
                self.session = session = self.broker.security.new_session(
                    self.listener, host, self.writer.get_extra_info("ssl_object"))
            except AuthenticationError as e:
                log.info("[peer=%s listener=%s] closing connection: %s", self.peer,
                         self.listener.name, e)
                return
            auth_deadline = None
            if not session.authenticated:
                self.decoder.max_frame_bytes = min(self.decoder.max_frame_bytes,
                                                   self.broker.security.sasl_max_receive)
                self.decoder.limit_name = "sasl.server.max.receive.size"
                auth_deadline = asyncio.get_running_loop().time() + \
                    self.broker.security.authentication_timeout_s
            while True:
                if auth_deadline is not None and not session.authenticated:
                    try:
                        data = await asyncio.wait_for(
                            self.reader.read(READ_CHUNK),
                            max(0.0, auth_deadline - asyncio.get_running_loop().time()))
                    except TimeoutError:
                        log.info("[peer=%s listener=%s] closing connection: not authenticated "
                                 "within connections.max.idle.ms", self.peer, self.listener.name)
                        return
                else:
                    self.idle_since = time.monotonic()
                    data = await self.reader.read(READ_CHUNK)
                    self.idle_since = None
                if not data:
                    return
                # Responses to the frames of one read leave in one write: a pipelining
                # client (Java: 5 in flight) would otherwise cost a syscall per response.
                for frame in self.decoder.feed(data):
                    if not self.broker.serving.is_set():
                        # as Kafka's broker: no request is processed before the broker
                        # has caught up with the metadata (a restarted broker would
                        # otherwise answer from an empty image: "topic unknown")
                        await self.broker.serving.wait()
                    out = await self.handle(frame)
                    if out is not None:
                        self.outs.extend(out)
                    if session.close_after_response is not None:
                        # a failed or refused authentication: answer (after the delay
                        # that slows password guessing) and close
                        await asyncio.sleep(session.close_after_response)
                        self.flush()
                        return
                    if session.authenticated and \
                            self.decoder.max_frame_bytes != self.broker.config.socket_request_max_bytes:
                        self.decoder.max_frame_bytes = self.broker.config.socket_request_max_bytes
                        self.decoder.limit_name = "socket.request.max.bytes"
                await self.send()
                if self.writer.transport.get_write_buffer_size() > 4 * 1024 * 1024:
                    await self.writer.drain()
                if session.muted_until:
                    # over a client quota: read nothing more until the throttle ends
                    wait = session.muted_until - time.monotonic()
                    session.muted_until = 0.0
                    if wait > 0:
                        await asyncio.sleep(wait)
        except ProtocolError as e:
            # the replies to the good frames before the bad one still go out
            self.flush()
            log.warning("[peer=%s] closing connection: %s", self.peer, e)
        except (RegionChanged, KafkaStorageError) as e:
            # as Kafka closes a connection whose FileRecords shrank while being sent
            log.warning("[peer=%s] closing connection: %s", self.peer, e)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:  # never let one connection's failure escape as a traceback
            log.exception("[peer=%s] connection failed; closing it", self.peer)
        finally:
            self.writer.close()
            # the share sessions opened on this connection end with it (KIP-932)
            closed = getattr(self.broker.share_partitions, "connection_closed", None)
            if closed is not None:
                closed(self.peer)

    async def handle(self, frame: bytes | bytearray) -> list[Part] | None:
        session = self.session
        if session is not None and session.raw_tokens:
            # a bare SASL token after a v0 SaslHandshake; the answer is bare too
            try:
                token = session.raw_step(bytes(frame), self.broker.security.failed_auth_delay_s)
            except SaslFailed as e:
                log.info("[peer=%s listener=%s] %s", self.peer, self.listener.name, e.message)
                return None
            return [len(token).to_bytes(4, "big"), token]
        try:
            request = codec.decode_request(frame, self.served)
        except codec.UnsupportedRequest as e:
            if e.header.api_key == API_VERSIONS:
                return [api_versions_fallback(e.header)]
            raise
        header = request.header
        if header.client_id is not None:
            self.log_context["client_id"] = header.client_id
        if request.trailing:
            note_trailing_bytes(self.peer, header, request.trailing)
        if session is not None:
            why = session.gate(header.api_key)
            if why is not None:
                raise ProtocolError(f"{why} ({messages.api_name(header.api_key)}) on listener "
                                    f"{self.listener.name}")
        entry = self.entries[header.api_key]
        if entry.broker_only and not self.broker.security.is_cluster_peer(session):
            # as Kafka closes a connection sending an API its listener does not enable
            raise ProtocolError(f"{messages.api_name(header.api_key)} is served to brokers "
                                f"only (principal {session.principal if session else '?'})")
        ctx = RequestContext(header, self.broker, self.peer, session,
                             self.zero_copy and header.api_key == FETCH)
        waited = [0.0]
        PARK_TIME.set(waited)
        t0 = time.perf_counter()
        stats = self.broker.stats
        try:
            body = await entry.handler(ctx, request.body)
        except ProtocolError:
            raise
        except Exception as e:
            log.exception(
                "[peer=%s] %s v%d (client %s) failed; closing connection",
                self.peer, messages.api_name(header.api_key), header.api_version,
                header.client_id,
            )
            raise ProtocolError(f"handler failed: {e!r}") from e
        if body is NO_RESPONSE:
            stats.requests[header.api_key].observe(time.perf_counter() - t0)
            return None
        if session is not None and header.api_key not in QUOTA_EXEMPT and \
                session.cluster_broker_id is None and self.broker.security.quotas_set():
            busy_us = int((time.perf_counter() - t0 - waited[0]) * 1e6)
            ms = self.broker.security.throttle(session, header.client_id,
                                               "request_percentage", max(busy_us, 0))
            if ms and isinstance(body, dict) and "throttle_time_ms" in body and \
                    ms > (body["throttle_time_ms"] or 0):
                body["throttle_time_ms"] = ms
        try:
            out = codec.encode_response_parts(
                header.api_key, header.api_version, header.correlation_id, body
            )
        except Exception as e:  # a handler built a body its version cannot carry
            log.exception("[peer=%s] %s v%d (client %s): response cannot be encoded",
                          self.peer, messages.api_name(header.api_key), header.api_version,
                          header.client_id)
            raise ProtocolError(f"response cannot be encoded: {e!r}") from e
        stats.requests[header.api_key].observe(time.perf_counter() - t0)
        stats.count_errors(header.api_key, body)
        if ctx.zero_copy and any(isinstance(p, OutOfLine) for p in out):
            self.has_regions = True
        return out


async def _writable(fd: int) -> None:
    """Until ``fd`` (a socket) can take more bytes."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await ready
    finally:
        loop.remove_writer(fd)
