"""A small blocking Kafka client on the project's own codec, for the CLI and tools.

It speaks to one bootstrap broker (all that a single node needs), negotiates
nothing fancy: fixed request versions that the broker serves.

Security (the CLI's `--command-config FILE`, Kafka client property names):
`security.protocol` PLAINTEXT / SSL / SASL_PLAINTEXT / SASL_SSL;
`ssl.truststore.location` (PEM CA file; default: the system's CAs),
`ssl.keystore.location` (PEM key + certificate, for client authentication),
`ssl.key.password`, `ssl.endpoint.identification.algorithm` (empty: no host name
check); `sasl.mechanism` PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512 with
`sasl.jaas.config` (`username="..." password="..."`) or `sasl.username` /
`sasl.password`.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
from pathlib import Path
from typing import Any

from jocko_py.protocol import codec
from jocko_py.protocol.errors import ErrorCode
from jocko_py.protocol.errors import KafkaError as KafkaError  # what the client raises


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (the Java client's key hash), as a signed 32-bit int."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The Java producer's default partition for a non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def parse_addr(addr: str, what: str = "--bootstrap-server") -> tuple[str, int]:
    """`host:port` (IPv6 in brackets); a ValueError naming ``what`` otherwise."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        raise ValueError(f"{what}: {addr.strip()!r} is not host:port")
    return host.strip("[]"), int(port)


# client security properties used when a Client is given none (`--command-config`)
_DEFAULT_CONFIG: dict[str, str] = {}


def set_default_config(props: dict[str, str]) -> None:
    _DEFAULT_CONFIG.clear()
    _DEFAULT_CONFIG.update(props)


def load_command_config(path: str) -> dict[str, str]:
    """A `--command-config` properties file; raises ValueError with a one-line reason."""
    from jocko_py.broker.config import parse_properties

    try:
        props = parse_properties(Path(path).read_text())
    except OSError as e:
        raise ValueError(f"--command-config {path}: {e.strerror or e}") from None
    proto = props.get("security.protocol", "PLAINTEXT").upper()
    if proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError(f"--command-config {path}: unknown security.protocol {proto}")
    if proto.startswith("SASL"):
        mech = props.get("sasl.mechanism", "GSSAPI").upper()
        if mech not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"--command-config {path}: sasl.mechanism {mech} is not supported "
                             "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    return props


class Client:
    def __init__(self, bootstrap: str, client_id: str = "jocko-py-cli", timeout: float = 30.0,
                 config: dict[str, str] | None = None, ssl_context: ssl.SSLContext | None = None):
        self.config = dict(_DEFAULT_CONFIG if config is None else config)
        # a ready TLS context (the broker's own, for its console) instead of ssl.* properties
        self.ssl_context = ssl_context
        # a comma-separated list: the first broker that answers
        err: OSError | None = None
        addrs = [parse_addr(a) for a in bootstrap.split(",") if a.strip()]
        for host, port in addrs:
            try:
                self.sock = socket.create_connection((host, port), timeout=timeout)
                self.addr = f"{host}:{port}"
                break
            except OSError as e:
                err = e
        else:
            raise err or OSError(f"no broker address in {bootstrap!r}")
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.client_id = client_id
        self._corr = itertools.count(1)
        try:
            self._secure(host or "localhost")
        except BaseException:
            self.sock.close()
            raise

    def _secure(self, host: str) -> None:
        cfg = self.config
        proto = cfg.get("security.protocol", "PLAINTEXT").upper()
        if proto in ("SSL", "SASL_SSL"):
            ctx = self.ssl_context
            if ctx is None:
                ctx = ssl.create_default_context(
                    cafile=cfg.get("ssl.truststore.location") or None)
                if cfg.get("ssl.endpoint.identification.algorithm", "https") == "":
                    ctx.check_hostname = False
                if cfg.get("ssl.keystore.location"):
                    ctx.load_cert_chain(cfg["ssl.keystore.location"],
                                        password=cfg.get("ssl.key.password") or None)
            self.sock = ctx.wrap_socket(self.sock, server_hostname=host)
        if proto.startswith("SASL"):
            self._sasl()

    def _sasl(self) -> None:
        from jocko_py.broker.security.sasl import jaas_options
        from jocko_py.broker.security.scram import ScramClient, ScramError

        cfg = self.config
        mech = cfg.get("sasl.mechanism", "GSSAPI").upper()
        opts = jaas_options(cfg.get("sasl.jaas.config", ""))
        user = opts.get("username", cfg.get("sasl.username", ""))
        password = opts.get("password", cfg.get("sasl.password", ""))
        hs = self.request(17, 1, {"mechanism": mech})
        if hs.error_code:
            raise KafkaError(hs.error_code, f"mechanism {mech}; the broker offers "
                             f"{', '.join(hs.mechanisms)}")
        if mech == "PLAIN":
            r = self.request(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})
        else:
            scram = ScramClient(mech, user, password)
            r = self.request(36, 2, {"auth_bytes": scram.first()})
            if not r.error_code:
                r = self.request(36, 2, {"auth_bytes": scram.final(bytes(r.auth_bytes))})
            if not r.error_code:
                try:
                    scram.verify(bytes(r.auth_bytes))
                except ScramError as e:
                    raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(e)) from None
        if r.error_code:
            raise KafkaError(r.error_code, r.error_message)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _security_hint(self, what: str) -> str:
        proto = self.config.get("security.protocol", "PLAINTEXT").upper()
        if proto == "PLAINTEXT":
            return (f"{self.addr} {what} at the first request: it may be an SSL or SASL "
                    "listener; set security.protocol (and its TLS/SASL settings) in a "
                    "--command-config file")
        return f"{self.addr} {what} at the first request ({proto}): check the credentials"

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        corr = next(self._corr)
        self.sock.sendall(codec.encode_request(api_key, version, corr, self.client_id, body))
        try:
            head = self._recv_exact(4)
        except ConnectionError:
            if corr == 1:  # closed at the first request: a listener that wants more
                raise ConnectionError(self._security_hint("closed the connection")) from None
            raise
        if corr == 1 and head[0] in (0x15, 0x16) and head[1] == 3:
            raise ConnectionError(self._security_hint("answered with TLS"))
        (size,) = struct.unpack(">i", head)
        frame = self._recv_exact(size)
        got, resp = codec.decode_response(api_key, version, frame)
        if got != corr:
            raise ConnectionError(f"correlation id {got} != {corr}")
        return resp

    # -- conveniences --------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None, auto_create: bool = False) -> Any:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": auto_create}
        return self.request(3, 12, body)

    def create_topic(self, name: str, partitions: int = 1, replication: int = 1,
                     configs: dict[str, str] | None = None) -> Any:
        r = self.request(19, 7, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": replication,
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
        }], "timeout_ms": 30000})
        t = r.topics[0]
        if t.error_code:
            raise KafkaError(t.error_code, t.error_message)
        return t

    def delete_topic(self, name: str) -> None:
        r = self.request(20, 6, {"topics": [{"name": name}], "timeout_ms": 30000})
        if r.responses[0].error_code:
            raise KafkaError(r.responses[0].error_code, r.responses[0].error_message)

    def describe_configs(self, topic: str) -> Any:
        r = self.request(32, 4, {"resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": None}]})
        res = r.results[0]
        if res.error_code:
            raise KafkaError(res.error_code, res.error_message)
        return res.configs

    def for_leader(self, topic: str, partition: int, auto_create: bool = False) -> Client:
        """A client connected to the partition's leader (this one if it leads or if the
        leader is unknown, in which case the request itself will say why)."""
        md = self.metadata([topic], auto_create=auto_create)
        for t in md.topics:
            for p in t.partitions:
                if p.partition_index != partition:
                    continue
                b = next((b for b in md.brokers if b.node_id == p.leader_id), None)
                peer = self.sock.getpeername()
                if b is not None and (b.host, b.port) != peer[:2] and \
                        f"{b.host}:{b.port}" != self.bootstrap:
                    return Client(f"{b.host}:{b.port}", self.client_id, self.timeout,
                                  self.config, self.ssl_context)
        return self

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1) -> Any:
        r = self.request(0, 9, {"acks": acks, "timeout_ms": 30000, "topic_data": [{
            "name": topic, "partition_data": [{"index": partition, "records": records}]}]})
        p = r.responses[0].partition_responses[0]
        if p.error_code:
            raise KafkaError(p.error_code, p.error_message)
        return p.base_offset

    def produce_batches(self, topic: str, batches: dict[int, bytes], acks: int = -1,
                        timeout_ms: int = 30000) -> dict[int, tuple[int, int, str | None]]:
        """One Produce request carrying a batch per partition: partition -> (error code,
        base offset, error message). acks=0 gets no response: every partition is 0/-1."""
        body = {"acks": acks, "timeout_ms": timeout_ms, "topic_data": [{
            "name": topic, "partition_data": [{"index": p, "records": b}
                                              for p, b in sorted(batches.items())]}]}
        if acks == 0:
            corr = next(self._corr)
            self.sock.sendall(codec.encode_request(0, 9, corr, self.client_id, body))
            return {p: (0, -1, None) for p in batches}
        r = self.request(0, 9, body)
        return {p.index: (p.error_code, p.base_offset, p.error_message)
                for t in r.responses for p in t.partition_responses}

    def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        r = self.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{
            "name": topic, "partitions": [{"partition_index": partition,
                                           "timestamp": timestamp}]}]})
        p = r.topics[0].partitions[0]
        if p.error_code:
            raise KafkaError(p.error_code)
        return p.offset, p.timestamp

    def fetch_partitions(self, topic: str, offsets: dict[int, int], max_wait_ms: int = 500,
                         max_bytes: int = 1 << 20, isolation_level: int = 0) -> list[Any]:
        """One Fetch for several partitions of a topic: their partition responses
        (`isolation_level` 1 = read_committed: up to the last stable offset, with the
        aborted transactions listed)."""
        r = self.request(1, 12, {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1,
            "max_bytes": max_bytes * max(1, len(offsets)), "isolation_level": isolation_level,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": p, "fetch_offset": o, "current_leader_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": max_bytes}
                for p, o in sorted(offsets.items())]}],
            "forgotten_topics_data": [], "rack_id": ""})
        if r.error_code:
            raise KafkaError(r.error_code)
        return [p for t in r.responses for p in t.partitions]

    def fetch(self, topic: str, partition: int, offset: int, max_wait_ms: int = 500,
              max_bytes: int = 1 << 20) -> Any:
        r = self.request(1, 12, {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1,
            "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "fetch_offset": offset, "current_leader_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        p = r.responses[0].partitions[0]
        if p.error_code:
            raise KafkaError(p.error_code)
        return p
