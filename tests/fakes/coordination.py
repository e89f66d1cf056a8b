"""An in-memory coordination store: the public methods of ``models.coordination.CoordinationStore``, no Redis.

``MemoryCoordinationStore`` keeps every key in a dict with its expiry, read against an injectable clock
(``ManualClock`` in tests: time moves only when told), so a test of the lifecycle's decisions
(leases, stop watches, dispatch's claims) runs without Redis and can let hours pass at once.

Same key names, values, TTL rounding (``EX`` whole seconds, ``PX`` milliseconds) and answers as
the real store; ``tests/foundation/test_coordination_contract.py`` runs one set of tests against both,
so the fake cannot drift. It is never a proof of Redis's own behaviour (Lua scripts, pipelines,
connection errors): the real store's tests stay that.

Test-only levers: ``down`` (every call raises RedisUnavailable, as a Redis that does not answer),
``forget_everything()`` (Redis restarted empty), ``ttl(key)`` (seconds left, None without one).
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from config.errors import LockNotOwned, RedisUnavailable
from models.coordination import (
    DISPATCH_LOCK,
    SWEEP_LOCK,
    CoordinationKeys,
    CoordinationStore,
    CoordinationThresholds,
    LeaseJudgement,
    TokenLockContext,
    connect_redis,
    tick_slot,
)

P = ParamSpec("P")
R = TypeVar("R")

#: The thresholds a store is built with (the fields of ``CoordinationThresholds``).
THRESHOLDS = tuple(f.name for f in fields(CoordinationThresholds))


class ManualClock:
    """Seconds that move only when told (``advance``); starts at a plausible Unix time."""

    def __init__(self, start: float = 1_716_314_400.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def _served(fn: Callable[P, R]) -> Callable[P, R]:
    """A store call: RedisUnavailable while the store is ``down``; one call at a time."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        store: MemoryCoordinationStore = args[0]  # type: ignore[assignment]
        store.answer()
        with store.mu:
            return fn(*args, **kwargs)

    return wrapper


class MemoryTokenLock(TokenLockContext):
    """``models.coordination.TokenLock`` on the fake store: token-safe, non-blocking, with a TTL."""

    def __init__(self, store: MemoryCoordinationStore, key: str, *, ttl_seconds: float) -> None:
        self.store = store
        self.key = key
        self.url = store.url
        self.ttl_seconds = ttl_seconds
        self._token: str | None = None

    @property
    def token(self) -> str | None:
        return self._token

    def acquire(self, token: str | None = None) -> bool:
        self.store.answer()
        token = token if token is not None else uuid.uuid1().hex
        if self.store._set(self.key, token, ttl=self.ttl_seconds, nx=True):
            self._token = token
            return True
        return False

    def adopt(self, token: str) -> MemoryTokenLock:
        self._token = token
        return self

    def extend(self) -> None:
        self.store.answer()
        if self._token is None:
            raise LockNotOwned("Cannot extend an unlocked lock")
        if not self.store._compare_and(self.key, self._token, expire=self.ttl_seconds):
            raise LockNotOwned("Cannot extend a lock that's no longer owned")

    def release(self) -> None:
        self.store.answer()
        if self._token is None:
            raise LockNotOwned("Cannot release an unlocked lock")
        token, self._token = self._token, None
        if not self.store._compare_and(self.key, token, delete=True):
            raise LockNotOwned("Cannot release a lock that's no longer owned")

    def owned(self) -> bool:
        self.store.answer()
        return self._token is not None and self.store._value(self.key) == self._token

    def locked(self) -> bool:
        self.store.answer()
        return self.store._value(self.key) is not None


class MemorySubscription:
    """A subscription to the fake store's stop channel (``stop_subscription``)."""

    def __init__(self, store: MemoryCoordinationStore) -> None:
        self.store = store
        self.messages: queue.Queue[str] = queue.Queue()
        self.closed = False

    def close(self) -> None:
        self.closed = True
        with self.store.mu:
            if self in self.store.subscriptions:
                self.store.subscriptions.remove(self)


class MemoryLiveness:
    """A held liveness signal of the fake store (``liveness_subscription``); ``kill()`` drops it as a
    server's CLIENT KILL would (the next ``hold_liveness`` raises RedisUnavailable)."""

    def __init__(self, store: MemoryCoordinationStore, lease_id: str) -> None:
        self.store = store
        self.lease_id = lease_id
        self.closed = False

    def kill(self) -> None:
        self.close()

    def close(self) -> None:
        with self.store.mu:
            if not self.closed:
                self.closed = True
                self.store.signals.remove(self)


@dataclass(eq=False)
class MemoryCoordinationStore(CoordinationKeys, CoordinationThresholds):
    """The coordination store in memory; see the module docstring. The thresholds
    (``CoordinationThresholds``) are keyword-only, as the real store's."""

    prefix: str = "kickoff:"
    url: str = "memory://"
    clock: Callable[[], float] = time.time
    down: bool = False  # every call raises RedisUnavailable (a Redis that does not answer)
    mu: threading.RLock = field(default_factory=threading.RLock, repr=False)
    subscriptions: list[MemorySubscription] = field(default_factory=list, repr=False)
    signals: list[MemoryLiveness] = field(default_factory=list, repr=False)
    _data: dict[str, tuple[str, float | None]] = field(default_factory=dict, repr=False)

    @classmethod
    def from_settings(
        cls, settings: Any, *, clock: Callable[[], float] = time.time
    ) -> MemoryCoordinationStore:
        """Like ``CoordinationStore.from_settings`` (the same thresholds; its client never connects)."""
        real = CoordinationStore.from_settings(settings, client=connect_redis(settings.redis_url))
        thresholds = {name: getattr(real, name) for name in THRESHOLDS}
        return cls(prefix=real.prefix, url=real.url, clock=clock, **thresholds)

    def answer(self) -> None:
        """Raise RedisUnavailable (naming REDIS_URL) while the store is ``down``."""
        if self.down:
            raise RedisUnavailable(
                service="Redis", setting="REDIS_URL", address=self.url, reason="the fake store is down"
            )

    # -- the key space (Redis semantics: an expired key is gone) ----------------------

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

    def _ids_of(self, key_of: Callable[[object], str]) -> list[str]:
        start = key_of("")
        found = []
        for key in self._keys(start):
            with contextlib.suppress(ValueError):
                found.append(str(uuid.UUID(key[len(start) :])))
        return found

    def _set_among(self, key_of: Callable[[object], str], ids: Iterable[object]) -> set[str]:
        return {str(i) for i in ids if self._live(key_of(str(i))) is not None}

    # -- ping and pending starts ---------------------------------------------------------

    @_served
    def ping(self) -> None:
        return None

    @_served
    def claim_pending(self, match_id: object) -> bool:
        return self._set(self.pending_key(match_id), "1", ttl=int(self.active_max_age_seconds), nx=True)

    @_served
    def claim_pending_many(self, match_ids: Sequence[str]) -> list[bool]:
        ttl = int(self.active_max_age_seconds)
        return [self._set(self.pending_key(m), "1", ttl=ttl, nx=True) for m in match_ids]

    @_served
    def clear_pending(self, *match_ids: object) -> None:
        self._delete(*(self.pending_key(m) for m in match_ids))

    @_served
    def clear_pending_unless_started(self, match_id: object) -> bool:
        if self._live(self.start_lock_key(match_id)) is not None:
            return False
        had = self._live(self.pending_key(match_id)) is not None
        self._delete(self.pending_key(match_id))
        return had

    @_served
    def is_pending(self, match_id: object) -> bool:
        return self._live(self.pending_key(match_id)) is not None

    @_served
    def pending_match_ids(self) -> list[str]:
        return self._ids_of(self.pending_key)

    @_served
    def pending_without_lock(self, match_ids: Iterable[str] | None = None) -> list[str]:
        ids = self._ids_of(self.pending_key) if match_ids is None else [str(m) for m in match_ids]
        return [
            m
            for m in ids
            if self._live(self.pending_key(m)) is not None and self._live(self.start_lock_key(m)) is None
        ]

    # -- attempts --------------------------------------------------------------------

    @_served
    def record_failed_attempt(self, match_id: object) -> int:
        ttl = int(self.attempts_ttl_seconds)
        count = int(self._value(self.attempts_key(match_id)) or 0) + 1
        self._set(self.attempts_key(match_id), str(count), ttl=ttl)
        if count >= self.attempt_cap:
            self._set(self.exhausted_key(match_id), str(count), ttl=ttl)
        return count

    @_served
    def attempts(self, match_id: object) -> int:
        return int(self._value(self.attempts_key(match_id)) or 0)

    @_served
    def is_exhausted(self, match_id: object) -> bool:
        return self._live(self.exhausted_key(match_id)) is not None

    @_served
    def exhausted_among(self, match_ids: Iterable[object]) -> set[str]:
        return self._set_among(self.exhausted_key, match_ids)

    @_served
    def counters(self, match_ids: Sequence[str]) -> list[tuple[int, bool, bool]]:
        return [
            (
                int(self._value(self.attempts_key(m)) or 0),
                self._live(self.exhausted_key(m)) is not None,
                self._live(self.pending_key(m)) is not None,
            )
            for m in match_ids
        ]

    @_served
    def matches_with_keys(self) -> set[str]:
        return {match_id for key_of in self.match_key_families for match_id in self._ids_of(key_of)}

    # -- locks -------------------------------------------------------------------------

    def start_lock(self, match_id: object) -> MemoryTokenLock:
        return MemoryTokenLock(self, self.start_lock_key(match_id), ttl_seconds=self.stale_seconds)

    @_served
    def start_lock_holder(self, match_id: object) -> str | None:
        return self._value(self.start_lock_key(match_id))

    @_served
    def start_lock_holders(self, match_ids: Sequence[str]) -> dict[str, str]:
        held = {str(m): self._value(self.start_lock_key(m)) for m in match_ids}
        return {m: token for m, token in held.items() if token is not None}

    def dispatch_lock(self) -> MemoryTokenLock:
        return MemoryTokenLock(self, self.prefix + DISPATCH_LOCK, ttl_seconds=self.coordination_lock_seconds)

    def sweep_lock(self) -> MemoryTokenLock:
        return MemoryTokenLock(self, self.prefix + SWEEP_LOCK, ttl_seconds=self.coordination_lock_seconds)

    @_served
    def extend_start_locks(self, holders: Sequence[tuple[str, str]], *, ttl_seconds: float) -> list[bool]:
        ttl = int(ttl_seconds * 1000) / 1000
        out = []
        for match_id, token in holders:
            key = self.start_lock_key(match_id)
            holder = self._value(key)
            if holder == token:
                self._expire(key, ttl)
            elif holder is None:
                self._set(key, token, ttl=ttl)
            out.append(holder in (token, None))
        return out

    @_served
    def delete_start_lock_if_token(self, match_id: object, token: str) -> bool:
        return self._compare_and(self.start_lock_key(match_id), token, delete=True)

    @_served
    def release_fenced_start_lock(self, match_id: object, token: str, lease_id: str) -> bool:
        with self.mu:
            if self._value(self.start_lock_key(match_id)) != token:
                return False
            if self._live(self.worker_lease_key(lease_id)) is not None:
                return False
            self._delete(self.start_lock_key(match_id), self.pending_key(match_id))
            return True

    @_served
    def claim_orphan_restarts(self, match_ids: Sequence[str], *, every_seconds: float) -> list[str]:
        out = []
        for m in (str(m) for m in match_ids):
            if self._live(self.start_lock_key(m)) is not None or self._live(self.pending_key(m)) is not None:
                continue
            if self._set(self.orphan_restart_key(m), "1", ttl=max(1, int(every_seconds)), nx=True):
                out.append(m)
        return out

    # -- hand-offs, stop flags, revoked messages ------------------------------------------

    @_served
    def announce_handover(self, match_id: object, *, ttl_seconds: float) -> None:
        self._set(self.handover_key(match_id), "1", ttl=max(1, int(ttl_seconds * 1000)) / 1000)

    @_served
    def handovers_ready(self, match_ids: Iterable[object]) -> set[str]:
        return self._set_among(self.handover_key, match_ids)

    @_served
    def clear_handovers(self, match_ids: Iterable[object]) -> None:
        self._delete(*(self.handover_key(m) for m in match_ids))

    @_served
    def set_stop_flag(self, match_id: object, *, ttl_seconds: float = 300.0) -> None:
        self._set(self.stop_flag_key(match_id), "1", ttl=max(1, int(ttl_seconds)))
        for subscription in self.subscriptions:
            subscription.messages.put(str(match_id))

    @_served
    def stop_subscription(self) -> MemorySubscription:
        subscription = MemorySubscription(self)
        self.subscriptions.append(subscription)
        return subscription

    def next_stop_message(self, pubsub: MemorySubscription, *, timeout: float) -> str | None:
        self.answer()
        try:
            return pubsub.messages.get(timeout=timeout)
        except queue.Empty:
            return None

    @_served
    def clear_stop_flag(self, match_id: object) -> None:
        self._delete(self.stop_flag_key(match_id))

    @_served
    def stop_flags_among(self, match_ids: Iterable[object]) -> set[str]:
        return self._set_among(self.stop_flag_key, match_ids)

    @_served
    def revoke_message(self, message_id: str) -> None:
        self._set(self.revoked_key(message_id), "1", ttl=int(self.active_max_age_seconds))

    @_served
    def is_revoked(self, message_id: str) -> bool:
        return self._live(self.revoked_key(message_id)) is not None

    @_served
    def consume_message(self, message_id: str) -> bool:
        return self._set(self.revoked_key(message_id), "used", ttl=int(self.active_max_age_seconds), nx=True)

    @_served
    def consumed_among(self, message_ids: Sequence[str]) -> set[str]:
        return self._set_among(self.revoked_key, message_ids)

    # -- worker leases ---------------------------------------------------------------------

    @_served
    def renew_worker_lease(
        self, lease_id: str, *, known_epoch: str, new_epoch_id: str, ttl_seconds: float
    ) -> tuple[int, str]:
        epoch = self._value(self.epoch_key)
        if epoch is None:
            epoch = f"{new_epoch_id}:{int(self.clock())}"
            self._set(self.epoch_key, epoch, ttl=None)
        ttl = int(ttl_seconds * 1000) / 1000
        key = self.worker_lease_key(lease_id)
        if self._expire(key, ttl):
            return 1, epoch
        if known_epoch in ("", None) or known_epoch != epoch:
            self._set(key, "s", ttl=ttl)
            return 2, epoch
        return 0, epoch

    @_served
    def judge_worker_leases(
        self, lease_ids: Iterable[str], *, grace_seconds: float, ttl_seconds: float
    ) -> LeaseJudgement:
        now_ms = int(self.clock() * 1000)
        states: dict[str, int] = {}
        with self.mu:
            held = {signal.lease_id for signal in self.signals}
            for lease_id in sorted(set(lease_ids)):
                value, lost = self._value(self.worker_lease_key(lease_id)), self.liveness_lost_key(lease_id)
                if value is None:
                    states[lease_id] = 0
                elif value != "s" or lease_id in held:
                    self._delete(lost)
                    states[lease_id] = 1
                else:
                    self._set(lost, str(now_ms), ttl=max(1, int(ttl_seconds * 1000)) / 1000, nx=True)
                    since = int(self._value(lost) or now_ms)
                    states[lease_id] = 3 if now_ms - since >= int(grace_seconds * 1000) else 2
            epoch = self._value(self.epoch_key)
        age = None if epoch is None else now_ms / 1000 - float(epoch.rsplit(":", 1)[1])
        return LeaseJudgement.of(states, epoch_age=age)

    @_served
    def liveness_subscription(self, lease_id: str) -> MemoryLiveness:
        signal = MemoryLiveness(self, lease_id)
        with self.mu:
            self.signals.append(signal)
        return signal

    @staticmethod
    def liveness_client_name(lease_id: str) -> str:
        return CoordinationStore.liveness_client_name(lease_id)

    def hold_liveness(self, pubsub: MemoryLiveness, *, timeout: float) -> None:
        self.answer()
        if pubsub.closed:
            raise RedisUnavailable(
                service="Redis", setting="REDIS_URL", address=self.url, reason="liveness connection dropped"
            )
        time.sleep(min(timeout, 0.01))

    @_served
    def live_worker_leases(self, lease_ids: Iterable[str]) -> tuple[set[str], float | None]:
        alive = {i for i in set(lease_ids) if self._live(self.worker_lease_key(i)) is not None}
        epoch = self._value(self.epoch_key)
        if epoch is None:
            return alive, None
        return alive, float(int(self.clock())) - float(epoch.rsplit(":", 1)[1])

    # -- scheduler ticks and bulk previews --------------------------------------------------

    @_served
    def claim_tick(self, entry: str, at: datetime, *, owner: str, ttl_seconds: float) -> bool:
        return self._set(self.tick_key(entry, tick_slot(at)), owner, ttl=int(ttl_seconds), nx=True)

    @_served
    def any_tick_at(self, at: datetime) -> bool:
        slot = tick_slot(at)
        return any(k.endswith(f"_{slot}") for k in self._keys(f"{self.prefix}scheduler_tick_"))

    @_served
    def newest_tick_at(self) -> datetime | None:
        slots = [k.rsplit("_", 1)[1] for k in self._keys(f"{self.prefix}scheduler_tick_")]
        newest = max(slots, default=None)
        return None if newest is None else datetime.strptime(newest, "%Y%m%dT%H%M").replace(tzinfo=UTC)

    @_served
    def save_bulk_preview(self, digest: str, payload: str, *, ttl_seconds: float) -> None:
        self._set(self.bulk_preview_key(digest), payload, ttl=max(1, int(ttl_seconds * 1000)) / 1000)

    @_served
    def peek_bulk_preview(self, digest: str) -> str | None:
        return self._value(self.bulk_preview_key(digest))

    @_served
    def take_bulk_preview(self, digest: str) -> str | None:
        value = self._value(self.bulk_preview_key(digest))
        self._delete(self.bulk_preview_key(digest))
        return value

    # -- clearing ---------------------------------------------------------------------------

    @_served
    def retake_for_forced_start(self, match_id: object) -> None:
        self._delete(self.attempts_key(match_id), self.exhausted_key(match_id))
        self._set(self.pending_key(match_id), "1", ttl=int(self.active_max_age_seconds))

    @_served
    def clear_start_barriers(self, match_id: object) -> None:
        self._delete(self.pending_key(match_id), self.attempts_key(match_id), self.exhausted_key(match_id))
