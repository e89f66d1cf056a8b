"""``CoordinationStore``: the concern stores of one Redis (REDIS_URL), built together from the settings.

Callers name the concern they use: ``coordination.barriers`` (start barriers),
``coordination.locks`` (locks, worker leases, liveness, degraded flags), ``coordination.stops``
(stop flags, hand-offs), ``coordination.ticks`` (scheduler ticks) and ``coordination.previews``
(bulk previews). All share one client, key prefix and set of thresholds.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, fields

import redis

from config.settings import KickoffSettings
from models.coordination._redis import connect_redis, translated
from models.coordination.bulk_previews import BulkPreviews
from models.coordination.keys import CoordinationKeys, CoordinationThresholds
from models.coordination.locks import Locks
from models.coordination.start_barriers import StartBarriers
from models.coordination.stop_signals import StopSignals
from models.coordination.ticks import SchedulerTicks


@dataclass(eq=False, repr=False)
class CoordinationStore(CoordinationKeys, CoordinationThresholds):
    """Owner of every kickoff key in Redis, by concern; see the package table for keys and TTLs."""

    client: redis.Redis
    _: KW_ONLY
    prefix: str
    url: str

    def __post_init__(self) -> None:
        shared = {f.name: getattr(self, f.name) for f in fields(CoordinationThresholds)}
        shared |= {"prefix": self.prefix, "url": self.url}
        self.barriers = StartBarriers(self.client, **shared)
        self.locks = Locks(self.client, **shared)
        self.stops = StopSignals(self.client, **shared)
        self.ticks = SchedulerTicks(self.client, **shared)
        self.previews = BulkPreviews(self.client, **shared)

    @classmethod
    def from_settings(cls, settings: KickoffSettings, client: redis.Redis | None = None) -> CoordinationStore:
        """Build from the settings: REDIS_URL, REDIS_KEY_PREFIX and the listener lifecycle thresholds."""
        return cls(
            client or connect_redis(settings.redis_url),
            prefix=settings.redis_key_prefix,
            url=settings.redis_url,
            stale_seconds=settings.listener_heartbeat_stale_seconds,
            active_max_age_seconds=settings.listener_active_max_age_seconds,
            attempts_ttl_seconds=settings.listener_start_attempts_ttl_seconds,
            attempt_cap=settings.listener_start_attempt_cap,
        )

    @translated
    def ping(self) -> None:
        """Raise RedisUnavailable (naming REDIS_URL) when Redis does not answer."""
        self.client.ping()
