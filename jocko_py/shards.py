"""One `jocko-py broker` as several shard processes (`num.shards` / `--shards`).

The broker is one Python thread, so one process uses one core. With ``num.shards = N``
the command becomes a supervisor of N broker processes on the host, each a broker of
the cluster in its own right (docs/shards.md says why this design and what measured
it): its own node id, its own ports, its own log directory, and its share of the
partitions and of the group and transaction coordinators (the partitions of
`__consumer_offsets` and `__transaction_state` it leads). Clients see N brokers, as
they would see N hosts.

Rules (``plan_shards``, pure; the supervisor only runs what it returns)
-----------------------------------------------------------------------
- Node ids. Shard k of node n is node ``n + 1000 * k`` (``SHARD_ID_STRIDE``): shard 0
  keeps the configured id, so a host's `controller.quorum.voters` entry and its data
  stay as they were; shard 1 of node 2 is 1002. Node ids must be below 1000 when
  N > 1, so no two hosts' shards can share an id.
- Ports. Every listener's port (bound and advertised), the metrics and the console
  port of shard k are shard 0's plus k. With N shards the defaults of the internal
  ports move past the Kafka ports: raft at P + N .. P + 2N - 1 and gossip at
  P + 2N .. P + 3N - 1 for a Kafka port P (for N = 1 these are today's P + 1, P + 2);
  an explicit raft/gossip address is shard 0's and shard k takes its port plus k. Two
  shards' ports that collide are refused before anything starts.
- Directories. Log directory D of the configured `log.dirs` becomes ``D/shard-k`` for
  shard k (its own `.lock` and `meta.properties`); the supervisor holds ``D/.lock``
  itself. A directory holding an unsharded broker's data (``D/meta.properties``) is
  refused, and so is one with data of more shards than N (their partitions would be
  offline); an unsharded broker refuses ``D/shard-0`` in turn (``check_unsharded_dirs``).
- Metadata quorum. A cluster member (`controller.quorum.voters` set) keeps its voters:
  shard 0 is the voter the configuration names, the other shards are brokers only
  (observers of the metadata log) and join gossip through shard 0. A single host
  becomes a one-voter cluster: shard 0 the voter and controller, its cluster id kept
  in ``D/shard-0/meta.properties`` (made on the first start) and given to every shard;
  its raft and gossip ports take a secret made once in ``D/cluster.secret`` unless
  `jocko.cluster.secret.file` names one.
- Placement treats a host's shards as one failure domain: they share the host's
  `broker.rack` (the configuration is the same) and its advertised host, and the
  controller puts a partition's replicas on distinct racks, then distinct hosts
  (cluster/controller.py, Placement).

The supervisor (``run_sharded``; its lines go to the `jocko_py.shards` logger) starts the N processes, each in its own process group
and stopped with the supervisor if the supervisor dies, forwards SIGINT/SIGTERM, and
exits 0 once all stopped cleanly. A shard that exits on its own makes it stop the
others and exit 1 with one line naming the shard; it does not restart shards (a
process manager restarts the whole broker, whose data all shards keep).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from jocko_py.broker.config import BrokerConfig, ConfigError, Listener, split_addr
from jocko_py.cluster.shard_ids import SHARD_ID_STRIDE, shard_node_id
from jocko_py.commitlog.dirs import random_uuid, read_meta

log = logging.getLogger("jocko_py.shards")
MAX_SHARDS = 256
# properties the supervisor derives for each shard; the configured ones are not passed
_DERIVED = frozenset({
    "node.id", "broker.id", "log.dir", "log.dirs", "listeners", "advertised.listeners",
    "jocko.broker.addr", "jocko.advertised.addr", "jocko.raft.addr", "jocko.gossip.addr",
    "jocko.gossip.join", "controller.quorum.voters", "num.shards", "jocko.metrics.addr",
    "jocko.console.addr", "cluster.id",
})


def cpu_count() -> int:
    """The cores this process may run on (its affinity mask, as a container limits it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_shards(value: str, what: str = "num.shards") -> int:
    """A shard count: a positive integer, or `auto` (0 too) for one per core."""
    v = value.strip().lower()
    if v in ("auto", "0"):
        return min(MAX_SHARDS, cpu_count())
    if not v.isdigit() or not 1 <= int(v) <= MAX_SHARDS:
        raise ConfigError(f"{what}: {value!r} is not a shard count (1 to {MAX_SHARDS}, "
                          "or auto for one per core)")
    return int(v)


def shard_dir(directory: Path, shard: int) -> Path:
    return directory / f"shard-{shard}"


@dataclass(frozen=True)
class ShardPlan:
    """What shard ``index`` runs with: its node id, its properties (a complete
    configuration for `jocko-py broker --config`), and where it serves Kafka clients."""

    index: int
    node_id: int
    properties: dict[str, str]
    host: str
    port: int


def _moved(listeners: tuple[Listener, ...], k: int) -> str:
    return ",".join(f"{x.name}://{_host(x.host)}:{x.port + k}" for x in listeners)


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def plan_shards(config: BrokerConfig, n: int, *, raft_explicit: bool,
                gossip_explicit: bool, cluster_id: str,
                extra_properties: dict[str, str] | None = None) -> list[ShardPlan]:
    """The N shards of ``config`` (module rules); ConfigError for what cannot be split:
    a node id of 1000 or more, a port of 0, ports that collide."""
    base = config.broker_id
    if not 0 <= base < SHARD_ID_STRIDE:
        raise ConfigError(f"node.id {base}: with num.shards > 1 node ids must be 0 to "
                          f"{SHARD_ID_STRIDE - 1} (shard k of node n is node n + "
                          f"{SHARD_ID_STRIDE}*k)")
    if any(x.port == 0 for x in config.listeners):
        raise ConfigError("num.shards > 1 needs fixed listener ports (port 0 given): shard "
                          "k listens on each listener's port + k")
    p0 = config.port
    rhost, rport = split_addr(config.raft_addr)
    if not raft_explicit:
        rhost, rport = config.host, p0 + n
    ghost, gport = split_addr(config.gossip_addr)
    if not gossip_explicit:
        ghost, gport = rhost, rport + n
    voters = config.get("controller.quorum.voters") or f"{base}@{_host(rhost)}:{rport}"
    given = {k: config.properties[k] for k in sorted(config.explicit)
             if k in config.properties and k not in _DERIVED}
    extra = {k: config.get(k) for k in ("jocko.metrics.addr", "jocko.console.addr")
             if config.get(k)}
    if cluster_id:
        extra["cluster.id"] = cluster_id
    dirs = [config.data_dir, *config.extra_log_dirs]
    plans: list[ShardPlan] = []
    used: dict[tuple[str, int], str] = {}

    def claim(kind: str, port: int, what: str) -> None:
        other = used.get((kind, port))
        if other is not None:
            raise ConfigError(f"num.shards={n}: {what} port {port} is also {other} port; set "
                              "ports at least num.shards apart (docs/shards.md)")
        used[(kind, port)] = what

    for k in range(n):
        nid = shard_node_id(base, k)
        props = dict(given)
        props["node.id"] = props["broker.id"] = str(nid)
        props["num.shards"] = "1"
        props["log.dirs"] = ",".join(str(shard_dir(d, k)) for d in dirs)
        props["listeners"] = _moved(config.listeners, k)
        props["advertised.listeners"] = _moved(config.advertised_listeners, k)
        props["jocko.raft.addr"] = f"{_host(rhost)}:{rport + k}"
        props["jocko.gossip.addr"] = f"{_host(ghost)}:{gport + k}"
        props["controller.quorum.voters"] = voters
        props.update(extra_properties or {})
        join = list(config.join) + ([f"{_host(ghost)}:{gport}"] if k else [])
        if join:
            props["jocko.gossip.join"] = ",".join(join)
        for key, addr in extra.items():
            if key == "cluster.id":
                props[key] = addr
                continue
            h, p = split_addr(addr)
            props[key] = f"{_host(h)}:{p + k}"
            claim("tcp", p + k, f"shard {k}'s {key}")
        for x in config.listeners:
            claim("tcp", x.port + k, f"shard {k}'s {x.name} listener")
        claim("tcp", rport + k, f"shard {k}'s raft")
        claim("udp", gport + k, f"shard {k}'s gossip")
        plans.append(ShardPlan(k, nid, props, config.advertised_host, p0 + k))
    return plans


def check_unsharded_dirs(config: BrokerConfig) -> None:
    """An unsharded broker refuses a directory that holds shards' data."""
    for d in [config.data_dir, *config.extra_log_dirs]:
        if shard_dir(d, 0).is_dir():
            raise ConfigError(f"{d} holds a sharded broker's data ({shard_dir(d, 0)}): "
                              "start it with the same --shards (num.shards) as before")


def check_sharded_dirs(config: BrokerConfig, n: int) -> None:
    for d in [config.data_dir, *config.extra_log_dirs]:
        if (d / "meta.properties").exists():
            raise ConfigError(f"{d} holds an unsharded broker's data ({d}/meta.properties): "
                              "start it without --shards, or give --shards a new directory")
        beyond = sorted(int(p.name[6:]) for p in d.glob("shard-*")
                        if p.name[6:].isdigit() and int(p.name[6:]) >= n and p.is_dir()
                        and any(p.iterdir()))
        if beyond:
            raise ConfigError(
                f"{d} holds data of shard(s) {', '.join(map(str, beyond))}, beyond "
                f"num.shards={n}: their partitions would be offline; start with "
                f"--shards {beyond[-1] + 1} (and reassign them away first to shrink)")


def single_host_cluster_id(config: BrokerConfig) -> str:
    """The cluster id of a single host's shards: stored in shard 0's first directory,
    else `cluster.id`, else a new one."""
    meta = read_meta(shard_dir(config.data_dir, 0))
    if meta is not None and meta.cluster_id:
        return meta.cluster_id
    return config.cluster_id or random_uuid()


def single_host_secret(config: BrokerConfig) -> dict[str, str]:
    """A single host's shards authenticate their raft and gossip ports with a secret
    of their own (``D/cluster.secret``, made once, mode 0600) unless one is configured."""
    from jocko_py.cluster.linkauth import generate_key

    if config.get("jocko.cluster.secret.file"):
        return {}
    path = config.data_dir / "cluster.secret"
    if not path.exists():
        config.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(generate_key() + "\n")
    return {"jocko.cluster.secret.file": str(path)}


_KEY_ESCAPES = {"\\": "\\\\", " ": "\\ ", "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!",
                "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
_VALUE_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}


def format_properties(props: dict[str, str]) -> str:
    """A `server.properties` text that `parse_properties` reads back as ``props``."""
    lines = []
    for k, v in props.items():
        key = "".join(_KEY_ESCAPES.get(c, c) for c in k)
        value = "".join(_VALUE_ESCAPES.get(c, c) for c in v)
        if value[:1] in (" ", "\t", "\f"):
            value = "\\" + value
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """The shard gets SIGTERM if the supervisor dies (Linux), so none is left behind."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _describe_exit(rc: int) -> str:
    if rc < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-rc).name}"
        return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


def run_sharded(config: BrokerConfig, plans: list[ShardPlan], global_args: list[str],
                stop_timeout_s: float = 60.0) -> int:
    """Run the shards until SIGINT/SIGTERM (exit 0 when every shard stopped cleanly) or
    until one exits on its own (the others are stopped; exit 1)."""
    from jocko_py.commitlog.dirs import lock_dirs

    dirs = [config.data_dir, *config.extra_log_dirs]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    with lock_dirs(dirs):
        files = []
        for p in plans:
            f = config.data_dir / f"shard-{p.index}.properties"
            fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write("# written by the jocko-py broker supervisor at each start; "
                          "edit the broker's own configuration instead\n")
                out.write(format_properties(p.properties))
            files.append(f)
        stopping: list[int] = []
        procs: dict[int, subprocess.Popen[bytes]] = {}

        def forward(signum: int, _frame: FrameType | None) -> None:
            stopping.append(signum)
            for proc in procs.values():
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(signal.SIGTERM)

        previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for p, f in zip(plans, files, strict=True):
                if stopping:
                    break
                cmd = [sys.executable, "-m", "jocko_py.cli", *global_args, "broker",
                       "--config", str(f)]
                procs[p.index] = subprocess.Popen(cmd, process_group=0,
                                                  preexec_fn=_die_with_parent)
            log.info("jocko-py broker: %d shards, node ids %s, Kafka ports %s, pids %s",
                     len(plans), ", ".join(str(p.node_id) for p in plans),
                     ", ".join(str(p.port) for p in plans),
                     ", ".join(str(x.pid) for x in procs.values()))
            failed: str | None = None
            while not stopping:
                for p in plans:
                    rc = procs[p.index].poll()
                    if rc is not None and not stopping:
                        failed = (f"jocko-py broker: shard {p.index} (node {p.node_id}) "
                                  f"{_describe_exit(rc)}; stopping the other shards")
                        break
                if failed:
                    log.critical("%s", failed)
                    forward(signal.SIGTERM, None)
                    break
                time.sleep(0.1)
            deadline = time.monotonic() + stop_timeout_s
            codes: dict[int, int] = {}
            for i, proc in procs.items():
                try:
                    codes[i] = proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    codes[i] = proc.wait(5)
                    log.critical("jocko-py broker: shard %d did not stop within %.0fs and "
                                 "was killed", i, stop_timeout_s)
                    failed = failed or "killed"
            if failed:
                return 1
            bad = {i: rc for i, rc in codes.items() if rc != 0}
            if bad:
                log.critical("jocko-py broker: %s", "; ".join(
                    f"shard {i} {_describe_exit(rc)}" for i, rc in sorted(bad.items())))
                return 1
            return 0
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(5)
            for s, h in previous.items():
                signal.signal(s, h)
