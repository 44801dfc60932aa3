"""Prometheus metrics: the collector and the HTTP endpoint that serves it (`/metrics`).

This module owns the names under which the broker is seen by Prometheus. They follow
the names Kafka's JMX metrics take under the Prometheus JMX exporter (the rules
Strimzi and most Kafka dashboards use: `kafka_server_brokertopicmetrics_bytesin_total`,
`kafka_server_replicamanager_underreplicatedpartitions`, ...), so an operator's
dashboards and alerts carry over. Raft, gossip and consumer-group lag have no JMX
counterpart under those rules; they use `kafka_server_raftmetrics_*` (KRaft's
raft-metrics group), `jocko_gossip_*` and `kafka_consumergroup_*` (kafka_exporter's
names).

Nothing is counted here. The request path counts in plain ints (`broker/stats.py`);
on a scrape, `BrokerCollector.collect` reads those counters and the broker's state
(partitions, logs, purgatories, groups, quorum) on the event loop, and the text
exposition is rendered in a worker thread, so a scrape costs the loop one pass over
the partitions and nothing per request.

The endpoint (`broker/http.py`) listens on `--metrics-addr` / `jocko.metrics.addr`
(off unless set): `GET /metrics` (Prometheus text format) and `GET /` (a pointer to
it). TLS and authentication (`jocko.metrics.ssl.enable`, `jocko.metrics.auth`: HTTP
Basic against the broker's users or mutual TLS; required by default once any listener
is SSL or SASL) are broker/security/http_access.py's.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from jocko_py.broker.http import HttpServer, Request, Response
from jocko_py.broker.partition import Role
from jocko_py.broker.security.http_access import HttpAccess
from jocko_py.broker.stats import LATENCY_BUCKETS
from jocko_py.protocol import messages
from jocko_py.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from jocko_py.broker.group.coordinator import GroupCoordinator
    from jocko_py.broker.replica_manager import ReplicaManager
    from jocko_py.broker.security.session import SecurityManager
    from jocko_py.broker.stats import BrokerStats
    from jocko_py.cluster.metadata import MetadataImage
    from jocko_py.cluster.quorum import MetadataQuorum

log = logging.getLogger("jocko_py.broker.metrics")


class MetricsHost(Protocol):
    """What a scrape reads: the counters, the replicas, the image and the quorum, the
    groups coordinated here, and the security settings (who may scrape)."""

    @property
    def stats(self) -> BrokerStats: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def quorum(self) -> MetadataQuorum: ...

    @property
    def groups(self) -> GroupCoordinator: ...

    @property
    def security(self) -> SecurityManager: ...


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=labels)


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels or [])


class BrokerCollector:
    """Reads the broker's counters and state into metric families (on the event loop)."""

    def __init__(self, broker: MetricsHost) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._topics()
        yield from self._partitions()
        yield from self._groups()
        yield from self._quorum()

    # -- network --------------------------------------------------------------------

    def _requests(self) -> Iterator[Metric]:
        st = self.broker.stats
        reqs = _counter("kafka_network_requestmetrics_requests_total",
                        "Requests served, per API", ["request"])
        lat = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from a request's arrival to its encoded response, per API",
            labels=["request"])
        bounds = [str(b) for b in LATENCY_BUCKETS] + ["+Inf"]
        for key, rs in sorted(st.requests.items()):
            name = messages.api_name(key)
            reqs.add_metric([name], rs.count)
            cum = 0
            buckets = []
            for le, n in zip(bounds, rs.buckets, strict=True):
                cum += n
                buckets.append((le, float(cum)))
            lat.add_metric([name], buckets, rs.total_seconds)
        yield reqs
        yield lat
        errs = _counter("kafka_network_requestmetrics_errors_total",
                        "Error codes in responses (per partition where the response has "
                        "partitions), per API and error; NONE is not counted",
                        ["request", "error"])
        for (key, code), n in sorted(st.errors.items()):
            errs.add_metric([messages.api_name(key), ErrorCode.of(code).name], n)
        yield errs
        conns = _gauge("kafka_server_socketservermetrics_connection_count",
                       "Open client connections")
        conns.add_metric([], st.connections_created - st.connections_closed)
        yield conns
        created = _counter("kafka_server_socketservermetrics_connection_creation_total",
                           "Client connections accepted", [])
        created.add_metric([], st.connections_created)
        yield created
        closed = _counter("kafka_server_socketservermetrics_connection_close_total",
                          "Client connections closed", [])
        closed.add_metric([], st.connections_closed)
        yield closed
        zc = _counter("jocko_fetch_zero_copy_bytes_total",
                      "Fetch record bytes sent from the file with sendfile", [])
        zc.add_metric([], st.zero_copy_bytes)
        yield zc

    # -- per topic ------------------------------------------------------------------

    def _topics(self) -> Iterator[Metric]:
        st = self.broker.stats
        for name, doc, values in (
            ("kafka_server_brokertopicmetrics_bytesin_total",
             "Record bytes appended as leader (produce), per topic", st.bytes_in),
            ("kafka_server_brokertopicmetrics_messagesin_total",
             "Records appended as leader (produce), per topic", st.messages_in),
            ("kafka_server_brokertopicmetrics_bytesout_total",
             "Record bytes sent to consumers, per topic", st.bytes_out),
            ("kafka_server_brokertopicmetrics_messagesout_total",
             "Records in the batches sent to consumers, per topic", st.messages_out),
            ("kafka_server_brokertopicmetrics_replicationbytesin_total",
             "Record bytes appended as follower, per topic", st.replication_bytes_in),
            ("kafka_server_brokertopicmetrics_replicationbytesout_total",
             "Record bytes sent to followers, per topic", st.replication_bytes_out),
            ("kafka_server_brokertopicmetrics_failedproducerequests_total",
             "Produce partitions that failed, per topic", st.failed_produce),
            ("kafka_server_brokertopicmetrics_failedfetchrequests_total",
             "Consumer fetch partitions that failed, per topic", st.failed_fetch),
        ):
            c = _counter(name, doc, ["topic"])
            for topic, n in sorted(values.items()):
                c.add_metric([topic], n)
            yield c

    # -- partitions and logs --------------------------------------------------------

    def _partitions(self) -> Iterator[Metric]:
        rm = self.broker.replicas
        image = self.broker.image
        lbl = ["topic", "partition"]
        size = _gauge("kafka_log_log_size", "Log size in bytes", lbl)
        segs = _gauge("kafka_log_log_numlogsegments", "Segments in the log", lbl)
        leo = _gauge("kafka_log_log_logendoffset", "Log end offset", lbl)
        lso = _gauge("kafka_log_log_logstartoffset", "Log start offset", lbl)
        hw = _gauge("kafka_cluster_partition_highwatermark",
                    "High watermark (on this broker's replica)", lbl)
        isr = _gauge("kafka_cluster_partition_insyncreplicascount",
                     "ISR size (partitions this broker leads)", lbl)
        repl = _gauge("kafka_cluster_partition_replicascount",
                      "Replicas (partitions this broker leads)", lbl)
        urp_p = _gauge("kafka_cluster_partition_underreplicated",
                       "1 if the ISR is smaller than the replicas (partitions led here)", lbl)
        leaders = under = under_min = 0
        for (topic, idx), p in sorted(rm.partitions.items()):
            lv = [topic, str(idx)]
            lg = p.log
            try:
                size.add_metric(lv, lg.size_bytes)
                segs.add_metric(lv, lg.num_segments)
                leo.add_metric(lv, lg.log_end_offset)
                lso.add_metric(lv, lg.log_start_offset)
            except Exception:  # a log closed under us (deleted meanwhile): skip it
                continue
            hw.add_metric(lv, p.high_watermark)
            if p.role is Role.LEADER:
                leaders += 1
                n_isr, n_rep = len(p.isr), len(p.replicas)
                isr.add_metric(lv, n_isr)
                repl.add_metric(lv, n_rep)
                urp_p.add_metric(lv, 1 if n_isr < n_rep else 0)
                under += n_isr < n_rep
                under_min += p.under_min_isr()
        yield from (size, segs, leo, lso, hw, isr, repl, urp_p)
        for name, doc, v in (
            ("kafka_server_replicamanager_partitioncount", "Partitions on this broker",
             len(rm.partitions)),
            ("kafka_server_replicamanager_leadercount", "Partitions this broker leads",
             leaders),
            ("kafka_server_replicamanager_underreplicatedpartitions",
             "Partitions led here whose ISR is smaller than their replicas", under),
            ("kafka_server_replicamanager_underminisrpartitioncount",
             "Partitions led here whose ISR is below min.insync.replicas", under_min),
        ):
            g = _gauge(name, doc)
            g.add_metric([], v)
            yield g
        for name, doc, n in (
            ("kafka_server_replicamanager_isrshrinks_total",
             "ISR shrinks confirmed by the controller", rm.stats.isr_shrinks),
            ("kafka_server_replicamanager_isrexpands_total",
             "ISR expansions confirmed by the controller", rm.stats.isr_expands),
        ):
            c = _counter(name, doc, [])
            c.add_metric([], n)
            yield c
        # Kafka reports these on the active controller only (0 elsewhere), so their sum
        # over the brokers is the cluster's figure
        active = self.broker.quorum.is_active_controller()
        offline = 0
        total = 0
        if active:
            for t in image.topics.values():
                for pi in t.partitions.values():
                    total += 1
                    offline += pi.leader < 0
        for name, doc, v in (
            ("kafka_controller_kafkacontroller_activecontrollercount",
             "1 on the active controller", int(active)),
            ("kafka_controller_kafkacontroller_offlinepartitionscount",
             "Partitions without a leader (active controller only)", offline),
            ("kafka_controller_kafkacontroller_globalpartitioncount",
             "Partitions in the cluster (active controller only)", total),
            ("kafka_controller_kafkacontroller_globaltopiccount",
             "Topics in the cluster (active controller only)",
             len(image.topics) if active else 0),
        ):
            g = _gauge(name, doc)
            g.add_metric([], v)
            yield g
        logs = rm.logs
        g = _gauge("kafka_log_logmanager_offlinelogdirectorycount",
                   "data directories that failed (Kafka's LogDirFailureChannel)")
        g.add_metric([], len(logs.dirs) if logs.offline_reason is not None
                     else len(logs.offline_dirs))
        yield g
        try:
            st = os.statvfs(logs.data_dir)
            total_b = st.f_blocks * st.f_frsize
            used_b = total_b - st.f_bfree * st.f_frsize
        except OSError:
            total_b = used_b = 0
        for name, doc, v in (
            ("jocko_log_dir_filesystem_size_bytes", "Size of the data directory's filesystem",
             total_b),
            ("jocko_log_dir_filesystem_used_bytes",
             "Used bytes of the data directory's filesystem (retention by share of disk "
             "keeps it under jocko.log.retention.disk.percent)", used_b),
        ):
            g = _gauge(name, doc)
            g.add_metric([], v)
            yield g
        purg = _gauge("kafka_server_delayedoperationpurgatory_purgatorysize",
                      "Requests waiting in a purgatory", ["delayedOperation"])
        purg.add_metric(["Produce"], rm.produce_waiters.size())
        purg.add_metric(["Fetch"], rm.fetch_waiters.size())
        yield purg

    # -- consumer groups ------------------------------------------------------------

    def _groups(self) -> Iterator[Metric]:
        gc = self.broker.groups
        rm = self.broker.replicas
        lbl = ["consumergroup", "topic", "partition"]
        cur = _gauge("kafka_consumergroup_current_offset",
                     "Committed offset of a group (groups coordinated here)", lbl)
        lag = _gauge("kafka_consumergroup_lag",
                     "High watermark minus committed offset (partitions hosted here)", lbl)
        members = _gauge("kafka_consumergroup_members", "Members of a group",
                         ["consumergroup", "state"])
        for gid, g in sorted(gc.groups.items()):
            members.add_metric([gid, g.state.value], len(g.members))
            for (topic, idx), om in sorted(g.offsets.items()):
                lv = [gid, topic, str(idx)]
                cur.add_metric(lv, om.offset)
                p = rm.partitions.get((topic, idx))
                if p is not None:
                    lag.add_metric(lv, max(0, p.high_watermark - om.offset))
        yield from (cur, lag, members)

    # -- metadata quorum ------------------------------------------------------------

    def _quorum(self) -> Iterator[Metric]:
        q = self.broker.quorum
        node = getattr(q, "node", None)
        if node is None:
            return
        core = node.core
        for name, doc, v in (
            ("kafka_server_raftmetrics_current_leader", "Raft leader id (-1: none known)",
             core.leader_id),
            ("kafka_server_raftmetrics_current_epoch", "Raft epoch", core.epoch),
            ("kafka_server_raftmetrics_high_watermark", "Raft high watermark (committed)",
             core.high_watermark),
            ("kafka_server_raftmetrics_log_end_offset", "Raft log end offset", core.log_end),
            ("kafka_server_raftmetrics_applied_offset",
             "Metadata records applied by this broker", node.machine.applied),
            ("kafka_server_raftmetrics_commit_lag",
             "Committed metadata records this broker has not applied yet",
             max(0, core.high_watermark - node.machine.applied)),
        ):
            g = _gauge(name, doc)
            g.add_metric([], v)
            yield g
        state = _gauge("kafka_server_raftmetrics_current_state",
                       "1 for this node's raft role", ["state"])
        role = core.role.value
        for r in ("leader", "follower", "candidate", "prospective", "unattached"):
            state.add_metric([r], 1 if r == role else 0)
        yield state
        members = _gauge("jocko_gossip_members", "Gossip members by state", ["state"])
        counts = {"alive": 0, "suspect": 0, "dead": 0, "left": 0}
        for m in node.gossip_core.members.values():
            counts[m.state.name.lower()] = counts.get(m.state.name.lower(), 0) + 1
        for s, n in counts.items():
            members.add_metric([s], n)
        yield members


class _Snapshot:
    """Metric families already collected (rendered off the event loop)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


class MetricsServer:
    """`GET /metrics` over HTTP (broker/http.py), on the broker's event loop."""

    def __init__(self, broker: MetricsHost, host: str, port: int) -> None:
        self.collector = BrokerCollector(broker)
        self.process = [ProcessCollector(registry=None), PlatformCollector(registry=None)]
        self.access = HttpAccess.from_config(broker.security, "metrics")
        self.http = HttpServer(host, port, self.handle, "metrics", self.access.ssl_context,
                               self.access.authenticate)
        self.scrapes = 0

    @property
    def port(self) -> int:
        return self.http.port

    async def start(self) -> None:
        await self.http.start()
        log.info("metrics on %s://%s:%d/metrics (%s)", self.http.scheme, self.http.host,
                 self.http.port, self.access.settings.describe())

    async def stop(self) -> None:
        await self.http.stop()

    async def render(self) -> bytes:
        families: list[Metric] = list(self.collector.collect())
        for c in self.process:
            families.extend(c.collect())
        return await asyncio.to_thread(generate_latest, _Snapshot(families))

    async def handle(self, req: Request) -> Response:
        if req.method == "POST":
            return Response(405, b"method not allowed\n", "text/plain")
        if req.path == "/metrics":
            self.scrapes += 1
            return Response(200, await self.render(), CONTENT_TYPE_LATEST)
        if req.path == "/":
            return Response(200, b'<a href="/metrics">metrics</a>\n')
        return Response(404, b"not found\n", "text/plain")
