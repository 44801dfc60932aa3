"""Who owns a log directory: the process holding its `.lock`, and the cluster and node
its `meta.properties` name (Kafka's LogManager lock and MetaPropertiesEnsemble).

Rules
-----
1. One process per directory. A broker locks `<dir>/.lock` (``flock(LOCK_EX |
   LOCK_NB)``) in every log directory before it reads anything from them (the metadata
   log lives in the first one), holds the locks for its whole life and releases them
   when it stops (closing the file; the file stays). A lock belongs to one open file
   description, so a second broker in the same process conflicts as well. The holder
   writes its pid into the file, so that the refused process can name it.
2. One cluster and one node per directory. `meta.properties` holds ``version=1``,
   ``cluster.id``, ``node.id`` and a ``directory.id`` of its own. All directories must
   agree with each other and with the configured ``cluster.id`` / ``node.id``; a
   stored id is never changed. A directory without the file gets it written once the
   cluster id is known (given, stored in another directory, generated on a single
   node, or learned from the cluster's metadata quorum).

On-disk format of `meta.properties` (java.util.Properties text, as Kafka writes it)::

    #
    #<date>
    cluster.id=<22-character base64url uuid>
    directory.id=<22-character base64url uuid>
    node.id=<int>
    version=1

written to `meta.properties.tmp`, fsynced and renamed into place. `.lock` holds the
holder's pid as decimal text.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import os
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LOCK_FILE",
    "META_FILE",
    "DirLocks",
    "DirectoryError",
    "DirectoryInUseError",
    "MetaProperties",
    "check_cluster_id",
    "lock_dirs",
    "read_meta",
    "random_uuid",
    "store_meta",
    "verify_meta",
    "write_meta",
]

LOCK_FILE = ".lock"
META_FILE = "meta.properties"
META_VERSION = 1

_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")


class DirectoryError(Exception):
    """A log directory cannot be used as it is; the message is one line for the operator."""


class DirectoryInUseError(DirectoryError):
    """Another process (or another broker in this process) holds the directory's lock."""

    def __init__(self, directory: Path, pid: int | None) -> None:
        who = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(f"data directory {directory} is in use by another process ({who}): "
                         f"its {LOCK_FILE} is held")
        self.directory = directory
        self.pid = pid


def random_uuid() -> str:
    """A random id as `kafka-storage random-uuid` prints it: a version-4 uuid in base64url
    without padding (22 characters), never starting with '-' (Kafka's Uuid.randomUuid)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def check_cluster_id(cluster_id: str) -> None:
    """Raise ValueError unless ``cluster_id`` is a 16-byte id in base64url (Kafka's
    Uuid.fromString, as `kafka-storage format -t` requires)."""
    if not _UUID_TEXT.fullmatch(cluster_id):
        raise ValueError(f"Cluster ID string {cluster_id} does not appear to be a valid UUID: "
                         "expected 22 base64url characters (see `jocko-py storage random-uuid`)")


# ---------------------------------------------------------------------- locks


class DirLocks:
    """The `.lock` files this process holds; ``release()`` (idempotent) frees them."""

    def __init__(self) -> None:
        self._fds: dict[Path, int] = {}

    @property
    def dirs(self) -> list[Path]:
        return list(self._fds)

    def release(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> DirLocks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder_pid(path: Path) -> int | None:
    # the holder writes its pid right after it takes the lock: give it a moment
    for _ in range(20):
        try:
            text = path.read_text().strip()
        except OSError:
            return None
        if text.isdigit():
            return int(text)
        time.sleep(0.01)
    return None


def lock_dirs(dirs: Iterable[Path]) -> DirLocks:
    """Create each directory if needed and take its `.lock`, all or none: on a directory
    held elsewhere, release what was taken and raise ``DirectoryInUseError``."""
    locks = DirLocks()
    try:
        for d in dict.fromkeys(Path(x) for x in dirs):
            if d in locks._fds:
                continue
            d.mkdir(parents=True, exist_ok=True)
            path = d / LOCK_FILE
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise DirectoryInUseError(d, _holder_pid(path)) from None
                raise
            locks._fds[d] = fd
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        locks.release()
        raise
    return locks


# ---------------------------------------------------------------------- meta.properties


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    # None in a file an older jocko-py wrote (cluster.id only): completed on start
    node_id: int | None
    directory_id: str
    version: int = META_VERSION

    def as_dict(self) -> dict[str, str]:
        out = {"cluster.id": self.cluster_id, "version": str(self.version)}
        if self.directory_id:
            out["directory.id"] = self.directory_id
        if self.node_id is not None:
            out["node.id"] = str(self.node_id)
        return out

    def text(self) -> str:
        stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
        body = "".join(f"{k}={v}\n" for k, v in sorted(self.as_dict().items()))
        return f"#\n#{stamp}\n{body}"


def _parse(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def read_meta(directory: Path) -> MetaProperties | None:
    """The directory's meta.properties; None when it has none (not formatted)."""
    path = directory / META_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise DirectoryError(f"cannot read {path}: {reason}") from None
    props = _parse(text)
    try:
        version = int(props.get("version", ""))
        node = props.get("node.id")
        node_id = None if node is None else int(node)
    except ValueError:
        raise DirectoryError(f"{path} is not a valid meta.properties file: version and "
                             "node.id must be integers") from None
    if version != META_VERSION:
        raise DirectoryError(f"{path}: meta.properties version {version} is not supported "
                             f"(expected {META_VERSION})")
    cluster_id = props.get("cluster.id", "")
    if not cluster_id:
        raise DirectoryError(f"{path} is not a valid meta.properties file: no cluster.id")
    return MetaProperties(cluster_id, node_id, props.get("directory.id", ""), version)


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by path (a directory: so a rename or a new or deleted
    entry in it is durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_meta(directory: Path, meta: MetaProperties) -> None:
    """Write meta.properties atomically (temp file, fsync, rename, fsync the directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / META_FILE
    tmp = path.with_name(META_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(meta.text())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(directory)


def verify_meta(dirs: Sequence[Path], node_id: int,
                cluster_id: str = "") -> tuple[str, dict[Path, MetaProperties | None]]:
    """Read every directory's meta.properties and check they agree with each other and
    with the configured ids (Kafka's MetaPropertiesEnsemble.verify). Returns the cluster
    id ("" when neither configured nor stored) and what each directory holds."""
    found = {d: read_meta(d) for d in dirs}
    expected = cluster_id
    seen_dir_ids: dict[str, Path] = {}
    for d, meta in found.items():
        if meta is None:
            continue
        if expected and meta.cluster_id != expected:
            raise DirectoryError(f"Invalid cluster.id in: {d / META_FILE}. Expected {expected}, "
                                 f"but read {meta.cluster_id}")
        expected = meta.cluster_id
        if meta.node_id is not None and meta.node_id != node_id:
            raise DirectoryError(
                f"Stored node id {meta.node_id} doesn't match previous node id {node_id} in "
                f"{d}. If you moved your data, make sure your configured node id matches. If "
                "you intend to create a new node, you should remove all data in your data "
                "directories.")
        if meta.directory_id:
            other = seen_dir_ids.get(meta.directory_id)
            if other is not None:
                raise DirectoryError(f"Duplicate directory ID {meta.directory_id} found in "
                                     f"{other} and {d}: each directory needs its own")
            seen_dir_ids[meta.directory_id] = d
    return expected, found


def store_meta(dirs: Sequence[Path], node_id: int, cluster_id: str) -> list[Path]:
    """Write meta.properties (with a new directory id) into every directory that has
    none, and complete one an older version wrote (no node.id or directory.id); check
    the others agree. Returns the directories written."""
    _, found = verify_meta(dirs, node_id, cluster_id)
    written = []
    for d, meta in found.items():
        if meta is None or meta.node_id is None or not meta.directory_id:
            write_meta(d, MetaProperties(cluster_id, node_id,
                                         meta.directory_id if meta and meta.directory_id
                                         else random_uuid()))
            written.append(d)
    return written
