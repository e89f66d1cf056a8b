"""Start-lock operations for many listeners at once: extend all in one call, delete a dead holder's lock.

The per-match start lock (models.barriers ``Barriers.start_lock``) holds the run's token (the
lifecycle row id). These compare-and-set scripts never touch a key whose token differs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

import redis

from config.errors import RedisUnavailable
from config.settings import mask_url
from models.barriers import Barriers

P = ParamSpec("P")
T = TypeVar("T")

# KEYS: lock keys; ARGV[1]: ttl in ms, ARGV[1 + i]: token expected in KEYS[i]. Per key: 1 extended,
# 2 the key was missing and is taken again with the token (Redis restarted empty), 0 another
# token holds it.
_EXTEND_MANY = """
local ttl = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('get', key)
  if holder == ARGV[i + 1] then
    redis.call('pexpire', key, ttl)
    out[i] = 1
  elseif not holder then
    redis.call('set', key, ARGV[i + 1], 'PX', ttl)
    out[i] = 2
  else
    out[i] = 0
  end
end
return out
"""

# KEYS: pending keys; ARGV[1]: ttl in seconds. Returns 1 where SET NX succeeded.
_CLAIM_MANY = """
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('set', key, '1', 'NX', 'EX', ARGV[1]) then out[i] = 1 else out[i] = 0 end
end
return out
"""

# KEYS[1]: lock key; ARGV[1]: token of the (dead) holder.
_DELETE_IF_TOKEN = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def _redis_errors(fn: Callable[P, T]) -> Callable[P, T]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        barriers = kwargs.get("barriers") or args[0]
        try:
            return fn(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise RedisUnavailable(
                service="Redis",
                setting="REDIS_URL",
                address=mask_url(barriers.url),  # type: ignore[union-attr]
                reason=str(exc) or type(exc).__name__,
            ) from exc

    return wrapper


@_redis_errors
def extend_start_locks(
    barriers: Barriers, holders: Sequence[tuple[str, str]], *, ttl_seconds: float
) -> list[bool]:
    """Extend the start locks of ``(match_id, token)`` pairs in one round trip.

    Returns, per pair, whether the lock now holds that token. A missing key is taken again:
    it can only be missing while its holder still beats in time if Redis lost its data (an
    expired or deleted lock means the holder's deadline passed, or its row was closed, and the
    caller stops such a run before or right after this call); a key held by another token
    is never touched.
    """
    if not holders:
        return []
    keys = [barriers.start_lock_key(match_id) for match_id, _ in holders]
    args = [int(ttl_seconds * 1000), *(token for _, token in holders)]
    result = barriers.client.eval(_EXTEND_MANY, len(keys), *keys, *args)
    return [bool(x) for x in result]


@_redis_errors
def delete_start_lock_if_token(barriers: Barriers, match_id: str, token: str) -> bool:
    """Delete a match's start lock only if ``token`` (a dead run's row id) still holds it."""
    return bool(barriers.client.eval(_DELETE_IF_TOKEN, 1, barriers.start_lock_key(match_id), token))


@_redis_errors
def start_lock_holder(barriers: Barriers, match_id: str) -> str | None:
    """The token holding a match's start lock, or None when it is free."""
    raw = barriers.client.get(barriers.start_lock_key(match_id))
    return raw.decode() if isinstance(raw, bytes) else raw


@_redis_errors
def claim_pending_many(barriers: Barriers, match_ids: Sequence[str]) -> list[bool]:
    """SET NX the pending key of every match in one script call; True where this call claimed it."""
    if not match_ids:
        return []
    ttl = int(barriers.active_max_age_seconds)
    keys = [barriers.pending_key(m) for m in match_ids]
    return [bool(x) for x in barriers.client.eval(_CLAIM_MANY, len(keys), *keys, ttl)]


@_redis_errors
def exhausted_among(barriers: Barriers, match_ids: Sequence[str]) -> set[str]:
    """The ids whose exhausted flag is set (one MGET)."""
    if not match_ids:
        return set()
    values = barriers.client.mget([barriers.exhausted_key(m) for m in match_ids])
    return {m for m, v in zip(match_ids, values, strict=True) if v is not None}


@_redis_errors
def clear_pending_many(barriers: Barriers, match_ids: Sequence[str]) -> None:
    """Delete the pending keys of ``match_ids`` (one command)."""
    if match_ids:
        barriers.client.delete(*(barriers.pending_key(m) for m in match_ids))


@_redis_errors
def consume_message(barriers: Barriers, message_id: str) -> bool:
    """Mark a start message as used (SET NX on its revoked key); False if revoked or used before.

    A start runs once per message id: a message Dramatiq re-delivers after a worker died, or
    one an operator stop revoked, finds the key set and does nothing.
    """
    ttl = int(barriers.active_max_age_seconds)
    return bool(barriers.client.set(barriers.revoked_key(message_id), "used", nx=True, ex=ttl))
