"""Raft metadata quorum: sans-IO core (``core``), messages/actions (``messages``),
durable storage (``storage``) and the asyncio TCP adapter (``transport``)."""

from jocko_py.cluster.raft.core import DurableState, NotLeaderError, RaftConfig, RaftCore, Role
from jocko_py.cluster.raft.storage import FileStorage, MemoryStorage

__all__ = [
    "DurableState",
    "FileStorage",
    "MemoryStorage",
    "NotLeaderError",
    "RaftConfig",
    "RaftCore",
    "Role",
]
