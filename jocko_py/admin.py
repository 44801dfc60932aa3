"""Consumer group administration over the Kafka protocol, shared by the CLI and the console.

`GroupAdmin` finds a group's coordinator, lists, describes, deletes groups and reads or
commits their offsets through `jocko_py.client.Client`; `parse_assignment` reads a
classic group member's ConsumerProtocolAssignment. It sits below `jocko_py.console` and
`jocko_py.cli` (the import-linter contract in pyproject.toml), so both use it without
the console reaching up into the CLI.
"""

from __future__ import annotations

import struct
from typing import Any

from jocko_py.client import Client, KafkaError
from jocko_py.protocol.errors import ErrorCode


def _check(code: int, what: str) -> None:
    if code:
        raise KafkaError(code, what)


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of a ConsumerProtocolAssignment (empty if unparseable)."""
    out: dict[str, list[int]] = {}
    try:
        pos = 2
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(n, 0)):
            (ln,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos:pos + ln].decode()
            pos += ln
            (np_,) = struct.unpack_from(">i", data, pos)
            pos += 4
            parts = list(struct.unpack_from(f">{max(np_, 0)}i", data, pos))
            pos += 4 * max(np_, 0)
            out.setdefault(topic, []).extend(parts)
    except (struct.error, UnicodeDecodeError):
        return {}
    return out


class GroupAdmin:
    def __init__(self, client: Client) -> None:
        self.c = client
        # connections to other brokers: a group's coordinator, a partition's leader
        self._clients: dict[tuple[str, int], Client] = {}
        self._coordinators: dict[str, Client] = {}

    def _client(self, host: str, port: int) -> Client:
        peer = self.c.sock.getpeername()[:2]
        if (host, port) == tuple(peer) or f"{host}:{port}" == self.c.bootstrap:
            return self.c
        c = self._clients.get((host, port))
        if c is None:
            c = self._clients[(host, port)] = Client(f"{host}:{port}", self.c.client_id,
                                                     self.c.timeout, self.c.config,
                                                     self.c.ssl_context)
        return c

    def close(self) -> None:
        for c in self._clients.values():
            c.close()

    def find_coordinator(self, group: str) -> Client:
        """A connection to the group's coordinator (in a cluster, maybe another broker)."""
        c = self._coordinators.get(group)
        if c is None:
            r = self.c.request(10, 3, {"key": group, "key_type": 0})
            _check(r.error_code, r.error_message or "FindCoordinator")
            c = self._coordinators[group] = self._client(r.host, r.port)
        return c

    def list_groups(self, states: list[str] | None = None,
                    types: list[str] | None = None) -> list[Any]:
        # each broker lists the groups it coordinates: ask them all (as Kafka's tool)
        found: dict[str, Any] = {}
        for b in self.c.metadata([]).brokers:
            r = self._client(b.host, b.port).request(
                16, 5, {"states_filter": states or [], "types_filter": types or []})
            _check(r.error_code, "ListGroups")
            for g in r.groups:
                found.setdefault(g.group_id, g)
        return sorted(found.values(), key=lambda g: g.group_id)

    def describe(self, group: str) -> Any:
        # v6 (KIP-1043) tells a KIP-848 group (and an unknown one) by GROUP_ID_NOT_FOUND
        r = self.find_coordinator(group).request(15, 6, {"groups": [group], "include_authorized_operations": False})
        g = r.groups[0]
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            c = self.find_coordinator(group).request(
                69, 0, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
            if c.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
                return self.describe_consumer_group(group)  # KIP-848 groups (as Kafka 4)
            st = self.find_coordinator(group).request(
                89, 0, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
            if st.error_code != ErrorCode.GROUP_ID_NOT_FOUND:  # KIP-1071 streams groups
                _check(st.error_code, st.error_message or f"StreamsGroupDescribe {group}")
                return st
            return g  # no such group: Dead, no members
        _check(g.error_code, f"DescribeGroups {group}")
        return g

    def describe_consumer_group(self, group: str) -> Any:
        r = self.find_coordinator(group).request(
            69, 0, {"group_ids": [group], "include_authorized_operations": False})
        g = r.groups[0]
        _check(g.error_code, g.error_message or f"ConsumerGroupDescribe {group}")
        return g

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        r = self.find_coordinator(group).request(9, 8, {"groups": [{"group_id": group, "topics": None}],
                                  "require_stable": False})
        g = r.groups[0]
        _check(g.error_code, f"OffsetFetch {group}")
        return {(t.name, p.partition_index): p.committed_offset
                for t in g.topics for p in t.partitions if p.committed_offset >= 0}

    def partitions(self, topic: str) -> list[int]:
        md = self.c.metadata([topic])
        t = md.topics[0]
        _check(t.error_code, f"topic {topic}")
        return sorted(p.partition_index for p in t.partitions)

    def offset_for(self, topic: str, partition: int, timestamp: int) -> int:
        """ListOffsets at the partition's leader."""
        md = self.c.metadata([topic])
        leader = next((p.leader_id for t in md.topics for p in t.partitions
                       if p.partition_index == partition), -1)
        b = next((b for b in md.brokers if b.node_id == leader), None)
        c = self._client(b.host, b.port) if b is not None else self.c
        return c.list_offset(topic, partition, timestamp)[0]

    def delete(self, group: str) -> int:
        r = self.find_coordinator(group).request(42, 2, {"groups_names": [group]})
        return int(r.results[0].error_code)

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        coord = self.find_coordinator(group)
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), o in sorted(offsets.items()):
            topics.setdefault(t, []).append(
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": ""})
        r = coord.request(8, 9, {"group_id": group, "generation_id_or_member_epoch": -1,
                                  "member_id": "", "group_instance_id": None,
                                  "topics": [{"name": n, "partitions": ps}
                                             for n, ps in topics.items()]})
        return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

    # -- share groups (KIP-932) ----------------------------------------------------------

    def describe_share_group(self, group: str) -> Any:
        """ShareGroupDescribe v1 at the coordinator: the group (GROUP_ID_NOT_FOUND raised
        for a group that is not a share group or does not exist)."""
        r = self.find_coordinator(group).request(
            77, 1, {"group_ids": [group], "include_authorized_operations": False})
        g = r.groups[0]
        _check(g.error_code, g.error_message or f"ShareGroupDescribe {group}")
        return g

    def share_offsets(self, group: str, topics: list[str] | None = None
                      ) -> dict[tuple[str, int], tuple[int, int]]:
        """DescribeShareGroupOffsets v1: (topic, partition) -> (start offset, lag) of every
        partition the group has share state for (of `topics` only, if given); -1 for
        what the coordinator does not know."""
        req_topics: list[dict[str, Any]] | None = None
        if topics is not None:
            req_topics = [{"topic_name": t, "partitions": self.partitions(t)} for t in topics]
        r = self.find_coordinator(group).request(
            90, 1, {"groups": [{"group_id": group, "topics": req_topics}]})
        g = r.groups[0]
        _check(g.error_code, g.error_message or f"DescribeShareGroupOffsets {group}")
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for t in g.topics:
            for p in t.partitions:
                _check(p.error_code, p.error_message or f"{t.topic_name}-{p.partition_index}")
                out[(t.topic_name, p.partition_index)] = (p.start_offset, p.lag)
        return out

    def alter_share_offsets(self, group: str, offsets: dict[tuple[str, int], int]
                            ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """AlterShareGroupOffsets v0 (the group must have no members): the start offset of
        each (topic, partition); -> their (error code, message)."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), o in sorted(offsets.items()):
            topics.setdefault(t, []).append({"partition_index": p, "start_offset": o})
        r = self.find_coordinator(group).request(91, 0, {"group_id": group, "topics": [
            {"topic_name": n, "partitions": ps} for n, ps in topics.items()]})
        _check(r.error_code, r.error_message or f"AlterShareGroupOffsets {group}")
        return {(t.topic_name, p.partition_index): (int(p.error_code), p.error_message)
                for t in r.responses for p in t.partitions}

    def delete_share_offsets(self, group: str, topics: list[str]
                             ) -> dict[str, tuple[int, str | None]]:
        """DeleteShareGroupOffsets v0: forget the group's share state of `topics`."""
        r = self.find_coordinator(group).request(
            92, 0, {"group_id": group, "topics": [{"topic_name": t} for t in topics]})
        _check(r.error_code, r.error_message or f"DeleteShareGroupOffsets {group}")
        return {t.topic_name: (int(t.error_code), t.error_message) for t in r.responses}
