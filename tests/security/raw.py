"""A raw Kafka connection for protocol-level security tests (optionally TLS)."""

from __future__ import annotations

import base64
import re
import socket
import ssl
import struct
from pathlib import Path
from typing import Any

from jocko_py.protocol import codec

IO_TIMEOUT = 10.0
_SECRET = re.compile(rb'\{"d":\{"secret":"([A-Za-z0-9+/=]+)"\},"k":10000,')


def cluster_secret(data_dir: Path) -> bytes:
    """The cluster secret as a broker's metadata log on disk holds it (only a broker,
    or whoever can read its data directory, knows it)."""
    for f in sorted(Path(data_dir).rglob("*")):
        if f.is_file() and ("raft" in f.parts or f.name == "__cluster_metadata.log"):
            m = _SECRET.search(f.read_bytes())
            if m:
                return base64.b64decode(m.group(1))
    raise AssertionError(f"no cluster secret in the metadata log under {data_dir}")


class Raw:
    def __init__(self, addr: str, ca: str | None = None, cert: tuple[str, str] | None = None
                 ) -> None:
        host, _, port = addr.rpartition(":")
        s = socket.create_connection((host, int(port)), timeout=IO_TIMEOUT)
        if ca is not None:
            ctx = ssl.create_default_context(cafile=ca)
            if cert is not None:
                ctx.load_cert_chain(*cert)
            s = ctx.wrap_socket(s, server_hostname="localhost")
        self.sock = s
        self.corr = 0
        self.client_id = "raw-test"

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        self.corr += 1
        self.sock.sendall(codec.encode_request(api_key, version, self.corr, self.client_id, body))
        return self.corr

    def _exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, ssl.SSLError):
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def recv(self, api_key: int, version: int) -> Any:
        """The response body, or None if the broker closed the connection."""
        head = self._exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        frame = self._exact(size)
        if frame is None:
            return None
        _, body = codec.decode_response(api_key, version, frame)
        return body

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.send(api_key, version, body)
        return self.recv(api_key, version)

    def closed(self) -> bool:
        """True once the broker has closed this connection (waits up to IO_TIMEOUT)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True
        except TimeoutError:
            return False

    # SASL helpers
    def login(self, user: str, password: str) -> Raw:
        """SASL/PLAIN; asserts success."""
        assert self.handshake("PLAIN").error_code == 0
        r = self.authenticate(f"\0{user}\0{password}".encode())
        assert r.error_code == 0, r.error_message
        return self

    def broker_login(self, broker_id: int, secret: bytes) -> Raw:
        """JOCKO-CLUSTER as broker ``broker_id`` (a broker's own connection); asserts
        success, and that the broker proved it knows the secret too."""
        from jocko_py.broker.security.cluster_auth import (
            MECHANISM,
            ClusterAuthClient,
            derive_key,
        )

        assert self.handshake(MECHANISM).error_code == 0
        auth = ClusterAuthClient(broker_id, derive_key(secret))
        r = self.authenticate(auth.first())
        assert r.error_code == 0, r.error_message
        r = self.authenticate(auth.final(bytes(r.auth_bytes)))
        assert r.error_code == 0, r.error_message
        auth.verify(bytes(r.auth_bytes))
        return self

    def handshake(self, mechanism: str) -> Any:
        return self.call(17, 1, {"mechanism": mechanism})

    def authenticate(self, token: bytes, version: int = 2) -> Any:
        return self.call(36, version, {"auth_bytes": token})
