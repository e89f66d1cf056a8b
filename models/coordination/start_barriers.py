"""Start barriers: what keeps a match from being started twice or forever (REDIS_URL).

The pending key (a start is queued or running), the failed-attempt count and its exhausted flag,
and the per-message mark that lets a start message run once (revoked or consumed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from models.coordination._redis import DELETE_IF_TOKEN, RedisConcern, translated

# KEYS: pending keys; ARGV[1]: ttl in seconds. Returns 1 where SET NX succeeded.
_CLAIM_MANY = """
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('set', key, '1', 'NX', 'EX', ARGV[1]) then out[i] = 1 else out[i] = 0 end
end
return out
"""

# KEYS[1]: the pending key, KEYS[2]: the start lock key: the pending key goes only while no start
# holds the lock (one step, so a start taking the lock meanwhile keeps its pending key).
_CLEAR_PENDING_UNLESS_STARTED = """
if redis.call('exists', KEYS[2]) == 1 then
  return 0
end
return redis.call('del', KEYS[1])
"""


@dataclass(eq=False, repr=False)
class StartBarriers(RedisConcern):
    """Pending keys, failed attempts, exhausted flags and start messages' once-only marks."""

    # -- pending start -------------------------------------------------------------

    @translated
    def claim_pending(self, match_id: object) -> bool:
        """SET NX the pending key; False when a start is already queued or running."""
        ttl = int(self.active_max_age_seconds)
        return bool(self.client.set(self.pending_key(match_id), "1", nx=True, ex=ttl))

    @translated
    def claim_pending_many(self, match_ids: Sequence[str]) -> list[bool]:
        """SET NX the pending key of every match in one script call; True where this call claimed it."""
        if not match_ids:
            return []
        keys = [self.pending_key(m) for m in match_ids]
        return [
            bool(x) for x in self._script(_CLAIM_MANY)(keys=keys, args=[int(self.active_max_age_seconds)])
        ]

    @translated
    def clear_pending(self, *match_ids: object) -> None:
        """Delete the pending keys of ``match_ids`` (one command)."""
        if match_ids:
            self.client.delete(*(self.pending_key(m) for m in match_ids))

    @translated
    def clear_pending_unless_started(self, match_id: object) -> bool:
        """Delete the pending key of ``match_id`` unless its start lock is held (one script call);
        True when a key was deleted."""
        keys = [self.pending_key(match_id), self.start_lock_key(match_id)]
        return bool(self._script(_CLEAR_PENDING_UNLESS_STARTED)(keys=keys))

    @translated
    def is_pending(self, match_id: object) -> bool:
        return bool(self.client.exists(self.pending_key(match_id)))

    @translated
    def pending_match_ids(self) -> list[str]:
        """Every match with a pending key (SCAN)."""
        return self._ids_of(self.pending_key)

    @translated
    def pending_without_lock(self, match_ids: Iterable[str] | None = None) -> list[str]:
        """Matches with a pending key but no start lock; ``None``: every pending key (SCAN)."""
        ids = self.pending_match_ids() if match_ids is None else [str(m) for m in match_ids]
        answers = self._read_each(ids, ("exists", self.pending_key), ("exists", self.start_lock_key))
        return [mid for mid, (pending, locked) in zip(ids, answers, strict=True) if pending and not locked]

    # -- attempts ------------------------------------------------------------------

    @translated
    def record_failed_attempt(self, match_id: object) -> int:
        """Count one failed start; set the exhausted flag at the cap. Return the count."""
        ttl = int(self.attempts_ttl_seconds)
        pipe = self.client.pipeline()
        pipe.incr(self.attempts_key(match_id))
        pipe.expire(self.attempts_key(match_id), ttl)
        count = int(pipe.execute()[0])
        if count >= self.attempt_cap:
            self.client.set(self.exhausted_key(match_id), str(count), ex=ttl)
        return count

    @translated
    def attempts(self, match_id: object) -> int:
        raw = self.client.get(self.attempts_key(match_id))
        return int(raw) if raw else 0

    @translated
    def is_exhausted(self, match_id: object) -> bool:
        return bool(self.client.exists(self.exhausted_key(match_id)))

    @translated
    def exhausted_among(self, match_ids: Iterable[object]) -> set[str]:
        """Return the ids (as strings) whose exhausted flag is set, in one round trip (MGET)."""
        return self._set_among(self.exhausted_key, match_ids)

    @translated
    def counters(self, match_ids: Sequence[str]) -> list[tuple[int, bool, bool]]:
        """``(attempts, exhausted, pending)`` per match, in one pipelined round trip (an MGET per key
        family: three replies however many matches, where a command per key cost the board's reading
        of 5,000 matches half a second of parsing)."""
        if not match_ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key_of in (self.attempts_key, self.exhausted_key, self.pending_key):
            pipe.mget([key_of(mid) for mid in match_ids])
        counts, exhausted, pending = pipe.execute()
        return [
            (int(count) if count else 0, flag is not None, held is not None)
            for count, flag, held in zip(counts, exhausted, pending, strict=True)
        ]

    @translated
    def matches_with_keys(self) -> set[str]:
        """Match ids that have a pending, attempts, exhausted or stop-flag key (SCAN per key family)."""
        return {match_id for key_of in self.match_key_families for match_id in self._ids_of(key_of)}

    # -- revoked and consumed start messages ---------------------------------------------

    @translated
    def revoke_message(self, message_id: str) -> None:
        """Mark a queued start message as revoked: the start checks it and does nothing."""
        self.client.set(self.revoked_key(message_id), "1", ex=int(self.active_max_age_seconds))

    @translated
    def is_revoked(self, message_id: str) -> bool:
        return bool(self.client.exists(self.revoked_key(message_id)))

    @translated
    def consume_message(self, message_id: str) -> bool:
        """Mark a start message as used (SET NX on its revoked key); False if revoked or used before.

        A start runs once per message id: a message Dramatiq re-delivers after a worker died, or
        one an operator stop revoked, finds the key set and does nothing.
        """
        ttl = int(self.active_max_age_seconds)
        return bool(self.client.set(self.revoked_key(message_id), "used", nx=True, ex=ttl))

    @translated
    def unconsume_message(self, message_id: str) -> bool:
        """Undo ``consume_message`` (a start that did nothing gives its message back to be run again);
        a revoked message stays revoked. True if the mark was removed."""
        return bool(self._script(DELETE_IF_TOKEN)(keys=[self.revoked_key(message_id)], args=["used"]))

    @translated
    def consumed_among(self, message_ids: Sequence[str]) -> set[str]:
        """Which of ``message_ids`` were consumed or revoked (one MGET)."""
        return self._set_among(self.revoked_key, message_ids)

    # -- clearing --------------------------------------------------------------------

    @translated
    def retake_for_forced_start(self, match_id: object) -> None:
        """Delete attempts and exhausted and take the pending key again (one transaction).

        A forced start clears the start barriers, then holds the pending key while it runs like
        any start, so neither dispatch nor a plain start enqueues the match meanwhile.
        """
        pipe = self.client.pipeline()
        pipe.delete(self.attempts_key(match_id), self.exhausted_key(match_id))
        pipe.set(self.pending_key(match_id), "1", ex=int(self.active_max_age_seconds))
        pipe.execute()

    @translated
    def clear_start_barriers(self, match_id: object) -> None:
        """Delete pending, attempts and exhausted; the start lock is left to its holder."""
        self.client.delete(
            self.pending_key(match_id), self.attempts_key(match_id), self.exhausted_key(match_id)
        )
