"""`jocko-py storage format|info|random-uuid` (Kafka's kafka-storage) and the broker's
checks of meta.properties on start: one line and a non-zero exit for every mistake."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jocko_py.cli import main
from jocko_py.client import Client
from jocko_py.commitlog.dirs import lock_dirs, read_meta
from jocko_py.embedded import EmbeddedBroker
from tests.support.broker import REPO, free_port

CID = "q1Sh-9_ISia_zwGINzRvyQ"
OTHER = "MkU3OEVBNTcwNTJENDM2Qg"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A real `jocko-py` process."""
    return subprocess.run([sys.executable, "-m", "jocko_py.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=REPO)


@pytest.fixture
def storage(capsys: pytest.CaptureFixture[str]) -> object:
    """`jocko-py storage ...` in this process (the same main() the command runs; a
    process each would cost more than the checks)."""
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        rc = main(["storage", *args])
        out = capsys.readouterr()
        return subprocess.CompletedProcess(["jocko-py", "storage", *args], rc, out.out, out.err)
    return run


def _one_line_error(r: subprocess.CompletedProcess[str], expected: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert expected in r.stderr, r.stderr


def test_random_uuid_prints_a_kafka_cluster_id() -> None:
    r = _cli("storage", "random-uuid")
    assert r.returncode == 0 and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}\n", r.stdout)


def test_format_info_and_formatting_twice(tmp_path: Path, storage: Any) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    conf = tmp_path / "server.properties"
    conf.write_text(f"node.id=3\nlog.dirs={a},{b}\n")
    r = storage("format", "-t", CID, "-c", str(conf))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"Formatting {d} with cluster.id {CID} and node.id 3."
                                     for d in (a, b)]
    ma, mb = read_meta(a), read_meta(b)
    assert ma is not None and mb is not None
    assert (ma.cluster_id, ma.node_id, mb.cluster_id, mb.node_id) == (CID, 3, CID, 3)
    assert ma.directory_id != mb.directory_id

    _one_line_error(storage("format", "--cluster-id", CID, "--config", str(conf)),
                    f"error: Log directory {a} is already formatted. Use --ignore-formatted to "
                    "ignore this directory and format the others.")
    r = storage("format", "-t", CID, "-c", str(conf), "--ignore-formatted")
    assert r.returncode == 0 and r.stdout == "All of the log directories are already formatted.\n"
    assert read_meta(a) == ma  # untouched
    _one_line_error(storage("format", "-t", OTHER, "-c", str(conf), "-g"),
                    f"error: Invalid cluster.id in: {a}/meta.properties. Expected {OTHER}, "
                    f"but read {CID}")

    r = storage("info", "--config", str(conf))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == (
        f"Found log directories:\n  {a}\n  {b}\n\n"
        f"Found metadata in {a}: {{cluster.id={CID}, directory.id={ma.directory_id}, "
        "node.id=3, version=1}\n"
        f"Found metadata in {b}: {{cluster.id={CID}, directory.id={mb.directory_id}, "
        "node.id=3, version=1}\n\n")
    r = storage("info", "--data-dir", str(tmp_path / "new"))
    assert r.returncode == 1 and r.stdout == (
        f"Found problem:\n  {tmp_path / 'new'} does not exist\n\n")
    (tmp_path / "empty").mkdir()
    r = storage("info", "--data-dir", str(tmp_path / "empty"))
    assert r.returncode == 1 and r.stdout == (
        f"Found log directory:\n  {tmp_path / 'empty'}\n\n"
        f"Found problem:\n  {tmp_path / 'empty'} is not formatted.\n\n")


def test_format_mistakes_are_one_line(tmp_path: Path, storage: Any) -> None:
    d = tmp_path / "d"
    _one_line_error(storage("format", "-t", "my-cluster", "--data-dir", str(d)),
                    "Cluster ID string my-cluster does not appear to be a valid UUID")
    _one_line_error(storage("format", "-t", CID),
                    "storage format: give --config FILE or --data-dir DIR")
    _one_line_error(storage("format", "-t", CID, "-c", str(tmp_path / "no.properties")),
                    "not found")
    with lock_dirs([d]):  # as a running broker holds it
        _one_line_error(storage("format", "-t", CID, "--data-dir", str(d)),
                        f"data directory {d} is in use by another process")
    assert read_meta(d) is None


def test_the_broker_refuses_directories_of_another_cluster_or_node(tmp_path: Path,
                                                                   storage: Any) -> None:
    d = tmp_path / "d"
    assert storage("format", "-t", CID, "--data-dir", str(d), "--broker-id",
                "1").returncode == 0
    addr = f"127.0.0.1:{free_port()}"
    r = _cli("broker", "--data-dir", str(d), "--broker-id", "1", "--broker-addr", addr,
             "--override", f"cluster.id={OTHER}")
    _one_line_error(r, f"jocko-py broker: Invalid cluster.id in: {d}/meta.properties. "
                       f"Expected {OTHER}, but read {CID}")
    r = _cli("broker", "--data-dir", str(d), "--broker-id", "2", "--broker-addr", addr)
    _one_line_error(r, f"jocko-py broker: Stored node id 1 doesn't match previous node id 2 "
                       f"in {d}.")
    assert sorted(p.name for p in d.iterdir()) == [".lock", "meta.properties"]


def test_a_single_node_makes_its_id_once_and_serves_it(tmp_path: Path, storage: Any) -> None:
    """No format step: the first start writes a random id; restarts keep it; Metadata and
    DescribeCluster give the stored id."""
    data = tmp_path / "data"
    ids = []
    for _ in range(2):
        with EmbeddedBroker(data) as b, Client(b.bootstrap_servers) as c:
            meta = read_meta(data)
            assert meta is not None and meta.node_id == 0 and len(meta.cluster_id) == 22
            assert c.metadata([]).cluster_id == meta.cluster_id
            dc = c.request(60, 0, {"include_cluster_authorized_operations": False})
            assert dc.cluster_id == meta.cluster_id
            ids.append(meta.cluster_id)
    assert ids[0] == ids[1]
    # a formatted directory's id is the one served
    other = tmp_path / "formatted"
    assert storage("format", "-t", CID, "--data-dir", str(other)).returncode == 0
    with EmbeddedBroker(other) as b, Client(b.bootstrap_servers) as c:
        assert c.metadata([]).cluster_id == CID
