"""Broker configuration: Kafka's property names and defaults, built once at start-up.

Sources, later ones winning: defaults, a `server.properties`-style file
(`--config`), `--override key=value`, then the dedicated command-line flags.
Topic-level log defaults (`log.segment.bytes`, `log.retention.ms`, ...) are kept
as raw properties and turned into a `LogConfig` by the commit log.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("jocko_py.broker.config")

DEFAULTS: dict[str, str] = {
    "broker.id": "0",
    "socket.request.max.bytes": "104857600",
    "message.max.bytes": "1048588",
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "delete.topic.enable": "true",
    "log.flush.scheduler.interval.ms": "1000",
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.retention.check.interval.ms": "300000",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.commit.timeout.ms": "5000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.max.bytes": "1048576",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "controlled.shutdown.enable": "true",
    "controlled.shutdown.timeout.ms": "30000",
    "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "controller.quorum.voters": "",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "jocko.gossip.probe.interval.ms": "1000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.segment.bytes": "104857600",
    "transaction.max.timeout.ms": "900000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "producer.id.expiration.ms": "86400000",
    "max.incremental.fetch.session.cache.slots": "1000",
    "request.timeout.ms": "30000",
}


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties' line format: `key=value`, `key: value` or `key value`
    (the first unescaped `=`, `:` or whitespace ends the key), `#`/`!` comments,
    `\\` line continuations and the usual backslash escapes."""
    props: dict[str, str] = {}
    lines = iter(text.splitlines())
    for raw in lines:
        line = raw.lstrip()
        if not line or line[0] in "#!":
            continue
        # a line ending in an odd number of backslashes continues on the next one
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1] + next(lines, "").lstrip()
        key, i = _scan_key(line)
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[key] = _unescape(rest).rstrip()
    return props


def _scan_key(line: str) -> tuple[str, int]:
    out: list[str] = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            out.append(line[i : i + 2])
            i += 2
            continue
        if c in "=: \t\f":
            break
        out.append(c)
        i += 1
    return _unescape("".join(out)), i


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and i + 6 <= len(s):
                try:
                    out.append(chr(int(s[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _protocol_map(value: str) -> dict[str, str]:
    """`listener.security.protocol.map` (`NAME:PROTOCOL,...`); PLAINTEXT maps to itself."""
    m = {"PLAINTEXT": "PLAINTEXT"}
    for entry in value.split(","):
        name, sep, proto = entry.strip().partition(":")
        if sep:
            m[name.strip().upper()] = proto.strip().upper()
    return m


def _plaintext_listener(value: str, proto_map: dict[str, str], prop: str) -> str | None:
    """`host:port` of the first plaintext entry of a Kafka `listeners` /
    `advertised.listeners` value (`NAME://host:port,...`), or None.

    jocko-py serves one plaintext listener: entries whose listener name maps to
    another security protocol (SSL, SASL_*) are skipped with a warning. An empty
    host means all interfaces.
    """
    for entry in value.split(","):
        name, sep, addr = entry.strip().partition("://")
        if not sep:
            continue
        proto = proto_map.get(name.strip().upper(), name.strip().upper())
        if proto != "PLAINTEXT":
            log.warning("%s: %s (%s) is not supported; only PLAINTEXT is served",
                        prop, entry.strip(), proto)
            continue
        host, _, port = addr.rpartition(":")
        return f"{host or '0.0.0.0'}:{port}"
    return None


def split_addr(addr: str, default_port: int = 9092) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host:
        return addr, default_port
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    data_dir: Path
    raft_addr: str
    cluster_id: str
    # cluster mode (controller.quorum.voters set): raft voters, gossip address and seeds
    voters: dict[builtins.int, str] = field(default_factory=dict)
    gossip_addr: str = ""
    join: tuple[str, ...] = ()
    rack: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    # the property names set by the operator (file, overrides, flags), not defaulted
    explicit: frozenset[str] = frozenset()

    def get(self, key: str) -> str:
        return self.properties.get(key, DEFAULTS.get(key, ""))

    def int(self, key: str) -> builtins.int:
        return builtins.int(self.get(key))

    def bool(self, key: str) -> builtins.bool:
        return self.get(key).lower() == "true"

    @property
    def socket_request_max_bytes(self) -> builtins.int:
        return self.int("socket.request.max.bytes")

    @property
    def auto_create_topics(self) -> builtins.bool:
        return self.bool("auto.create.topics.enable")

    @property
    def num_partitions(self) -> builtins.int:
        return self.int("num.partitions")

    @property
    def message_max_bytes(self) -> builtins.int:
        return self.int("message.max.bytes")


def build_config(
    *,
    config_file: Path | None = None,
    overrides: dict[str, str] | None = None,
    broker_id: int | None = None,
    broker_addr: str | None = None,
    advertised_addr: str | None = None,
    data_dir: str | None = None,
    raft_addr: str | None = None,
    gossip_addr: str | None = None,
    join: str | None = None,
    voters: str | None = None,
) -> BrokerConfig:
    given: dict[str, str] = {}
    if config_file is not None:
        given.update(parse_properties(config_file.read_text()))
    given.update(overrides or {})
    props = DEFAULTS | given
    if broker_id is not None:
        props["broker.id"] = str(broker_id)
    if "node.id" in props and broker_id is None:
        props["broker.id"] = props["node.id"]
    if data_dir is not None:
        props["log.dirs"] = data_dir
    proto_map = _protocol_map(props.get("listener.security.protocol.map", ""))
    addr = (
        broker_addr
        or props.get("jocko.broker.addr")
        or _plaintext_listener(props.get("listeners", ""), proto_map, "listeners")
        or "localhost:9092"
    )
    host, port = split_addr(addr)
    adv = (
        advertised_addr
        or props.get("jocko.advertised.addr")
        or _plaintext_listener(props.get("advertised.listeners", ""), proto_map,
                               "advertised.listeners")
        or f"{host}:{port}"
    )
    adv_host, adv_port = split_addr(adv, port)
    if adv_host in ("0.0.0.0", "::", ""):
        adv_host = "localhost"
    ddir = Path(props.get("log.dirs", props.get("log.dir", "./data")).split(",")[0])
    if voters is not None:
        props["controller.quorum.voters"] = voters
    voter_map = parse_voters(props.get("controller.quorum.voters", ""))
    if not voter_map and props.get("controller.quorum.bootstrap.servers"):
        raise ConfigError(
            "controller.quorum.bootstrap.servers (a dynamic quorum, KIP-853) is not "
            "supported: list the voters in controller.quorum.voters")
    roles = {r.strip() for r in props.get("process.roles", "").split(",") if r.strip()}
    if roles - {"broker", "controller"}:
        raise ConfigError(f"process.roles: unknown role(s) {sorted(roles - {'broker', 'controller'})}")
    bid = int(props["broker.id"])
    raft = raft_addr or props.get("jocko.raft.addr") or voter_map.get(bid) \
        or f"{host}:{port + 1}"
    if bid in voter_map and raft != voter_map[bid]:
        raise ConfigError(
            f"raft address {raft} differs from this broker's entry {bid}@{voter_map[bid]} "
            "in controller.quorum.voters")
    if gossip_addr is not None:
        props["jocko.gossip.addr"] = gossip_addr
    rhost, rport = split_addr(raft)
    gossip = props.get("jocko.gossip.addr") or f"{rhost}:{rport + 1}"
    if join is not None:
        props["jocko.gossip.join"] = join
    seeds = tuple(s.strip() for s in props.get("jocko.gossip.join", "").split(",") if s.strip())
    cluster_id = props.get("cluster.id", "")
    if voter_map and not cluster_id:
        # every member derives the same id from the voter set (no format step needed)
        digest = hashlib.sha256(props["controller.quorum.voters"].replace(" ", "").encode())
        cluster_id = base64.urlsafe_b64encode(digest.digest()[:16]).decode().rstrip("=")
    return BrokerConfig(
        broker_id=int(props["broker.id"]),
        host=host,
        port=port,
        advertised_host=adv_host,
        advertised_port=adv_port,
        data_dir=ddir,
        raft_addr=raft,
        cluster_id=cluster_id,
        properties=props,
        explicit=frozenset(given),
        voters=voter_map,
        gossip_addr=gossip,
        join=seeds,
        rack=props.get("broker.rack") or None,
    )


class ConfigError(ValueError):
    """A configuration value that cannot be used (reported as one line)."""


def parse_voters(value: str) -> dict[builtins.int, str]:
    """Kafka's ``controller.quorum.voters``: ``id@host:port,...``."""
    out: dict[builtins.int, str] = {}
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        vid, at, addr = part.partition("@")
        if not at or not vid.strip().isdigit() or ":" not in addr:
            raise ConfigError(
                f"controller.quorum.voters: {part!r} is not of the form id@host:port")
        out[builtins.int(vid)] = addr.strip()
    return out


def load_or_create_cluster_id(data_dir: Path) -> str:
    """Kafka keeps the cluster id in meta.properties; so do we."""
    meta = data_dir / "meta.properties"
    if meta.exists():
        props = parse_properties(meta.read_text())
        if props.get("cluster.id"):
            return props["cluster.id"]
    cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    data_dir.mkdir(parents=True, exist_ok=True)
    meta.write_text(f"version=1\ncluster.id={cid}\n")
    return cid
