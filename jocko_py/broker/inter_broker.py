"""An asyncio Kafka client for broker-to-broker requests (replica fetches, requests
forwarded to the active controller, AlterPartition).

One `BrokerChannel` is one TCP connection to one broker; requests are pipelined and
matched to responses by correlation id. Correlation ids start at a random value per
channel, so a response that belongs to an earlier connection (or an earlier process)
can never be taken for the answer to a new request. A channel that fails is closed and
every pending request raises `ConnectionError`; the next request dials again.

Before its first request a channel authenticates as a broker of the cluster with
JOCKO-CLUSTER (a challenge-response over SaslHandshake/SaslAuthenticate keyed by the
cluster secret from the metadata log, `security/cluster_auth.py`), on every listener;
the other broker serves the broker-only APIs only to such connections. Until this
broker has applied the secret, connecting fails (ConnectionError: callers retry).
On an SSL / SASL_SSL inter-broker listener (`inter.broker.listener.name`) it speaks
TLS (`ClientSecurity.ssl`) first. (Without `cluster_key`, a channel authenticates with
SASL PLAIN or SCRAM: `sasl_mechanism`, `username`, `password`.) When the broker gives the
session a lifetime (`connections.max.reauth.ms`, KIP-368) the channel dials anew
(and so authenticates anew) once 80% of it has passed, between requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
from typing import Any

from jocko_py.broker.security.client import ClientSecurity as ClientSecurity
from jocko_py.protocol import codec

log = logging.getLogger("jocko_py.broker.inter_broker")

_LEN = struct.Struct(">i")
MAX_RESPONSE = 256 * 1024 * 1024


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, connect_timeout: float = 2.0,
                 security: ClientSecurity | None = None):
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security
        self.connect_timeout = connect_timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._corr = int.from_bytes(os.urandom(3), "big")
        self._read_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._session_expires: float | None = None  # loop time to re-authenticate by

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def _connect(self) -> None:
        async with self._lock:
            if self._writer is not None and not self._writer.is_closing():
                return
            sec = self.security
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host, self.port, ssl=sec.ssl if sec else None,
                    server_hostname=self.host if sec and sec.ssl else None),
                self.connect_timeout)
            self._session_expires = None
            if sec is not None and (sec.sasl_mechanism or sec.cluster_key is not None):
                try:
                    lifetime_ms = await asyncio.wait_for(
                        self._authenticate(reader, writer, sec), self.connect_timeout * 2)
                    if lifetime_ms > 0:
                        self._session_expires = asyncio.get_running_loop().time() + \
                            0.8 * lifetime_ms / 1000
                except BaseException:
                    writer.close()
                    raise
            self._writer = writer
            self._reader = reader
            self._read_task = asyncio.create_task(self._read_loop(reader))

    async def _call(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One request/response before the read loop runs (the SASL exchange)."""
        self._corr = (self._corr + 1) & 0x7FFFFFFF
        writer.write(codec.encode_request(api_key, version, self._corr, self.client_id, body))
        (size,) = _LEN.unpack(await reader.readexactly(4))
        if size < 4 or size > 1 << 20:
            raise ConnectionError(f"bad response size {size} from {self.address}")
        _, resp = codec.decode_response(api_key, version, await reader.readexactly(size))
        return resp

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            sec: ClientSecurity) -> int:
        """The SASL exchange; the session lifetime the broker gave (ms, 0: none)."""
        from jocko_py.broker.security.scram import ScramClient, ScramError

        if sec.cluster_key is not None:
            return await self._authenticate_broker(reader, writer, sec)
        mech = sec.sasl_mechanism or "PLAIN"
        hs = await self._call(reader, writer, 17, 1, {"mechanism": mech})
        if hs.error_code:
            raise ConnectionError(f"{self.address} refused SASL mechanism {mech}")
        if mech == "PLAIN":
            tokens = [f"\0{sec.username}\0{sec.password}".encode()]
        else:
            scram = ScramClient(mech, sec.username, sec.password)
            tokens = [scram.first()]
        r = await self._call(reader, writer, 36, 2, {"auth_bytes": tokens[0]})
        if not r.error_code and mech != "PLAIN":
            r = await self._call(reader, writer, 36, 2,
                                 {"auth_bytes": scram.final(bytes(r.auth_bytes))})
            if not r.error_code:
                try:
                    scram.verify(bytes(r.auth_bytes))
                except ScramError as e:
                    raise ConnectionError(f"{self.address}: {e}") from None
        if r.error_code:
            raise ConnectionError(
                f"SASL authentication to {self.address} failed: {r.error_message}")
        return int(r.session_lifetime_ms)

    async def _authenticate_broker(self, reader: asyncio.StreamReader,
                                   writer: asyncio.StreamWriter, sec: ClientSecurity) -> int:
        """JOCKO-CLUSTER (`security/cluster_auth.py`): prove this broker knows the cluster
        secret, and check that the other one does."""
        from jocko_py.broker.security.cluster_auth import (
            MECHANISM,
            ClusterAuthClient,
            ClusterAuthError,
        )

        assert sec.cluster_key is not None
        key = sec.cluster_key()
        if key is None:
            raise ConnectionError("the cluster secret is not known yet (metadata not applied)")
        hs = await self._call(reader, writer, 17, 1, {"mechanism": MECHANISM})
        if hs.error_code:
            raise ConnectionError(f"{self.address} refused broker authentication "
                                  f"({hs.error_code})")
        auth = ClusterAuthClient(sec.cluster_broker_id, key)
        r = await self._call(reader, writer, 36, 2, {"auth_bytes": auth.first()})
        try:
            if not r.error_code:
                r = await self._call(reader, writer, 36, 2,
                                     {"auth_bytes": auth.final(bytes(r.auth_bytes))})
                if not r.error_code:
                    auth.verify(bytes(r.auth_bytes))
        except ClusterAuthError as e:
            raise ConnectionError(f"broker authentication to {self.address}: {e}") from None
        if r.error_code:
            raise ConnectionError(
                f"broker authentication to {self.address} failed: {r.error_message}")
        return int(r.session_lifetime_ms)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        err: BaseException = ConnectionError(f"connection to {self.address} closed")
        try:
            while True:
                (size,) = _LEN.unpack(await reader.readexactly(4))
                if size < 4 or size > MAX_RESPONSE:
                    raise ConnectionError(f"bad response size {size} from {self.address}")
                frame = await reader.readexactly(size)
                (corr,) = struct.unpack_from(">i", frame, 0)
                entry = self._pending.pop(corr, None)
                if entry is None:
                    log.debug("response with unknown correlation id %d from %s", corr,
                              self.address)
                    continue
                api_key, version, fut = entry
                if fut.done():
                    continue
                try:
                    _, resp = codec.decode_response(api_key, version, frame)
                except Exception as e:  # a garbled response fails that request only
                    fut.set_exception(ConnectionError(f"undecodable response: {e}"))
                    continue
                fut.set_result(resp)
        except (asyncio.IncompleteReadError, OSError, ConnectionError) as e:
            err = ConnectionError(f"connection to {self.address} lost: {e}")
        except asyncio.CancelledError:
            err = ConnectionError(f"connection to {self.address} closed")
            raise
        finally:
            self._fail_all(err)

    def _fail_all(self, err: BaseException) -> None:
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
        if self._writer is not None:
            self._writer.close()
        self._writer = None

    async def request(self, api_key: int, version: int, body: dict[str, Any],
                      timeout: float) -> Any:
        """Send one request and wait (bounded) for its response."""
        if self._session_expires is not None and not self._pending and \
                asyncio.get_running_loop().time() >= self._session_expires:
            await self.close()  # a new connection authenticates anew (KIP-368)
        try:
            await self._connect()
        except (OSError, TimeoutError) as e:
            raise ConnectionError(f"cannot connect to {self.address}: {e}") from e
        assert self._writer is not None
        self._corr = (self._corr + 1) & 0x7FFFFFFF
        corr = self._corr
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[corr] = (api_key, version, fut)
        self._writer.write(codec.encode_request(api_key, version, corr, self.client_id, body))
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            self._pending.pop(corr, None)
            # the connection may be wedged: start afresh next time
            await self.close()
            raise

    async def close(self) -> None:
        if self._read_task is not None:
            self._read_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._read_task
            self._read_task = None
        self._fail_all(ConnectionError(f"channel to {self.address} closed"))
