"""Redis barriers: the one owner of every key, TTL, Lua script and Redis error translation (REDIS_URL).

All keys start with the configurable ``redis_key_prefix`` (default ``kickoff:``). ``{id}`` is
the internal Match.id. No other module touches the Redis client: they call ``CoordinationStore``.

=========================================  ===============  ===================================
key (after the prefix)                     TTL              purpose
=========================================  ===============  ===================================
pending_start_match_listener_{id}          active age       dispatch/admin cannot double-enqueue
                                                            a match; cleared when a start ends
start_match_listener_attempts_{id}         attempts TTL     failed starts (12 h)
start_match_listener_exhausted_{id}        attempts TTL     set at the attempt cap; dispatch skips
start_match_listener_{id}                  stale threshold  token lock: one starter per match,
                                                            extended by every heartbeat
dispatch_upcoming_match_listeners          60 s             token lock: one dispatch at a time
sweep_stale_match_listeners                60 s             token lock: one sweeper at a time
stop_match_listener_{id}                   stop flag TTL    operator stop: running listener exits 15
revoked_message_{message id}               active age       a queued start that must not run
listener_worker_{lease id}                 worker lease     a listener worker process is alive;
                                                            renewed every lease / 4 ("s": it holds
                                                            a liveness signal, see below)
liveness_lost_{lease id}                   worker lease     when a reaper first saw that lease's
                                                            liveness signal gone (Redis ms)
handover_ready_{id}                        2 x hand-off + 1 a graceful shutdown's successor start
                                                            waits for the match's start lock
orphan_restart_{id}                        restart spacing  a reaper restarted a fenced run's
                                                            match that nothing else would (60 s)
redis_epoch                                none             "{id}:{unix s}" written when found
                                                            missing: Redis lost its data then
scheduler_tick_{entry}_{YYYYmmddTHHMM}     tick TTL (1 h)   one send per periodic entry and slot
bulk_preview_{sha256 of the confirm}       confirm (300 s)  a bulk action's preview: its action,
                                                            filter, match ids and caller; taken
                                                            (GETDEL) by the confirmed call
=========================================  ===============  ===================================

Pub/sub channel ``listener_stops`` (after the prefix): an operator stop publishes the match id,
so a running listener stops at once; the stop-flag poll is the fallback.

Pub/sub channel ``listener_worker_alive_{lease id}`` (after the prefix): a listener worker's
liveness signal. The worker holds one connection subscribed to it (``liveness_subscription``) and
nothing is ever published on it: ``PUBSUB NUMSUB`` answers 1 while that connection is open and 0
from the moment Redis sees it close, which the kernel does at once when the process ends
(SIGKILL, OOM, crash). ``judge_worker_leases`` reads it for every lease in one script.

Locks are token-safe (redis-py's Lock: ``SET NX PX`` with a random token; release and extend
compare the token in a Lua script), so a holder can never release or extend a lock it lost, and
no path deletes a lock another holder owns. Lua scripts are registered once per client
(``register_script``: EVALSHA). Redis errors are translated here into RedisUnavailable /
LockNotOwned / RedisCommandRefused (``redis_errors``; the Dramatiq broker's Redis uses it too,
naming BROKER_URL).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

import redis
from redis.commands.core import Script
from redis.exceptions import ClusterDownError, LockError, LockNotOwnedError, OutOfMemoryError, ReadOnlyError
from redis.lock import Lock

from config.errors import LockNotOwned, RedisCommandRefused, RedisUnavailable
from config.settings import KickoffSettings, mask_url

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
  redis.call('set', KEYS[1], 's', 'PX', ARGV[1])
  return {2, epoch}
end
return {0, epoch}
"""

# KEYS[1]: the epoch key, then per lease its lease key and its liveness_lost key. ARGV[1]: the grace
# in ms, ARGV[2]: the liveness_lost keys' ttl in ms, ARGV[2 + i]: lease i's liveness channel. Returns
# {epoch or false, now ms, state per lease...}: 0 the lease key is gone (lapsed), 1 alive (signal
# held, or a lease that holds none: value other than 's'), 2 signal gone within the grace, 3 signal
# gone for the grace or longer (the process is dead). The first reaper to see a signal gone writes
# when (SET NX), so every reaper measures the grace from the same instant, in Redis's clock.
_JUDGE_LEASES = """
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {redis.call('get', KEYS[1]), now}
local grace = tonumber(ARGV[1])
for i = 1, (#KEYS - 1) / 2 do
  local lease, lost = KEYS[2 * i], KEYS[2 * i + 1]
  local v = redis.call('get', lease)
  local state = 1
  if not v then
    state = 0
  elseif v == 's' then
    if redis.call('pubsub', 'numsub', ARGV[2 + i])[2] > 0 then
      redis.call('del', lost)
    else
      redis.call('set', lost, now, 'NX', 'PX', ARGV[2])
      local since = tonumber(redis.call('get', lost))
      if now - since >= grace then state = 3 else state = 2 end
    end
  end
  out[i + 2] = state
end
return out
"""

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
# KEYS[1]: the pending key, KEYS[2]: the start lock key: the pending key goes only while no start
# holds the lock (one step, so a start taking the lock meanwhile keeps its pending key).
_CLEAR_PENDING_UNLESS_STARTED = """
if redis.call('exists', KEYS[2]) == 1 then
  return 0
end
return redis.call('del', KEYS[1])
"""


_DELETE_IF_TOKEN = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


# KEYS[1]: lock key, KEYS[2]: the lease key of the run holding it, KEYS[3]: the pending key;
# ARGV[1]: the run's token. Deletes the lock and the pending key only while the lock still holds
# the token and the lease is gone (the run fenced itself and cannot write any more): no live
# run's lock, and no pending key a later start claimed under a lock of its own, is touched.
_RELEASE_FENCED = """
if redis.call('get', KEYS[1]) == ARGV[1] and redis.call('exists', KEYS[2]) == 0 then
  redis.call('del', KEYS[1], KEYS[3])
  return 1
end
return 0
"""

# KEYS: per match, its start lock, pending key and restart mark; ARGV[1]: the mark's TTL (s).
_CLAIM_ORPHANS = """
local out = {}
for i = 1, #KEYS, 3 do
  local ok = 0
  if redis.call('exists', KEYS[i]) == 0 and redis.call('exists', KEYS[i + 1]) == 0 then
    if redis.call('set', KEYS[i + 2], '1', 'NX', 'EX', ARGV[1]) then ok = 1 end
  end
  out[#out + 1] = ok
end
return out
"""

#: Connections one client keeps at most; a thread that finds them all in use waits (up to the
#: socket timeout) instead of failing, as redis-py's default pool (100, then "Too many connections")
#: would when a thousand listener threads of one process end, or hand off, at once.
REDIS_MAX_CONNECTIONS = 50


def connect_redis(url: str) -> redis.Redis:
    """Return a client for ``url`` (no connection is opened until the first command)."""
    pool = redis.BlockingConnectionPool.from_url(
        url, max_connections=REDIS_MAX_CONNECTIONS, timeout=10, socket_connect_timeout=5, socket_timeout=10
    )
    return redis.Redis(connection_pool=pool)


#: Error codes with which Redis refuses every write, whatever the key: the server is not usable
#: (full at maxmemory, failing to save, its master gone, a script running, loading its data, a
#: read-only replica). A script's error starts with the code; a pipeline's carries it after
#: "caused error: ". Any other refusal (WRONGTYPE, ...) is about one key's data.
_OUTAGE_CODE = re.compile(
    r"(?:^|caused error: )(?:OOM|MISCONF|MASTERDOWN|BUSY|LOADING|READONLY|NOREPLICAS|CLUSTERDOWN|TRYAGAIN)\b"
)


def refuses_every_write(exc: redis.ResponseError) -> bool:
    """True when ``exc`` says Redis as a whole refuses commands (an outage), not one key's data."""
    return isinstance(exc, OutOfMemoryError | ReadOnlyError | ClusterDownError) or bool(
        _OUTAGE_CODE.search(str(exc))
    )


@contextmanager
def redis_errors(*, url: str, setting: str = "REDIS_URL", service: str = "Redis") -> Iterator[None]:
    """The one boundary of the Redis driver: a refused or timed-out command becomes RedisUnavailable.

    So does a command Redis refuses as a whole (OOM, MISCONF, ...: ``refuses_every_write``); a
    command refused for one key's data (WRONGTYPE, ...) becomes RedisCommandRefused.

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
    except redis.ResponseError as exc:
        if refuses_every_write(exc):
            raise RedisUnavailable(
                service=service, setting=setting, address=mask_url(url), reason=str(exc)
            ) from exc
        raise RedisCommandRefused(f"{service} refused a command: {exc}") from exc


def _redis_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a method of an object with a ``url`` inside ``redis_errors``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with redis_errors(url=args[0].url):  # type: ignore[attr-defined]
            return fn(*args, **kwargs)

    return wrapper


def tick_slot(at: datetime) -> str:
    """The minute slot (UTC, ``YYYYmmddTHHMM``) a scheduler tick at ``at`` belongs to."""
    return at.astimezone(UTC).strftime("%Y%m%dT%H%M")


def _text(raw: Any) -> str | None:
    return raw.decode() if isinstance(raw, bytes) else raw


class TokenLockContext:
    """``with lock:`` of a token lock: try once to take it (the value is True when taken), and
    release it on exit when held. ``TokenLock`` and the tests' in-memory lock both use it."""

    token: str | None

    def acquire(self, token: str | None = None) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            with contextlib.suppress(LockNotOwned):
                self.release()


class TokenLock(TokenLockContext):
    """A token-safe lock on one key; ``token`` identifies the holder across processes."""

    def __init__(self, client: redis.Redis, key: str, *, ttl_seconds: float, url: str) -> None:
        self.key = key
        self.url = url
        self.ttl_seconds = ttl_seconds
        self._lock = Lock(client, key, timeout=ttl_seconds, blocking=False, thread_local=False)

    @property
    def token(self) -> str | None:
        """The holder's token, or None when this object holds nothing."""
        return _text(self._lock.local.token)

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


def _key_of(name: str) -> Callable[[CoordinationKeys, object], str]:
    """A key-name method: ``{prefix}{name}{ident}`` for a match, message or lease id."""

    def key(self: CoordinationKeys, ident: object) -> str:
        return f"{self.prefix}{name}{ident}"

    return key


class LeaseState(enum.IntEnum):
    """What ``judge_worker_leases`` found for one worker lease."""

    LAPSED = 0  # the lease key is gone: the process fenced itself (paused, cut off) or died long ago
    ALIVE = 1  # the lease is fresh and its liveness signal is held (or the lease holds none)
    SIGNAL_LOST = 2  # the signal is gone but the grace has not passed: maybe a dropped connection
    DEAD = 3  # the signal stayed gone for the grace: the process ended (its connection closed)


@dataclass(frozen=True)
class LeaseJudgement:
    """Every judged lease's state, and the age in seconds of Redis's data epoch (None: unknown)."""

    states: dict[str, LeaseState]
    epoch_age: float | None

    @classmethod
    def of(cls, states: dict[str, int], *, epoch_age: float | None) -> LeaseJudgement:
        return cls({k: LeaseState(v) for k, v in states.items()}, epoch_age)

    def among(self, *wanted: LeaseState) -> set[str]:
        """The leases in one of the ``wanted`` states."""
        return {lease for lease, state in self.states.items() if state in wanted}


class CoordinationKeys:
    """The names of every kickoff key in Redis, read from ``prefix`` alone (the module table).

    ``CoordinationStore`` and the tests' in-memory store both name their keys through it.
    """

    prefix: str

    # the prefix, the name, then the match id (message id, lease id)
    pending_key = _key_of("pending_start_match_listener_")
    attempts_key = _key_of("start_match_listener_attempts_")
    exhausted_key = _key_of("start_match_listener_exhausted_")
    start_lock_key = _key_of("start_match_listener_")
    stop_flag_key = _key_of("stop_match_listener_")
    revoked_key = _key_of("revoked_message_")  # of a message id
    worker_lease_key = _key_of("listener_worker_")  # of a lease id
    liveness_lost_key = _key_of("liveness_lost_")  # of a lease id
    liveness_channel = _key_of("listener_worker_alive_")  # a pub/sub channel, of a lease id
    handover_key = _key_of("handover_ready_")
    orphan_restart_key = _key_of("orphan_restart_")
    bulk_preview_key = _key_of("bulk_preview_")  # of a confirm token's SHA-256

    def tick_key(self, entry: str, slot: str) -> str:
        return f"{self.prefix}scheduler_tick_{entry}_{slot}"

    @property
    def epoch_key(self) -> str:
        return self.prefix + EPOCH_KEY

    @property
    def stop_channel(self) -> str:
        return self.prefix + STOP_CHANNEL

    @property
    def match_key_families(self) -> tuple[Callable[[object], str], ...]:
        """The key families a match leaves behind (``matches_with_keys``): pending, attempts,
        exhausted and stop flag."""
        return (self.pending_key, self.attempts_key, self.exhausted_key, self.stop_flag_key)


@dataclass(kw_only=True, eq=False, repr=False)
class CoordinationThresholds:
    """The TTLs and the attempt cap a coordination store is built with (keyword-only fields).

    ``CoordinationStore`` and the tests' in-memory store both take them from here.
    """

    stale_seconds: float = 180.0
    active_max_age_seconds: float = 12 * 3600.0
    attempts_ttl_seconds: float = 12 * 3600.0
    attempt_cap: int = 15
    coordination_lock_seconds: float = 60.0


@dataclass(eq=False, repr=False)
class CoordinationStore(CoordinationKeys, CoordinationThresholds):
    """Owner of every kickoff key in Redis; see the module table for keys and TTLs."""

    client: redis.Redis
    _: KW_ONLY
    prefix: str
    url: str

    def __post_init__(self) -> None:
        self._scripts: dict[str, Script] = {}

    @classmethod
    def from_settings(cls, settings: KickoffSettings, client: redis.Redis | None = None) -> CoordinationStore:
        """Build from the settings: REDIS_URL, REDIS_KEY_PREFIX and the listener lifecycle thresholds."""
        return cls(
            client or connect_redis(settings.redis_url),
            prefix=settings.redis_key_prefix,
            url=settings.redis_url,
            stale_seconds=settings.listener_heartbeat_stale_seconds,
            active_max_age_seconds=settings.listener_active_max_age_seconds,
            attempts_ttl_seconds=settings.listener_start_attempts_ttl_seconds,
            attempt_cap=settings.listener_start_attempt_cap,
        )

    def _script(self, source: str) -> Script:
        """The registered Lua script of ``source`` (EVALSHA, loaded once per client)."""
        if source not in self._scripts:
            self._scripts[source] = self.client.register_script(source)
        return self._scripts[source]

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
    def claim_pending_many(self, match_ids: Sequence[str]) -> list[bool]:
        """SET NX the pending key of every match in one script call; True where this call claimed it."""
        if not match_ids:
            return []
        keys = [self.pending_key(m) for m in match_ids]
        return [
            bool(x) for x in self._script(_CLAIM_MANY)(keys=keys, args=[int(self.active_max_age_seconds)])
        ]

    @_redis_errors
    def clear_pending(self, *match_ids: object) -> None:
        """Delete the pending keys of ``match_ids`` (one command)."""
        if match_ids:
            self.client.delete(*(self.pending_key(m) for m in match_ids))

    @_redis_errors
    def clear_pending_unless_started(self, match_id: object) -> bool:
        """Delete the pending key of ``match_id`` unless its start lock is held (one script call);
        True when a key was deleted."""
        keys = [self.pending_key(match_id), self.start_lock_key(match_id)]
        return bool(self._script(_CLEAR_PENDING_UNLESS_STARTED)(keys=keys))

    @_redis_errors
    def is_pending(self, match_id: object) -> bool:
        return bool(self.client.exists(self.pending_key(match_id)))

    @_redis_errors
    def pending_match_ids(self) -> list[str]:
        """Every match with a pending key (SCAN)."""
        return self._ids_of(self.pending_key)

    @_redis_errors
    def pending_without_lock(self, match_ids: Iterable[str] | None = None) -> list[str]:
        """Matches with a pending key but no start lock; ``None``: every pending key (SCAN)."""
        ids = self.pending_match_ids() if match_ids is None else [str(m) for m in match_ids]
        answers = self._read_each(ids, ("exists", self.pending_key), ("exists", self.start_lock_key))
        return [mid for mid, (pending, locked) in zip(ids, answers, strict=True) if pending and not locked]

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
        """Return the ids (as strings) whose exhausted flag is set, in one round trip (MGET)."""
        return self._set_among(self.exhausted_key, match_ids)

    @_redis_errors
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

    @_redis_errors
    def matches_with_keys(self) -> set[str]:
        """Match ids that have a pending, attempts, exhausted or stop-flag key (SCAN per key family)."""
        return {match_id for key_of in self.match_key_families for match_id in self._ids_of(key_of)}

    def _read_each(
        self, match_ids: Sequence[str], *reads: tuple[str, Callable[[object], str]]
    ) -> list[list[Any]]:
        """For each match id, each ``(command, key_of)`` read (``get``, ``exists``) of its key, in one
        pipelined round trip; the answers per match, in order."""
        if not match_ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for mid in match_ids:
            for command, key_of in reads:
                getattr(pipe, command)(key_of(mid))
        flat = pipe.execute()
        return [flat[i : i + len(reads)] for i in range(0, len(flat), len(reads))]

    def _set_among(self, key_of: Callable[[Any], str], ids: Iterable[object]) -> set[str]:
        """Which of ``ids`` (as strings) have their key of one family set (one MGET)."""
        wanted = [str(i) for i in ids]
        if not wanted:
            return set()
        values = self.client.mget([key_of(i) for i in wanted])
        return {i for i, v in zip(wanted, values, strict=True) if v is not None}

    def _ids_of(self, key_of: Callable[[object], str]) -> list[str]:
        """The match ids (UUIDs) of every key of one family (SCAN)."""
        start = len(key_of(""))
        found = []
        for raw in self.client.scan_iter(match=key_of("*"), count=1000):
            with contextlib.suppress(ValueError):
                found.append(str(uuid.UUID(_text(raw)[start:])))
        return found

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

    @_redis_errors
    def start_lock_holders(self, match_ids: Sequence[str]) -> dict[str, str]:
        """The token in each held start lock among ``match_ids`` (one MGET); free locks are left out."""
        if not match_ids:
            return {}
        values = self.client.mget([self.start_lock_key(m) for m in match_ids])
        return {str(m): str(_text(v)) for m, v in zip(match_ids, values, strict=True) if v is not None}

    def dispatch_lock(self) -> TokenLock:
        return self._coordination_lock(DISPATCH_LOCK)

    def sweep_lock(self) -> TokenLock:
        return self._coordination_lock(SWEEP_LOCK)

    def _coordination_lock(self, name: str) -> TokenLock:
        """The lock that lets one run of ``name`` (dispatch, sweep) go at a time across processes."""
        return TokenLock(
            self.client, self.prefix + name, ttl_seconds=self.coordination_lock_seconds, url=self.url
        )

    @_redis_errors
    def extend_start_locks(self, holders: Sequence[tuple[str, str]], *, ttl_seconds: float) -> list[bool]:
        """Extend the start locks of ``(match_id, token)`` pairs in one round trip.

        Returns, per pair, whether the lock now holds that token. A missing key is taken again:
        it can only be missing while its holder still beats in time if Redis lost its data (an
        expired lock means the holder's deadline passed, and the caller stops such a run before
        or right after this call); a key held by another token is never touched.
        """
        if not holders:
            return []
        keys = [self.start_lock_key(match_id) for match_id, _ in holders]
        args = [int(ttl_seconds * 1000), *(token for _, token in holders)]
        return [bool(x) for x in self._script(_EXTEND_MANY)(keys=keys, args=args)]

    @_redis_errors
    def delete_start_lock_if_token(self, match_id: object, token: str) -> bool:
        """Delete a match's start lock only if ``token`` (a dead run's row id) still holds it."""
        return bool(self._script(_DELETE_IF_TOKEN)(keys=[self.start_lock_key(match_id)], args=[token]))

    @_redis_errors
    def release_fenced_start_lock(self, match_id: object, token: str, lease_id: str) -> bool:
        """Delete a match's start lock and pending key if ``token`` holds the lock and ``lease_id`` is gone.

        One script (``_RELEASE_FENCED``): the run of ``token`` fenced itself (its worker lease
        expired) but could not release its lock, so no start of the match could run until the
        lock's TTL. True when both were deleted.
        """
        keys = [self.start_lock_key(match_id), self.worker_lease_key(lease_id), self.pending_key(match_id)]
        return bool(self._script(_RELEASE_FENCED)(keys=keys, args=[token]))

    @_redis_errors
    def claim_orphan_restarts(self, match_ids: Sequence[str], *, every_seconds: float) -> list[str]:
        """The matches among ``match_ids`` with neither a start lock nor a pending key, each at most
        once per ``every_seconds`` (its restart mark, SET NX EX): one script call.

        A reaper restarts those (a fenced run's match whose keys a Redis restart lost); the mark
        keeps a fault that fails every restart from restarting it more often than that.
        """
        ids = [str(m) for m in match_ids]
        if not ids:
            return []
        keys = [
            k for m in ids for k in (self.start_lock_key(m), self.pending_key(m), self.orphan_restart_key(m))
        ]
        answers = self._script(_CLAIM_ORPHANS)(keys=keys, args=[max(1, int(every_seconds))])
        return [m for m, ok in zip(ids, answers, strict=True) if ok]

    # -- stop flags and revoked messages -------------------------------------------

    # -- graceful hand-off -----------------------------------------------------------

    @_redis_errors
    def announce_handover(self, match_id: object, *, ttl_seconds: float) -> None:
        """A successor start of ``match_id`` waits for the start lock (the stopping run may stop now)."""
        self.client.set(self.handover_key(match_id), "1", px=max(1, int(ttl_seconds * 1000)))

    @_redis_errors
    def handovers_ready(self, match_ids: Iterable[object]) -> set[str]:
        """Which of ``match_ids`` have a successor waiting, in one round trip (MGET)."""
        return self._set_among(self.handover_key, match_ids)

    @_redis_errors
    def clear_handovers(self, match_ids: Iterable[object]) -> None:
        """Forget the waiting marks of ``match_ids`` (before a hand-off: none is left from an older one)."""
        keys = [self.handover_key(m) for m in match_ids]
        if keys:
            self.client.delete(*keys)

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
        return _text(message["data"])

    @_redis_errors
    def clear_stop_flag(self, match_id: object) -> None:
        self.client.delete(self.stop_flag_key(match_id))

    @_redis_errors
    def stop_flags_among(self, match_ids: Iterable[object]) -> set[str]:
        """Return which of ``match_ids`` have a stop flag, in one round trip (MGET)."""
        return self._set_among(self.stop_flag_key, match_ids)

    @_redis_errors
    def revoke_message(self, message_id: str) -> None:
        """Mark a queued start message as revoked: the start checks it and does nothing."""
        self.client.set(self.revoked_key(message_id), "1", ex=int(self.active_max_age_seconds))

    @_redis_errors
    def is_revoked(self, message_id: str) -> bool:
        return bool(self.client.exists(self.revoked_key(message_id)))

    @_redis_errors
    def consume_message(self, message_id: str) -> bool:
        """Mark a start message as used (SET NX on its revoked key); False if revoked or used before.

        A start runs once per message id: a message Dramatiq re-delivers after a worker died, or
        one an operator stop revoked, finds the key set and does nothing.
        """
        ttl = int(self.active_max_age_seconds)
        return bool(self.client.set(self.revoked_key(message_id), "used", nx=True, ex=ttl))

    @_redis_errors
    def consumed_among(self, message_ids: Sequence[str]) -> set[str]:
        """Which of ``message_ids`` were consumed or revoked (one MGET)."""
        return self._set_among(self.revoked_key, message_ids)

    # -- worker leases -----------------------------------------------------------------

    @_redis_errors
    def renew_worker_lease(
        self, lease_id: str, *, known_epoch: str, new_epoch_id: str, ttl_seconds: float
    ) -> tuple[int, str]:
        """Extend (or create) a listener worker's lease; ``(state, epoch)``, see ``_RENEW_LEASE``."""
        keys = [self.worker_lease_key(lease_id), self.epoch_key]
        state, epoch = self._script(_RENEW_LEASE)(
            keys=keys, args=[int(ttl_seconds * 1000), known_epoch, new_epoch_id]
        )
        return int(state), str(_text(epoch))

    @_redis_errors
    def live_worker_leases(self, lease_ids: Iterable[str]) -> tuple[set[str], float | None]:
        """Which of ``lease_ids`` are alive, and the age in seconds of Redis's data epoch.

        The age is None when no epoch is recorded yet (nothing can be judged dead then).
        """
        ids = sorted(set(lease_ids))
        pipe = self.client.pipeline(transaction=False)
        pipe.time()
        pipe.get(self.epoch_key)
        for lease_id in ids:
            pipe.exists(self.worker_lease_key(lease_id))
        now, epoch, *hits = pipe.execute()
        alive = {lease_id for lease_id, hit in zip(ids, hits, strict=True) if hit}
        if epoch is None:
            return alive, None
        started = float(str(_text(epoch)).rsplit(":", 1)[1])
        return alive, float(now[0]) - started

    @_redis_errors
    def judge_worker_leases(
        self, lease_ids: Iterable[str], *, grace_seconds: float, ttl_seconds: float
    ) -> LeaseJudgement:
        """Each lease's state (lapsed, alive, signal gone within or past ``grace_seconds``), one script.

        See ``_JUDGE_LEASES``; ``ttl_seconds``: the worker lease's TTL (the lost-signal marks live as
        long). The epoch's age is None when no epoch is recorded yet (nothing can be judged then).
        """
        ids = sorted(set(lease_ids))
        keys = [self.epoch_key]
        for lease_id in ids:
            keys += [self.worker_lease_key(lease_id), self.liveness_lost_key(lease_id)]
        args = [int(grace_seconds * 1000), max(1, int(ttl_seconds * 1000))]
        args += [self.liveness_channel(lease_id) for lease_id in ids]
        epoch, now_ms, *states = self._script(_JUDGE_LEASES)(keys=keys, args=args)
        age = None if not epoch else int(now_ms) / 1000 - float(str(_text(epoch)).rsplit(":", 1)[1])
        return LeaseJudgement.of(dict(zip(ids, (int(s) for s in states), strict=True)), epoch_age=age)

    def liveness_subscription(self, lease_id: str) -> Any:
        """A redis-py PubSub (a connection of its own) subscribed to ``lease_id``'s liveness channel.

        While it stays open, peers judge the worker alive; it closes when the process ends.
        """
        pubsub = self.client.pubsub()
        try:
            self._subscribe_liveness(pubsub, lease_id)
        except Exception:
            with contextlib.suppress(Exception):
                pubsub.close()
            raise
        return pubsub

    @staticmethod
    def liveness_client_name(lease_id: str) -> str:
        """The name (CLIENT SETNAME) of the connection holding ``lease_id``'s liveness signal, as
        CLIENT LIST shows it."""
        return f"kickoff-liveness-{lease_id}"

    @_redis_errors
    def _subscribe_liveness(self, pubsub: Any, lease_id: str) -> None:
        pubsub.execute_command("CLIENT", "SETNAME", self.liveness_client_name(lease_id))
        pubsub.parse_response(block=False, timeout=5.0)
        pubsub.subscribe(self.liveness_channel(lease_id))
        # Read the confirmation: from here on, PUBSUB NUMSUB counts this connection.
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.5)
            if message is not None and message.get("type") == "subscribe":
                return
        raise redis.TimeoutError("no confirmation of the liveness subscription within 5 s")

    @_redis_errors
    def hold_liveness(self, pubsub: Any, *, timeout: float) -> None:
        """Wait up to ``timeout`` s on a liveness connection; RedisUnavailable once it dropped (a
        server ``CLIENT KILL``, a Redis restart): the caller subscribes anew at once."""
        pubsub.get_message(timeout=timeout)  # a closed connection reads EOF at once

    # -- scheduler ticks -----------------------------------------------------------------

    @_redis_errors
    def claim_tick(self, entry: str, at: datetime, *, owner: str, ttl_seconds: float) -> bool:
        """SET NX a periodic entry's minute slot; False when another scheduler already sent it."""
        key = self.tick_key(entry, tick_slot(at))
        return bool(self.client.set(key, owner, nx=True, ex=int(ttl_seconds)))

    @_redis_errors
    def any_tick_at(self, at: datetime) -> bool:
        """Whether any periodic entry claimed the minute slot of ``at``."""
        pattern = self.tick_key("*", tick_slot(at))
        return next(iter(self.client.scan_iter(match=pattern, count=1000)), None) is not None

    @_redis_errors
    def newest_tick_at(self) -> datetime | None:
        """The start (UTC) of the newest minute slot any periodic entry claimed; None when none is kept."""
        slots = (
            str(_text(k)).rsplit("_", 1)[1]
            for k in self.client.scan_iter(match=self.tick_key("*", "*"), count=1000)
        )
        newest = max(slots, default=None)
        return None if newest is None else datetime.strptime(newest, "%Y%m%dT%H%M").replace(tzinfo=UTC)

    # -- bulk previews -----------------------------------------------------------------

    @_redis_errors
    def save_bulk_preview(self, digest: str, payload: str, *, ttl_seconds: float) -> None:
        """Keep a bulk action's preview (JSON) under its confirm token's digest for ``ttl_seconds``."""
        self.client.set(self.bulk_preview_key(digest), payload, px=max(1, int(ttl_seconds * 1000)))

    @_redis_errors
    def peek_bulk_preview(self, digest: str) -> str | None:
        """The preview kept under ``digest``, left in place (checked before it is taken); None if gone."""
        return _text(self.client.get(self.bulk_preview_key(digest)))

    @_redis_errors
    def take_bulk_preview(self, digest: str) -> str | None:
        """The preview kept under ``digest``, deleted as it is read (GETDEL: one use); None if gone."""
        return _text(self.client.getdel(self.bulk_preview_key(digest)))

    # -- clearing --------------------------------------------------------------------

    @_redis_errors
    def retake_for_forced_start(self, match_id: object) -> None:
        """Delete attempts and exhausted and take the pending key again (one transaction).

        A forced start clears the start barriers, then holds the pending key while it runs like
        any start, so neither dispatch nor a plain start enqueues the match meanwhile.
        """
        pipe = self.client.pipeline()
        pipe.delete(self.attempts_key(match_id), self.exhausted_key(match_id))
        pipe.set(self.pending_key(match_id), "1", ex=int(self.active_max_age_seconds))
        pipe.execute()

    @_redis_errors
    def clear_start_barriers(self, match_id: object) -> None:
        """Delete pending, attempts and exhausted; the start lock is left to its holder."""
        self.client.delete(
            self.pending_key(match_id), self.attempts_key(match_id), self.exhausted_key(match_id)
        )
