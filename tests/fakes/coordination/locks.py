"""``models.coordination.Locks`` in memory: token locks, worker leases, liveness signals, degraded flags."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from config.errors import LockNotOwned, RedisUnavailable
from models.coordination import (
    DISPATCH_LOCK,
    SWEEP_LOCK,
    GivenBackRow,
    LeaseJudgement,
    Locks,
    TokenLockContext,
)
from models.coordination.locks import GIVEN_BACK_CLOSED
from tests.fakes.coordination._memory import MemoryConcern, MemoryRedis, served


class MemoryTokenLock(TokenLockContext):
    """``models.coordination.TokenLock`` on the fake store: token-safe, non-blocking, with a TTL."""

    def __init__(self, store: MemoryConcern, key: str, *, ttl_seconds: float) -> None:
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


class MemoryLiveness:
    """A held liveness signal of the fake store (``liveness_subscription``); ``kill()`` drops it as a
    server's CLIENT KILL would (the next ``hold_liveness`` raises RedisUnavailable)."""

    def __init__(self, store: MemoryRedis, lease_id: str) -> None:
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


@dataclass(eq=False, repr=False)
class MemoryLocks(MemoryConcern):
    """The locks and worker leases of the fake store."""

    def start_lock(self, match_id: object) -> MemoryTokenLock:
        return MemoryTokenLock(self, self.start_lock_key(match_id), ttl_seconds=self.stale_seconds)

    @served
    def start_lock_holder(self, match_id: object) -> str | None:
        return self._value(self.start_lock_key(match_id))

    @served
    def start_lock_holders(self, match_ids: Sequence[str]) -> dict[str, str]:
        held = {str(m): self._value(self.start_lock_key(m)) for m in match_ids}
        return {m: token for m, token in held.items() if token is not None}

    def dispatch_lock(self) -> MemoryTokenLock:
        return MemoryTokenLock(self, self.prefix + DISPATCH_LOCK, ttl_seconds=self.coordination_lock_seconds)

    def sweep_lock(self) -> MemoryTokenLock:
        return MemoryTokenLock(self, self.prefix + SWEEP_LOCK, ttl_seconds=self.coordination_lock_seconds)

    @served
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

    @served
    def delete_start_lock_if_token(self, match_id: object, token: str) -> bool:
        return self._compare_and(self.start_lock_key(match_id), token, delete=True)

    @served
    def release_fenced_start_lock(self, match_id: object, token: str, lease_id: str) -> bool:
        with self.mu:
            if self._value(self.start_lock_key(match_id)) != token:
                return False
            if self._live(self.worker_lease_key(lease_id)) is not None:
                return False
            self._delete(self.start_lock_key(match_id), self.pending_key(match_id))
            return True

    # the hash of a lease's taken starts as one key per match: ``{starts_taken_key}|{match id}``
    @served
    def note_start_taken(self, lease_id: str, match_id: object, token: str, *, ttl_seconds: float) -> None:
        base = self.starts_taken_key(lease_id)
        self._set(f"{base}|{match_id}", token, ttl=ttl_seconds)
        for key in self._keys(f"{base}|"):
            self._expire(key, ttl_seconds)
        self._set(f"{self.listener_leases_index}|{lease_id}", "1", ttl=None)

    # the set of leases to judge as one key per lease: ``{listener_leases_index}|{lease id}``
    @served
    def leases_to_judge(self) -> list[str]:
        return sorted(key.rsplit("|", 1)[1] for key in self._keys(f"{self.listener_leases_index}|"))

    @served
    def forget_start_taken(self, lease_id: str, match_id: object) -> None:
        self._delete(f"{self.starts_taken_key(lease_id)}|{match_id}")

    @served
    def release_starts_taken(self, lease_ids: Iterable[str]) -> list[str]:
        released = []
        with self.mu:
            for lease_id in sorted(set(lease_ids)):
                for key in sorted(self._keys(f"{self.starts_taken_key(lease_id)}|")):
                    match = key.rsplit("|", 1)[1]
                    if self._value(self.start_lock_key(match)) == self._value(key):
                        self._delete(self.start_lock_key(match), self.pending_key(match))
                        released.append(match)
                    self._delete(key)
                self._delete(f"{self.listener_leases_index}|{lease_id}")
        return released

    @served
    def claim_orphan_restarts(self, match_ids: Sequence[str], *, every_seconds: float) -> list[str]:
        out = []
        for m in (str(m) for m in match_ids):
            if self._live(self.start_lock_key(m)) is not None or self._live(self.pending_key(m)) is not None:
                continue
            if self._set(self.orphan_restart_key(m), "1", ttl=max(1, int(every_seconds)), nx=True):
                out.append(m)
        return out

    @served
    def flag_degraded_runs(
        self, degraded: Sequence[str], recovered: Sequence[str], *, ttl_seconds: float
    ) -> None:
        for record_id in degraded:
            self._set(self.degraded_key(record_id), "1", ttl=max(1, int(ttl_seconds * 1000)) / 1000)
        self._delete(*(self.degraded_key(r) for r in recovered))

    @served
    def degraded_runs(self, record_ids: Iterable[str]) -> set[str]:
        return self._set_among(self.degraded_key, record_ids)

    # -- runs given back with their row left open -------------------------------------------

    @served
    def give_back_row(self, run: GivenBackRow, *, ttl_seconds: float) -> bool:
        key = self.given_back_key(run.record_id)
        self._set(key, run.encoded(), ttl=max(1, int(ttl_seconds * 1000)) / 1000, nx=True)
        return self._value(key) == GIVEN_BACK_CLOSED

    @served
    def given_back_rows(self) -> list[GivenBackRow]:
        start = self.given_back_key("")
        marks = {k[len(start) :]: self._value(k) for k in self._keys(start)}
        return [
            GivenBackRow.decoded(record_id, value)
            for record_id, value in sorted(marks.items())
            if value is not None and value != GIVEN_BACK_CLOSED
        ]

    @served
    def settle_given_back_row(self, record_id: str) -> None:
        key = self.given_back_key(record_id)
        with self.mu:
            entry = self._live(key)
            if entry is not None:
                self.space._data[key] = (GIVEN_BACK_CLOSED, entry[1])

    @served
    def forget_given_back_row(self, record_id: str) -> None:
        self._delete(self.given_back_key(record_id))

    # -- worker leases ---------------------------------------------------------------------

    @served
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

    @served
    def judge_worker_leases(
        self, lease_ids: Iterable[str], *, grace_seconds: float, ttl_seconds: float
    ) -> LeaseJudgement:
        now_ms = int(self.clock() * 1000)
        states: dict[str, int] = {}
        with self.mu:
            held = {signal.lease_id for signal in self.space.signals}
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

    @served
    def liveness_subscription(self, lease_id: str, *, index: int = 0) -> MemoryLiveness:
        signal = MemoryLiveness(self.space, lease_id)
        with self.mu:
            self.space.signals.append(signal)
        self._set(f"{self.listener_leases_index}|{lease_id}", "1", ttl=None)
        return signal

    @staticmethod
    def liveness_client_name(lease_id: str, index: int = 0) -> str:
        return Locks.liveness_client_name(lease_id, index)

    def hold_liveness(self, pubsub: MemoryLiveness, *, timeout: float) -> None:
        self.answer()
        if pubsub.closed:
            raise RedisUnavailable(
                service="Redis", setting="REDIS_URL", address=self.url, reason="liveness connection dropped"
            )
        time.sleep(min(timeout, 0.01))

    @served
    def live_worker_leases(self, lease_ids: Iterable[str]) -> tuple[set[str], float | None]:
        alive = {i for i in set(lease_ids) if self._live(self.worker_lease_key(i)) is not None}
        epoch = self._value(self.epoch_key)
        if epoch is None:
            return alive, None
        return alive, float(int(self.clock())) - float(epoch.rsplit(":", 1)[1])
