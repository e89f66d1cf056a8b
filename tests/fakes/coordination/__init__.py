"""An in-memory coordination store: ``models.coordination.CoordinationStore``'s concern stores, no Redis.

``MemoryCoordinationStore`` has the real store's concern stores (``barriers``, ``locks``, ``stops``,
``ticks``, ``previews``), each a module of this package as each real one is a module of
``models/coordination/``, all on one key space (``_memory.MemoryRedis``). That keeps every key in a
dict with its expiry, read against an injectable clock (``ManualClock`` in tests: time moves only
when told), so a test of the lifecycle's decisions (leases, stop watches, dispatch's claims) runs
without Redis and can let hours pass at once.

Same key names, values, TTL rounding (``EX`` whole seconds, ``PX`` milliseconds) and answers as
the real store; ``tests/foundation/test_coordination_contract.py`` runs one set of tests against both,
so the fake cannot drift. It is never a proof of Redis's own behaviour (Lua scripts, pipelines,
connection errors): the real store's tests stay that.

Test-only levers: ``down`` (every call raises RedisUnavailable, as a Redis that does not answer),
``forget_everything()`` (Redis restarted empty), ``ttl(key)`` (seconds left, None without one).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from models.coordination import CoordinationKeys, CoordinationStore, CoordinationThresholds, connect_redis
from tests.fakes.coordination._memory import ManualClock, MemoryRedis, served
from tests.fakes.coordination.bulk_previews import MemoryBulkPreviews
from tests.fakes.coordination.locks import MemoryLiveness, MemoryLocks, MemoryTokenLock
from tests.fakes.coordination.start_barriers import MemoryStartBarriers
from tests.fakes.coordination.stop_signals import MemoryStopSignals, MemorySubscription
from tests.fakes.coordination.ticks import MemorySchedulerTicks

#: The thresholds a store is built with (the fields of ``CoordinationThresholds``).
THRESHOLDS = tuple(f.name for f in fields(CoordinationThresholds))


@dataclass(eq=False)
class MemoryCoordinationStore(CoordinationKeys, CoordinationThresholds):
    """The coordination store in memory; see the package docstring. The thresholds
    (``CoordinationThresholds``) are keyword-only, as the real store's."""

    prefix: str = "kickoff:"
    url: str = "memory://"
    clock: Callable[[], float] = time.time
    space: MemoryRedis = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.space = MemoryRedis(url=self.url, clock=self.clock)
        shared = {name: getattr(self, name) for name in THRESHOLDS}
        shared |= {"space": self.space, "prefix": self.prefix}
        self.barriers = MemoryStartBarriers(**shared)
        self.locks = MemoryLocks(**shared)
        self.stops = MemoryStopSignals(**shared)
        self.ticks = MemorySchedulerTicks(**shared)
        self.previews = MemoryBulkPreviews(**shared)

    @classmethod
    def from_settings(
        cls, settings: Any, *, clock: Callable[[], float] = time.time
    ) -> MemoryCoordinationStore:
        """Like ``CoordinationStore.from_settings`` (the same thresholds; its client never connects)."""
        real = CoordinationStore.from_settings(settings, client=connect_redis(settings.redis_url))
        thresholds = {name: getattr(real, name) for name in THRESHOLDS}
        return cls(prefix=real.prefix, url=real.url, clock=clock, **thresholds)

    # -- test levers (on the shared key space) -------------------------------------------

    @property
    def down(self) -> bool:
        """Every call raises RedisUnavailable while set (a Redis that does not answer)."""
        return self.space.down

    @down.setter
    def down(self, value: bool) -> None:
        self.space.down = value

    @property
    def subscriptions(self) -> list[MemorySubscription]:
        return self.space.subscriptions

    @property
    def signals(self) -> list[MemoryLiveness]:
        return self.space.signals

    def ttl(self, key: str) -> float | None:
        """Seconds ``key`` has left; None when it has no TTL or does not exist."""
        return self.space.ttl(key)

    def forget_everything(self) -> None:
        """Lose every key, as a Redis restarted without its data."""
        self.space.forget_everything()

    @served
    def ping(self) -> None:
        return None

    def answer(self) -> None:
        self.space.answer()

    @property
    def mu(self) -> Any:
        return self.space.mu


__all__ = [
    "THRESHOLDS",
    "ManualClock",
    "MemoryBulkPreviews",
    "MemoryCoordinationStore",
    "MemoryLiveness",
    "MemoryLocks",
    "MemoryRedis",
    "MemorySchedulerTicks",
    "MemoryStartBarriers",
    "MemoryStopSignals",
    "MemorySubscription",
    "MemoryTokenLock",
]
