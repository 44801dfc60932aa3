"""LogManager: every partition log under the data directories (Kafka's `log.dirs`).

This module owns the data directories: which logs exist and in which directory,
loading them on start, placing new ones (the directory holding the fewest logs, as
Kafka), deleting them, batching their fsyncs, retention across them, and the
directory-level checkpoint files (one set per directory).

A failed disk operation (Kafka's LogDirFailureChannel):
- in a cluster (``offline_on_failure``), takes the whole manager offline and the
  broker stops, so that other replicas lead (as a KRaft broker of Kafka before JBOD
  support in KRaft); with one directory or several;
- on a single node with several directories, takes only the directory that failed
  offline when it is not the first one (which holds the broker's metadata): its logs
  are closed, its partitions answer KAFKA_STORAGE_ERROR until a restart, new logs go
  to the other directories, which keep serving (Kafka's JBOD);
- on a single node otherwise, fails only the operation: the directory keeps serving
  reads, and writes resume once space is freed.

On-disk layout of each directory::

    <topic>-<partition>/                 one directory per log (see log.py)
    <topic>-<partition>.<uuid>-delete/   a log being deleted (removed on start)
    recovery-point-offset-checkpoint     Kafka's checkpoint format, text:
                                             0                  (version)
                                             <count>
                                             <topic> <partition> <offset>   (count lines)
    .kafka_cleanshutdown                 present only after a clean close_all(), JSON
                                         (Kafka 4.x's CleanShutdownFileHandler):
                                             {"version":0,"brokerEpoch":<epoch>}
                                         the broker epoch this process was registered
                                         under (-1: none); fsynced. Lets the next start
                                         skip segment recovery, and register with that
                                         epoch as its previous one (KIP-966: a clean
                                         restart keeps its eligible-leader place). An
                                         empty marker (older versions) is clean for
                                         recovery and names no epoch.
    .lock, meta.properties               the holder's lock and the directory's cluster
                                         and node ids (dirs.py; taken/checked by app.py)

Checkpoints are written to ``<name>.tmp``, fsynced and renamed into place.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

from jocko_py.commitlog.config import LogConfig
from jocko_py.commitlog.dirs import fsync_path
from jocko_py.commitlog.errors import KafkaStorageError
from jocko_py.commitlog.fd_cache import HANDLES
from jocko_py.commitlog.leader_epoch import LeaderEpochCache
from jocko_py.commitlog.log import FlushTicket, Log, run_flush

__all__ = ["LogManager", "previous_broker_epoch", "read_clean_shutdown_epoch",
           "read_offset_checkpoint", "write_clean_shutdown_file", "write_offset_checkpoint"]

logger = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_SUFFIX = "-delete"
# threads that fsync the logs on a clean shutdown (Kafka: num.recovery.threads.per.data.dir)
SHUTDOWN_FLUSH_THREADS = 16
# threads that make new logs' files when many are created at once (topics created, a
# broker's partitions moved here), and the fewest new logs worth the threads. File
# creation waits on the file system's journal; on a busy disk, one create after another
# spends most of its time waiting, and threads overlap the waits (1,000 partitions' files
# under a 1-minute load of 11 on 2 cores: 8.7 s one after another, 0.3 s on 8 threads).
CREATE_THREADS = 8
CREATE_THREADS_MIN = 16

TopicPartition = tuple[str, int]
_T = TypeVar("_T")
_R = TypeVar("_R")


def write_offset_checkpoint(path: Path, offsets: dict[TopicPartition, int]) -> None:
    """Write Kafka's offset checkpoint format atomically."""
    tmp = path.with_name(path.name + ".tmp")
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    try:
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise KafkaStorageError(f"cannot write {path}: {exc}") from exc


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Read Kafka's offset checkpoint format; a missing or malformed file gives {}."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        out: dict[TopicPartition, int] = {}
        for line in lines[2 : 2 + count]:
            topic, part, off = line.split()
            out[(topic, int(part))] = int(off)
        if len(out) != count:
            raise ValueError("entry count mismatch")
        return out
    except (ValueError, IndexError) as exc:
        logger.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}


def write_clean_shutdown_file(directory: Path, broker_epoch: int) -> None:
    """The clean-shutdown marker of ``directory``, naming ``broker_epoch``; the file and
    the directory entry are fsynced (the marker vouches for everything flushed before)."""
    path = directory / CLEAN_SHUTDOWN_FILE
    data = json.dumps({"version": 0, "brokerEpoch": broker_epoch},
                      separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    fsync_path(directory)



def read_clean_shutdown_epoch(directory: Path) -> int | None:
    """The broker epoch the clean-shutdown marker of ``directory`` names: None without a
    marker, -1 for a marker naming none (empty, from an older version, or unreadable)."""
    try:
        text = (directory / CLEAN_SHUTDOWN_FILE).read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("cannot read %s: %s", directory / CLEAN_SHUTDOWN_FILE, exc)
        return -1
    try:
        doc = json.loads(text)
        epoch = doc.get("brokerEpoch") if isinstance(doc, dict) else None
        if isinstance(epoch, int) and not isinstance(epoch, bool):
            return epoch
    except ValueError:
        pass
    return -1


def previous_broker_epoch(dirs: list[Path]) -> int:
    """Kafka's readBrokerEpochFromCleanShutdownFiles: the broker epoch every directory's
    clean-shutdown marker names, or -1 when one has no marker (that directory, at least,
    was not shut down cleanly), names none, or they disagree. Read before the logs are
    loaded (loading deletes the markers)."""
    epochs = {read_clean_shutdown_epoch(d) for d in dirs}
    if len(epochs) != 1:
        if None not in epochs:
            logger.info("clean shutdown markers name different broker epochs: %s",
                        sorted(e for e in epochs if e is not None))
        return -1
    epoch = epochs.pop()
    if epoch is not None and epoch >= 0:
        logger.info("clean shutdown markers name broker epoch %d", epoch)
    return -1 if epoch is None else epoch


def _make_new_log_dirs(paths: list[Path]) -> list[bool]:
    """Make new logs' directories; False for one that exists already or cannot be made
    (its log is then created or loaded the usual way)."""
    made = []
    for path in paths:
        try:
            os.mkdir(path)
        except OSError:
            made.append(False)
        else:
            made.append(True)
    return made


def _save_leader_epochs(caches: list[LeaderEpochCache]) -> None:
    for c in caches:
        c.save()


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``orders-3`` -> ("orders", 3); None for anything else."""
    topic, dash, part = name.rpartition("-")
    if not dash or not topic or not part.isdigit():
        return None
    return topic, int(part)


class LogManager:
    """Owns the logs in ``data_dir``; synchronous, one owner (the broker loop)."""

    def __init__(self, data_dir: Path, default_config: LogConfig,
                 extra_dirs: tuple[Path, ...] = ()) -> None:
        self.data_dir = data_dir
        # every data directory, the first one first (it also holds the broker's metadata)
        self.dirs: list[Path] = [data_dir, *(d for d in extra_dirs if d != data_dir)]
        self.default_config = default_config
        self.logs: dict[TopicPartition, Log] = {}
        self._where: dict[TopicPartition, Path] = {}  # the directory of each log
        # logs in each directory (from _where), for placing new ones; None: to recount
        self._counts: dict[Path, int] | None = None
        self._dirty: dict[TopicPartition, Log] = {}
        # Kafka's LogDirFailureChannel: the first I/O failure in the directory (a full
        # disk, EIO) takes it offline for good; listeners react (the broker stops).
        self.offline_reason: str | None = None
        self.failure_listeners: list[Callable[[str], None]] = []
        # False (a single node, no other replica to take over): a failed operation
        # only fails that request; the directory stays online and serves reads, and
        # writes resume once space is freed
        self.offline_on_failure = True
        # single node, several directories: the directories taken offline on their own
        # (not the first), the logs they held, and who hears of it
        self.offline_dirs: dict[Path, str] = {}
        self._offline_tps: set[TopicPartition] = set()
        self.dir_failure_listeners: list[Callable[[Path, str], None]] = []
        # the directories whose clean-shutdown marker is known to be gone (deleted when
        # they were loaded or a log was created in them; written again only by close_all)
        self._marker_gone: set[Path] = set()
        # new logs' directories that prepare_new_logs made
        self._premade: set[Path] = set()
        self._pool: ThreadPoolExecutor | None = None

    def mark_offline(self, reason: str, base: Path | None = None) -> None:
        """An operation on a log in directory `base` (None: not known) failed."""
        if self.offline_reason is not None:
            return
        if not self.offline_on_failure:
            if base is not None and len(self.dirs) > 1 and base != self.data_dir:
                self._take_dir_offline(base, reason)
            return
        self.offline_reason = reason
        logger.critical("log dir %s failed (%s): its partitions are offline",
                        self.data_dir, reason)
        for fn in self.failure_listeners:
            try:
                fn(reason)
            except Exception:
                logger.exception("log dir failure listener failed")

    def _take_dir_offline(self, base: Path, reason: str) -> None:
        if base in self.offline_dirs or base not in self.dirs:
            return
        self.offline_dirs[base] = reason
        tps = [tp for tp, d in self._where.items() if d == base]
        for tp in tps:
            self._offline_tps.add(tp)
            self._dirty.pop(tp, None)
            lg = self.logs.pop(tp, None)
            if lg is not None:
                for seg in lg.segments:
                    try:
                        seg.close()
                    except Exception:  # the disk failed: nothing more to save
                        logger.debug("closing %s", seg, exc_info=True)
        online = len(self.dirs) - len(self.offline_dirs)
        logger.critical("log dir %s failed (%s): its %d partitions are offline until a "
                        "restart; %d other log dirs keep serving", base, reason, len(tps),
                        online)
        for fn in self.dir_failure_listeners:
            try:
                fn(base, reason)
            except Exception:
                logger.exception("log dir failure listener failed")

    def is_offline(self, topic: str, partition: int) -> bool:
        """True when this log's directory failed (or the whole manager did)."""
        return self.offline_reason is not None or (topic, partition) in self._offline_tps

    def dir_offline_reason(self, base: Path) -> str | None:
        """Why this directory is offline, or None if it serves."""
        return self.offline_reason or self.offline_dirs.get(base)

    def dir_of(self, topic: str, partition: int) -> Path | None:
        """The data directory holding this log, if it exists."""
        return self._where.get((topic, partition))

    def _place(self) -> Path:
        """Where a new log goes: the directory with the fewest logs (first on a tie)."""
        online = [d for d in self.dirs if d not in self.offline_dirs]
        if len(online) == 1:
            return online[0]
        if self._counts is None:  # counted once, then kept by _track (not per new log)
            self._counts = {}
            for d in self._where.values():
                self._counts[d] = self._counts.get(d, 0) + 1
        counts = self._counts
        return min(online, key=lambda d: counts.get(d, 0))

    def _dir_for(self, topic: str, partition: int) -> Path:
        name = f"{topic}-{partition}"
        base = self._where.get((topic, partition))
        if base is None:
            online = [d for d in self.dirs if d not in self.offline_dirs]
            if len(online) == 1:  # the only place it can be, or go: no need to look
                base = online[0]
            else:
                base = next((d for d in online if (d / name).exists()), None) or self._place()
        return base / name

    def _track(self, tp: TopicPartition, lg: Log, base: Path) -> None:
        self.logs[tp] = lg
        if self._counts is not None and self._where.get(tp) != base:
            if tp in self._where:
                self._counts = None
            else:
                self._counts[base] = self._counts.get(base, 0) + 1
        self._where[tp] = base

        def on_dirty(_log: Log, tp: TopicPartition = tp) -> None:
            self._dirty[tp] = _log

        lg.on_dirty = on_dirty

    # --- loading -----------------------------------------------------------------

    def load_all(self, configs: dict[TopicPartition, LogConfig] | None = None) -> None:
        """Open (and if needed recover) every log found in the data directories."""
        for base in self.dirs:
            before = len(self.logs)
            try:
                base.mkdir(parents=True, exist_ok=True)
                marker = base / CLEAN_SHUTDOWN_FILE
                clean = marker.exists()
                # Deleted before anything is loaded (Kafka, KAFKA-10471): a crash while
                # loading, or any time from now on, must trigger recovery next time; the
                # deletion is made durable, so a power loss cannot bring the marker back.
                if clean:
                    marker.unlink(missing_ok=True)
                    fsync_path(base)
                self._marker_gone.add(base)
                points = read_offset_checkpoint(base / RECOVERY_POINT_CHECKPOINT)
                for p in sorted(base.iterdir()):
                    if not p.is_dir():
                        continue
                    if p.name.endswith(DELETE_SUFFIX):
                        shutil.rmtree(p, ignore_errors=True)
                        continue
                    tp = parse_log_dir_name(p.name)
                    if tp is None or tp in self.logs:
                        continue
                    cfg = (configs or {}).get(tp, self.default_config)
                    lg = Log.open(p, cfg, points.get(tp, 0), had_clean_shutdown=clean)
                    self._track(tp, lg, base)
            except OSError as exc:
                raise KafkaStorageError(f"cannot load logs from {base}: {exc}") from exc
            n = len(self.logs) - before
            logger.info(
                "loaded %d logs from %s (%s)", n, base,
                "no logs yet" if not n
                else "after a clean shutdown" if clean else "recovered after an unclean shutdown",
            )

    # --- access ------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        tp = (topic, partition)
        lg = self.logs.get(tp)
        if lg is None:
            if tp in self._offline_tps:
                raise KafkaStorageError(f"log dir {self._where.get(tp)} of {topic}-{partition} "
                                        "is offline")
            path = self._dir_for(topic, partition)
            self._clear_marker(path.parent)
            if path in self._premade:
                self._premade.discard(path)
                lg = Log.create(path, config or self.default_config)
            else:
                try:
                    # a new partition (the usual case): its directory is made here, so
                    # the log has nothing to load or clean up
                    os.mkdir(path)
                except (FileExistsError, FileNotFoundError):
                    lg = Log.open(path, config or self.default_config)
                except OSError as exc:
                    raise KafkaStorageError(f"cannot create log {path}: {exc}") from exc
                else:
                    lg = Log.create(path, config or self.default_config)
            self._track(tp, lg, path.parent)
        return lg

    def _clear_marker(self, base: Path) -> None:
        """The clean-shutdown marker goes before a log is created in ``base``."""
        if base not in self._marker_gone:
            (base / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
            self._marker_gone.add(base)

    def _threads(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(CREATE_THREADS, thread_name_prefix="log-create")
        return self._pool

    def prepare_new_logs(self, tps: list[TopicPartition]) -> None:
        """Make the directories of the logs of ``tps`` that do not exist yet, many at
        once on `CREATE_THREADS` threads; `get_or_create` then makes their logs in them. Fewer than `CREATE_THREADS_MIN` are left to it. A log whose
        files cannot be made here (it exists, or an error) is left to it too: it loads
        the log or reports the error."""
        todo: list[Path] = []
        for tp in tps:
            if tp not in self.logs and tp not in self._offline_tps:
                todo.append(self._dir_for(*tp))
        if len(todo) < CREATE_THREADS_MIN:
            return
        for base in {p.parent for p in todo}:
            self._clear_marker(base)
        for chunk, made in self._in_chunks(_make_new_log_dirs, todo):
            self._premade.update(p for p, ok in zip(chunk, made, strict=True) if ok)

    def save_leader_epochs(self, caches: list[LeaderEpochCache]) -> None:
        """Write the leader-epoch checkpoints that `LeaderEpochCache.assign` deferred,
        many at once on `CREATE_THREADS` threads (see `CREATE_THREADS`)."""
        if len(caches) < CREATE_THREADS_MIN:
            for c in caches:
                c.save()
        else:
            for _ in self._in_chunks(_save_leader_epochs, caches):
                pass

    def _in_chunks(self, fn: Callable[[list[_T]], _R], items: list[_T],
                   ) -> Iterator[tuple[list[_T], _R]]:
        """``fn`` on `CREATE_THREADS` slices of ``items`` at once, one thread each (one
        task per slice, not per item: a task costs more than a file); (slice, answer)
        pairs; the first exception is raised once all are done."""
        chunks = [items[i::CREATE_THREADS] for i in range(CREATE_THREADS)]
        chunks = [c for c in chunks if c]
        futures = [self._threads().submit(fn, c) for c in chunks]
        wait(futures)
        for c, f in zip(chunks, futures, strict=True):
            yield c, f.result()

    def delete(self, topic: str, partition: int) -> bool:
        """Close and remove a log: renamed aside first so a crash cannot resurrect it."""
        tp = (topic, partition)
        if tp in self._offline_tps:  # on a failed disk: forgotten, its files left there
            self._offline_tps.discard(tp)
            self._where.pop(tp, None)
            self._counts = None
            logger.warning("log %s-%d is on offline log dir: its files are left there",
                           topic, partition)
            return True
        path = self._dir_for(topic, partition)
        self._premade.discard(path)
        lg = self.logs.pop(tp, None)
        self._where.pop(tp, None)
        self._counts = None
        self._dirty.pop(tp, None)
        if lg is not None:
            for seg in lg.segments:
                seg.close()
        if not path.exists():
            return lg is not None
        aside = path.parent / f"{path.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        try:
            os.replace(path, aside)
            shutil.rmtree(aside)
        except OSError as exc:
            raise KafkaStorageError(f"cannot delete log {path}: {exc}") from exc
        return True

    # --- flushing / checkpoints --------------------------------------------------------

    def flush_dirty(self, now_ms: int | None = None) -> int:
        """fsync logs whose flush.messages or flush.ms is due; call once per loop turn."""
        flushed = 0
        for tp, lg in list(self._dirty.items()):
            if lg.flush_if_due(now_ms):
                flushed += 1
            if not lg.unflushed_messages:
                self._dirty.pop(tp, None)
        return flushed

    def begin_flush_due(self, now_ms: int | None = None, *, all_dirty: bool = False,
                        ) -> list[FlushTicket]:
        """Tickets for the logs whose flush is due (or every dirty log): fsync them with
        ``run_flush`` on any thread, then ``end_flush_tickets`` here."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        tickets = []
        for tp, lg in list(self._dirty.items()):
            if lg.unflushed_messages and (all_dirty or lg.needs_flush
                                          or now - lg.last_flush_ms >= lg.config.flush_ms):
                tickets.append(lg.begin_flush())
            if not lg.unflushed_messages:
                self._dirty.pop(tp, None)
        return tickets

    @staticmethod
    def run_flush_tickets(tickets: list[FlushTicket]) -> None:
        for t in tickets:
            run_flush(t)

    @staticmethod
    def end_flush_tickets(tickets: list[FlushTicket]) -> None:
        errors = []
        for t in tickets:
            try:
                t.log.end_flush(t)
            except KafkaStorageError as e:
                e.log_dir = Path(t.log.dir).parent  # type: ignore[attr-defined]
                errors.append(e)
        if errors:
            raise errors[0]

    @property
    def has_due_flush(self) -> bool:
        """True when some log reached flush.messages (cheap check for the loop)."""
        return any(lg.needs_flush for lg in self._dirty.values())

    def flush_all(self) -> None:
        for lg in self.logs.values():
            lg.flush()
        self._dirty.clear()

    def checkpoint_recovery_points(self) -> None:
        """Persist each log's recovery point (call periodically and on shutdown)."""
        if self.offline_reason is not None:
            return  # the last good checkpoint stays; recovery starts from it
        for base in self.dirs:
            if base in self.offline_dirs:
                continue
            try:
                write_offset_checkpoint(
                    base / RECOVERY_POINT_CHECKPOINT,
                    {tp: lg.recovery_point for tp, lg in self.logs.items()
                     if self._where.get(tp, self.data_dir) == base},
                )
            except KafkaStorageError as e:
                self.mark_offline(e.message, base)
                if base not in self.offline_dirs:
                    raise

    def apply_retention_all(self, now_ms: int | None = None) -> int:
        deleted = 0
        for tp, lg in list(self.logs.items()):
            try:
                deleted += lg.apply_retention(now_ms)
            except KafkaStorageError as e:
                logger.exception("[partition=%s-%d] retention failed", *tp)
                self.mark_offline(e.message, self._where.get(tp))
        return deleted

    def _flush_all_parallel(self) -> bool:
        """Flush every log and write its producer snapshot, the fsyncs on
        `SHUTDOWN_FLUSH_THREADS` threads (Kafka closes its logs on a pool too): one fsync
        after another cost a clean stop seconds per thousand partitions. The tickets are
        taken and settled on this thread (descriptors and recovery points are the owner's);
        only fsyncs and the snapshot files run on the pool. Logs go in batches of at most
        a quarter of the open-file bound: a ticket holds its descriptors until its fsync
        is done, and all logs' at once would pass the bound (and the OS's limit) when
        there are more logs than it. False if any failed."""
        ok = True
        logs = list(self.logs.values())
        step = max(1, min(1000, HANDLES.limit // 4))
        with ThreadPoolExecutor(SHUTDOWN_FLUSH_THREADS,
                                thread_name_prefix="log-shutdown") as pool:
            for i in range(0, len(logs), step):
                batch = logs[i:i + step]
                tickets: list[FlushTicket] = []
                for lg in batch:
                    try:
                        tickets.append(lg.begin_flush())
                    except KafkaStorageError:
                        ok = False
                        logger.exception("[log=%s] flush on shutdown failed", lg.name)
                list(pool.map(run_flush, tickets))
                list(pool.map(Log.save_producer_state, [lg for lg in batch if lg.segments]))
                for t in tickets:
                    try:
                        t.log.end_flush(t)
                    except KafkaStorageError:
                        ok = False
                        logger.exception("[log=%s] flush on shutdown failed", t.log.name)
        for lg in logs:  # what the tickets did not cover (nothing, normally)
            try:
                lg.flush()
            except KafkaStorageError:
                ok = False
                logger.exception("[log=%s] flush on shutdown failed", lg.name)
        self._dirty.clear()
        return ok

    def close_all(self, broker_epoch: int = -1) -> None:
        """Flush, checkpoint and close every log, then mark the shutdown clean in every
        directory that did not fail, naming ``broker_epoch`` (the epoch this broker was
        registered under; -1 when it was not)."""
        failed = not self._flush_all_parallel()
        try:
            self.checkpoint_recovery_points()
        except KafkaStorageError:
            failed = True
            logger.exception("cannot write recovery point checkpoint")
        for lg in self.logs.values():
            lg.close()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._premade.clear()
        self.logs.clear()
        self._where.clear()
        self._counts = None
        self._dirty.clear()
        if not failed and self.offline_reason is None:  # a failed dir is recovered
            for base in self.dirs:
                if base in self.offline_dirs:
                    continue
                self._marker_gone.discard(base)
                try:
                    write_clean_shutdown_file(base, broker_epoch)
                except OSError:
                    logger.exception("cannot write clean shutdown marker in %s", base)
