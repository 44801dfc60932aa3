"""Broker configuration: Kafka's property names and defaults, built once at start-up.

Sources, later ones winning: defaults, a `server.properties`-style file
(`--config`), `--override key=value`, then the dedicated command-line flags.
Topic-level log defaults (`log.segment.bytes`, `log.retention.ms`, ...) are kept
as raw properties and turned into a `LogConfig` by the commit log.
"""

from __future__ import annotations

import builtins
import logging
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
    # KIP-848 consumer-protocol groups (broker/group/consumer.py)
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.assignors": "uniform,range",
    "group.consumer.migration.policy": "bidirectional",
    # KIP-1071 streams groups (broker/group/streams_service.py)
    "group.streams.session.timeout.ms": "45000",
    "group.streams.min.session.timeout.ms": "45000",
    "group.streams.max.session.timeout.ms": "60000",
    "group.streams.heartbeat.interval.ms": "5000",
    "group.streams.min.heartbeat.interval.ms": "5000",
    "group.streams.max.heartbeat.interval.ms": "15000",
    "group.streams.max.size": "2147483647",
    "group.streams.num.standby.replicas": "0",
    "group.streams.max.standby.replicas": "2",
    "group.streams.task.offset.interval.ms": "60000",
    "group.streams.min.task.offset.interval.ms": "15000",
    "group.streams.acceptable.recovery.lag": "10000",
    # Kafka 4.4's warm-up and rack-tag settings: accepted and described; its sticky
    # assignor creates no warm-up task (AssignmentRefiner.refine returns the target as
    # it is) and reads no rack tag, and neither does jocko-py's (streams_assignor.py)
    "group.streams.num.warmup.replicas": "2",
    "group.streams.max.warmup.replicas": "20",
    "group.streams.rack.aware.assignment.tags": "",
    "group.streams.initial.rebalance.delay.ms": "3000",
    "group.streams.assignment.interval.ms": "1000",
    "group.streams.min.assignment.interval.ms": "0",
    "group.streams.max.assignment.interval.ms": "15000",
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
    # cluster links (broker/security/cluster_links.py): the brokers' shared secret file
    # (raft handshake, gossip tags), gossip encryption, mutual TLS on the raft port
    "jocko.cluster.secret.file": "",
    "jocko.gossip.encrypt": "false",
    "jocko.raft.ssl.enable": "false",
    "transactional.id.expiration.ms": "604800000",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.segment.bytes": "104857600",
    # the share coordinator on __share_group_state (KIP-932; broker/share/coordinator.py)
    "share.coordinator.state.topic.num.partitions": "50",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "share.coordinator.state.topic.segment.bytes": "104857600",
    "share.coordinator.snapshot.update.records.per.snapshot": "500",
    "share.coordinator.write.timeout.ms": "5000",
    "share.coordinator.state.topic.prune.interval.ms": "300000",
    "share.coordinator.cold.partition.snapshot.interval.ms": "300000",
    "transaction.max.timeout.ms": "900000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "producer.id.expiration.ms": "86400000",
    "max.incremental.fetch.session.cache.slots": "1000",
    "request.timeout.ms": "30000",
    # Prometheus endpoint (host:port); empty: off (broker/metrics.py)
    "jocko.metrics.addr": "",
    # the web console (console.py): host:port, empty: off; read-only hides every action
    "jocko.console.addr": "",
    "jocko.console.read.only": "false",
    # who may use the console and the metrics endpoint (broker/security/http_access.py):
    # auth none | basic | mtls | basic,mtls (empty: none while every listener is
    # PLAINTEXT, else basic, and the console read-only unless read.only is set); TLS
    # with the broker's ssl.* PEM settings unless jocko.<console|metrics>.ssl.* has its own
    "jocko.console.auth": "",
    "jocko.console.ssl.enable": "false",
    "jocko.console.ssl.client.auth": "",
    "jocko.console.ssl.keystore.location": "",
    "jocko.console.ssl.keystore.certificate.chain": "",
    "jocko.console.ssl.keystore.key": "",
    "jocko.console.ssl.key.password": "",
    "jocko.console.ssl.truststore.location": "",
    "jocko.console.ssl.truststore.certificates": "",
    "jocko.metrics.auth": "",
    "jocko.metrics.ssl.enable": "false",
    "jocko.metrics.ssl.client.auth": "",
    "jocko.metrics.ssl.keystore.location": "",
    "jocko.metrics.ssl.keystore.certificate.chain": "",
    "jocko.metrics.ssl.keystore.key": "",
    "jocko.metrics.ssl.key.password": "",
    "jocko.metrics.ssl.truststore.location": "",
    "jocko.metrics.ssl.truststore.certificates": "",
    # retention by share of disk (commitlog/disk_retention.py): -1 off
    "jocko.log.retention.disk.percent": "-1",
    "jocko.log.retention.disk.protect.committed.offsets": "false",
    # segment files kept open at most (commitlog/fd_cache.py): -1 = 3/4 of `ulimit -n`
    "jocko.log.max.open.files": "-1",
    # Fetch reads of 64 KiB or more sent with sendfile on listeners without TLS
    "jocko.zero.copy.enable": "true",
    "connection.failed.authentication.delay.ms": "100",
    "connections.max.reauth.ms": "0",
    "connections.max.idle.ms": "600000",
    "quota.window.num": "11",
    "quota.window.size.seconds": "1",
    "sasl.server.max.receive.size": "524288",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.principal.mapping.rules": "DEFAULT",
    "jocko.ssl.reload.check.interval.ms": "10000",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
    "authorizer.class.name": "",
}


# Properties read somewhere other than DEFAULTS (listeners, log defaults, groups, ...).
_READ_ELSEWHERE = frozenset({
    "node.id", "process.roles", "cluster.id", "broker.rack", "listeners",
    "advertised.listeners", "listener.security.protocol.map", "log.dirs", "log.dir",
    "controller.quorum.bootstrap.servers", "jocko.broker.addr", "jocko.advertised.addr",
    "jocko.raft.addr", "jocko.gossip.addr", "jocko.gossip.join", "log.cleaner.enable",
    "log.cleaner.backoff.ms", "offset.metadata.max.bytes", "offsets.topic.segment.bytes",
    "log.retention.ms", "log.retention.minutes", "log.retention.hours", "log.roll.ms",
    "log.roll.hours", "log.roll.jitter.ms", "log.roll.jitter.hours",
    "num.shards",  # jocko_py/shards.py
    # group settings and their bounds read by the group coordinator, the share
    # partitions and group configs' validation (broker/group/group_configs.py)
    "group.consumer.assignment.interval.ms", "group.consumer.min.assignment.interval.ms",
    "group.consumer.max.assignment.interval.ms", "group.consumer.min.heartbeat.interval.ms",
    "group.consumer.max.heartbeat.interval.ms", "group.consumer.min.session.timeout.ms",
    "group.consumer.max.session.timeout.ms", "group.share.assignment.interval.ms",
    "group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms",
    "group.share.delivery.count.limit", "group.share.min.delivery.count.limit",
    "group.share.max.delivery.count.limit", "group.share.heartbeat.interval.ms",
    "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
    "group.share.session.timeout.ms", "group.share.min.session.timeout.ms",
    "group.share.max.session.timeout.ms", "group.share.record.lock.duration.ms",
    "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
    "group.share.partition.max.record.locks", "group.share.min.partition.max.record.locks",
    "group.share.max.partition.max.record.locks", "group.share.max.share.sessions",
    "group.share.max.size", "group.share.initialize.retry.interval.ms",
    "group.streams.assignors",
})
# Kafka broker properties that jocko-py accepts and does not use (threads, buffers,
# listeners it does not serve, ZooKeeper, transactions...): a stock server.properties
# starts without a warning.
_KAFKA_IGNORED = frozenset({
    "num.network.threads", "num.io.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes", "queued.max.requests", "controller.listener.names",
    "inter.broker.listener.name", "inter.broker.protocol.version",
    "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
    "transaction.state.log.num.partitions", "zookeeper.connect",
    "zookeeper.connection.timeout.ms", "log.message.format.version", "compression.type",
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "group.coordinator.rebalance.protocols",
    "metadata.log.dir",
    "metadata.log.segment.bytes", "metadata.max.retention.bytes", "early.start.listeners",
    "log.preallocate", "replica.socket.timeout.ms",
    "max.connections", "max.connections.per.ip", "authorizer.class.name",
    "super.users", "sasl.enabled.mechanisms", "ssl.keystore.location",
})


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


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's SecurityProtocol ids, as RegisterBrokerRecord carries them
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


@dataclass(frozen=True)
class Listener:
    """One entry of `listeners` / `advertised.listeners`: `NAME://host:port` and the
    security protocol `listener.security.protocol.map` gives its name."""

    name: str
    security_protocol: str
    host: str
    port: int

    @property
    def tls(self) -> builtins.bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> builtins.bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def _protocol_map(value: str) -> dict[str, str]:
    """`listener.security.protocol.map` (`NAME:PROTOCOL,...`); as Kafka's default, each
    security protocol's name maps to itself."""
    m = {p: p for p in SECURITY_PROTOCOLS}
    for entry in value.split(","):
        name, sep, proto = entry.strip().partition(":")
        if sep:
            proto = proto.strip().upper()
            if proto not in SECURITY_PROTOCOLS:
                raise ConfigError(f"listener.security.protocol.map: unknown security "
                                  f"protocol {proto!r} (one of {', '.join(SECURITY_PROTOCOLS)})")
            m[name.strip().upper()] = proto
    return m


def parse_listeners(value: str, proto_map: dict[str, str], prop: str) -> list[Listener]:
    """A Kafka `listeners` / `advertised.listeners` value (`NAME://host:port,...`). An
    empty host means all interfaces (0.0.0.0)."""
    out: list[Listener] = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, addr = entry.partition("://")
        name = name.strip().upper()
        host, colon, port = addr.rpartition(":")
        if not sep or not colon or not port.strip().isdigit():
            raise ConfigError(f"{prop}: {entry!r} is not of the form NAME://host:port")
        proto = proto_map.get(name)
        if proto is None:
            raise ConfigError(f"{prop}: listener {name} has no security protocol: add "
                              f"{name}:<protocol> to listener.security.protocol.map")
        if any(x.name == name for x in out):
            raise ConfigError(f"{prop}: listener name {name} is used twice")
        out.append(Listener(name, proto, host.strip("[]") or "0.0.0.0", builtins.int(port)))
    return out


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
    # `log.dirs` after the first (data_dir): more data directories, partitions spread
    extra_log_dirs: tuple[Path, ...] = ()
    # every listener (bound) and its advertised address, by name; `host`/`port` and
    # `advertised_host`/`advertised_port` above are the inter-broker listener's
    listeners: tuple[Listener, ...] = ()
    advertised_listeners: tuple[Listener, ...] = ()
    inter_broker_listener: str = "PLAINTEXT"

    def listener_config(self, listener: str, key: str) -> str:
        """A per-listener setting: `listener.name.<name>.<key>` wins over `<key>`, as
        in Kafka (the listener name in lower case)."""
        return self.properties.get(f"listener.name.{listener.lower()}.{key}", self.get(key))

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
    metrics_addr: str | None = None,
    console_addr: str | None = None,
) -> BrokerConfig:
    given: dict[str, str] = {}
    if config_file is not None:
        try:
            text = config_file.read_text()
        except (OSError, UnicodeDecodeError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ConfigError(f"cannot read config file {config_file}: {reason}") from None
        given.update(parse_properties(text))
    given.update(overrides or {})
    _check_properties(given)
    props = DEFAULTS | given
    if broker_id is not None:
        props["broker.id"] = str(broker_id)
    if "node.id" in props and broker_id is None:
        props["broker.id"] = props["node.id"]
    if data_dir is not None:
        props["log.dirs"] = data_dir
    proto_map = _protocol_map(props.get("listener.security.protocol.map", ""))
    listeners = parse_listeners(props.get("listeners", ""), proto_map, "listeners")
    # --broker-addr (or jocko.broker.addr) is the PLAINTEXT listener, added or moved
    flag_addr = broker_addr or props.get("jocko.broker.addr")
    if flag_addr:
        h, p = _checked_addr(flag_addr, "--broker-addr" if broker_addr else "jocko.broker.addr")
        listeners = [x for x in listeners if x.name != "PLAINTEXT"]
        listeners.insert(0, Listener("PLAINTEXT", "PLAINTEXT", h, p))
    if not listeners:
        listeners = [Listener("PLAINTEXT", "PLAINTEXT", "localhost", 9092)]
    names = {x.name for x in listeners}
    advertised_given = {
        x.name: x for x in parse_listeners(props.get("advertised.listeners", ""), proto_map,
                                           "advertised.listeners")}
    for name in advertised_given:
        if name not in names:
            raise ConfigError(f"advertised.listeners: {name} is not in listeners")
    adv_flag = advertised_addr or props.get("jocko.advertised.addr")
    inter = props.get("inter.broker.listener.name", "").strip().upper()
    if inter and inter not in names:
        raise ConfigError(f"inter.broker.listener.name: {inter} is not in listeners "
                          f"({', '.join(sorted(names))})")
    if not inter:
        # Kafka's default is the listener named after security.inter.broker.protocol
        # (PLAINTEXT); without one, the first listener of that protocol, else the first
        sip = props.get("security.inter.broker.protocol", "PLAINTEXT").strip().upper()
        inter = next((x.name for x in listeners if x.name == sip), "") or next(
            (x.name for x in listeners if x.security_protocol == sip), listeners[0].name)
    advertised: list[Listener] = []
    for x in listeners:
        a = advertised_given.get(x.name)
        ahost, aport = (a.host, a.port) if a else (x.host, x.port)
        if adv_flag and x.name == ("PLAINTEXT" if "PLAINTEXT" in names else inter):
            ahost, aport = _checked_addr(adv_flag, "--advertised-addr" if advertised_addr
                                         else "jocko.advertised.addr", x.port)
        if ahost in ("0.0.0.0", "::", ""):
            ahost = "localhost"
        advertised.append(Listener(x.name, x.security_protocol, ahost, aport))
    # the inter-broker listener first: brokers reach each other at a broker's first
    # registered endpoint
    order = sorted(range(len(listeners)), key=lambda i: listeners[i].name != inter)
    listeners = [listeners[i] for i in order]
    advertised = [advertised[i] for i in order]
    host, port = listeners[0].host, listeners[0].port
    adv_host, adv_port = advertised[0].host, advertised[0].port
    dirs = [Path(d.strip()) for d in props.get("log.dirs", props.get("log.dir", "./data")).split(",")
            if d.strip()] or [Path("./data")]
    ddir = dirs[0]
    if voters is not None:
        props["controller.quorum.voters"] = voters
    if metrics_addr is not None:
        props["jocko.metrics.addr"] = metrics_addr
    if console_addr is not None:
        props["jocko.console.addr"] = console_addr
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
    # The cluster id lives in each log directory's meta.properties (commitlog/dirs.py),
    # written by `jocko-py storage format`, generated once by a single node, or learned
    # from the metadata quorum; `cluster.id`, when set, must match what is stored.
    cluster_id = props.get("cluster.id", "").strip()
    if cluster_id and not all(c.isascii() and (c.isalnum() or c in "-_") for c in cluster_id):
        raise ConfigError(f"cluster.id: {cluster_id!r} is not a cluster id (base64url "
                          "characters, as `jocko-py storage random-uuid` prints)")
    return BrokerConfig(
        broker_id=int(props["broker.id"]),
        host=host,
        port=port,
        advertised_host=adv_host,
        advertised_port=adv_port,
        data_dir=ddir,
        extra_log_dirs=tuple(dict.fromkeys(d for d in dirs[1:] if d != ddir)),
        raft_addr=raft,
        cluster_id=cluster_id,
        properties=props,
        explicit=frozenset(given),
        voters=voter_map,
        gossip_addr=gossip,
        join=seeds,
        rack=props.get("broker.rack") or None,
        listeners=tuple(listeners),
        advertised_listeners=tuple(advertised),
        inter_broker_listener=inter,
    )


class ConfigError(ValueError):
    """A configuration value that cannot be used (reported as one line)."""


def _checked_addr(addr: str, what: str, default_port: int | None = None) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep and default_port is not None:
        return addr, default_port
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"{what}: {addr!r} is not host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


# TLS / SASL settings, read per listener by jocko_py/broker/security (each also as
# `listener.name.<listener>.<name>`; SASL's JAAS also per mechanism,
# `listener.name.<listener>.<mechanism>.sasl.jaas.config`).
SECURITY_PROPERTIES = frozenset({
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.key.password", "ssl.truststore.location",
    "ssl.truststore.type", "ssl.truststore.certificates", "ssl.enabled.protocols",
    "ssl.cipher.suites", "ssl.client.auth", "ssl.principal.mapping.rules",
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.mechanism.inter.broker.protocol",
    "sasl.server.max.receive.size", "jocko.sasl.plain.users.file",
})
_MECHANISMS = ("plain.", "scram-sha-256.", "scram-sha-512.")


def known_property(name: str) -> bool:
    from jocko_py.commitlog.config import TOPIC_CONFIGS, broker_property_names

    if name.startswith("listener.name."):
        rest = name[len("listener.name."):].partition(".")[2]
        for mech in _MECHANISMS:
            if rest.startswith(mech) and rest[len(mech):] == "sasl.jaas.config":
                return True
        return rest in SECURITY_PROPERTIES or rest in DEFAULTS
    return (name in DEFAULTS or name in _READ_ELSEWHERE or name in _KAFKA_IGNORED
            or name in SECURITY_PROPERTIES
            or name in broker_property_names() or name in TOPIC_CONFIGS)


def _check_properties(given: dict[str, str]) -> None:
    """Warn about unknown names (as Kafka does) and refuse values of the wrong type."""
    from jocko_py.commitlog.config import LogConfig

    for name in sorted(given):
        if not known_property(name):
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
    for name, value in given.items():
        default = DEFAULTS.get(name)
        if default is None or not default:
            continue
        v = value.strip()
        if default in ("true", "false"):
            if v.lower() not in ("true", "false"):
                raise ConfigError(f"invalid value {value!r} for {name}: expected true or false")
        elif default.lstrip("-").isdigit():
            try:
                (float if name.endswith(".seconds") else builtins.int)(v)
            except ValueError:
                raise ConfigError(f"invalid value {value!r} for {name}: expected an "
                                  "integer") from None
    try:
        LogConfig.from_broker_properties(DEFAULTS | given)
    except ValueError as e:
        raise ConfigError(f"invalid log property: {e}") from None


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

