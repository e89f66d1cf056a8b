"""Locks and worker leases: who may run what, and whether a listener worker is alive (REDIS_URL).

Locks are token-safe (redis-py's Lock: ``SET NX PX`` with a random token; release and extend
compare the token in a Lua script), so a holder can never release or extend a lock it lost, and
no path deletes a lock another holder owns: the per-match start lock, and the dispatch and sweep
locks that let one run of each go at a time.

A listener worker holds a lease (``listener_worker_{lease id}``, renewed every lease / 4) and a
liveness signal: two connections subscribed to ``listener_worker_alive_{lease id}``, on which
nothing is ever published. ``PUBSUB NUMSUB`` answers 2 while both are open, 1 when Redis dropped
one (a ``CLIENT KILL``: still alive), and 0 from the moment Redis sees both close, which the kernel
does at once when the process ends (SIGKILL, OOM, crash). ``judge_worker_leases`` reads it for
every lease in one script. A run's degraded flag (its event log writing is behind) is set by its
worker's beats too.
"""

from __future__ import annotations

import contextlib
import enum
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.lock import Lock

from config.errors import LockNotOwned
from models.coordination._redis import DELETE_IF_TOKEN, RedisConcern, text, translated
from models.coordination.keys import DISPATCH_LOCK, SWEEP_LOCK

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

# KEYS: a start lock, its match's pending key; ARGV[1]: the token. Both deleted if the token holds it.
_RELEASE_IF_TOKEN = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1], KEYS[2])
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


#: A given-back mark's value once a reaper closed the run's row.
GIVEN_BACK_CLOSED = "closed"


@dataclass(frozen=True)
class GivenBackRow:
    """A run that gave its match back with its row left open: what closing the row writes."""

    record_id: str  # the run's lifecycle row id
    match_id: str
    exit_code: int
    reason: str

    def encoded(self) -> str:
        return json.dumps({"match_id": self.match_id, "exit_code": self.exit_code, "reason": self.reason})

    @classmethod
    def decoded(cls, record_id: str, value: str) -> GivenBackRow:
        fields = json.loads(value)
        return cls(record_id, str(fields["match_id"]), int(fields["exit_code"]), str(fields["reason"]))


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
        return text(self._lock.local.token)

    @translated
    def acquire(self, token: str | None = None) -> bool:
        """Try once to take the lock (``SET NX PX``); True when taken."""
        return bool(self._lock.acquire(blocking=False, token=token))

    def adopt(self, token: str) -> TokenLock:
        """Act as the holder of ``token`` (a process that learned the token elsewhere)."""
        self._lock.local.token = token.encode()
        return self

    @translated
    def extend(self) -> None:
        """Reset the TTL to the full lifetime; LockNotOwned when the token no longer matches."""
        self._lock.extend(self.ttl_seconds, replace_ttl=True)

    @translated
    def release(self) -> None:
        """Delete the lock if we still own it; LockNotOwned otherwise."""
        self._lock.release()

    @translated
    def owned(self) -> bool:
        """Whether the key still holds our token."""
        return bool(self._lock.owned())

    @translated
    def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return bool(self._lock.locked())


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


@dataclass(eq=False, repr=False)
class Locks(RedisConcern):
    """Start, dispatch and sweep locks; worker leases, liveness signals and degraded flags."""

    # -- locks ---------------------------------------------------------------------

    def start_lock(self, match_id: object) -> TokenLock:
        """The per-match start lock: lives for the stale threshold, extended by heartbeats."""
        return TokenLock(
            self.client,
            self.start_lock_key(match_id),
            ttl_seconds=self.stale_seconds,
            url=self.url,
        )

    @translated
    def start_lock_holder(self, match_id: object) -> str | None:
        """The token (the holder's record id) in the match's start lock, or None when it is free."""
        raw = self.client.get(self.start_lock_key(match_id))
        return raw.decode() if isinstance(raw, bytes) else raw

    @translated
    def start_lock_holders(self, match_ids: Sequence[str]) -> dict[str, str]:
        """The token in each held start lock among ``match_ids`` (one MGET); free locks are left out."""
        if not match_ids:
            return {}
        values = self.client.mget([self.start_lock_key(m) for m in match_ids])
        return {str(m): str(text(v)) for m, v in zip(match_ids, values, strict=True) if v is not None}

    def dispatch_lock(self) -> TokenLock:
        return self._coordination_lock(DISPATCH_LOCK)

    def sweep_lock(self) -> TokenLock:
        return self._coordination_lock(SWEEP_LOCK)

    def _coordination_lock(self, name: str) -> TokenLock:
        """The lock that lets one run of ``name`` (dispatch, sweep) go at a time across processes."""
        return TokenLock(
            self.client, self.prefix + name, ttl_seconds=self.coordination_lock_seconds, url=self.url
        )

    @translated
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

    @translated
    def delete_start_lock_if_token(self, match_id: object, token: str) -> bool:
        """Delete a match's start lock only if ``token`` (a dead run's row id) still holds it."""
        return bool(self._script(DELETE_IF_TOKEN)(keys=[self.start_lock_key(match_id)], args=[token]))

    @translated
    def release_fenced_start_lock(self, match_id: object, token: str, lease_id: str) -> bool:
        """Delete a match's start lock and pending key if ``token`` holds the lock and ``lease_id`` is gone.

        One script (``_RELEASE_FENCED``): the run of ``token`` fenced itself (its worker lease
        expired) but could not release its lock, so no start of the match could run until the
        lock's TTL. True when both were deleted.
        """
        keys = [self.start_lock_key(match_id), self.worker_lease_key(lease_id), self.pending_key(match_id)]
        return bool(self._script(_RELEASE_FENCED)(keys=keys, args=[token]))

    @translated
    def note_start_taken(self, lease_id: str, match_id: object, token: str, *, ttl_seconds: float) -> None:
        """Note that a start under ``lease_id`` took ``match_id``'s start lock as ``token``, until
        ``forget_start_taken``: should its worker die before the run writes its row, a reaper releases
        the lock (``release_starts_taken``), which nothing else would before its TTL."""
        key = self.starts_taken_key(lease_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(key, str(match_id), token)
        pipe.pexpire(key, max(1, int(ttl_seconds * 1000)))
        pipe.sadd(self.listener_leases_index, lease_id)
        pipe.execute()

    @translated
    def forget_start_taken(self, lease_id: str, match_id: object) -> None:
        """The start noted under ``lease_id`` for ``match_id`` let its lock go (or its run ended)."""
        self.client.hdel(self.starts_taken_key(lease_id), str(match_id))

    @translated
    def leases_to_judge(self) -> list[str]:
        """The listener worker leases that held a liveness signal (``liveness_subscription``) or noted a
        start (``note_start_taken``) and were not found dead or lapsed since (``release_starts_taken``
        forgets them): a reaper judges them beside the leases of open rows, since a worker killed with
        no open row of its own (its runs taken over after a pause, or none begun yet after a burst of
        starts) is found by no row, and the starts it fetched or began would wait for the next dispatch
        tick or their locks' TTL."""
        return sorted(str(text(lease)) for lease in self.client.smembers(self.listener_leases_index))

    @translated
    def release_starts_taken(self, lease_ids: Iterable[str]) -> list[str]:
        """Release the start locks (and pending keys) the starts of these dead workers' leases took
        and still hold, and forget them (and the leases); the matches released (to be sent again)."""
        released: list[str] = []
        script = self._script(_RELEASE_IF_TOKEN)
        leases = sorted(set(lease_ids))
        for lease_id in leases:
            key = self.starts_taken_key(lease_id)
            for match_id, token in sorted(self.client.hgetall(key).items()):
                match, held = str(text(match_id)), str(text(token))
                if script(keys=[self.start_lock_key(match), self.pending_key(match)], args=[held]):
                    released.append(match)
            self.client.delete(key)
        if leases:
            self.client.srem(self.listener_leases_index, *leases)
        return released

    @translated
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

    # -- degraded runs ---------------------------------------------------------------

    @translated
    def flag_degraded_runs(
        self, degraded: Sequence[str], recovered: Sequence[str], *, ttl_seconds: float
    ) -> None:
        """Set (or refresh) the degraded flag of the runs ``degraded`` (lifecycle row ids) for
        ``ttl_seconds`` and delete the flags of ``recovered``, in one round trip."""
        if not degraded and not recovered:
            return
        pipe = self.client.pipeline(transaction=False)
        for record_id in degraded:
            pipe.set(self.degraded_key(record_id), "1", px=max(1, int(ttl_seconds * 1000)))
        if recovered:
            pipe.delete(*(self.degraded_key(r) for r in recovered))
        pipe.execute()

    @translated
    def degraded_runs(self, record_ids: Iterable[str]) -> set[str]:
        """Which of ``record_ids`` (lifecycle row ids) have their degraded flag set, in one MGET."""
        return self._set_among(self.degraded_key, record_ids)

    # -- runs given back with their row left open -------------------------------------

    @translated
    def give_back_row(self, run: GivenBackRow, *, ttl_seconds: float) -> bool:
        """Mark the open row of a run that gave its match back but could not close it (its host cut
        from PostgreSQL): a reaper of any worker that reaches PostgreSQL closes it for the run and
        sends the match (``given_back_rows``, ``settle_given_back_row``). Set if missing (a Redis
        restart loses it: the run marks it again each try), for ``ttl_seconds``; True once a reaper
        has closed the row (the run stops trying), in one round trip."""
        key = self.given_back_key(run.record_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.set(key, run.encoded(), nx=True, px=max(1, int(ttl_seconds * 1000)))
        pipe.sadd(self.given_back_index, run.record_id)
        pipe.get(key)
        return text(pipe.execute()[-1]) == GIVEN_BACK_CLOSED

    @translated
    def given_back_rows(self) -> list[GivenBackRow]:
        """The runs given back whose rows no reaper has closed yet: one SMEMBERS (and, when there are
        any, one MGET); index entries whose mark expired are dropped."""
        ids = sorted(text(i) for i in self.client.smembers(self.given_back_index))
        if not ids:
            return []
        values = [
            text(v) if v is not None else None for v in self.client.mget(self.given_back_key(i) for i in ids)
        ]
        gone = [i for i, v in zip(ids, values, strict=True) if v is None]
        if gone:
            self.client.srem(self.given_back_index, *gone)
        return [
            GivenBackRow.decoded(i, v)
            for i, v in zip(ids, values, strict=True)
            if v is not None and v != GIVEN_BACK_CLOSED
        ]

    @translated
    def settle_given_back_row(self, record_id: str) -> None:
        """A reaper closed (or found closed) a given-back run's row: its mark says so until it expires."""
        self.client.set(self.given_back_key(record_id), GIVEN_BACK_CLOSED, xx=True, keepttl=True)

    @translated
    def forget_given_back_row(self, record_id: str) -> None:
        """The run closed its row itself: no mark left for a reaper."""
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(self.given_back_key(record_id))
        pipe.srem(self.given_back_index, record_id)
        pipe.execute()

    # -- worker leases -----------------------------------------------------------------

    @translated
    def renew_worker_lease(
        self, lease_id: str, *, known_epoch: str, new_epoch_id: str, ttl_seconds: float
    ) -> tuple[int, str]:
        """Extend (or create) a listener worker's lease; ``(state, epoch)``, see ``_RENEW_LEASE``."""
        keys = [self.worker_lease_key(lease_id), self.epoch_key]
        state, epoch = self._script(_RENEW_LEASE)(
            keys=keys, args=[int(ttl_seconds * 1000), known_epoch, new_epoch_id]
        )
        return int(state), str(text(epoch))

    @translated
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
        started = float(str(text(epoch)).rsplit(":", 1)[1])
        return alive, float(now[0]) - started

    @translated
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
        age = None if not epoch else int(now_ms) / 1000 - float(str(text(epoch)).rsplit(":", 1)[1])
        return LeaseJudgement.of(dict(zip(ids, (int(s) for s in states), strict=True)), epoch_age=age)

    def liveness_subscription(self, lease_id: str, *, index: int = 0) -> Any:
        """A redis-py PubSub (a connection of its own) subscribed to ``lease_id``'s liveness channel;
        ``index``: which of the worker's connections holding it (its client name says).

        While one stays open, peers judge the worker alive; they all close when the process ends.
        """
        pubsub = self.client.pubsub()
        try:
            self._subscribe_liveness(pubsub, lease_id, index)
        except Exception:
            with contextlib.suppress(Exception):
                pubsub.close()
            raise
        return pubsub

    @staticmethod
    def liveness_client_name(lease_id: str, index: int = 0) -> str:
        """The name (CLIENT SETNAME) of connection ``index`` holding ``lease_id``'s liveness signal, as
        CLIENT LIST shows it (``kickoff-liveness-{lease id}``, then ``-1``, ``-2``… for the others)."""
        return f"kickoff-liveness-{lease_id}" + (f"-{index}" if index else "")

    @translated
    def _subscribe_liveness(self, pubsub: Any, lease_id: str, index: int = 0) -> None:
        pubsub.execute_command("CLIENT", "SETNAME", self.liveness_client_name(lease_id, index))
        pubsub.parse_response(block=False, timeout=5.0)
        pubsub.subscribe(self.liveness_channel(lease_id))
        # Read the confirmation: from here on, PUBSUB NUMSUB counts this connection.
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.5)
            if message is not None and message.get("type") == "subscribe":
                self.client.sadd(self.listener_leases_index, lease_id)  # judged by every reaper from now
                return
        raise redis.TimeoutError("no confirmation of the liveness subscription within 5 s")

    @translated
    def hold_liveness(self, pubsub: Any, *, timeout: float) -> None:
        """Wait up to ``timeout`` s on a liveness connection; RedisUnavailable once it dropped (a
        server ``CLIENT KILL``, a Redis restart): the caller subscribes anew at once."""
        pubsub.get_message(timeout=timeout)  # a closed connection reads EOF at once
