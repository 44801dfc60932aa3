"""Client quotas: produce and fetch byte rates per user and/or client id, enforced
with Kafka's throttle semantics.

Quotas are ClientQuotaRecords in the metadata image (AlterClientQuotas). For a
request of user U (the principal's name; ANONYMOUS without authentication) and
client id C, the quota is the first configured one of, in Kafka's order:
/users/U/clients/C, /users/U/clients/<default>, /users/U, /users/<default>/clients/C,
/users/<default>/clients/<default>, /users/<default>, /clients/C, /clients/<default>.
Everything that matches the same entry shares one rate.

The rate is Kafka's windowed rate: bytes over the last `quota.window.num` (11)
windows of `quota.window.size.seconds` (1), divided by the time they cover (at
least `quota.window.num - 1` windows, so a fresh client is not throttled for its
first burst). Over the quota, the request is still answered, with
`throttle_time_ms` = the time it takes the rate to fall back to the quota (capped at
the whole window), and the connection reads nothing more for that long (KIP-219:
the client also waits). `producer_byte_rate` counts produced record bytes,
`consumer_byte_rate` fetched ones. `request_percentage` is the share of one
request-handling thread (percent; jocko-py has one event loop) a client's requests
may use: each request counts the time its handler ran, less the time it waited
(parked in purgatory, for a rebalance, for an fsync), with the same windowed rate
and throttling; broker-to-broker requests (replica fetches, cluster actions) and the
connection set-up (ApiVersions, SASL) are exempt, as in Kafka.
`controller_mutation_rate` (KIP-599) counts the partitions a client creates (topics,
new partitions) and deletes: a CreateTopics v6+, CreatePartitions v3+ or DeleteTopics
v5+ while the client's rate is already over the quota gets THROTTLING_QUOTA_EXCEEDED
for each topic; otherwise the mutation is done (it may overshoot) and the response is
throttled until the rate is back under the quota; older versions are always served
and throttled.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field

from jocko_py.cluster.client_quota_control import CLIENT_ID, QUOTA_KEYS, USER, Entity
from jocko_py.cluster.metadata import MetadataImage

ENFORCED = QUOTA_KEYS
# request_percentage is recorded in microseconds of handler time: Q percent of one
# thread is Q * 10,000 microseconds per second
SCALE = {"request_percentage": 10_000.0}
KEYS = ENFORCED


def candidates(user: str, client_id: str) -> list[Entity]:
    """Kafka's precedence of quota entities for (user, client id)."""
    return [
        ((CLIENT_ID, client_id), (USER, user)), ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)), ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),), ((CLIENT_ID, None),),
    ]


@dataclass
class _Rate:
    samples: collections.deque[tuple[float, int]] = field(default_factory=collections.deque)
    total: int = 0


class QuotaManager:
    def __init__(self, image: Callable[[], MetadataImage], window_num: int = 11,
                 window_size_s: float = 1.0) -> None:
        self._image = image
        self.window_num = max(2, window_num)
        self.window_size_s = max(0.01, window_size_s)
        self._rates: dict[tuple[Entity, str], _Rate] = {}

    def quota(self, user: str, client_id: str, key: str) -> tuple[Entity, float] | None:
        quotas = self._image().quotas
        if not quotas:
            return None
        for ent in candidates(user, client_id):
            q = quotas.get(ent)
            if q is not None and key in q:
                return ent, q[key]
        return None

    def record(self, user: str, client_id: str, key: str, nbytes: int, now: float) -> int:
        """Count ``nbytes`` against the quota that applies; the throttle time (ms)."""
        found = self.quota(user, client_id, key)
        if found is None:
            return 0
        ent, limit = found
        limit *= SCALE.get(key, 1.0)
        r = self._rates.setdefault((ent, key), _Rate())
        span = self.window_num * self.window_size_s
        while r.samples and r.samples[0][0] <= now - span:
            r.total -= r.samples.popleft()[1]
        if nbytes:
            r.samples.append((now, nbytes))
            r.total += nbytes
        if not r.samples:
            return 0
        elapsed = max(now - r.samples[0][0], (self.window_num - 1) * self.window_size_s)
        if limit <= 0 or r.total <= limit * elapsed:
            return 0
        return int(min(span, (r.total - limit * elapsed) / limit) * 1000)
