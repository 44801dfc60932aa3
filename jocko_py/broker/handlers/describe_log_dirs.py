"""DescribeLogDirs (key 35), versions 1-5: what `kafka-log-dirs --describe` reads.

One result per data directory of this broker (`log.dirs`): its absolute path, per topic and partition hosted in it the size of the log in
bytes (every segment) and the offset lag (Kafka's: high watermark minus log end
offset, floored at 0, as there are no "future" replicas), and from v4 the total and
usable bytes of its file system; v5's IsCordoned is false (KIP-1066's cordoned
log dirs are not implemented: no directory is ever cordoned). A null topic list means every partition; named
partitions not hosted here are left out, as Kafka does. A directory taken offline by
a disk failure answers KAFKA_STORAGE_ERROR with no topics.

Not implemented: cordoning a directory (`cordoned.log.dirs`), future replicas (AlterReplicaLogDirs, moving a partition between
directories); a failed directory takes every directory offline.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from typing import Any

from jocko_py.broker.api import RequestContext, api
from jocko_py.broker.metadata_cache import YIELD_S
from jocko_py.protocol.errors import ErrorCode


@api(35, 1, 5)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    logs = broker.replicas.logs
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {}
        for t in req.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    results: dict[str, dict[str, Any]] = {}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for base in logs.dirs:
        path = os.path.abspath(base)
        results[path] = {"error_code": ErrorCode.NONE, "log_dir": path, "topics": [],
                         "total_bytes": -1, "usable_bytes": -1, "is_cordoned": False}
        by_dir[path] = {}
        if logs.dir_offline_reason(base) is not None:
            results[path]["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        elif ctx.version >= 4:
            try:
                usage = shutil.disk_usage(path)
                results[path]["total_bytes"], results[path]["usable_bytes"] = \
                    usage.total, usage.free
            except OSError:
                pass
    if logs.offline_reason is None:
        if wanted is None:
            items = sorted(logs.logs.items())
        else:  # what was named, not every log
            items = sorted(((t, p), lg) for t, ps in wanted.items() for p in ps
                           if (lg := logs.get(t, p)) is not None)
        since = time.perf_counter()
        for i, ((topic, pid), lg) in enumerate(items):
            if i & 255 == 255 and time.perf_counter() - since > YIELD_S:
                # every log of a big broker: let other requests through meanwhile
                await asyncio.sleep(0)
                since = time.perf_counter()
            base = logs.dir_of(topic, pid) or logs.data_dir
            if logs.dir_offline_reason(base) is not None:
                continue
            p = broker.replicas.get(topic, pid)
            lag = max(p.high_watermark - lg.log_end_offset, 0) if p is not None else 0
            by_dir[os.path.abspath(base)].setdefault(topic, []).append({
                "partition_index": pid, "partition_size": lg.size_bytes, "offset_lag": lag,
                "is_future_key": False})
    for path, res in results.items():
        res["topics"] = [{"name": t, "partitions": ps} for t, ps in by_dir[path].items()]
    out: dict[str, Any] = {"throttle_time_ms": 0, "results": list(results.values())}
    if ctx.version >= 3:
        out["error_code"] = ErrorCode.NONE
    return out
