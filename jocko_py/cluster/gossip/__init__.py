"""Gossip membership: sans-IO SWIM core (``core``), messages (``messages``) and the
asyncio UDP adapter (``transport``)."""

from jocko_py.cluster.gossip.core import GossipConfig, GossipCore, Member, State
from jocko_py.cluster.gossip.messages import MemberEvent, MemberMeta

__all__ = ["GossipConfig", "GossipCore", "Member", "MemberEvent", "MemberMeta", "State"]
