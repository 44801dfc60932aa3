"""Sharded brokers without processes: the plan of a `--shards N` broker (node ids,
ports, directories, quorum; jocko_py/shards.py), the command line's refusals, and
placement treating a host's shards as one failure domain (cluster/controller.py)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from jocko_py.broker.config import ConfigError, build_config, parse_properties
from jocko_py.cluster.controller import BrokerInfo, Controller, ControllerConfig
from jocko_py.cluster.metadata import MetadataImage
from jocko_py.cluster.shard_ids import host_and_shard
from jocko_py.protocol.errors import ErrorCode
from jocko_py.shards import (
    check_sharded_dirs,
    check_unsharded_dirs,
    format_properties,
    parse_shards,
    plan_shards,
)


def _plan(n: int, **kw: object) -> list:  # type: ignore[type-arg]
    config = build_config(**kw)  # type: ignore[arg-type]
    return plan_shards(config, n, raft_explicit=bool(kw.get("raft_addr")) or bool(
        config.voters.get(config.broker_id)), gossip_explicit=False, cluster_id="c1")


def test_single_host_plan_ids_ports_dirs_and_quorum(tmp_path: Path) -> None:
    plans = _plan(3, broker_id=7, broker_addr="10.0.0.1:9092",
                  overrides={"log.dirs": f"{tmp_path}/a,{tmp_path}/b",
                             "num.partitions": "6", "jocko.metrics.addr": "0.0.0.0:9308"})
    assert [p.node_id for p in plans] == [7, 1007, 2007]
    assert [host_and_shard(p.node_id) for p in plans] == [(7, 0), (7, 1), (7, 2)]
    assert [p.port for p in plans] == [9092, 9093, 9094]
    for k, p in enumerate(plans):
        props = p.properties
        assert props["node.id"] == props["broker.id"] == str(7 + 1000 * k)
        assert props["listeners"] == f"PLAINTEXT://10.0.0.1:{9092 + k}"
        assert props["log.dirs"] == f"{tmp_path}/a/shard-{k},{tmp_path}/b/shard-{k}"
        # raft after the Kafka ports, gossip after raft; shard 0 the only voter
        assert props["jocko.raft.addr"] == f"10.0.0.1:{9095 + k}"
        assert props["jocko.gossip.addr"] == f"10.0.0.1:{9098 + k}"
        assert props["controller.quorum.voters"] == "7@10.0.0.1:9095"
        assert props.get("jocko.gossip.join") == (None if k == 0 else "10.0.0.1:9098")
        assert props["jocko.metrics.addr"] == f"0.0.0.0:{9308 + k}"
        assert props["cluster.id"] == "c1" and props["num.shards"] == "1"
        assert props["num.partitions"] == "6"  # the operator's settings are kept
        # each shard's properties build a config of their own
        c = build_config(overrides=parse_properties(format_properties(props)))
        assert (c.broker_id, c.port, c.raft_addr) == (7 + 1000 * k, 9092 + k,
                                                       f"10.0.0.1:{9095 + k}")


def test_cluster_member_keeps_its_voters_and_joins_through_shard_zero() -> None:
    plans = _plan(2, broker_id=2, broker_addr="h2:9092",
                  voters="1@h1:9190,2@h2:9190,3@h3:9190", join="h1:9194")
    assert [p.properties["controller.quorum.voters"] for p in plans] == [
        "1@h1:9190,2@h2:9190,3@h3:9190"] * 2
    assert [p.properties["jocko.raft.addr"] for p in plans] == ["h2:9190", "h2:9191"]
    assert [p.properties["jocko.gossip.join"] for p in plans] == [
        "h1:9194", "h1:9194,h2:9192"]
    # shard 1's Kafka port is shard 0's raft port: refused, naming both
    with pytest.raises(ConfigError, match="port 9093 is also shard 0's raft port"):
        _plan(2, broker_id=2, broker_addr="h2:9092", raft_addr="h2:9093")


def test_refusals() -> None:
    with pytest.raises(ConfigError, match="node ids must be 0 to 999"):
        _plan(2, broker_id=1000)
    with pytest.raises(ConfigError, match="port 0"):
        _plan(2, broker_addr="localhost:0")
    with pytest.raises(ConfigError, match="is not a shard count"):
        parse_shards("-1")
    assert parse_shards("auto") >= 1 and parse_shards("3") == 3


def test_properties_round_trip() -> None:
    props = {"a b": "x", "k=1": " lead", "sasl.jaas.config": 'm required u="a\\b";',
             "multi": "l1\nl2\tend", "colon:key": "#!"}
    assert parse_properties(format_properties(props)) == props


def test_directories_of_another_layout_are_refused(tmp_path: Path) -> None:
    d = tmp_path / "d"
    (d / "shard-0").mkdir(parents=True)
    config = build_config(data_dir=str(d))
    with pytest.raises(ConfigError, match="sharded broker's data"):
        check_unsharded_dirs(config)
    (d / "shard-3").mkdir()
    (d / "shard-3" / "t-0").mkdir()
    with pytest.raises(ConfigError, match="shard\\(s\\) 3, beyond num.shards=2"):
        check_sharded_dirs(config, 2)
    check_sharded_dirs(config, 4)
    (d / "meta.properties").write_text("node.id=0\n")
    with pytest.raises(ConfigError, match="unsharded broker's data"):
        check_sharded_dirs(config, 4)


def test_cli_mistakes_are_one_line(tmp_path: Path) -> None:
    for args, text in [(["--shards", "x"], "--shards: 'x' is not a shard count"),
                       (["--shards", "2", "--broker-id", "1500"], "node.id 1500: with num.shards > 1 node ids must be 0 to 999")]:
        r = subprocess.run([sys.executable, "-m", "jocko_py.cli", "broker",
                            "--data-dir", str(tmp_path / "d"), *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, r
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"jocko-py broker: {text}"), lines


def _placement(hosts: dict[int, tuple[str, str]], rf: int) -> list[tuple[int, ...]]:
    ctl = Controller(ControllerConfig(producer_id_block_size=100))
    img = MetadataImage()
    live = {b: BrokerInfo(b, h, 9000 + b, r or None, uuid.UUID(int=b + 1))
            for b, (h, r) in hosts.items()}
    for rec in ctl.reconcile(img, live):
        img.apply(rec)
    err, recs = ctl.create_topic(img, "t", 12, rf)
    assert err == ErrorCode.NONE
    for rec in recs:
        img.apply(rec)
    return [p.replicas for p in img.topics["t"].partitions.values()]


def test_placement_puts_replicas_on_distinct_hosts_before_a_hosts_other_shard() -> None:
    # three hosts of two shards each, no racks: replicas on three hosts
    hosts = {n + 1000 * k: (f"h{n}", "") for n in (1, 2, 3) for k in (0, 1)}
    for replicas in _placement(hosts, 3):
        assert len({hosts[b][0] for b in replicas}) == 3, replicas
    # two racks of two hosts each (two shards per host), rf 3: both racks, three hosts
    hosts = {n + 1000 * k: (f"h{n}", "r1" if n < 3 else "r2")
             for n in (1, 2, 3, 4) for k in (0, 1)}
    for replicas in _placement(hosts, 3):
        assert len({hosts[b][1] for b in replicas}) == 2, replicas
        assert len({hosts[b][0] for b in replicas}) == 3, replicas
    # one host of two shards: rf 2 still places (on both shards)
    assert all(len(set(r)) == 2 for r in _placement({0: ("h", ""), 1000: ("h", "")}, 2))
