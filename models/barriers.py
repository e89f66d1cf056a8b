"""Redis barriers: every lock, pending key, counter and flag kickoff keeps in Redis (REDIS_URL).

All keys start with the configurable ``redis_key_prefix`` (default ``kickoff:``). ``{id}`` is
the internal Match.id.

=========================================  ===============  ===================================
key (after the prefix)                     TTL              purpose
=========================================  ===============  ===================================
pending_start_match_listener_{id}          stale threshold  dispatch/admin cannot double-enqueue
                                           + active age     a match; cleared when a start ends
start_match_listener_attempts_{id}         attempts TTL     failed starts (12 h)
start_match_listener_exhausted_{id}        attempts TTL     set at the attempt cap; dispatch skips
start_match_listener_{id}                  stale threshold  token lock: one starter per match,
                                                            extended by every heartbeat
dispatch_upcoming_match_listeners          60 s             token lock: one dispatch at a time
sweep_stale_match_listeners                60 s             token lock: one sweeper at a time
stop_match_listener_{id}                   stop flag TTL    operator stop: running listener exits 15
revoked_message_{message id}               active age       a queued start that must not run
listener_worker_{lease id}                 worker lease     a listener worker process is alive;
                                                            renewed every lease / 4
redis_epoch                                none             "{id}:{unix s}" written when found
                                                            missing: Redis lost its data then
=========================================  ===============  ===================================

Pub/sub channel ``listener_stops`` (after the prefix): an operator stop publishes the match id,
so a running listener stops at once; the stop-flag poll is the fallback.

Locks are token-safe (redis-py's Lock: ``SET NX PX`` with a random token; release and extend
compare the token in a Lua script), so a holder can never release or extend a lock it lost.
Redis errors are translated here into RedisUnavailable / LockNotOwned.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import redis
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock

from config.errors import LockNotOwned, RedisUnavailable
from config.settings import mask_url

P = ParamSpec("P")
R = TypeVar("R")

DISPATCH_LOCK = "dispatch_upcoming_match_listeners"
SWEEP_LOCK = "sweep_stale_match_listeners"
EPOCH_KEY = "redis_epoch"
STOP_CHANNEL = "listener_stops"

# KEYS[1]: the lease key, KEYS[2]: the epoch key. ARGV[1]: ttl ms, ARGV[2]: the epoch the caller
# last saw ('' for a new lease), ARGV[3]: a fresh epoch id. Returns {state, epoch}: state 1 the
# lease was extended, 2 it was created (a new lease, or Redis lost its data since the caller's
# last renewal), 0 it expired under an unchanged epoch (the caller was too slow: fenced).
_RENEW_LEASE = """
local epoch = redis.call('get', KEYS[2])
if not epoch then
  epoch = ARGV[3] .. ':' .. redis.call('time')[1]
  redis.call('set', KEYS[2], epoch)
end
if redis.call('pexpire', KEYS[1], ARGV[1]) == 1 then return {1, epoch} end
if ARGV[2] == '' or ARGV[2] ~= epoch then
  redis.call('set', KEYS[1], '1', 'PX', ARGV[1])
  return {2, epoch}
end
return {0, epoch}
"""


def connect_redis(url: str) -> redis.Redis:
    """Return a client for ``url`` (no connection is opened until the first command)."""
    return redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)


@contextmanager
def redis_errors(*, url: str, setting: str = "REDIS_URL", service: str = "Redis") -> Iterator[None]:
    """The one boundary of the Redis driver: a refused or timed-out command becomes RedisUnavailable.

    ``setting`` names what an operator should look at: REDIS_URL for kickoff's keys, BROKER_URL
    for Dramatiq's broker (sends, queue depths, worker heartbeats).
    """
    try:
        yield
    except (LockNotOwnedError, LockError) as exc:
        raise LockNotOwned(str(exc)) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise RedisUnavailable(
            service=service, setting=setting, address=mask_url(url), reason=str(exc) or type(exc).__name__
        ) from exc


def _translate(url_of: Callable[[Any], str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with redis_errors(url=url_of(args[0])):
                return fn(*args, **kwargs)

        return wrapper

    return decorate


_redis_errors = _translate(lambda self: self.url)


class TokenLock:
    """A token-safe lock on one key; ``token`` identifies the holder across processes."""

    def __init__(self, client: redis.Redis, key: str, *, ttl_seconds: float, url: str) -> None:
        self.key = key
        self.url = url
        self.ttl_seconds = ttl_seconds
        self._lock = Lock(client, key, timeout=ttl_seconds, blocking=False, thread_local=False)

    @property
    def token(self) -> str | None:
        """The holder's token, or None when this object holds nothing."""
        raw = self._lock.local.token
        return raw.decode() if isinstance(raw, bytes) else raw

    @_redis_errors
    def acquire(self, token: str | None = None) -> bool:
        """Try once to take the lock (``SET NX PX``); True when taken."""
        return bool(self._lock.acquire(blocking=False, token=token))

    def adopt(self, token: str) -> TokenLock:
        """Act as the holder of ``token`` (a process that learned the token elsewhere)."""
        self._lock.local.token = token.encode()
        return self

    @_redis_errors
    def extend(self) -> None:
        """Reset the TTL to the full lifetime; LockNotOwned when the token no longer matches."""
        self._lock.extend(self.ttl_seconds, replace_ttl=True)

    @_redis_errors
    def release(self) -> None:
        """Delete the lock if we still own it; LockNotOwned otherwise."""
        self._lock.release()

    @_redis_errors
    def owned(self) -> bool:
        """Whether the key still holds our token."""
        return bool(self._lock.owned())

    @_redis_errors
    def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return bool(self._lock.locked())

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            with contextlib.suppress(LockNotOwned):
                self.release()


class Barriers:
    """Owner of every kickoff key in Redis; see the module table for keys and TTLs."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str,
        url: str,
        stale_seconds: float = 180.0,
        active_max_age_seconds: float = 12 * 3600.0,
        attempts_ttl_seconds: float = 12 * 3600.0,
        attempt_cap: int = 15,
        coordination_lock_seconds: float = 60.0,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.url = url
        self.stale_seconds = stale_seconds
        self.active_max_age_seconds = active_max_age_seconds
        self.attempts_ttl_seconds = attempts_ttl_seconds
        self.attempt_cap = attempt_cap
        self.coordination_lock_seconds = coordination_lock_seconds

    @classmethod
    def from_settings(cls, settings: Any, client: redis.Redis | None = None) -> Barriers:
        """Build from a MatchListenerEnvironment (or BaseEnvironment with defaults)."""
        kwargs: dict[str, Any] = {}
        for attr, name in (
            ("listener_heartbeat_stale_seconds", "stale_seconds"),
            ("listener_active_max_age_seconds", "active_max_age_seconds"),
            ("listener_start_attempts_ttl_seconds", "attempts_ttl_seconds"),
            ("listener_start_attempt_cap", "attempt_cap"),
        ):
            if hasattr(settings, attr):
                kwargs[name] = getattr(settings, attr)
        return cls(
            client or connect_redis(settings.redis_url),
            prefix=settings.redis_key_prefix,
            url=settings.redis_url,
            **kwargs,
        )

    # -- key names ---------------------------------------------------------------

    def pending_key(self, match_id: object) -> str:
        return f"{self.prefix}pending_start_match_listener_{match_id}"

    def attempts_key(self, match_id: object) -> str:
        return f"{self.prefix}start_match_listener_attempts_{match_id}"

    def exhausted_key(self, match_id: object) -> str:
        return f"{self.prefix}start_match_listener_exhausted_{match_id}"

    def start_lock_key(self, match_id: object) -> str:
        return f"{self.prefix}start_match_listener_{match_id}"

    def stop_flag_key(self, match_id: object) -> str:
        return f"{self.prefix}stop_match_listener_{match_id}"

    def revoked_key(self, message_id: str) -> str:
        return f"{self.prefix}revoked_message_{message_id}"

    def worker_lease_key(self, lease_id: str) -> str:
        return f"{self.prefix}listener_worker_{lease_id}"

    @property
    def stop_channel(self) -> str:
        return self.prefix + STOP_CHANNEL

    # -- ping --------------------------------------------------------------------

    @_redis_errors
    def ping(self) -> None:
        """Raise RedisUnavailable (naming REDIS_URL) when Redis does not answer."""
        self.client.ping()

    # -- pending start -------------------------------------------------------------

    @_redis_errors
    def claim_pending(self, match_id: object) -> bool:
        """SET NX the pending key; False when a start is already queued or running."""
        ttl = int(self.active_max_age_seconds)
        return bool(self.client.set(self.pending_key(match_id), "1", nx=True, ex=ttl))

    @_redis_errors
    def clear_pending(self, match_id: object) -> None:
        self.client.delete(self.pending_key(match_id))

    @_redis_errors
    def is_pending(self, match_id: object) -> bool:
        return bool(self.client.exists(self.pending_key(match_id)))

    # -- attempts ------------------------------------------------------------------

    @_redis_errors
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

    @_redis_errors
    def attempts(self, match_id: object) -> int:
        raw = self.client.get(self.attempts_key(match_id))
        return int(raw) if raw else 0

    @_redis_errors
    def is_exhausted(self, match_id: object) -> bool:
        return bool(self.client.exists(self.exhausted_key(match_id)))

    @_redis_errors
    def exhausted_among(self, match_ids: Iterable[object]) -> set[str]:
        """Return the ids (as strings) whose exhausted flag is set, in one round trip."""
        ids = [str(m) for m in match_ids]
        if not ids:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for mid in ids:
            pipe.exists(self.exhausted_key(mid))
        return {mid for mid, hit in zip(ids, pipe.execute(), strict=True) if hit}

    # -- locks ---------------------------------------------------------------------

    def start_lock(self, match_id: object) -> TokenLock:
        """The per-match start lock: lives for the stale threshold, extended by heartbeats."""
        return TokenLock(
            self.client,
            self.start_lock_key(match_id),
            ttl_seconds=self.stale_seconds,
            url=self.url,
        )

    @_redis_errors
    def start_lock_holder(self, match_id: object) -> str | None:
        """The token (the holder's record id) in the match's start lock, or None when it is free."""
        raw = self.client.get(self.start_lock_key(match_id))
        return raw.decode() if isinstance(raw, bytes) else raw

    def dispatch_lock(self) -> TokenLock:
        return TokenLock(
            self.client,
            self.prefix + DISPATCH_LOCK,
            ttl_seconds=self.coordination_lock_seconds,
            url=self.url,
        )

    def sweep_lock(self) -> TokenLock:
        return TokenLock(
            self.client,
            self.prefix + SWEEP_LOCK,
            ttl_seconds=self.coordination_lock_seconds,
            url=self.url,
        )

    # -- stop flags and revoked messages -------------------------------------------

    @_redis_errors
    def set_stop_flag(self, match_id: object, *, ttl_seconds: float = 300.0) -> None:
        """Ask the running listener of ``match_id`` to stop (exit 15): the flag, then a push."""
        pipe = self.client.pipeline(transaction=False)
        pipe.set(self.stop_flag_key(match_id), "1", ex=max(1, int(ttl_seconds)))
        pipe.publish(self.stop_channel, str(match_id))
        pipe.execute()

    def stop_subscription(self) -> Any:
        """A redis-py PubSub subscribed to the stop channel (its own connection)."""
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        self._subscribe(pubsub)
        return pubsub

    @_redis_errors
    def _subscribe(self, pubsub: Any) -> None:
        pubsub.subscribe(self.stop_channel)

    @_redis_errors
    def next_stop_message(self, pubsub: Any, *, timeout: float) -> str | None:
        """The next match id pushed on the stop channel within ``timeout`` seconds, or None."""
        message = pubsub.get_message(timeout=timeout)
        if message is None or message.get("type") != "message":
            return None
        data = message["data"]
        return data.decode() if isinstance(data, bytes) else str(data)

    # -- worker leases -----------------------------------------------------------------

    @_redis_errors
    def renew_worker_lease(
        self, lease_id: str, *, known_epoch: str, new_epoch_id: str, ttl_seconds: float
    ) -> tuple[int, str]:
        """Extend (or create) a listener worker's lease; ``(state, epoch)``, see ``_RENEW_LEASE``."""
        keys = [self.worker_lease_key(lease_id), self.prefix + EPOCH_KEY]
        state, epoch = self._script(_RENEW_LEASE)(
            keys=keys, args=[int(ttl_seconds * 1000), known_epoch, new_epoch_id]
        )
        return int(state), epoch.decode() if isinstance(epoch, bytes) else str(epoch)

    @_redis_errors
    def live_worker_leases(self, lease_ids: Iterable[str]) -> tuple[set[str], float | None]:
        """Which of ``lease_ids`` are alive, and the age in seconds of Redis's data epoch.

        The age is None when no epoch is recorded yet (nothing can be judged dead then).
        """
        ids = sorted(set(lease_ids))
        pipe = self.client.pipeline(transaction=False)
        pipe.time()
        pipe.get(self.prefix + EPOCH_KEY)
        for lease_id in ids:
            pipe.exists(self.worker_lease_key(lease_id))
        now, epoch, *hits = pipe.execute()
        alive = {lease_id for lease_id, hit in zip(ids, hits, strict=True) if hit}
        if epoch is None:
            return alive, None
        started = float((epoch.decode() if isinstance(epoch, bytes) else epoch).rsplit(":", 1)[1])
        return alive, float(now[0]) - started

    def _script(self, source: str) -> Any:
        """The registered Lua script of ``source`` (EVALSHA, loaded once per client)."""
        scripts = self.__dict__.setdefault("_scripts", {})
        if source not in scripts:
            scripts[source] = self.client.register_script(source)
        return scripts[source]

    @_redis_errors
    def clear_stop_flag(self, match_id: object) -> None:
        self.client.delete(self.stop_flag_key(match_id))

    @_redis_errors
    def stop_flags_among(self, match_ids: Iterable[object]) -> set[str]:
        """Return which of ``match_ids`` have a stop flag, in one round trip (MGET)."""
        ids = [str(m) for m in match_ids]
        if not ids:
            return set()
        values = self.client.mget([self.stop_flag_key(m) for m in ids])
        return {mid for mid, v in zip(ids, values, strict=True) if v is not None}

    @_redis_errors
    def revoke_message(self, message_id: str) -> None:
        """Mark a queued start message as revoked: the start checks it and does nothing."""
        self.client.set(self.revoked_key(message_id), "1", ex=int(self.active_max_age_seconds))

    @_redis_errors
    def is_revoked(self, message_id: str) -> bool:
        return bool(self.client.exists(self.revoked_key(message_id)))

    # -- clearing --------------------------------------------------------------------

    @_redis_errors
    def clear_start_barriers(self, match_id: object, *, include_start_lock: bool) -> None:
        """Delete pending, attempts and exhausted (and, if asked, the start lock whoever holds it).

        Deleting the start lock is for operator paths only (stop, abandon, force): a live
        holder then fails its next extend and stops itself.
        """
        keys = [
            self.pending_key(match_id),
            self.attempts_key(match_id),
            self.exhausted_key(match_id),
        ]
        if include_start_lock:
            keys.append(self.start_lock_key(match_id))
        self.client.delete(*keys)
