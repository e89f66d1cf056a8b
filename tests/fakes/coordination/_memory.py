"""The in-memory key space every fake concern store shares, and their base (``MemoryConcern``).

``MemoryRedis`` keeps every key in a dict with its expiry, read against an injectable clock
(``ManualClock`` in tests: time moves only when told), with Redis's semantics (an expired key is
gone; ``EX`` whole seconds, ``PX`` milliseconds are the callers' rounding). ``served`` is the fake's
side of ``models.coordination._redis.translated``: RedisUnavailable while the space is ``down``.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from config.errors import RedisUnavailable
from models.coordination import CoordinationKeys, CoordinationThresholds

if TYPE_CHECKING:
    from tests.fakes.coordination.locks import MemoryLiveness
    from tests.fakes.coordination.stop_signals import MemorySubscription

P = ParamSpec("P")
R = TypeVar("R")


class ManualClock:
    """Seconds that move only when told (``advance``); starts at a plausible Unix time."""

    def __init__(self, start: float = 1_716_314_400.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


@dataclass(eq=False)
class MemoryRedis:
    """The key space of one fake Redis: keys with their expiry, its pub/sub subscribers and held
    liveness signals; ``down``: every call raises RedisUnavailable (a Redis that does not answer)."""

    url: str = "memory://"
    clock: Callable[[], float] = time.time
    down: bool = False
    mu: threading.RLock = field(default_factory=threading.RLock, repr=False)
    subscriptions: list[MemorySubscription] = field(default_factory=list, repr=False)
    signals: list[MemoryLiveness] = field(default_factory=list, repr=False)
    _data: dict[str, tuple[str, float | None]] = field(default_factory=dict, repr=False)

    def answer(self) -> None:
        """Raise RedisUnavailable (naming REDIS_URL) while the store is ``down``."""
        if self.down:
            raise RedisUnavailable(
                service="Redis", setting="REDIS_URL", address=self.url, reason="the fake store is down"
            )

    def _live(self, key: str) -> tuple[str, float | None] | None:
        entry = self._data.get(key)
        if entry is not None and entry[1] is not None and entry[1] <= self.clock():
            del self._data[key]
            return None
        return entry

    def _value(self, key: str) -> str | None:
        with self.mu:
            entry = self._live(key)
            return None if entry is None else entry[0]

    def _set(self, key: str, value: str, *, ttl: float | None, nx: bool = False) -> bool:
        with self.mu:
            if nx and self._live(key) is not None:
                return False
            self._data[key] = (value, None if ttl is None else self.clock() + ttl)
            return True

    def _delete(self, *keys: str) -> None:
        with self.mu:
            for key in keys:
                self._data.pop(key, None)

    def _expire(self, key: str, ttl: float) -> bool:
        entry = self._live(key)
        if entry is None:
            return False
        self._data[key] = (entry[0], self.clock() + ttl)
        return True

    def _compare_and(
        self, key: str, token: str, *, expire: float | None = None, delete: bool = False
    ) -> bool:
        with self.mu:
            if self._value(key) != token:
                return False
            if delete:
                del self._data[key]
            elif expire is not None:
                self._expire(key, expire)
            return True

    def _keys(self, start: str) -> list[str]:
        return [k for k in list(self._data) if k.startswith(start) and self._live(k) is not None]

    def ttl(self, key: str) -> float | None:
        """Seconds ``key`` has left; None when it has no TTL or does not exist."""
        with self.mu:
            entry = self._live(key)
            return None if entry is None or entry[1] is None else entry[1] - self.clock()

    def forget_everything(self) -> None:
        """Lose every key, as a Redis restarted without its data."""
        with self.mu:
            self._data.clear()


def served(fn: Callable[P, R]) -> Callable[P, R]:
    """A store call: RedisUnavailable while the key space is ``down``; one call at a time."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        store: MemoryConcern = args[0]  # type: ignore[assignment]
        store.answer()
        with store.mu:
            return fn(*args, **kwargs)

    return wrapper


@dataclass(eq=False, repr=False)
class MemoryConcern(CoordinationKeys, CoordinationThresholds):
    """One fake concern store: its key prefix and thresholds, on a key space shared with the others."""

    space: MemoryRedis
    prefix: str = "kickoff:"

    @property
    def url(self) -> str:
        return self.space.url

    @property
    def mu(self) -> threading.RLock:
        return self.space.mu

    def clock(self) -> float:
        return self.space.clock()

    def answer(self) -> None:
        self.space.answer()

    def _live(self, key: str) -> tuple[str, float | None] | None:
        return self.space._live(key)

    def _value(self, key: str) -> str | None:
        return self.space._value(key)

    def _set(self, key: str, value: str, *, ttl: float | None, nx: bool = False) -> bool:
        return self.space._set(key, value, ttl=ttl, nx=nx)

    def _delete(self, *keys: str) -> None:
        self.space._delete(*keys)

    def _expire(self, key: str, ttl: float) -> bool:
        return self.space._expire(key, ttl)

    def _compare_and(
        self, key: str, token: str, *, expire: float | None = None, delete: bool = False
    ) -> bool:
        return self.space._compare_and(key, token, expire=expire, delete=delete)

    def _keys(self, start: str) -> list[str]:
        return self.space._keys(start)

    def _ids_of(self, key_of: Callable[[object], str]) -> list[str]:
        start = key_of("")
        found = []
        for key in self._keys(start):
            with contextlib.suppress(ValueError):
                found.append(str(uuid.UUID(key[len(start) :])))
        return found

    def _set_among(self, key_of: Callable[[object], str], ids: Iterable[object]) -> set[str]:
        return {str(i) for i in ids if self._live(key_of(str(i))) is not None}
