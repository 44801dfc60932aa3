"""Share sessions (KIP-932): the partitions a share consumer fetches, keyed by (group,
member), with the epoch its next request must carry. Pure: the handlers ask, the cache
answers with the session's partitions or Kafka's error.

Rules (Kafka's `ShareSessionCache` and `SharePartitionManager.newContext`)
-------------------------------------------------------------------------
- ShareFetch epoch 0 opens a session with the request's partitions, replacing the
  member's previous one; acknowledgements in it are INVALID_REQUEST (nothing was acquired
  in this session). A new session past `group.share.max.share.sessions` is
  SHARE_SESSION_LIMIT_REACHED. The next request carries epoch 1.
- Epoch -1 closes the member's session (SHARE_SESSION_NOT_FOUND when there is none): its
  acknowledgements are applied, nothing is fetched, and the member's remaining acquired
  records are released.
- Any other epoch needs the member's session (SHARE_SESSION_NOT_FOUND) at exactly that
  epoch (INVALID_SHARE_SESSION_EPOCH); ShareFetch adds its partitions to the session and
  removes the forgotten ones; the epoch then moves on (wrapping to 1 after 2^31-1).
- ShareAcknowledge never opens a session: epoch 0 is INVALID_SHARE_SESSION_EPOCH.
- A session ends with its connection too (`close_connection`); its member's records
  are released then as well.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from jocko_py.protocol.errors import ErrorCode

E = ErrorCode
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set
    connection: str = ""
    last_used_ms: int = 0


@dataclass(frozen=True)
class SessionDecision:
    """`error` NONE and the partitions to fetch (empty when closing), or the error.
    `closing`: the session ended with this request; release the member's records."""
    error: ErrorCode = E.NONE
    partitions: tuple[TopicIdPartition, ...] = ()
    closing: bool = False
    message: str | None = None


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def fetch(self, group_id: str, member_id: str, epoch: int,
              partitions: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition],
              has_acknowledgements: bool, now: int, connection: str = "") -> SessionDecision:
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                return SessionDecision(E.INVALID_REQUEST,
                                       message="acknowledgements in a session's first fetch")
            if key not in self.sessions and len(self.sessions) >= self.max_sessions:
                return SessionDecision(E.SHARE_SESSION_LIMIT_REACHED,
                                       message="group.share.max.share.sessions reached")
            s = ShareSession(group_id, member_id, 1, dict.fromkeys(partitions), connection,
                             now)
            self.sessions[key] = s
            return SessionDecision(partitions=tuple(s.partitions))
        cur = self.sessions.get(key)
        if cur is None:
            return SessionDecision(E.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return SessionDecision(closing=True)
        s = cur
        if epoch != s.epoch:
            return SessionDecision(E.INVALID_SHARE_SESSION_EPOCH,
                                   message=f"expected epoch {s.epoch}, got {epoch}")
        for tp in partitions:
            s.partitions[tp] = None
        for tp in forgotten:
            s.partitions.pop(tp, None)
        s.epoch = next_epoch(s.epoch)
        s.last_used_ms = now
        if connection:
            s.connection = connection
        return SessionDecision(partitions=tuple(s.partitions))

    def acknowledge(self, group_id: str, member_id: str, epoch: int,
                    now: int) -> SessionDecision:
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            return SessionDecision(E.INVALID_SHARE_SESSION_EPOCH,
                                   message="ShareAcknowledge cannot open a share session")
        s = self.sessions.get(key)
        if s is None:
            return SessionDecision(E.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return SessionDecision(closing=True)
        if epoch != s.epoch:
            return SessionDecision(E.INVALID_SHARE_SESSION_EPOCH,
                                   message=f"expected epoch {s.epoch}, got {epoch}")
        s.epoch = next_epoch(s.epoch)
        s.last_used_ms = now
        return SessionDecision(partitions=tuple(s.partitions))

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def close_connection(self, connection: str) -> list[ShareSession]:
        """The sessions of a closed connection, removed."""
        gone = [k for k, s in self.sessions.items() if connection and s.connection == connection]
        return [self.sessions.pop(k) for k in gone]
