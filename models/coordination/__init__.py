"""Redis coordination: the one owner of every key, TTL, Lua script and Redis error translation (REDIS_URL).

All keys start with the configurable ``redis_key_prefix`` (default ``kickoff:``). ``{id}`` is
the internal Match.id. No other module touches the Redis client: they call a concern store of
``CoordinationStore`` (``store.py``), each a module of this package:

- ``start_barriers`` (``coordination.barriers``): pending keys, attempts, exhausted flags, the
  start messages' once-only marks;
- ``locks`` (``coordination.locks``): start, dispatch and sweep locks, worker leases, liveness
  signals, orphan restarts, degraded flags and given-back rows;
- ``stop_signals`` (``coordination.stops``): stop flags and their push, graceful hand-off marks;
- ``ticks`` (``coordination.ticks``): scheduler ticks;
- ``bulk_previews`` (``coordination.previews``): bulk actions' previews.

``keys`` names every key (one table, below) and holds the thresholds; ``_redis`` holds the client,
the Lua script registry and the one Redis error translation (``redis_errors``).

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
handover_live_{id}                         2 x hand-off + 1 a run of the match sent its first live
                                                            byte (a handed-over run stops then)
orphan_restart_{id}                        restart spacing  a reaper restarted a fenced run's
                                                            match that nothing else would (60 s)
listener_degraded_{row id}                 3 x heartbeat    a run's event log writing is behind
                                                            (listener.ingest): set by each beat
                                                            while so, deleted when it caught up;
                                                            the boards show the run "degraded"
given_back_{row id}                        half the stale   a run gave its match back and could
                                           threshold        not close its row (its host cut from
                                                            PostgreSQL): a reaper elsewhere
                                                            closes it, sends the match, and
                                                            writes "closed" (the run stops)
given_back_runs                            none             the set of those row ids (the
                                                            reapers' one read; expired dropped)
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
liveness signal. The worker holds two connections subscribed to it (``liveness_subscription``) and
nothing is ever published on it: ``PUBSUB NUMSUB`` answers 2 while both are open, 1 when Redis
dropped one (a ``CLIENT KILL``: still alive), and 0 from the moment Redis sees both close, which the
kernel does at once when the process ends (SIGKILL, OOM, crash). ``judge_worker_leases`` reads it
for every lease in one script.

Locks are token-safe (redis-py's Lock: ``SET NX PX`` with a random token; release and extend
compare the token in a Lua script), so a holder can never release or extend a lock it lost, and
no path deletes a lock another holder owns. Lua scripts are registered once per concern store
(``register_script``: EVALSHA). Redis errors are translated in one place, ``_redis.redis_errors``,
into RedisUnavailable / LockNotOwned / RedisCommandRefused (the Dramatiq broker's Redis uses it
too, naming BROKER_URL).
"""

from models.coordination._redis import REDIS_MAX_CONNECTIONS, connect_redis, redis_errors, refuses_every_write
from models.coordination.bulk_previews import BulkPreviews
from models.coordination.keys import (
    DISPATCH_LOCK,
    EPOCH_KEY,
    STOP_CHANNEL,
    SWEEP_LOCK,
    CoordinationKeys,
    CoordinationThresholds,
)
from models.coordination.locks import (
    GivenBackRow,
    LeaseJudgement,
    LeaseState,
    Locks,
    TokenLock,
    TokenLockContext,
)
from models.coordination.start_barriers import StartBarriers
from models.coordination.stop_signals import StopSignals
from models.coordination.store import CoordinationStore
from models.coordination.ticks import SchedulerTicks, tick_slot

__all__ = [
    "DISPATCH_LOCK",
    "EPOCH_KEY",
    "REDIS_MAX_CONNECTIONS",
    "STOP_CHANNEL",
    "SWEEP_LOCK",
    "BulkPreviews",
    "CoordinationKeys",
    "CoordinationStore",
    "CoordinationThresholds",
    "GivenBackRow",
    "LeaseJudgement",
    "LeaseState",
    "Locks",
    "SchedulerTicks",
    "StartBarriers",
    "StopSignals",
    "TokenLock",
    "TokenLockContext",
    "connect_redis",
    "redis_errors",
    "refuses_every_write",
    "tick_slot",
]
