"""Log directory ownership (commitlog/dirs.py): the `.lock` and `meta.properties`."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from jocko_py.commitlog.dirs import (
    LOCK_FILE,
    META_FILE,
    DirectoryError,
    DirectoryInUseError,
    MetaProperties,
    check_cluster_id,
    lock_dirs,
    random_uuid,
    read_meta,
    store_meta,
    verify_meta,
    write_meta,
)

CID = "q1Sh-9_ISia_zwGINzRvyQ"
OTHER = "MkU3OEVBNTcwNTJENDM2Qg"


def test_a_second_lock_in_the_same_process_conflicts_and_names_the_holder(
        tmp_path: Path) -> None:
    """flock belongs to an open file description: opening the file again conflicts,
    even in the process that holds it (two embedded brokers on one directory)."""
    d = tmp_path / "d"
    first = lock_dirs([d])
    try:
        with pytest.raises(DirectoryInUseError) as e:
            lock_dirs([d])
        assert e.value.pid == os.getpid() and e.value.directory == d
        assert str(e.value) == (f"data directory {d} is in use by another process "
                                f"(pid {os.getpid()}): its {LOCK_FILE} is held")
    finally:
        first.release()
    lock_dirs([d]).release()  # released: taken again
    assert (d / LOCK_FILE).exists()  # the file stays, as Kafka's


def test_all_or_none_a_busy_directory_releases_the_others(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    held = lock_dirs([b])
    try:
        with pytest.raises(DirectoryInUseError) as e:
            lock_dirs([a, b])
        assert e.value.directory == b
        lock_dirs([a]).release()  # `a` was not left locked
    finally:
        held.release()


def test_a_lock_held_by_another_process_names_its_pid(tmp_path: Path) -> None:
    d = tmp_path / "d"
    code = ("import sys, time; from pathlib import Path; from jocko_py.commitlog.dirs import "
            f"lock_dirs; lock_dirs([Path({str(d)!r})]); print('locked', flush=True); "
            "sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(DirectoryInUseError) as e:
            lock_dirs([d])
        assert e.value.pid == proc.pid and f"(pid {proc.pid})" in str(e.value)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # it exits: the kernel drops its lock
        proc.wait(10)
    lock_dirs([d]).release()


def test_meta_properties_round_trip_in_kafkas_format(tmp_path: Path) -> None:
    meta = MetaProperties(CID, 3, random_uuid())
    write_meta(tmp_path, meta)
    assert read_meta(tmp_path) == meta
    lines = (tmp_path / META_FILE).read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert lines[2:] == [f"cluster.id={CID}", f"directory.id={meta.directory_id}", "node.id=3",
                         "version=1"]
    assert read_meta(tmp_path / "absent") is None
    assert not list(tmp_path.glob("*.tmp"))


def test_random_uuid_is_a_base64url_uuid4_like_kafka_storage() -> None:
    ids = {random_uuid() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        u = uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        assert u.version == 4
        check_cluster_id(text)
    with pytest.raises(ValueError, match="does not appear to be a valid UUID"):
        check_cluster_id("my-cluster")


def test_directories_must_agree_with_each_other_and_the_config(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    write_meta(a, MetaProperties(CID, 1, random_uuid()))
    write_meta(b, MetaProperties(OTHER, 1, random_uuid()))
    with pytest.raises(DirectoryError) as e:
        verify_meta([a, b], 1)
    assert str(e.value) == (f"Invalid cluster.id in: {b / META_FILE}. Expected {CID}, "
                            f"but read {OTHER}")
    with pytest.raises(DirectoryError, match=f"Expected {OTHER}, but read {CID}"):
        verify_meta([a], 1, OTHER)  # the configured cluster.id
    with pytest.raises(DirectoryError, match="Stored node id 1 doesn't match previous node id 2"):
        verify_meta([a], 2)
    assert verify_meta([a, c], 1) == (CID, {a: read_meta(a), c: None})
    assert verify_meta([c], 1) == ("", {c: None})
    # a directory copied from another keeps its directory.id: refused
    (c / META_FILE).parent.mkdir()
    (c / META_FILE).write_bytes((a / META_FILE).read_bytes())
    with pytest.raises(DirectoryError, match="Duplicate directory ID"):
        verify_meta([a, c], 1)


def test_store_fills_the_unformatted_directories_and_never_changes_an_id(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_meta(a, MetaProperties(CID, 1, random_uuid()))
    before = (a / META_FILE).read_bytes()
    assert store_meta([a, b], 1, CID) == [b]
    assert (a / META_FILE).read_bytes() == before
    mb = read_meta(b)
    assert mb is not None and (mb.cluster_id, mb.node_id) == (CID, 1)
    assert mb.directory_id != read_meta(a).directory_id  # type: ignore[union-attr]
    with pytest.raises(DirectoryError, match="Invalid cluster.id"):
        store_meta([a, b], 1, OTHER)
    assert read_meta(a) is not None and read_meta(a).cluster_id == CID  # type: ignore[union-attr]


def test_a_file_from_an_older_version_is_completed(tmp_path: Path) -> None:
    """jocko-py wrote `version=1` and `cluster.id` only: the id is kept, node.id and a
    directory.id are added."""
    (tmp_path / META_FILE).write_text(f"version=1\ncluster.id={CID}\n")
    assert verify_meta([tmp_path], 5)[0] == CID
    assert store_meta([tmp_path], 5, CID) == [tmp_path]
    meta = read_meta(tmp_path)
    assert meta is not None and (meta.cluster_id, meta.node_id) == (CID, 5)
    assert len(meta.directory_id) == 22


@pytest.mark.parametrize("text, expected", [
    ("version=1\nnode.id=x\ncluster.id=a\n", "version and node.id must be integers"),
    ("version=0\nnode.id=1\ncluster.id=a\n", "version 0 is not supported"),
    ("version=1\nnode.id=1\n", "no cluster.id"),
])
def test_a_garbled_file_is_one_clear_error(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / META_FILE).write_text(text)
    with pytest.raises(DirectoryError, match=expected):
        read_meta(tmp_path)
