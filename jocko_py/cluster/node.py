"""A cluster-brain node: raft metadata quorum + gossip membership + active controller.

Composes the sans-IO cores with their asyncio adapters around one ``MetadataImage``:
committed raft entries (``encode_records`` payloads) are applied to the image; while
this node is the raft leader, the controller reconciles the image with the gossip view
(every ``reconcile_ms``, only once all of its own proposals are applied) and serves
admin requests. The broker will embed ``ClusterNode``; until then it runs standalone
(``python -m jocko_py.cluster.node``) with a JSON-lines control port used by the
loopback tests: each request line ``{"op": ...}`` gets one response line.

Control ops: ``status``; ``image`` (the full metadata image as its canonical snapshot
records, with ``applied`` and ``fingerprint``); ``describe_quorum``; ``add_voter`` (voter_id, address) and
``remove_voter`` (voter_id); ``create_topic`` (name, partitions, replication_factor,
configs); ``bench_commit`` (count: propose one record at a time and report each
commit latency in ms).

Failure policy: fail-stop. The raft tick loop, the gossip tick loop and the control
loop are supervised; if one of them raises (or ends), the error is logged with its
traceback, ``ClusterNode.fatal`` is set and ``wait_fatal()`` returns, and the standalone
process exits with status 70 instead of lingering as a node that no longer ticks. It
does not keep ticking: a tick that raised may have changed the raft core without its
persist actions running (or a write/fsync failed), and carrying on could send what is
not durable. Restarting from the durable state is always safe, so a supervisor (or the
embedding broker) restarts the node.

Each process seeds its raft election-timeout jitter from ``os.urandom`` (not from the
node id alone), so a restarted node does not replay the timeouts of its previous life.

Cluster id: the raft core owns it (``RaftConfig.cluster_id``, "" when the directories
are not formatted; raft/core.py rule 9) and gossip carries it in ``MemberMeta`` (members
of another cluster are ignored). When the core learns the id from the metadata log, the
node hands it to ``on_cluster_id`` (the broker stores it in each log directory's
meta.properties) and announces it by gossip. When the core finds it cannot join the
quorum because of another cluster's id, the node stops (``fatal`` is a
``ClusterIdMismatchError``, logged as one line without a traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.gossip.core import GossipConfig, GossipCore, State
from jocko_py.cluster.gossip.messages import MemberEvent, MemberMeta, member_incarnation
from jocko_py.cluster.gossip.transport import GossipTransport
from jocko_py.cluster.linkauth import LinkSecurity, load_secret_file
from jocko_py.cluster.metadata import (
    CONFIG_RESOURCE_TOPIC,
    ClusterSecretRecord,
    ConfigRecord,
    MetadataDelta,
    MetadataImage,
    MetadataRecord,
    RegisterBrokerRecord,
    decode_records,
    encode_records,
    parse_endpoints,
)
from jocko_py.cluster.raft.core import NotLeaderError, RaftConfig, RaftCore, Role
from jocko_py.cluster.raft.messages import DATA, Entry, ReplicaState, RoleChanged, Snapshot
from jocko_py.cluster.raft.storage import FileStorage
from jocko_py.cluster.raft.transport import RaftTransport
from jocko_py.protocol.errors import ErrorCode

log = logging.getLogger("jocko_py.cluster.node")



class ClusterIdMismatchError(Exception):
    """This node's cluster id is not the quorum's: it cannot join (one line, no traceback)."""


class MetadataStateMachine:
    """Applies committed metadata entries to a ``MetadataImage`` and hands each entry's
    ``MetadataDelta`` to the listeners (the broker's metadata publisher)."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.applied = 0
        self.listeners: list[Callable[[MetadataImage, MetadataDelta], None]] = []
        # broker id -> metadata offset just past its latest registration: a broker whose
        # heartbeat reports at least this offset has caught up with the metadata
        self.registered_at: dict[int, int] = {}

    def _publish(self, delta: MetadataDelta) -> None:
        if not delta:
            return
        for fn in self.listeners:
            try:
                fn(self.image, delta)
            except Exception:
                log.exception("metadata listener failed")

    def on_commit(self, entries: tuple[Entry, ...]) -> None:
        for e in entries:
            self.applied = e.offset + 1
            if e.kind == DATA:
                records = decode_records(e.data)
                for r in records:
                    if isinstance(r, RegisterBrokerRecord):
                        self.registered_at[r.broker_id] = self.applied
                self._publish(self.image.apply_batch(records))

    def on_load_snapshot(self, snapshot: Snapshot) -> None:
        old = MetadataImage()
        old.__dict__.update(self.image.__dict__)
        self.image.restore(decode_records(snapshot.data))
        self.applied = snapshot.end_offset
        self._publish(MetadataImage.diff(old, self.image))


class ClusterNode:
    def __init__(
        self,
        node_id: int,
        data_dir: Path,
        raft_listen: str,
        voters: dict[int, str],
        gossip_listen: str,
        seeds: list[str],
        advertised: str,
        rack: str | None = None,
        raft_config: RaftConfig | None = None,
        gossip_config: GossipConfig | None = None,
        reconcile_ms: int = 100,
        snapshot_every: int = 1000,
        raft_seed: int | None = None,
        on_cluster_id: Callable[[str], None] | None = None,
        security: LinkSecurity | None = None,
        previous_broker_epoch: int = -1,
    ) -> None:
        self.node_id = node_id
        self.storage = FileStorage(data_dir / "raft")
        self.machine = MetadataStateMachine()
        # Per-process jitter: a restart must not repeat its previous election timeouts.
        if raft_seed is None:
            raft_seed = int.from_bytes(os.urandom(8), "big")
        self.core = RaftCore(node_id, voters, raft_config, self.storage.load(), seed=raft_seed)
        self.raft = RaftTransport(
            self.core, self.storage, self.machine, raft_listen, on_role=self._on_role,
            security=security,
        )
        # A new incarnation per process start (rule: a restart re-registers the broker).
        # With the epoch of the previous one when it stopped cleanly.
        meta = MemberMeta(node_id, advertised, raft_listen, rack, str(uuid.uuid4()),
                          self.core.cluster_id, previous_broker_epoch)
        # the cluster id this node has announced (stored, gossiped); see _check_cluster_id
        self.on_cluster_id = on_cluster_id
        self._announced_cluster_id = self.core.cluster_id
        self.gossip_core = GossipCore(f"broker-{node_id}", gossip_listen, meta, gossip_config)
        self.gossip = GossipTransport(self.gossip_core, on_event=self._on_member,
                                      security=security)
        self.seeds = seeds
        self.controller = Controller(ControllerConfig())
        # Serialises controller decisions with their commit (the embedding broker
        # shares one lock between this loop and its admin requests).
        self.lock = asyncio.Lock()
        # auto.leader.rebalance.enable: preferred leaders are restored every this many
        # ms (Kafka's leader.imbalance.check.interval.seconds); 0 disables it
        self.leader_rebalance_interval_ms = 0
        self._last_rebalance = time.monotonic()
        # Broker heartbeats (BrokerHeartbeat): when required, the active controller
        # fences a broker whose heartbeats lapse for session_timeout_ms (after its own
        # first session as controller, so a new controller does not fence everyone), and
        # unfences a broker only once a heartbeat shows it caught up with the metadata.
        self.heartbeats_required = False
        self.session_timeout_ms = 9000
        self.heartbeats: dict[int, tuple[float, int]] = {}
        self._active_since: float | None = None
        self.reconcile_ms = reconcile_ms
        self.snapshot_every = snapshot_every
        self._task: asyncio.Task[None] | None = None
        self.member_events: list[tuple[float, str, str]] = []
        self.fatal: BaseException | None = None
        self._fatal_event: asyncio.Event | None = None
        self._closing = False

    async def start(self) -> None:
        self._fatal_event = asyncio.Event()
        await self.raft.start()
        await self.gossip.start(self.seeds)
        self._task = asyncio.create_task(self._control_loop())
        loops = {"raft tick": self.raft.ticker, "gossip tick": self.gossip.ticker,
                 "raft persist": self.raft.persister}
        loops["control"] = self._task
        for name, task in loops.items():
            assert task is not None
            task.add_done_callback(functools.partial(self._loop_done, name))

    def _loop_done(self, name: str, task: asyncio.Task[None]) -> None:
        """Supervision (fail-stop, see the module docstring): a loop that ends while the
        node is not closing is fatal."""
        if self._closing or self.fatal is not None:
            return
        exc = None if task.cancelled() else task.exception()
        if exc is None:
            exc = RuntimeError(f"{name} loop ended unexpectedly")
        self.fatal = exc
        log.critical(
            "[node=%d] %s loop failed; the node stops (fail-stop)",
            self.node_id,
            name,
            exc_info=(type(exc), exc, exc.__traceback__),
        )
        if self._fatal_event is not None:
            self._fatal_event.set()

    @property
    def cluster_id(self) -> str:
        """This node's cluster id ("" until the directories or the quorum give one)."""
        return self.core.cluster_id

    def _fail_stop(self, exc: BaseException) -> None:
        """Fail-stop for a reason that needs no traceback, logged where it was found."""
        if self.fatal is None:
            self.fatal = exc
            if self._fatal_event is not None:
                self._fatal_event.set()

    def _check_cluster_id(self) -> bool:
        """Store and announce a cluster id the raft core learned; False (and the node
        stops) if the core found it cannot join the quorum because of the id."""
        c = self.core
        if c.inconsistent is not None:
            self._fail_stop(ClusterIdMismatchError(c.inconsistent))
            return False
        if c.cluster_id and c.cluster_id != self._announced_cluster_id:
            if self.on_cluster_id is not None:
                self.on_cluster_id(c.cluster_id)
            self._announced_cluster_id = c.cluster_id
            me = self.gossip_core.members[self.gossip_core.name].meta
            self.gossip_core.update_meta(dataclasses.replace(me, cluster_id=c.cluster_id),
                                         self.gossip.now())
            log.info("[node=%d] cluster id %s stored and announced", self.node_id, c.cluster_id)
        return True

    async def wait_fatal(self) -> BaseException:
        """Returns the error that stopped a supervised loop (waits until one does)."""
        assert self._fatal_event is not None, "start() first"
        await self._fatal_event.wait()
        assert self.fatal is not None
        return self.fatal

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task  # a failure was logged by _loop_done
        await self.gossip.close()
        await self.raft.close()
        self.storage.close()

    def _on_role(self, rc: RoleChanged) -> None:
        log.info(
            "[node=%d] raft %s epoch=%d leader=%d", self.node_id, rc.role, rc.epoch, rc.leader_id
        )
        if rc.role == "leader":
            self._active_since = time.monotonic()
            self.heartbeats = {}
        else:
            self._active_since = None

    def record_heartbeat(self, broker_id: int, metadata_offset: int) -> tuple[bool, bool]:
        """A broker's heartbeat, on the active controller: (caught up, fenced)."""
        self.heartbeats[broker_id] = (time.monotonic(), metadata_offset)
        caught_up = metadata_offset >= self.machine.registered_at.get(broker_id, 0)
        b = self.machine.image.brokers.get(broker_id)
        return caught_up, b is None or b.fenced

    def _heartbeat_filter(self, live: dict[int, BrokerInfo]) -> tuple[dict[int, BrokerInfo],
                                                                       set[int] | None]:
        """Apply heartbeat liveness to the gossip view: (live brokers, caught-up brokers)."""
        if not self.heartbeats_required or self._active_since is None:
            return live, None
        now = time.monotonic()
        timeout = self.session_timeout_ms / 1000
        if now - self._active_since >= timeout:
            lapsed = {b for b in live
                      if now - self.heartbeats.get(b, (0.0, 0))[0] > timeout}
            for b in lapsed:
                if not self.machine.image.brokers.get(b) or \
                        not self.machine.image.brokers[b].fenced:
                    log.info("[node=%d] broker %d: no heartbeat for %d ms", self.node_id, b,
                             self.session_timeout_ms)
            live = {b: i for b, i in live.items() if b not in lapsed}
        caught_up = {b for b, (_, off) in self.heartbeats.items()
                     if off >= self.machine.registered_at.get(b, 0)}
        return live, caught_up

    def _on_member(self, ev: MemberEvent) -> None:
        self.member_events.append((time.time(), ev.kind, ev.name))
        log.info("[node=%d] member %s %s", self.node_id, ev.name, ev.kind)

    def live_brokers(self) -> dict[int, BrokerInfo]:
        out: dict[int, BrokerInfo] = {}
        mine = self.core.cluster_id
        for m in self.gossip_core.members.values():
            if m.meta.cluster_id and mine and m.meta.cluster_id != mine:
                continue  # another cluster's broker (gossip ignores its updates too)
            if m.state <= State.SUSPECT:
                try:
                    eps = parse_endpoints(m.meta.advertised_addr)
                except ValueError:
                    log.warning("[node=%d] member %s advertises a bad address %r",
                                self.node_id, m.name, m.meta.advertised_addr)
                    continue
                out[m.meta.broker_id] = BrokerInfo(
                    m.meta.broker_id, eps[0].host, eps[0].port, m.meta.rack,
                    member_incarnation(m.meta), eps, m.meta.previous_broker_epoch)
        return out

    def is_active_controller(self) -> bool:
        return self.core.role is Role.LEADER

    def _settled(self) -> bool:
        c = self.core
        return c.high_watermark == c.log_end and self.machine.applied == c.high_watermark

    async def _control_loop(self) -> None:
        while True:
            await asyncio.sleep(self.reconcile_ms / 1000)
            if not self._check_cluster_id():
                return
            c = self.core
            if c.applied - c.log_start >= self.snapshot_every and self.machine.applied == c.applied:
                data = encode_records(self.machine.image.snapshot())
                self.raft.execute(c.take_snapshot(c.applied, data, self.raft.now()))
            if not self.is_active_controller() or not self._settled():
                continue
            async with self.lock:
                if not self.is_active_controller() or not self._settled():
                    continue
                live, caught_up = self._heartbeat_filter(self.live_brokers())
                recs = self.controller.bootstrap_records(self.machine.image) + \
                    self.controller.reconcile(self.machine.image, live, caught_up=caught_up)
                if not recs and self.leader_rebalance_interval_ms > 0 and \
                        time.monotonic() - self._last_rebalance \
                        >= self.leader_rebalance_interval_ms / 1000:
                    self._last_rebalance = time.monotonic()
                    recs = self.controller.rebalance_leaders(self.machine.image)
                    if recs:
                        log.info("[node=%d] moving %d partition(s) back to their preferred "
                                 "leaders", self.node_id, len(recs))
                if recs:
                    with contextlib.suppress(NotLeaderError):
                        await self.raft.propose([encode_records(recs)])

    async def propose(self, records: list[MetadataRecord]) -> int:
        return await self.raft.propose([encode_records(records)])

    async def create_topic(
        self, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None
    ) -> int:
        if not self.is_active_controller():
            return ErrorCode.NOT_CONTROLLER
        err, recs = self.controller.create_topic(self.machine.image, name, partitions, rf, configs)
        if err == ErrorCode.NONE:
            try:
                await self.propose(recs)
            except NotLeaderError:
                return ErrorCode.NOT_CONTROLLER
        return err

    def status(self) -> dict[str, Any]:
        c = self.core
        img = self.machine.image
        return {
            "node_id": self.node_id,
            "role": c.role.value,
            "epoch": c.epoch,
            "leader": c.leader_id,
            "high_watermark": c.high_watermark,
            "log_end": c.log_end,
            "log_start": c.log_start,
            "applied": self.machine.applied,
            "fingerprint": img.fingerprint(),
            "topics": sorted(img.topics),
            "brokers": {
                str(b.broker_id): {"fenced": b.fenced, "rack": b.rack} for b in img.brokers.values()
            },
            "partitions": {
                f"{t.name}-{pid}": {
                    "leader": p.leader,
                    "isr": list(p.isr),
                    "elr": list(p.elr),
                    "leader_epoch": p.leader_epoch,
                }
                for t in img.topics.values()
                for pid, p in t.partitions.items()
            },
            "members": {m.name: m.state.name.lower() for m in self.gossip_core.members.values()},
        }

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "status":
            return self.status()
        if op == "image":
            img = self.machine.image
            return {
                "applied": self.machine.applied,
                "fingerprint": img.fingerprint(),
                "records": [  # the cluster secret is never shown
                    [type(r).__name__, _jsonable(dataclasses.asdict(r))] for r in img.snapshot()
                    if not isinstance(r, ClusterSecretRecord)
                ],
            }
        if op == "create_topic":
            err = await self.create_topic(
                str(req["name"]),
                int(req.get("partitions", 1)),
                int(req.get("replication_factor", 1)),
                req.get("configs"),
            )
            return {"error_code": err, "leader": self.core.leader_id}
        if op == "describe_quorum":
            dq = self.core.describe_quorum(self.raft.now())
            return {
                "error_code": dq.error_code,
                "leader_id": dq.leader_id,
                "leader_epoch": dq.leader_epoch,
                "high_watermark": dq.high_watermark,
                "current_voters": [vars_of(r) for r in dq.current_voters],
                "observers": [vars_of(r) for r in dq.observers],
            }
        if op in ("add_voter", "remove_voter"):
            # AddRaftVoter / RemoveRaftVoter: one change at a time, leader only.
            now = self.raft.now()
            if op == "add_voter":
                err, acts = self.core.add_voter(int(req["voter_id"]), str(req["address"]), now)
            else:
                err, acts = self.core.remove_voter(int(req["voter_id"]), now)
            self.raft.execute(acts)
            return {"error_code": err, "leader": self.core.leader_id}
        if op == "bench_commit":
            if not self.is_active_controller():
                return {"error_code": ErrorCode.NOT_CONTROLLER, "leader": self.core.leader_id}
            lat: list[float] = []
            for i in range(int(req.get("count", 100))):
                rec = ConfigRecord(CONFIG_RESOURCE_TOPIC, "__bench", "n", str(i))
                t0 = time.perf_counter()
                try:
                    await self.propose([rec])
                except NotLeaderError:
                    return {"error_code": ErrorCode.NOT_CONTROLLER, "latencies_ms": lat}
                lat.append((time.perf_counter() - t0) * 1000)
            return {"error_code": ErrorCode.NONE, "latencies_ms": lat}
        return {"error_code": ErrorCode.INVALID_REQUEST, "message": f"unknown op {op!r}"}


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)  # UUIDs


def vars_of(r: ReplicaState) -> dict[str, int]:
    return {
        "replica_id": r.replica_id,
        "log_end_offset": r.log_end_offset,
        "last_fetch_timestamp": r.last_fetch_timestamp,
        "last_caught_up_timestamp": r.last_caught_up_timestamp,
    }


async def _control_server(node: ClusterNode, listen: str) -> asyncio.Server:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    resp = await node.handle(json.loads(line))
                except Exception as e:  # report, keep serving
                    log.exception("[node=%d] control request failed", node.node_id)
                    resp = {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "message": repr(e)}
                writer.write(json.dumps(resp).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    host, port = listen.rsplit(":", 1)
    return await asyncio.start_server(serve, host, int(port))


def _parse_voters(s: str) -> dict[int, str]:
    out = {}
    for part in s.split(","):
        i, addr = part.split("=", 1)
        out[int(i)] = addr
    return out


async def _amain(args: argparse.Namespace) -> int:
    raft_cfg = RaftConfig(
        election_timeout_ms=args.election_timeout_ms,
        fetch_timeout_ms=args.fetch_timeout_ms,
        fetch_max_wait_ms=args.fetch_max_wait_ms,
        request_timeout_ms=args.request_timeout_ms,
    )
    gossip_cfg = GossipConfig(
        probe_interval_ms=args.probe_interval_ms,
        probe_timeout_ms=args.probe_interval_ms * 2 // 5,
        suspicion_mult=args.suspicion_mult,
        sync_interval_ms=args.probe_interval_ms * 10,
        reconnect_interval_ms=args.probe_interval_ms * 3,
    )
    node = ClusterNode(
        node_id=args.node_id,
        data_dir=Path(args.data_dir),
        raft_listen=args.raft,
        voters=_parse_voters(args.voters),
        gossip_listen=args.gossip,
        seeds=[s for s in args.seeds.split(",") if s],
        advertised=args.advertised,
        rack=args.rack,
        raft_config=raft_cfg,
        gossip_config=gossip_cfg,
        snapshot_every=args.snapshot_every,
        security=LinkSecurity(load_secret_file(args.secret_file)) if args.secret_file else None,
    )
    await node.start()
    server = await _control_server(node, args.control)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("[node=%d] ready", args.node_id)
    code = await run_until_stopped(node, stop)
    server.close()
    return code


EXIT_FATAL = 70  # EX_SOFTWARE: a supervised loop failed


async def run_until_stopped(node: ClusterNode, stop: asyncio.Event) -> int:
    """Serve until ``stop`` is set (graceful: leave the gossip group, exit 0) or a
    supervised loop fails (fail-stop: close without leaving, exit ``EXIT_FATAL``)."""
    stop_wait = asyncio.create_task(stop.wait())
    fatal_wait = asyncio.create_task(node.wait_fatal())
    await asyncio.wait({stop_wait, fatal_wait}, return_when=asyncio.FIRST_COMPLETED)
    for t in (stop_wait, fatal_wait):
        t.cancel()
    if node.fatal is None:
        await node.gossip.leave()
        await node.close()
        return 0
    await node.close()
    log.critical("[node=%d] exiting with status %d: %r", node.node_id, EXIT_FATAL, node.fatal)
    return EXIT_FATAL


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="jocko-py cluster brain node (raft+gossip)")
    p.add_argument("--node-id", type=int, required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--raft", required=True, help="host:port of this node's raft listener")
    p.add_argument("--voters", required=True, help="id=host:port,... bootstrap voters")
    p.add_argument("--gossip", required=True, help="host:port (UDP) for gossip")
    p.add_argument("--seeds", default="", help="gossip seed addresses, comma separated")
    p.add_argument("--advertised", default="127.0.0.1:9092")
    p.add_argument("--rack", default=None)
    p.add_argument("--control", required=True, help="host:port of the JSON control port")
    p.add_argument("--election-timeout-ms", type=int, default=1000)
    p.add_argument("--fetch-timeout-ms", type=int, default=2000)
    p.add_argument("--fetch-max-wait-ms", type=int, default=500)
    p.add_argument("--request-timeout-ms", type=int, default=300)
    p.add_argument("--probe-interval-ms", type=int, default=1000)
    p.add_argument("--suspicion-mult", type=int, default=4)
    p.add_argument("--snapshot-every", type=int, default=1000)
    p.add_argument("--secret-file", default="", help="cluster secret (raft and gossip auth)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    code = asyncio.run(_amain(args))
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    main()
