"""``models.coordination.SchedulerTicks`` in memory."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from models.coordination import tick_slot
from tests.fakes.coordination._memory import MemoryConcern, served


@dataclass(eq=False, repr=False)
class MemorySchedulerTicks(MemoryConcern):
    """The scheduler ticks of the fake store."""

    @served
    def claim_tick(self, entry: str, at: datetime, *, owner: str, ttl_seconds: float) -> bool:
        return self._set(self.tick_key(entry, tick_slot(at)), owner, ttl=int(ttl_seconds), nx=True)

    @served
    def any_tick_at(self, at: datetime) -> bool:
        slot = tick_slot(at)
        return any(k.endswith(f"_{slot}") for k in self._keys(f"{self.prefix}scheduler_tick_"))

    @served
    def newest_tick_at(self) -> datetime | None:
        slots = [k.rsplit("_", 1)[1] for k in self._keys(f"{self.prefix}scheduler_tick_")]
        newest = max(slots, default=None)
        return None if newest is None else datetime.strptime(newest, "%Y%m%dT%H%M").replace(tzinfo=UTC)
