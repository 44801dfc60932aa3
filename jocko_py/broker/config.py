"""Broker configuration: Kafka's property names and defaults, built once at start-up.

Sources, later ones winning: defaults, a `server.properties`-style file
(`--config`), `--override key=value`, then the dedicated command-line flags.
Topic-level log defaults (`log.segment.bytes`, `log.retention.ms`, ...) are kept
as raw properties and turned into a `LogConfig` by the commit log.
"""

from __future__ import annotations

import builtins
import uuid
from dataclasses import dataclass, field
from pathlib import Path

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
    "offsets.topic.replication.factor": "1",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.commit.timeout.ms": "5000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    "replica.lag.time.max.ms": "30000",
    "transactional.id.expiration.ms": "604800000",
    "producer.id.expiration.ms": "86400000",
    "max.incremental.fetch.session.cache.slots": "1000",
    "request.timeout.ms": "30000",
}


def parse_properties(text: str) -> dict[str, str]:
    """Java-properties subset: `key=value` or `key: value`, `#`/`!` comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                props[k.strip()] = v.strip()
                break
        else:
            props[line] = ""
    return props


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
    addr = broker_addr or props.get("jocko.broker.addr", "localhost:9092")
    host, port = split_addr(addr)
    adv = advertised_addr or props.get("jocko.advertised.addr") or f"{host}:{port}"
    adv_host, adv_port = split_addr(adv, port)
    if adv_host in ("0.0.0.0", "::", ""):
        adv_host = "localhost"
    ddir = Path(props.get("log.dirs", props.get("log.dir", "./data")).split(",")[0])
    raft = raft_addr or props.get("jocko.raft.addr", f"{host}:{port + 1}")
    return BrokerConfig(
        broker_id=int(props["broker.id"]),
        host=host,
        port=port,
        advertised_host=adv_host,
        advertised_port=adv_port,
        data_dir=ddir,
        raft_addr=raft,
        cluster_id=props.get("cluster.id", ""),
        properties=props,
        explicit=frozenset(given),
    )


def load_or_create_cluster_id(data_dir: Path) -> str:
    """Kafka keeps the cluster id in meta.properties; so do we."""
    meta = data_dir / "meta.properties"
    if meta.exists():
        props = parse_properties(meta.read_text())
        if props.get("cluster.id"):
            return props["cluster.id"]
    import base64

    cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    data_dir.mkdir(parents=True, exist_ok=True)
    meta.write_text(f"version=1\ncluster.id={cid}\n")
    return cid
