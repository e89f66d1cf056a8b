"""``models.coordination.StartBarriers`` in memory: pending keys, attempts, start messages' marks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tests.fakes.coordination._memory import MemoryConcern, served


@dataclass(eq=False, repr=False)
class MemoryStartBarriers(MemoryConcern):
    """The start barriers of the fake store."""

    @served
    def claim_pending(self, match_id: object) -> bool:
        return self._set(self.pending_key(match_id), "1", ttl=int(self.active_max_age_seconds), nx=True)

    @served
    def claim_pending_many(self, match_ids: Sequence[str]) -> list[bool]:
        ttl = int(self.active_max_age_seconds)
        return [self._set(self.pending_key(m), "1", ttl=ttl, nx=True) for m in match_ids]

    @served
    def clear_pending(self, *match_ids: object) -> None:
        self._delete(*(self.pending_key(m) for m in match_ids))

    @served
    def clear_pending_unless_started(self, match_id: object) -> bool:
        if self._live(self.start_lock_key(match_id)) is not None:
            return False
        had = self._live(self.pending_key(match_id)) is not None
        self._delete(self.pending_key(match_id))
        return had

    @served
    def is_pending(self, match_id: object) -> bool:
        return self._live(self.pending_key(match_id)) is not None

    @served
    def pending_match_ids(self) -> list[str]:
        return self._ids_of(self.pending_key)

    @served
    def pending_without_lock(self, match_ids: Iterable[str] | None = None) -> list[str]:
        ids = self._ids_of(self.pending_key) if match_ids is None else [str(m) for m in match_ids]
        return [
            m
            for m in ids
            if self._live(self.pending_key(m)) is not None and self._live(self.start_lock_key(m)) is None
        ]

    # -- attempts --------------------------------------------------------------------

    @served
    def record_failed_attempt(self, match_id: object) -> int:
        ttl = int(self.attempts_ttl_seconds)
        count = int(self._value(self.attempts_key(match_id)) or 0) + 1
        self._set(self.attempts_key(match_id), str(count), ttl=ttl)
        if count >= self.attempt_cap:
            self._set(self.exhausted_key(match_id), str(count), ttl=ttl)
        return count

    @served
    def attempts(self, match_id: object) -> int:
        return int(self._value(self.attempts_key(match_id)) or 0)

    @served
    def is_exhausted(self, match_id: object) -> bool:
        return self._live(self.exhausted_key(match_id)) is not None

    @served
    def exhausted_among(self, match_ids: Iterable[object]) -> set[str]:
        return self._set_among(self.exhausted_key, match_ids)

    @served
    def counters(self, match_ids: Sequence[str]) -> list[tuple[int, bool, bool]]:
        return [
            (
                int(self._value(self.attempts_key(m)) or 0),
                self._live(self.exhausted_key(m)) is not None,
                self._live(self.pending_key(m)) is not None,
            )
            for m in match_ids
        ]

    @served
    def matches_with_keys(self) -> set[str]:
        return {match_id for key_of in self.match_key_families for match_id in self._ids_of(key_of)}

    @served
    def revoke_message(self, message_id: str) -> None:
        self._set(self.revoked_key(message_id), "1", ttl=int(self.active_max_age_seconds))

    @served
    def is_revoked(self, message_id: str) -> bool:
        return self._live(self.revoked_key(message_id)) is not None

    @served
    def consume_message(self, message_id: str) -> bool:
        return self._set(self.revoked_key(message_id), "used", ttl=int(self.active_max_age_seconds), nx=True)

    @served
    def unconsume_message(self, message_id: str) -> bool:
        return self._compare_and(self.revoked_key(message_id), "used", delete=True)

    @served
    def consumed_among(self, message_ids: Sequence[str]) -> set[str]:
        return self._set_among(self.revoked_key, message_ids)

    @served
    def retake_for_forced_start(self, match_id: object) -> None:
        self._delete(self.attempts_key(match_id), self.exhausted_key(match_id))
        self._set(self.pending_key(match_id), "1", ttl=int(self.active_max_age_seconds))

    @served
    def clear_start_barriers(self, match_id: object) -> None:
        self._delete(self.pending_key(match_id), self.attempts_key(match_id), self.exhausted_key(match_id))
