"""Sans-IO SWIM membership: failure detection and dissemination, Serf-style.

The core owns one member's view of the cluster. It performs no I/O: entry points take
the current time ``now`` (ms) and return actions (``Send`` a message to an address,
``MemberEvent`` for the application). Entry points: ``join(seeds, now)``,
``tick(now)``, ``receive(msg, now)``, ``leave(now)``, ``update_meta(meta, now)``.

Rules
-----
1. Probing. Every ``probe_interval_ms`` the member pings the next member of a shuffled
   round-robin list of alive and suspect members (so every member is probed by
   everyone within ``n`` periods). No ack within ``probe_timeout_ms``: ask ``indirect_k``
   random others to ping it (PingReq) and forward the ack. No ack, direct or indirect,
   by the end of the period: the target becomes *suspect*.
2. Suspicion. A suspect that does not refute within the suspicion timeout is declared
   *dead*. The timeout is ``suspicion_mult * log10(n) * probe_interval_ms`` (at least
   ``suspicion_mult`` periods) for a member whose own probe failed, and
   ``suspicion_max_mult`` times that for a member that only heard the rumour (Lifeguard:
   the rumour's refutation may travel as slowly as the rumour); its own failed probe of
   a suspect cuts its timer to the short one. Buddy system: the accuser pings the
   suspect with the suspicion at once, and every ping to a suspect carries it first, so
   that the suspect refutes in its ack (own state is piggybacked first).
3. Incarnations. Only a member raises its own incarnation. An ``alive`` update wins if
   its incarnation is greater than the known one (or the member is new); ``suspect``
   wins over alive with an incarnation >= the known one and over suspect with a
   greater one; ``dead``/``left`` win with an incarnation >= the known one. A member that
   hears it is suspect or dead refutes by broadcasting alive with a larger incarnation;
   one that hears of itself alive at an incarnation it has not passed (an earlier life,
   before a restart) does the same, so its new metadata wins.
4. Dissemination. Updates ride on pings and acks (at most ``max_piggyback`` per message,
   least-sent first) and are retransmitted ``retransmit_mult * ceil(log10(n + 1))`` times.
5. Anti-entropy. Joining pushes and pulls the full state with a seed (Sync). Every
   ``sync_interval_ms`` a member syncs with a random alive member, and every
   ``reconnect_interval_ms`` with a random dead member or seed it does not see alive,
   so views reconverge after a partition heals, islands of members that restarted
   while cut off merge, and a member wrongly declared dead learns it and refutes.
   A message from a member we think dead is answered with its dead state for the same
   reason.
6. Leave. A leaving member broadcasts ``left`` with a raised incarnation; others do not
   suspect or reconnect to it. Dead and left members are reaped after ``reap_ms``.
7. Cluster id. Once a member knows its cluster id (``MemberMeta.cluster_id``), updates
   carrying another non-empty id are ignored (logged once per member and id), and a
   message whose sender announces itself with another id is dropped whole: a broker of
   another cluster never enters the membership. A member learning its id drops the
   members it holds that carry another one. Updates without an id (a member that has
   not learned it yet) are accepted.
"""

from __future__ import annotations

import enum
import logging
import math
import random
from dataclasses import dataclass

from jocko_py.cluster.gossip.messages import (
    Ack,
    MemberEvent,
    MemberMeta,
    Ping,
    PingReq,
    Send,
    Sync,
    Update,
)

log = logging.getLogger("jocko_py.cluster.gossip")

GossipAction = Send | MemberEvent


class State(enum.IntEnum):
    ALIVE = 0
    SUSPECT = 1
    DEAD = 2
    LEFT = 3


@dataclass(frozen=True, slots=True)
class GossipConfig:
    probe_interval_ms: int = 1000
    probe_timeout_ms: int = 400
    indirect_k: int = 3
    suspicion_mult: int = 4
    suspicion_max_mult: int = 6
    retransmit_mult: int = 4
    max_piggyback: int = 8
    # members per Sync datagram: 8 keep a datagram near 1.2 KB, under a 1500-byte MTU
    sync_chunk: int = 8
    sync_interval_ms: int = 10_000
    reconnect_interval_ms: int = 3_000
    reap_ms: int = 24 * 3600 * 1000


@dataclass(slots=True)
class Member:
    name: str
    addr: str
    meta: MemberMeta
    state: State
    incarnation: int
    since_ms: int


class GossipCore:
    def __init__(
        self,
        name: str,
        addr: str,
        meta: MemberMeta,
        config: GossipConfig | None = None,
        seed: int | None = None,
    ) -> None:
        self.name = name
        self.addr = addr
        self.config = config or GossipConfig()
        self._rng = random.Random(seed)
        self.incarnation = 0
        self.members: dict[str, Member] = {name: Member(name, addr, meta, State.ALIVE, 0, 0)}
        self._out: list[GossipAction] = []
        self._queue: dict[str, tuple[Update, int]] = {}  # name -> (update, times sent)
        self._seq = 0
        self._probe_list: list[str] = []
        self._probe: tuple[str, int, int] | None = None  # (target, seq, started)
        self._probe_indirect_sent = False
        self._next_probe = 0
        self._forward: dict[int, tuple[str, int, int]] = {}  # my seq -> (requester, seq, t)
        self._suspect_deadline: dict[str, int] = {}
        self._told_dead: dict[str, int] = {}  # member held dead -> when we last told it
        self._next_sync = 0
        self._next_reconnect = 0
        self._seeds: list[str] = []
        self.left = False
        self._foreign_seen: set[tuple[str, str]] = set()  # (member, cluster id) logged

    # ------------------------------------------------------------------ queries

    @property
    def cluster_id(self) -> str:
        return self.members[self.name].meta.cluster_id

    def _foreign(self, u: Update) -> bool:
        """Rule 7: an update from another cluster (logged once per member and id)."""
        mine, theirs = self.cluster_id, u.meta.cluster_id
        if not (mine and theirs and mine != theirs):
            return False
        if (u.name, theirs) not in self._foreign_seen:
            self._foreign_seen.add((u.name, theirs))
            log.warning("[gossip %s] ignoring member %s at %s: it belongs to cluster %s, this "
                        "member to cluster %s", self.name, u.name, u.addr, theirs, mine)
        return True

    def alive_members(self) -> list[Member]:
        return [m for m in self.members.values() if m.state is State.ALIVE]

    def state_of(self, name: str) -> State | None:
        m = self.members.get(name)
        return None if m is None else m.state

    # ------------------------------------------------------------------ plumbing

    def _drain(self) -> list[GossipAction]:
        out, self._out = self._out, []
        return out

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _n(self) -> int:
        return sum(1 for m in self.members.values() if m.state <= State.SUSPECT)

    def _retransmit_limit(self) -> int:
        return self.config.retransmit_mult * max(1, math.ceil(math.log10(self._n() + 1)))

    def _enqueue(self, u: Update) -> None:
        self._queue[u.name] = (u, 0)

    def _piggyback(self) -> tuple[Update, ...]:
        if not self._queue:
            return ()
        limit = self._retransmit_limit()
        # Least-sent first; our own state (a refutation) before others' at equal count.
        picked = sorted(self._queue.items(), key=lambda kv: (kv[1][1], kv[0] != self.name, kv[0]))
        picked = picked[: self.config.max_piggyback]
        out = []
        for name, (u, n) in picked:
            out.append(u)
            if n + 1 >= limit:
                del self._queue[name]
            else:
                self._queue[name] = (u, n + 1)
        return tuple(out)

    def _self_update(self) -> Update:
        me = self.members[self.name]
        return Update(me.state.name.lower(), me.name, me.addr, me.incarnation, me.meta)

    def _update_of(self, m: Member) -> Update:
        return Update(m.state.name.lower(), m.name, m.addr, m.incarnation, m.meta)

    def _send(self, addr: str, msg: Ping | Ack | PingReq | Sync) -> None:
        self._out.append(Send(addr, msg))

    def _event(self, kind: str, m: Member) -> None:
        self._out.append(MemberEvent(kind, m.name, m.addr, m.meta, m.incarnation))

    # ------------------------------------------------------------------ entry points

    def join(self, seeds: list[str], now: int) -> list[GossipAction]:
        self._seeds = [s for s in seeds if s != self.addr]
        self._enqueue(self._self_update())
        for s in self._seeds:
            self._send_sync(s, reply=True)
        self._next_probe = now + self.config.probe_interval_ms
        self._next_sync = now + self.config.sync_interval_ms
        self._next_reconnect = now + self.config.reconnect_interval_ms
        return self._drain()

    def leave(self, now: int) -> list[GossipAction]:
        me = self.members[self.name]
        self.incarnation += 1
        me.incarnation, me.state, me.since_ms = self.incarnation, State.LEFT, now
        self.left = True
        u = self._self_update()
        self._enqueue(u)
        others = [m for m in self.members.values() if m.name != self.name and m.state <= 1]
        self._rng.shuffle(others)
        for m in others[: max(3, self.config.indirect_k)]:
            self._send(m.addr, Ping(self.name, self.addr, self._next_seq(), m.name, (u,)))
        return self._drain()

    def update_meta(self, meta: MemberMeta, now: int) -> list[GossipAction]:
        me = self.members[self.name]
        self.incarnation += 1
        me.incarnation, me.meta = self.incarnation, meta
        self._enqueue(self._self_update())
        for m in list(self.members.values()):
            if m.name != self.name and self._foreign(self._update_of(m)):
                del self.members[m.name]  # rule 7: learned our id; theirs differs
                self._suspect_deadline.pop(m.name, None)
                self._queue.pop(m.name, None)
        return self._drain()

    def tick(self, now: int) -> list[GossipAction]:
        if self.left:
            return []
        c = self.config
        # Suspicion timeouts.
        for name, deadline in list(self._suspect_deadline.items()):
            m = self.members.get(name)
            if m is None or m.state is not State.SUSPECT:
                del self._suspect_deadline[name]
            elif now >= deadline:
                del self._suspect_deadline[name]
                self._apply(Update("dead", m.name, m.addr, m.incarnation, m.meta), now)
        # Indirect probes.
        if self._probe is not None and not self._probe_indirect_sent:
            target, seq, started = self._probe
            if now - started >= c.probe_timeout_ms:
                self._probe_indirect_sent = True
                tm = self.members.get(target)
                helpers = [
                    m
                    for m in self.members.values()
                    if m.state is State.ALIVE and m.name not in (self.name, target)
                ]
                self._rng.shuffle(helpers)
                if tm is not None:
                    for h in helpers[: c.indirect_k]:
                        self._send(
                            h.addr,
                            PingReq(self.name, self.addr, seq, target, tm.addr, self._piggyback()),
                        )
        if now >= self._next_probe:
            self._next_probe = now + c.probe_interval_ms
            self._end_probe(now)
            self._start_probe(now)
        if now >= self._next_sync:
            self._next_sync = now + c.sync_interval_ms
            alive = [m for m in self.alive_members() if m.name != self.name]
            if alive:
                self._send_sync(self._rng.choice(alive).addr, reply=True)
            elif self._seeds:
                self._send_sync(self._rng.choice(self._seeds), reply=True)
        if now >= self._next_reconnect:
            self._next_reconnect = now + c.reconnect_interval_ms
            self._reconnect()
        # Stale indirect forwards, reaping.
        for s, (_r, _q, t) in list(self._forward.items()):
            if now - t > c.probe_interval_ms * 2:
                del self._forward[s]
        for m in list(self.members.values()):
            if m.state >= State.DEAD and now - m.since_ms > c.reap_ms and m.name != self.name:
                del self.members[m.name]
        return self._drain()

    def _reconnect(self) -> None:
        """Sync with a dead member, or a seed we do not see alive: this also merges
        islands formed by members that restarted while cut off."""
        known = {m.addr for m in self.members.values() if m.state <= State.SUSPECT}
        targets = [m.addr for m in self.members.values() if m.state is State.DEAD]
        targets += [a for a in self._seeds if a not in known]
        if targets:
            self._send_sync(self._rng.choice(sorted(set(targets))), reply=True)

    def _end_probe(self, now: int) -> None:
        if self._probe is None:
            return
        target, _seq, _ = self._probe
        self._probe = None
        m = self.members.get(target)
        if m is None or m.state > State.SUSPECT:
            return
        if m.state is State.ALIVE:
            self._apply(Update("suspect", m.name, m.addr, m.incarnation, m.meta), now)
        # Our own probe confirms the suspicion: the short timeout applies.
        short = now + self._suspicion_timeout()
        self._suspect_deadline[m.name] = min(self._suspect_deadline.get(m.name, short), short)
        # Buddy system: tell the suspect at once, so that it can refute in its ack.
        u = self._update_of(m)
        self._send(m.addr, Ping(self.name, self.addr, self._next_seq(), m.name, (u,)))

    def _start_probe(self, now: int) -> None:
        for _ in range(2):
            while self._probe_list:
                name = self._probe_list.pop()
                m = self.members.get(name)
                if m is not None and m.state <= State.SUSPECT and name != self.name:
                    seq = self._next_seq()
                    self._probe = (name, seq, now)
                    self._probe_indirect_sent = False
                    ups = self._piggyback()
                    if m.state is State.SUSPECT:
                        # Buddy system: a suspect always hears of its suspicion when probed.
                        ups = (self._update_of(m), *[u for u in ups if u.name != name])
                    self._send(m.addr, Ping(self.name, self.addr, seq, name, ups))
                    return
            self._probe_list = [
                n for n, m in self.members.items() if n != self.name and m.state <= 1
            ]
            self._rng.shuffle(self._probe_list)

    def _send_sync(self, addr: str, reply: bool) -> None:
        """The whole view, split over datagrams of at most ``sync_chunk`` members each
        (one datagram used to carry all of it: past ~450 members it no longer fit in a
        UDP datagram and anti-entropy stopped); only the first asks for a reply."""
        states = [self._update_of(m) for m in sorted(self.members.values(), key=_key)]
        step = max(1, self.config.sync_chunk)
        for i in range(0, max(1, len(states)), step):
            self._send(addr, Sync(self.name, self.addr, reply and i == 0,
                                  tuple(states[i:i + step])))

    # ------------------------------------------------------------------ receive

    def receive(self, msg: Ping | Ack | PingReq | Sync, now: int) -> list[GossipAction]:
        if self.left:
            return []
        if any(u.name == msg.src and self._foreign(u) for u in msg.updates):
            return []  # rule 7: the sender belongs to another cluster
        for u in msg.updates:
            if not self._foreign(u):
                self._apply(u, now)
        sender = self.members.get(msg.src)
        if sender is not None and sender.state is State.DEAD and msg.src != self.name:
            self._answer_dead_sender(sender, msg.src_addr, now)
        if isinstance(msg, Ping):
            if msg.target == self.name:
                self._send(msg.src_addr, Ack(self.name, self.addr, msg.seq, self._piggyback()))
        elif isinstance(msg, PingReq):
            seq = self._next_seq()
            self._forward[seq] = (msg.src_addr, msg.seq, now)
            self._send(
                msg.target_addr, Ping(self.name, self.addr, seq, msg.target, self._piggyback())
            )
        elif isinstance(msg, Ack):
            fwd = self._forward.pop(msg.seq, None)
            if fwd is not None:
                requester, seq, _ = fwd
                self._send(requester, Ack(self.name, self.addr, seq, self._piggyback()))
            elif self._probe is not None and self._probe[1] == msg.seq:
                self._probe = None
        elif isinstance(msg, Sync):
            if msg.reply:
                self._send_sync(msg.src_addr, reply=False)
        return self._drain()

    def _answer_dead_sender(self, sender: Member, addr: str, now: int) -> None:
        """A member we hold dead is talking to us: tell it our verdict and ask for its
        state back. It refutes with a higher incarnation, and its reply brings it back
        alive here (and, through dissemination, everywhere). At most once per probe
        interval per member, so that a sender that does not refute cannot start a storm."""
        last = self._told_dead.get(sender.name)
        if last is not None and now - last < self.config.probe_interval_ms:
            return
        self._told_dead[sender.name] = now
        self._send(addr, Sync(self.name, self.addr, True, (self._update_of(sender),)))

    def _apply(self, u: Update, now: int) -> None:
        if u.name == self.name:
            self._maybe_refute(u, now)
            return
        m = self.members.get(u.name)
        kind = State[u.state.upper()]
        if m is None:
            if kind >= State.DEAD:
                # Learn of it so that we do not resurrect it from stale alive gossip.
                self.members[u.name] = Member(u.name, u.addr, u.meta, kind, u.incarnation, now)
                return
            m = Member(u.name, u.addr, u.meta, kind, u.incarnation, now)
            self.members[u.name] = m
            self._enqueue(u)
            self._event("join", m)
            if kind is State.SUSPECT:
                self._suspect_deadline[m.name] = now + self._rumour_timeout()
            return
        if kind is State.ALIVE:
            if u.incarnation <= m.incarnation:
                return
            was = m.state
            m.state, m.incarnation, m.addr, m.since_ms = State.ALIVE, u.incarnation, u.addr, now
            meta_changed = m.meta != u.meta
            m.meta = u.meta
            self._enqueue(u)
            if was >= State.DEAD:
                self._event("join", m)
            elif meta_changed:
                self._event("update", m)
            elif was is State.SUSPECT:
                self._event("alive", m)
        elif kind is State.SUSPECT:
            if m.state >= State.DEAD:
                return
            if (m.state is State.ALIVE and u.incarnation >= m.incarnation) or (
                m.state is State.SUSPECT and u.incarnation > m.incarnation
            ):
                first = m.state is State.ALIVE
                m.state, m.incarnation, m.since_ms = State.SUSPECT, u.incarnation, now
                self._enqueue(u)
                if first:
                    self._suspect_deadline[m.name] = now + self._rumour_timeout()
                    self._event("suspect", m)
        else:
            if u.incarnation < m.incarnation or m.state >= State.DEAD:
                if m.state is State.DEAD and kind is State.LEFT and u.incarnation >= m.incarnation:
                    m.state = State.LEFT
                return
            m.state, m.incarnation, m.since_ms = kind, u.incarnation, now
            self._enqueue(u)
            self._event("failed" if kind is State.DEAD else "left", m)

    def _maybe_refute(self, u: Update, now: int) -> None:
        if self.left:
            return
        me = self.members[self.name]
        if u.state == "alive":
            # Others hold an older life of ours (we restarted) at an incarnation we have
            # not passed: outbid it, or our new metadata never wins (rule 3).
            if u.incarnation > self.incarnation or (
                u.incarnation == self.incarnation and u.meta != me.meta
            ):
                self.incarnation = u.incarnation + 1
                me.incarnation = self.incarnation
                self._enqueue(self._self_update())
            return
        if u.incarnation >= self.incarnation:
            self.incarnation = u.incarnation + 1
            me = self.members[self.name]
            me.incarnation = self.incarnation
            log.info(
                "[gossip %s] refuting %s at incarnation %d", self.name, u.state, self.incarnation
            )
        # Even a stale accusation means someone holds an old view of us: re-announce.
        self._enqueue(self._self_update())

    def _rumour_timeout(self) -> int:
        return self.config.suspicion_max_mult * self._suspicion_timeout()

    def _suspicion_timeout(self) -> int:
        c = self.config
        scale = max(1.0, math.log10(max(self._n(), 1)))
        return int(c.suspicion_mult * scale * c.probe_interval_ms)


def _key(m: Member) -> str:
    return m.name


__all__ = ["GossipAction", "GossipConfig", "GossipCore", "Member", "State"]
