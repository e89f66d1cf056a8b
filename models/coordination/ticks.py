"""Scheduler ticks: one send per periodic entry and minute slot across schedulers (REDIS_URL)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from models.coordination._redis import RedisConcern, text, translated


def tick_slot(at: datetime) -> str:
    """The minute slot (UTC, ``YYYYmmddTHHMM``) a scheduler tick at ``at`` belongs to."""
    return at.astimezone(UTC).strftime("%Y%m%dT%H%M")


@dataclass(eq=False, repr=False)
class SchedulerTicks(RedisConcern):
    """The claimed minute slots of the periodic entries (SET NX, kept for the tick TTL)."""

    @translated
    def claim_tick(self, entry: str, at: datetime, *, owner: str, ttl_seconds: float) -> bool:
        """SET NX a periodic entry's minute slot; False when another scheduler already sent it."""
        key = self.tick_key(entry, tick_slot(at))
        return bool(self.client.set(key, owner, nx=True, ex=int(ttl_seconds)))

    @translated
    def any_tick_at(self, at: datetime) -> bool:
        """Whether any periodic entry claimed the minute slot of ``at``."""
        pattern = self.tick_key("*", tick_slot(at))
        return next(iter(self.client.scan_iter(match=pattern, count=1000)), None) is not None

    @translated
    def newest_tick_at(self) -> datetime | None:
        """The start (UTC) of the newest minute slot any periodic entry claimed; None when none is kept."""
        slots = (
            str(text(k)).rsplit("_", 1)[1]
            for k in self.client.scan_iter(match=self.tick_key("*", "*"), count=1000)
        )
        newest = max(slots, default=None)
        return None if newest is None else datetime.strptime(newest, "%Y%m%dT%H%M").replace(tzinfo=UTC)
